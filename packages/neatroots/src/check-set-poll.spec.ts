import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createLogger } from '@neatroots/platform';
import { startCheckSet, type CheckSet } from './runtime';

/**
 * Database checks saved by another process (the api of the distributed deployment, the
 * planner) take effect in this one: the check set reads the database checks again and
 * reloads when they changed, without a restart or a file change.
 */
const rule = (id: string) => `id: ${id}\nkind: rule\nrule: { type: count, at_least: 3 }\napplies_to: { project: [shop] }\n`;

async function until(cond: () => boolean, ms = 3_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('the check set and database checks written elsewhere', () => {
  let home: string;
  let set: CheckSet | undefined;
  afterEach(() => {
    set?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('reloads when the database checks change, and only then', async () => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'nr-poll-'));
    const stored: { id: string; yaml: string; origin: string }[] = [];
    let reads = 0;
    set = await startCheckSet({
      home,
      projects: () => [],
      database: async () => {
        reads++;
        return [...stored];
      },
      log: createLogger({ level: 'error' }),
      watch: false,
      databasePollMs: 20,
    });
    const ids = () => set!.loaded().checks.map((c) => c.id);
    const first = set.loaded();
    expect(ids()).not.toContain('saved-elsewhere');
    // Unchanged database checks: read again, the loaded set kept as it was.
    await until(() => reads >= 4);
    expect(set.loaded()).toBe(first);

    stored.push({ id: 'saved-elsewhere', yaml: rule('saved-elsewhere'), origin: 'cli' });
    await until(() => ids().includes('saved-elsewhere'));
    expect(set.rules().rules.map((r) => r.check.id)).toContain('saved-elsewhere');

    stored.length = 0;
    await until(() => !ids().includes('saved-elsewhere'));
  });
});

describe('the check set refreshed after a plan', () => {
  let home: string;
  let set: CheckSet | undefined;
  afterEach(() => {
    set?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('reloads only when the database checks changed', async () => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'nr-refresh-'));
    const stored: { id: string; yaml: string; origin: string }[] = [];
    set = await startCheckSet({ home, projects: () => [], database: async () => [...stored], log: createLogger({ level: 'error' }), watch: false, databasePollMs: 60_000 });
    const first = set.loaded();
    await set.refresh();
    // Nothing new: the set as it was, not parsed again.
    expect(set.loaded()).toBe(first);
    stored.push({ id: 'planned', yaml: rule('planned'), origin: 'planner' });
    await set.refresh();
    expect(set.loaded().checks.map((c) => c.id)).toContain('planned');
    expect(set.rules().rules.map((r) => r.check.id)).toContain('planned');
  });
});
