import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from './sopops';

/** Runs `sopops merge` in-process with captured output (written bytes kept as they are). */
async function run(args: string[], cwd: string): Promise<{ code: number; stdout: string; err: string }> {
  let stdout = '';
  const err: string[] = [];
  const io = { out: (l: string) => (stdout += `${l}\n`), write: (t: string) => (stdout += t), err: (l: string) => err.push(l), env: {}, cwd };
  const code = await main(['merge', ...args], io);
  return { code, stdout, err: err.join('\n') };
}

describe('sopops merge', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sopops-merge-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, text: string) => fs.writeFileSync(path.join(dir, name), text);

  const base = '# Take an order\n\n## Steps\n1. Greet the caller.\n2. Look up the account of the caller.\n3. Read the order back.\n';

  it('prints the merged file as it is and exits 0 when the edits merge (neighbouring lines included)', async () => {
    write('base.md', base);
    write('current.md', base.replace('1. Greet the caller.', '1. Greet the caller with the name of the restaurant.'));
    write('suggested.md', base.replace('2. Look up the account of the caller.', "2. Look up the caller's account by phone number."));
    const r = await run(['base.md', 'current.md', 'suggested.md'], dir);
    expect(r).toEqual({
      code: 0,
      err: '',
      stdout: "# Take an order\n\n## Steps\n1. Greet the caller with the name of the restaurant.\n2. Look up the caller's account by phone number.\n3. Read the order back.\n",
    });
  });

  it('keeps a file without a newline at the end as it is', async () => {
    write('base.md', 'a\nb');
    write('current.md', 'A\nb');
    write('suggested.md', 'a\nb');
    expect((await run(['base.md', 'current.md', 'suggested.md'], dir)).stdout).toBe('A\nb');
  });

  it('exits 1 with the conflicts as JSON when the same line changed two ways', async () => {
    write('base.md', base);
    write('current.md', `Goal: g.\n${base.replace('3. Read the order back.', '3. Read the order back slowly.')}`);
    write('suggested.md', base.replace('3. Read the order back.', '3. Read the whole order back.'));
    const r = await run(['base.md', 'current.md', 'suggested.md'], dir);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toEqual({
      conflicts: [{ line: 7, base: ['3. Read the order back.'], current: ['3. Read the order back slowly.'], suggested: ['3. Read the whole order back.'] }],
    });
  });

  it('exits 2 naming the file that cannot be read', async () => {
    write('base.md', base);
    write('current.md', base);
    const r = await run(['base.md', 'current.md', 'missing.md'], dir);
    expect(r.code).toBe(2);
    expect(r.err).toContain('SUGGESTED missing.md');
    expect(r.stdout).toBe('');
    fs.mkdirSync(path.join(dir, 'folder.md'));
    expect((await run(['folder.md', 'current.md', 'base.md'], dir)).err).toContain('BASE folder.md');
  });

  it('exits 2 without three files', async () => {
    const r = await run(['base.md'], dir);
    expect(r.code).toBe(2);
    expect(r.err).toContain('three files');
  });
});
