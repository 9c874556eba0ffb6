/**
 * A page of problems costs what the page holds, not what the project holds: Home lists the open
 * problems 200 at a time, and with 75,000 open findings each page took about 1 s (8-16 s on an
 * embedded database with no statistics), since the heads were picked by ranking every open
 * finding. 20,000 findings here, on a database never analyzed (as an embedded one was).
 */
import type { Db, Queryable, QueryResult } from '@neatroots/ports';
import { finding, T0 } from './fixtures.test';
import { FindingsRepo } from './findings.repo';
import type { FindingStateFilter, ListFindingsQuery } from './records';
import { openTestDb } from './test-db.test';

const RUNS = 4000; // 5 findings each
let db: Db;

/** A run's five findings: a loop group of three (two tied on priority and time), one alone, an ending group of one. */
function runFindings(r: number) {
  // Two runs share each time, so heads tie on raised_at and the id orders them.
  const at = T0 + Math.floor(r / 2) * 10;
  const run_id = `r${String(r).padStart(5, '0')}`;
  const id = (k: number) => `f${String(r).padStart(5, '0')}${k}`;
  return [
    finding({ id: id(0), run_id, project: 'big', check_id: 'runaway', group: 'loop', priority: 1, at_ms: at }),
    finding({ id: id(1), run_id, project: 'big', check_id: 'repeated-tool-call', group: 'loop', priority: 5, at_ms: at + 1 }),
    finding({ id: id(2), run_id, project: 'big', check_id: 'errors', group: 'loop', priority: 5, at_ms: at + 1 }),
    finding({ id: id(3), run_id, project: 'big', check_id: 'slow', at_ms: at + 2 }),
    finding({ id: id(4), run_id, project: 'big', check_id: 'no-ending', group: 'ending', at_ms: at + 3 }),
  ];
}

beforeAll(async () => {
  db = await openTestDb();
  await db.exec('TRUNCATE findings, note_deliveries, check_stats');
  const repo = new FindingsRepo(db);
  const all = Array.from({ length: RUNS }, (_, r) => runFindings(r)).flat();
  for (let i = 0; i < all.length; i += 5000) await repo.apply(all.slice(i, i + 5000));
  // Some of them in other states, so a group's head in one state is another finding than in the next.
  const ids = (every: number, k: number) => Array.from({ length: Math.ceil(RUNS / every) }, (_, i) => `f${String(i * every).padStart(5, '0')}${k}`);
  await repo.apply([...ids(7, 1), ...ids(17, 0), ...ids(19, 3)].map((id) => {
    const f = all.find((x) => x.id === id)!;
    return { ...f, status: 'resolved' as const, at_ms: f.at_ms + 5 };
  }));
  await db.query('UPDATE findings SET dismissed_at = $2::timestamptz, dismissed_by = $3 WHERE id = ANY($1::text[])', [[...ids(11, 2), ...ids(23, 4)], new Date(T0).toISOString(), 'ana']);
  await db.query('UPDATE findings SET quiet = true WHERE id = ANY($1::text[])', [[...ids(13, 3), ...ids(29, 0)]]);
  await repo.markActive(ids(5, 4).map((finding_id) => ({ finding_id, project: 'big', at_ms: T0 + 1 })));
}, 120_000);
afterAll(() => db.close());

interface Row { id: string; run_id: string; group_name: string | null; priority: number; raised_ms: number; status: string; dismissed: boolean; quiet: boolean; active: boolean }

/** The problems a state lists, worked out here from every finding: [head, ...the others in order]. */
async function expected(state: FindingStateFilter, includeQuiet = false): Promise<string[][]> {
  const res = await db.query<Record<string, unknown>>(
    `SELECT id, run_id, group_name, priority, raised_at, status, dismissed_at IS NOT NULL AS dismissed, quiet, active_at IS NOT NULL AS active
     FROM findings WHERE project = 'big'`,
  );
  const rows: Row[] = res.rows.map((r) => ({
    id: String(r.id), run_id: String(r.run_id), group_name: (r.group_name as string | null) ?? null, priority: Number(r.priority),
    raised_ms: new Date(r.raised_at as string).getTime(), status: String(r.status), dismissed: Boolean(r.dismissed), quiet: Boolean(r.quiet), active: Boolean(r.active),
  }));
  const inState = (f: Row) => {
    switch (state) {
      case 'open': return f.status === 'open' && !f.dismissed;
      case 'active': return f.status === 'open' && !f.dismissed && f.active;
      case 'resolved': return f.status === 'resolved' && !f.dismissed;
      case 'dismissed': return f.dismissed;
      case 'all': return true;
    }
  };
  const groups = new Map<string, Row[]>();
  for (const f of rows) {
    if (!inState(f) || (!includeQuiet && f.quiet && !f.dismissed)) continue;
    const key = f.group_name === null ? `f ${f.id}` : `g ${f.run_id} ${f.group_name}`;
    groups.set(key, [...(groups.get(key) ?? []), f]);
  }
  const ranked = (a: Row, b: Row) => b.priority - a.priority || a.raised_ms - b.raised_ms || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  const problems = [...groups.values()].map((m) => m.sort(ranked));
  problems.sort((a, b) => b[0].raised_ms - a[0].raised_ms || (a[0].id < b[0].id ? 1 : -1));
  return problems.map((m) => m.map((f) => f.id));
}

/** Every page, the cursor followed to the end. */
async function pages(q: ListFindingsQuery): Promise<{ problems: string[][]; pages: number }> {
  const repo = new FindingsRepo(db);
  const problems: string[][] = [];
  let cursor: string | undefined;
  let n = 0;
  do {
    const page = await repo.list('big', { ...q, cursor });
    n++;
    problems.push(...page.items.map((p) => [p.id, ...p.related.map((r) => r.id)]));
    cursor = page.next_cursor ?? undefined;
  } while (cursor !== undefined);
  return { problems, pages: n };
}

/** The statement a list call sends, and what running it reads: the rows its scans and joins looked at. */
async function rowsRead(q: ListFindingsQuery): Promise<number> {
  let sent: { sql: string; params?: readonly unknown[] } | undefined;
  const spy: Queryable = {
    query: <R>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>> => {
      sent = { sql, params };
      return db.query<R>(sql, params);
    },
  };
  await new FindingsRepo(spy).list('big', q);
  const res = await db.query<Record<string, unknown>>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sent!.sql}`, sent!.params);
  const cell = Object.values(res.rows[0])[0];
  const plan = (typeof cell === 'string' ? JSON.parse(cell) : cell) as { Plan: PlanNode }[];
  return read(plan[0].Plan);
}

interface PlanNode { 'Node Type': string; 'Actual Rows': number; 'Actual Loops': number; Plans?: PlanNode[]; [k: string]: unknown }

function read(node: PlanNode): number {
  const loops = node['Actual Loops'] ?? 1;
  let n = 0;
  if (/Scan$/.test(node['Node Type']) && !/^(CTE|Subquery|Function|Values|WorkTable) Scan$/.test(node['Node Type'])) {
    n += (node['Actual Rows'] + Number(node['Rows Removed by Filter'] ?? 0) + Number(node['Rows Removed by Index Recheck'] ?? 0)) * loops;
  }
  n += Number(node['Rows Removed by Join Filter'] ?? 0) * loops;
  for (const child of node.Plans ?? []) n += read(child);
  return n;
}

describe('a page of open problems with 20,000 findings', () => {
  it('reads a number of rows bounded by the page, not by the open findings, on a database with no statistics', async () => {
    const open = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM findings WHERE status = 'open' AND dismissed_at IS NULL`)).rows[0].n;
    expect(open).toBeGreaterThan(15_000);
    const first = await rowsRead({ state: 'open', limit: 200 });
    const cursor = (await new FindingsRepo(db).list('big', { state: 'open', limit: 200 })).next_cursor!;
    const second = await rowsRead({ state: 'open', limit: 200, cursor });
    const one = await rowsRead({ state: 'open', limit: 1 });
    // The page's heads, the non-heads passed on the way, and each head's group: a few rows a problem.
    expect(first).toBeLessThan(20 * 200);
    expect(second).toBeLessThan(20 * 200);
    expect(one).toBeLessThan(50);
  }, 60_000);

  it('gives every open problem once, in the same order, with its group, following the cursor to the end', async () => {
    const want = await expected('open');
    const got = await pages({ state: 'open', limit: 200 });
    expect(got.pages).toBe(Math.ceil(want.length / 200) + (want.length % 200 === 0 ? 1 : 0));
    expect(got.problems).toEqual(want);
    // the sample holds every shape: groups of three, two and one, resolved, dismissed and quiet heads
    expect(new Set(want.map((p) => p.length))).toEqual(new Set([1, 2, 3]));
  }, 120_000);

  it.each<[FindingStateFilter, boolean]>([['active', false], ['resolved', false], ['dismissed', false], ['open', true]])(
    'lists %s problems (quiet ones too: %s) as before, page by page',
    async (state, include_quiet) => {
      const want = await expected(state, include_quiet);
      expect(want.length).toBeGreaterThan(100);
      expect((await pages({ state, include_quiet, limit: 97 })).problems).toEqual(want);
    },
    120_000,
  );

  it('lists all problems as before (the first pages)', async () => {
    const want = (await expected('all')).slice(0, 1500);
    const repo = new FindingsRepo(db);
    const got: string[][] = [];
    let cursor: string | undefined;
    while (got.length < 1500) {
      const page = await repo.list('big', { state: 'all', limit: 500, cursor });
      got.push(...page.items.map((p) => [p.id, ...p.related.map((r) => r.id)]));
      cursor = page.next_cursor!;
    }
    expect(got).toEqual(want);
  }, 60_000);
});
