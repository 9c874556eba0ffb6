import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Db, QueryResult } from '@neatroots/ports';
import { migrate, openPglite } from '../db';
import { until } from '../testing/until';
import { DbSharedCache } from './db';

/** A database whose statements are counted (to see a batch's lookups go as one). */
function counting(db: Db): { db: Db; statements: string[] } {
  const statements: string[] = [];
  return {
    statements,
    db: { ...db, query: <R>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>> => (statements.push(sql), db.query<R>(sql, params)) },
  };
}

/** Each test opens PGlite in a data folder and migrates it: up to 39 s on a loaded 2-core machine. */
const SLOW = 120_000;

describe("DbSharedCache (the embedded default's model answers, kept in its database)", () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-cache-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('keeps an answer across a restart of the process, under its name, until the ttl runs out', async () => {
    let now = 1_000_000;
    const first = await openPglite({ dataDir: dir });
    await migrate(first);
    const a = new DbSharedCache({ db: first, now: () => now }).named('answers');
    await a.set('q1', '{"p":0.9}', 60_000);
    await a.set('q2', 'two', 1_000);
    await first.close();

    const again = await openPglite({ dataDir: dir });
    try {
      const cache = new DbSharedCache({ db: again, now: () => now });
      const answers = cache.named('answers');
      expect(await answers.get('q1')).toBe('{"p":0.9}');
      expect(await cache.named('other').get('q1')).toBeUndefined();
      expect(await answers.get('missing')).toBeUndefined();
      now += 1_001;
      expect(await answers.get('q2')).toBeUndefined();
      expect(await answers.get('q1')).toBe('{"p":0.9}');
      // A write replaces the value and its expiry.
      await answers.set('q1', 'newer', 10);
      expect(await answers.get('q1')).toBe('newer');
      now += 11;
      expect(await answers.get('q1')).toBeUndefined();
    } finally {
      await again.close();
    }
  }, SLOW);

  it('looks up the questions of one batch in one statement, and deletes what expired after a write', async () => {
    let now = 5_000;
    const pg = await openPglite({ dataDir: dir });
    try {
      await migrate(pg);
      const { db, statements } = counting(pg);
      const answers = new DbSharedCache({ db, now: () => now, pruneEveryMs: 1_000 }).named('answers');
      await Promise.all(['a', 'b', 'c'].map((k) => answers.set(k, `v-${k}`, 500)));
      expect(statements.filter((s) => s.startsWith('INSERT'))).toHaveLength(1);
      const got = await Promise.all(['a', 'b', 'c', 'd', 'a'].map((k) => answers.get(k)));
      expect(got).toEqual(['v-a', 'v-b', 'v-c', undefined, 'v-a']);
      expect(statements.filter((s) => s.startsWith('SELECT'))).toHaveLength(1);

      now += 1_000; // a, b and c expired; the next write prunes them
      await answers.set('d', 'v-d', 60_000);
      // The prune follows the write (its caller is not held up for it).
      const rows = await until('a, b and c pruned', async () => {
        const r = await pg.query<{ key: string; value: string }>('SELECT key, value FROM shared_cache');
        return r.rows.length === 1 && r;
      }, 30_000, 20);
      expect(rows.rows.map((r) => r.value)).toEqual(['v-d']);
      expect(rows.rows[0].key).toMatch(/^[0-9a-f]{40}$/);
    } finally {
      await pg.close();
    }
  }, SLOW);

  it('reads as a miss and drops a write when the database fails, and says so once', async () => {
    const pg = await openPglite({ dataDir: dir });
    await migrate(pg);
    await pg.close();
    const errors: unknown[] = [];
    const answers = new DbSharedCache({ db: pg, onError: (e) => errors.push(e) }).named('answers');
    await expect(answers.set('k', 'v', 1_000)).resolves.toBeUndefined();
    await expect(answers.get('k')).resolves.toBeUndefined();
    expect(errors).toHaveLength(1);
  }, SLOW);
});
