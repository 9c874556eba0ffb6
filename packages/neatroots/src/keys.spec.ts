import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { loadConfig, migrate, openPglite } from '@neatroots/platform';
import { seedApiKeys } from '@neatroots/review';
import { ProjectsRepo } from '@neatroots/store';
import { main, type Io } from './cli';

/**
 * `neatroots keys new`: a random key and the NEATROOTS_API_KEYS entry to paste, which review
 * reads back as that project and scope and which then opens the project. Before it there was no
 * command: the docs said to set "a-long-random-key", and people made keys by hand.
 */
const bin = path.resolve(__dirname, '..', 'bin', 'neatroots.js');
const KEY = /^nr_[A-Za-z0-9_-]{32}$/;

/** The real CLI, as a user runs it. */
function cli(args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, NEATROOTS_HOME: '/nonexistent-neatroots-home' } });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** The CLI in-process (its main), for the refusals. */
async function run(args: string[]): Promise<{ code: number; out: string[]; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: Io = { out: (l) => out.push(l), err: (l) => err.push(l), env: {}, cwd: process.cwd() };
  const code = await main(args, io);
  return { code, out, err: err.join('\n') };
}

describe('neatroots keys new', () => {
  it('prints a new random key and the entry for it; review seeds the entry and the key opens the project with its scope', async () => {
    const full = cli(['keys', 'new', '--project', 'shop']);
    expect([full.code, full.err]).toEqual([0, '']);
    const [keyLine, entryLine, ...more] = full.out.trimEnd().split('\n');
    expect(more).toEqual([]);
    const key = keyLine.replace(/^key: /, '');
    expect(key).toMatch(KEY);
    expect(entryLine).toBe(`entry: shop=${key}`);

    const agent = cli(['keys', 'new', '--project=shop', '--scope', 'ingest', '--json']);
    expect([agent.code, agent.err]).toEqual([0, '']);
    const j = JSON.parse(agent.out) as { project: string; scope: string; key: string; entry: string };
    expect(j).toEqual({ project: 'shop', scope: 'ingest', key: expect.stringMatching(KEY), entry: `shop=${j.key}:ingest` });
    // Random: never the same key twice.
    expect(j.key).not.toBe(key);

    // The two entries pasted into NEATROOTS_API_KEYS, read and seeded as review does at start.
    const setting = `${entryLine.replace(/^entry: /, '')},${j.entry}`;
    const db = await openPglite();
    try {
      await migrate(db);
      await seedApiKeys(db, loadConfig({ NEATROOTS_API_KEYS: setting }).NEATROOTS_API_KEYS, { warn: () => undefined });
      const projects = new ProjectsRepo(db);
      expect(await projects.resolveApiKey(key)).toEqual({ project: 'shop', scope: 'api' });
      expect(await projects.resolveApiKey(j.key)).toEqual({ project: 'shop', scope: 'ingest' });
    } finally {
      await db.close();
    }
  }, 240_000);

  it('--scope api and a project with a dot and a colon are taken as review takes them', async () => {
    const r = await run(['keys', 'new', '--project', 'my.app:eu', '--scope', 'api']);
    expect(r.code).toBe(0);
    const key = r.out[0].replace(/^key: /, '');
    expect(r.out).toEqual([`key: ${key}`, `entry: my.app:eu=${key}`]);
    expect(loadConfig({ NEATROOTS_API_KEYS: `my.app:eu=${key}` }).NEATROOTS_API_KEYS).toEqual([{ project: 'my.app:eu', key }]);
  });

  it.each([
    [['keys', 'new'], '--project NAME is required: the project the key opens'],
    [['keys', 'new', '--project', ''], '--project needs a value, got an empty one'],
    [['keys', 'new', '--project', ' '], '--project is empty: give the project the key opens, as agents send it'],
    [['keys', 'new', '--project', 'a,b'], '--project "a,b" holds a ",", which separates the entries of NEATROOTS_API_KEYS'],
    [['keys', 'new', '--project', 'a=b'], '--project "a=b" holds a "=", which ends the project of an entry (project=key)'],
    [['keys', 'new', '--project', ' shop'], '--project " shop" begins or ends with a space, which review drops'],
    [['keys', 'new', '--project', 'shop', '--scope', 'admin'], '--scope must be api or ingest, got "admin"'],
    [['keys', 'new', '--project', 'shop', 'extra'], 'keys new takes no arguments, got extra'],
    [['keys'], 'keys needs a command: new'],
    [['keys', 'old'], 'unknown keys command "old" (its command: new)'],
  ])('%j: exit 2, the reason and the usage, no key printed', async (args, reason) => {
    const r = await run(args);
    expect(r.code).toBe(2);
    expect(r.out).toEqual([]);
    expect(r.err.split('\n')[0]).toBe(`neatroots keys: ${reason}`);
    expect(r.err).toContain('Usage: neatroots keys new --project NAME [--scope api|ingest] [--json]');
  });

  it('is listed in the help, and has its own', async () => {
    const top = await run(['--help']);
    expect(top.out.join('\n')).toMatch(/^ {2}keys +make a new random API key and the NEATROOTS_API_KEYS entry that gives it$/m);
    const own = await run(['help', 'keys']);
    expect([own.code, own.out[0].split('\n')[0]]).toEqual([0, 'Usage: neatroots keys new --project NAME [--scope api|ingest] [--json]']);
    expect(own.out[0]).toContain('--scope SCOPE');
  });
});
