/**
 * Following a run live (GET runs/{id}?since=): the first look reads the run's last arrival, and a
 * look that finds nothing new (most of a followed run's looks) reads no span, from the run's
 * newest arrival the span write keeps on its row (migration 0037). Before, each read the run's
 * every span (a 50,000-span run: 50,000 rows every poll). A look after new spans reads the run's
 * spans through the primary key's prefix, as a page of the run does: no index of spans by arrival,
 * which every span written would pay for. 50,000 spans here, with the planner's statistics
 * (Postgres's autovacuum keeps them, and the embedded database analyzes its tables as they grow).
 */
import type { Db, Queryable, QueryResult } from '@neatroots/ports';
import { spanEnv } from './fixtures.test';
import { RunsRepo } from './runs.repo';
import { openTestDb, resetDb } from './test-db.test';
import { StoreWriter } from './writer';

const SPANS = 50_000;
let db: Db;

beforeAll(async () => {
  db = await openTestDb();
  await resetDb(db);
  const writer = new StoreWriter(db);
  await writer.writeEvents([spanEnv('p', { run_id: 'big', span_id: 's0', start_ms: 1_700_000_000_000 }), spanEnv('p', { run_id: 'other', span_id: 'o0' })]);
  await writer.close();
  // The rest in one statement each: the writer would take minutes for what the reads need.
  for (const [run, n] of [['big', SPANS], ['other', 10_000]] as const) {
    await db.query(
      `INSERT INTO spans (project, run_id, span_id, payload, start_ms, start_exact, received_at)
       SELECT 'p', $1::text, 's' || g, json_build_object('run_id', $1::text, 'span_id', 's' || g, 'type', 'tool', 'name', 'search', 'status', 'ok', 'start_ms', 1700000000000 + g),
              1700000000000 + g, 1700000000000 + g, now()
       FROM generate_series(1, $2::int) g`,
      [run, n],
    );
  }
  // What the span write keeps on the run (these went in without it).
  await db.exec(`UPDATE runs r SET last_arrival = (SELECT max(arrival) FROM spans s WHERE s.project = r.project AND s.run_id = r.run_id)`);
  await db.exec('ANALYZE spans');
}, 180_000);
afterAll(() => db.close());

/** The statements a call sends. */
async function sent(call: (repo: RunsRepo) => Promise<unknown>): Promise<{ sql: string; params?: readonly unknown[] }[]> {
  const out: { sql: string; params?: readonly unknown[] }[] = [];
  const spy: Queryable = {
    query: <R>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>> => {
      out.push({ sql, params });
      return db.query<R>(sql, params);
    },
  };
  await call(new RunsRepo(spy));
  return out;
}

interface PlanNode { 'Node Type': string; 'Actual Rows': number; 'Actual Loops': number; Plans?: PlanNode[]; [k: string]: unknown }

/** The rows a statement's scans look at, run as it was sent. */
async function rowsRead(s: { sql: string; params?: readonly unknown[] }): Promise<number> {
  const res = await db.query<Record<string, unknown>>(`EXPLAIN (ANALYZE, FORMAT JSON) ${s.sql}`, s.params);
  const cell = Object.values(res.rows[0])[0];
  const plan = (typeof cell === 'string' ? JSON.parse(cell) : cell) as { Plan: PlanNode }[];
  const read = (node: PlanNode): number => {
    let n = 0;
    if (/Scan$/.test(node['Node Type']) && !/^(CTE|Subquery|Function|Values|WorkTable) Scan$/.test(node['Node Type'])) {
      n += (node['Actual Rows'] + Number(node['Rows Removed by Filter'] ?? 0)) * (node['Actual Loops'] ?? 1);
    }
    for (const child of node.Plans ?? []) n += read(child);
    return n;
  };
  return read(plan[0].Plan);
}

describe('following a run of 50,000 spans live', () => {
  it('reads the run\'s last arrival from its row, and no span on a look that finds nothing new', async () => {
    const first = await new RunsRepo(db).detail('p', 'big', { spans_limit: 10 });
    expect(first?.run.run_id).toBe('big');
    // The first look: where the next starts (the run's last arrival).
    const firstSent = await sent((repo) => repo.detail('p', 'big', { spans_limit: 10 }));
    const last = firstSent.find((s) => /last_arrival/.test(s.sql) && !/WITH page AS/.test(s.sql))!;
    expect(await rowsRead(last)).toBeLessThan(10);
    // A look with nothing new reads no span; one after 20 more spans (the writer keeps the run's
    // newest arrival) returns them, in the order they were stored.
    const nothing = await sent((repo) => repo.detail('p', 'big', { since: first!.spans_since }));
    const sinceRead = nothing.find((s) => /WITH page AS/.test(s.sql))!;
    expect(await rowsRead(sinceRead)).toBeLessThan(10);
    const writer = new StoreWriter(db);
    await writer.writeEvents(Array.from({ length: 20 }, (_, i) => spanEnv('p', { run_id: 'big', span_id: `late${i}`, start_ms: 1_700_000_100_000 + i })));
    await writer.close();
    let page: Awaited<ReturnType<RunsRepo['detail']>> = null;
    const twenty = await sent(async (repo) => (page = await repo.detail('p', 'big', { since: first!.spans_since })));
    expect(page!.spans.map((s) => s.span_id)).toEqual(Array.from({ length: 20 }, (_, i) => `late${i}`));
    expect(twenty.some((s) => /WITH page AS/.test(s.sql))).toBe(true);
    // and the look after those finds nothing again, reading no span
    const again = await sent((repo) => repo.detail('p', 'big', { since: page!.spans_since }));
    expect(await rowsRead(again.find((s) => /WITH page AS/.test(s.sql))!)).toBeLessThan(10);
  }, 120_000);
});
