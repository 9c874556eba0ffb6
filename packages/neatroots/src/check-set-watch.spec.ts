import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createLogger } from '@neatroots/platform';
import { startCheckSet, type CheckSet } from './runtime';

/**
 * A check file edited while the server runs: the check set's reload parses that file alone
 * (its CheckParseCache) and the watcher loads nothing of its own, so each check file is read
 * once per edit, not once by the watcher and again by the reload, and the others are not
 * parsed again.
 */
// The check files read, counted through node:fs as every module here gets it.
const mockReads = { dir: '', count: 0 };
jest.mock('node:fs', () => {
  const real = jest.requireActual<typeof import('node:fs')>('node:fs');
  return {
    ...real,
    readFileSync: (...args: Parameters<typeof real.readFileSync>) => {
      if (mockReads.dir && typeof args[0] === 'string' && args[0].startsWith(mockReads.dir)) mockReads.count++;
      return real.readFileSync(...args);
    },
  };
});

const rule = (id: string, atLeast: number) => `id: ${id}\nkind: rule\nrule: { type: count, at_least: ${atLeast} }\n`;

async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('the check set and an edited check file', () => {
  let home: string;
  let set: CheckSet | undefined;
  afterEach(() => {
    set?.close();
    mockReads.dir = '';
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('parses only the edited file, and reads each check file once', async () => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'nr-watch-'));
    const dir = path.join(home, 'checks');
    fs.mkdirSync(dir);
    const N = 20;
    for (let i = 0; i < N; i++) fs.writeFileSync(path.join(dir, `c${i}.yaml`), rule(`c${i}`, 3));
    // Each reload reads the database checks once: the reloads are counted by that.
    let reloads = 0;
    const database = async () => {
      reloads++;
      return [];
    };
    set = await startCheckSet({ home, projects: () => [], database, log: createLogger({ level: 'error' }), watch: true, databasePollMs: 60_000 });
    const atLeast = (id: string) => (set!.loaded().checks.find((c) => c.id === id) as unknown as { rule: { at_least: number } }).rule.at_least;
    expect(atLeast('c7')).toBe(3);
    const before = set.work();
    reloads = 0;
    mockReads.dir = dir + path.sep;
    mockReads.count = 0;
    fs.writeFileSync(path.join(dir, 'c7.yaml'), rule('c7', 5));
    await until(() => atLeast('c7') === 5);
    await new Promise((r) => setTimeout(r, 500)); // any later reload of the same edit
    const after = set.work();
    expect({ parses: after.parses - before.parses, compiled_rules: after.compiled_rules - before.compiled_rules }).toEqual({ parses: 1, compiled_rules: 1 });
    // Read by the reload only: N files for each reload the edit caused (the watcher may see it twice).
    expect(reloads).toBeGreaterThanOrEqual(1);
    const reads = mockReads.count;
    expect({ reads, reloads }).toEqual({ reads: N * reloads, reloads });
  }, 30_000);
});
