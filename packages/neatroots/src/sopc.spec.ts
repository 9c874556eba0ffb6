import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Io } from './cli';
import { main } from './sopc';

async function run(args: string[], cwd: string): Promise<{ code: number; out: string[]; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: Io = { out: (l) => out.push(l), err: (l) => err.push(l), env: {}, cwd };
  const code = await main(args, io);
  return { code, out, err: err.join('\n') };
}

describe('sopc', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sopc-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (rel: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  };
  const good = () => {
    write('procs/procedures/take-order.md', '# Take an order\nGoal: Placed.\n\n## Steps\n1. Greet.\n2. Look up. [tool: lookup_account, required]\n');
    write('procs/agents/phone-agent.yaml', 'instructions: Answer the phone.\nprocedures: [take-order]\n');
  };

  describe('compile', () => {
    it('exits 0 with nothing on standard output for a folder that compiles', async () => {
      good();
      expect(await run(['compile', 'procs'], dir)).toEqual({ code: 0, out: [], err: '' });
    });

    it('exits 1 with every error, FILE:LINE: message relative to the folder', async () => {
      good();
      write('procs/procedures/bad.md', '# Bad\n## Steps\n1. A. [tool: x, sometimes]\n2.\n## Never\n- N. [when: y]\n');
      write('procs/groups/g.yaml', 'procedures: [gone]\n');
      const r = await run(['compile', path.join(dir, 'procs')], '/');
      expect(r.code).toBe(1);
      expect(r.out).toEqual([
        'groups/g.yaml:1: unknown procedure "gone" (no procedures/gone.md)',
        'procedures/bad.md:3: unknown annotation "sometimes" (known: tool: NAME, required, when: CONDITION)',
        'procedures/bad.md:4: empty step',
        'procedures/bad.md:6: "when:" belongs to steps only',
      ]);
    });

    it('exits 2 for a folder that cannot be read, the reason on standard error', async () => {
      const r = await run(['compile', 'nope'], dir);
      expect(r.code).toBe(2);
      expect(r.out).toEqual([]);
      expect(r.err).toContain('nope: no such folder');
      const none = await run(['compile', '.'], dir);
      expect(none.code).toBe(2);
      expect(none.err).toContain('not a procedures folder');
    });

    it('exits 2 when procedures/ (or agents/, groups/) is a file, not a folder, with a plain message', async () => {
      write('procs/procedures', 'not a folder\n');
      write('procs/agents/phone-agent.yaml', 'procedures: []\n');
      for (const cmd of ['compile', 'export']) {
        const r = await run([cmd, 'procs'], dir);
        expect(r).toEqual({ code: 2, out: [], err: `sopc ${cmd}: ${path.join(dir, 'procs', 'procedures')}: not a folder (procedures/ holds the .md files)` });
      }
      expect(fs.existsSync(path.join(dir, 'procs', 'lock.json'))).toBe(false);
    });

    it('exits 2 when export --out names a path under a file', async () => {
      good();
      write('plain', 'a file\n');
      for (const out of ['plain/lock.json', 'plain/sub/lock.json']) {
        const r = await run(['export', 'procs', '--out', out], dir);
        expect(r).toEqual({ code: 2, out: [], err: `sopc export: cannot write --out ${out}: ${path.join(dir, 'plain')} is a file, not a folder` });
      }
    });

    it('export says what is wrong with the --out path the user gave, never the hidden file written beside it (exit 2)', async () => {
      good();
      fs.mkdirSync(path.join(dir, 'cdir'));
      const gone = path.join(dir, 'nonexist', 'x.json');
      for (const [out, said] of [
        [gone, `sopc export: cannot write --out ${gone}: its folder ${path.dirname(gone)} does not exist`],
        ['cdir', 'sopc export: --out cdir is a folder'],
        ['cdir/', 'sopc export: --out cdir/ is a folder'],
      ]) {
        const r = await run(['export', 'procs', '--out', out], dir);
        expect(r).toEqual({ code: 2, out: [], err: said });
        expect(r.err).not.toContain('.tmp');
      }
      // DIR/lock.json a folder: said of that path.
      fs.mkdirSync(path.join(dir, 'procs', 'lock.json'));
      expect(await run(['export', 'procs'], dir)).toEqual({ code: 2, out: [], err: `sopc export: ${path.join(dir, 'procs', 'lock.json')} is a folder` });
      // Nothing left behind.
      expect(fs.readdirSync(path.join(dir, 'cdir'))).toEqual([]);
      expect(fs.readdirSync(dir).sort()).toEqual(['cdir', 'procs']);
      expect(fs.readdirSync(path.join(dir, 'procs')).sort()).toEqual(['agents', 'lock.json', 'procedures']);
    });

    it('export --out with its value left out, or given twice, is a usage error (exit 2) and writes nothing', async () => {
      good();
      const missing = await run(['export', 'procs', '--out', '-v'], dir);
      expect(missing).toEqual({ code: 2, out: [], err: expect.stringMatching(/^sopc export: --out needs a value, got the option -v; write --out=-v if you mean it\nUsage: sopc export/) });
      const twice = await run(['export', 'procs', '--out', 'a.json', '--out', 'b.json'], dir);
      expect(twice).toEqual({ code: 2, out: [], err: expect.stringMatching(/^sopc export: --out given twice: give it once\nUsage: sopc export/) });
      expect(fs.readdirSync(dir).sort()).toEqual(['procs']);
      expect(fs.existsSync(path.join(dir, 'procs', 'lock.json'))).toBe(false);
    });

    it('exits 2 on a usage error', async () => {
      expect((await run(['compile'], dir)).code).toBe(2);
      expect((await run(['compile', 'a', 'b'], dir)).err).toContain('one folder, got 2');
    });
  });

  describe('export', () => {
    it('writes DIR/lock.json in the format, and --out elsewhere or - for standard output', async () => {
      good();
      const r = await run(['export', 'procs'], dir);
      expect(r).toEqual({ code: 0, out: [], err: '' });
      const lock = JSON.parse(fs.readFileSync(path.join(dir, 'procs/lock.json'), 'utf8'));
      expect(lock.procedures).toHaveLength(1);
      expect(lock.procedures[0]).toMatchObject({ procedure_id: 'take-order', name: 'Take an order', goal: 'Placed.', applies_when: null });
      expect(lock.procedures[0].rules[1]).toMatchObject({ kind: 'step', index: 2, text: 'Look up.', tool: 'lookup_account', required: true, when: null });
      expect(lock.agents).toEqual([{ agent: 'phone-agent', procedures: ['take-order'], instructions: expect.stringContaining('2. Look up. (Required. Use the tool lookup_account.)') }]);
      // exporting again (lock.json now beside the three folders) gives the same file
      const again = await run(['export', 'procs', '--out', 'elsewhere.json'], dir);
      expect(again.code).toBe(0);
      expect(fs.readFileSync(path.join(dir, 'elsewhere.json'), 'utf8')).toBe(fs.readFileSync(path.join(dir, 'procs/lock.json'), 'utf8'));
      const stdout = await run(['export', 'procs', '--out', '-'], dir);
      expect(JSON.parse(stdout.out.join('\n'))).toEqual(lock);
    });

    it('replaces lock.json whole: a reader of the old file keeps it intact, and nothing is left beside it', async () => {
      good();
      const lock = path.join(dir, 'procs/lock.json');
      fs.writeFileSync(lock, '{"old": true}\n');
      fs.chmodSync(lock, 0o640);
      // A reader (a deploy, sopops push) that opened lock.json before the export.
      const fd = fs.openSync(lock, 'r');
      try {
        expect((await run(['export', 'procs'], dir)).code).toBe(0);
        const buf = Buffer.alloc(4096);
        expect(buf.toString('utf8', 0, fs.readSync(fd, buf, 0, buf.length, 0))).toBe('{"old": true}\n');
      } finally {
        fs.closeSync(fd);
      }
      expect(JSON.parse(fs.readFileSync(lock, 'utf8')).procedures).toHaveLength(1);
      expect(fs.statSync(lock).mode & 0o777).toBe(0o640);
      expect(fs.readdirSync(path.join(dir, 'procs')).sort()).toEqual(['agents', 'lock.json', 'procedures']);
    });

    it('writes nothing and exits 1 with every error when the folder does not compile', async () => {
      good();
      write('procs/agents/other.yaml', 'procedures: [nope]\ngroups: [none]\n');
      const r = await run(['export', 'procs'], dir);
      expect(r.code).toBe(1);
      expect(r.out).toEqual(['agents/other.yaml:1: unknown procedure "nope" (no procedures/nope.md)', 'agents/other.yaml:2: unknown group "none" (no groups/none.yaml)']);
      expect(fs.existsSync(path.join(dir, 'procs/lock.json'))).toBe(false);
    });
  });

  it('--help on the program and on each command', async () => {
    const top = await run(['--help'], dir);
    expect(top.code).toBe(0);
    expect(top.out.join('\n')).toMatch(/compile .*\n.*export /);
    for (const c of ['compile', 'export']) {
      const r = await run([c, '--help'], dir);
      expect(r.code).toBe(0);
      expect(r.out.join('\n')).toContain(`Usage: sopc ${c} DIR`);
    }
    expect((await run([], dir)).code).toBe(2);
    expect((await run(['frobnicate'], dir)).code).toBe(2);
  });
});
