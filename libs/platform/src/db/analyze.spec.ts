import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Db, Logger } from '@neatroots/ports';
import { loadConfig } from '../config';
import { embeddedPlatform } from '../runtime/platforms';
import { until, within } from '../testing/until';
import { migrate } from './migrate';
import { openPgliteWorker, type Analysis } from './pglite-worker';

/**
 * PGlite has no autovacuum, and nothing analyzed the embedded database: the planner guessed every
 * table held a handful of rows, and Home's list of problems with 100,000 findings took 8-16 s a
 * page (a nested loop over all of them), about 1 s once analyzed.
 */
const SLOW = 180_000;
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

const silent: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {}, child: () => silent };

/** The rows the planner expects a query to give (EXPLAIN's estimate). */
async function estimate(db: Db, sql: string): Promise<number> {
  const res = await db.query<Record<string, unknown>>(`EXPLAIN (FORMAT JSON) ${sql}`);
  const cell = Object.values(res.rows[0])[0];
  const plan = (typeof cell === 'string' ? JSON.parse(cell) : cell) as { Plan: { 'Plan Rows': number } }[];
  return plan[0].Plan['Plan Rows'];
}

const OPEN = `SELECT * FROM findings WHERE project = 'big' AND status = 'open'`;

describe('the embedded platform analyzes its database', () => {
  it('after migrating at a start: the planner knows the findings of a home no version analyzed', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'nr-analyze-'));
    dirs.push(home);
    const config = loadConfig({ NEATROOTS_HOME: home });
    // A home an earlier version filled: 20,000 findings, 15,000 of them open, never analyzed.
    fs.mkdirSync(config.dataDir, { recursive: true });
    const before = await openPgliteWorker({ dataDir: path.join(config.dataDir, 'pg'), analyze: false });
    try {
      await migrate(before);
      await before.query(
        `INSERT INTO findings (id, project, run_id, check_id, check_source, kind, title, action, status, raised_at, updated_at)
         SELECT 'f' || g, 'big', 'r' || (g / 5), 'c' || (g % 5), 'library', 'rule', 't', 'flag',
                CASE WHEN g % 4 = 0 THEN 'resolved' ELSE 'open' END, now(), now()
         FROM generate_series(1, 20000) g`,
      );
      // what the planner made of it: next to nothing
      expect(await estimate(before, OPEN)).toBeLessThan(1_000);
    } finally {
      await before.close();
    }

    const platform = embeddedPlatform({ config, log: silent, drainTopic: 'x' });
    try {
      const db = await platform.db();
      const rows = await until('the planner to know the open findings', async () => {
        const n = await estimate(db, OPEN);
        return n > 10_000 ? n : undefined;
      }, 60_000);
      expect(rows).toBeGreaterThan(12_000);
      expect(rows).toBeLessThan(18_000);
    } finally {
      await platform.close();
    }
  }, SLOW);
});

describe('openPgliteWorker analyzes as the tables change', () => {
  const write = async (db: Db, rows: number) => {
    await db.exec('CREATE TABLE IF NOT EXISTS w (i int PRIMARY KEY, state text, p text)');
    const start = Number((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM w')).rows[0].n);
    await db.query(
      `INSERT INTO w SELECT g, CASE WHEN g % 4 = 0 THEN 'resolved' ELSE 'open' END, repeat(md5(g::text), 8) FROM generate_series($1::int, $2::int) g`,
      [start, start + rows - 1],
    );
  };

  it('once enough was written since the last analysis', async () => {
    const seen: Analysis[] = [];
    const db = await openPgliteWorker({ analyze: { pollMs: 20, walBytes: 2 * 2 ** 20, onAnalyze: (a) => seen.push(a) } });
    try {
      await write(db, 20_000);
      await until('an analysis for what was written', () => seen.some((a) => a.why === 'written'), 60_000, 20);
      const est = await estimate(db, `SELECT * FROM w WHERE state = 'open'`);
      expect(est).toBeGreaterThan(12_000);
      expect(est).toBeLessThan(18_000);
      expect(seen[0]).toMatchObject({ why: 'written', stopped: false });
      expect(seen[0].analyzed).toBe(seen[0].tables);
    } finally {
      await db.close();
    }
  }, SLOW);

  it('after everyMs when anything was written, and not while nothing is', async () => {
    const seen: Analysis[] = [];
    const db = await openPgliteWorker({ analyze: { pollMs: 20, walBytes: 2 ** 40, everyMs: 200, minWalBytes: 1, onAnalyze: (a) => seen.push(a) } });
    try {
      await write(db, 100);
      await until('an analysis after everyMs', () => seen.some((a) => a.why === 'timer'), 60_000, 20);
      expect(await estimate(db, `SELECT * FROM w WHERE state = 'open'`)).toBeGreaterThan(50);
      // Nothing written since (looks and analyses write no WAL of their own that counts): no more.
      const n = seen.length;
      await new Promise((r) => setTimeout(r, 1_000));
      expect(seen.length).toBe(n);
    } finally {
      await db.close();
    }
  }, SLOW);

  it('a close stops an analysis under way after the table in hand', async () => {
    const db = await openPgliteWorker({ analyze: false });
    for (let t = 0; t < 40; t++) {
      await db.exec(`CREATE TABLE t${t} (i int, p text)`);
      await db.query(`INSERT INTO t${t} SELECT g, md5(g::text) FROM generate_series(1, 2000) g`);
    }
    const analysis = db.analyze();
    // the analysis is under way: this call waited its turn behind its first
    await db.query('SELECT 1');
    await within(db.close(), 30_000, 'the close');
    const a = await within(analysis, 30_000, 'the analysis the close stopped');
    expect(a.stopped).toBe(true);
    expect(a.tables).toBe(40);
    expect(a.analyzed).toBeLessThan(a.tables);
  }, SLOW);
});
