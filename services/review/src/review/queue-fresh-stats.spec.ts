import type { Db } from '@neatroots/ports';
import { recordingDb, type Answered } from '../../../../libs/store/src/test-db.test';
import { migrate, openPglite } from '@neatroots/platform';
import { REVIEW_STATES } from '@neatroots/review-domain';
import { ReviewSop } from './service';

/**
 * The embedded database is analyzed in the background after it starts, and after enough has
 * been written; a review queue of every state asked for before that (a freshly filled
 * database, its planner statistics empty) was planned as if each table held a handful of rows:
 * the verdicts, taken for 5 rows, were joined to every pattern and every finding by nested loops
 * (7,200,000 rows thrown away by a join filter and 8.8 s for 3,000 patterns and 100,000
 * findings). The queue's statements now go pattern by pattern on their indexes, which no
 * statistics change: before any ANALYZE, they touch a few rows per pattern, and read no finding
 * by a scan of the table.
 */
const WS = 'fresh';
const PATTERNS = 1_000;
const VERDICTS = 800;
const FINDINGS_PER_PATTERN = 10;

let raw: Db;
let db: Db;
let review: ReviewSop;
let statements: Answered[];

beforeAll(async () => {
  raw = await openPglite();
  await migrate(raw);
  ({ db, answered: statements } = recordingDb(raw));
  const jobs = { work: async () => undefined, add: async () => 'x', run: async () => undefined as never, schedule: async () => undefined, close: async () => undefined };
  review = new ReviewSop({ db, jobs });
  // Filled in bulk, as an import or a busy first hour does, and never analyzed.
  await raw.query('INSERT INTO projects (name) VALUES ($1)', [WS]);
  await raw.query(
    `INSERT INTO sop_sessions (id, workspace, external_id, agent, started_at, content_hash, body, status, result, checked_result, received_at, checked_at)
     SELECT 'ses_' || i, $1, 'ext-' || i, 'agent', now() - i * interval '1 minute', md5(i::text), '{"turns":[]}'::jsonb, 'checked', 'deviated', 'deviated', now(), now()
       FROM generate_series(1, $2::int) i`,
    [WS, FINDINGS_PER_PATTERN * 10],
  );
  await raw.query(
    `INSERT INTO sop_patterns (id, workspace, procedure_id, procedure_name, lineage_id, kind, name, named_by, rule_id, rule_kind, rule_index, rule_text, rule_ran_at)
     SELECT 'pat_' || i, $1, 'proc-' || (i / 40), 'Procedure ' || (i / 40), 'r_' || i, 'rule', 'Rule ' || i, 'rule_text', 'r_' || i, 'step', i % 40 + 1, 'Rule ' || i || ': do it.', now()
       FROM generate_series(1, $2::int) i`,
    [WS, PATTERNS],
  );
  await raw.query(
    `INSERT INTO sop_findings (id, workspace, session_id, procedure_id, rule_id, kind, index, text, status, started_at, created_at, pattern_id, rule_pattern_id)
     SELECT 'sf_' || i || '_' || k, $1, 'ses_' || (k * 10 + i % 10 + 1), 'proc-' || (i / 40), 'r_' || i, 'step', i % 40 + 1, 'Rule ' || i, 'skipped',
            now() - k * interval '1 hour', now() - k * interval '1 hour', 'pat_' || i, 'pat_' || i
       FROM generate_series(1, $2::int) i, generate_series(0, $3::int - 1) k`,
    [WS, PATTERNS, FINDINGS_PER_PATTERN],
  );
  await raw.query(
    `INSERT INTO sop_verdicts (workspace, pattern_id, verdict, created_at)
     SELECT $1, 'pat_' || i, (ARRAY['acceptable', 'real', 'sop_wrong', 'checker_wrong'])[i % 4 + 1], now() - interval '5 hours' FROM generate_series(1, $2::int) i`,
    [WS, VERDICTS],
  );
}, 120_000);
afterAll(async () => {
  await raw?.close();
});

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Join Filter'?: number;
  Plans?: PlanNode[];
}

const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

/** Each statement's plan as run (EXPLAIN ANALYZE), with the rows its nodes gave and threw away. */
async function touched(sqls: readonly { sql: string; params: readonly unknown[] | undefined }[]): Promise<{ sql: string; rows: number; plan: PlanNode[] }[]> {
  const out: { sql: string; rows: number; plan: PlanNode[] }[] = [];
  for (const s of sqls) {
    if (!/^\s*(SELECT|WITH)\b/i.test(s.sql)) continue;
    const res = await raw.query<Record<string, unknown>>(`EXPLAIN (ANALYZE, FORMAT JSON) ${s.sql}`, s.params);
    const v = Object.values(res.rows[0])[0];
    const plan = nodes(((typeof v === 'string' ? JSON.parse(v) : v) as { Plan: PlanNode }[])[0].Plan);
    const rows = plan.reduce((n, p) => n + ((p['Actual Rows'] ?? 0) + (p['Rows Removed by Filter'] ?? 0) + (p['Rows Removed by Join Filter'] ?? 0)) * (p['Actual Loops'] ?? 1), 0);
    out.push({ sql: s.sql.replace(/\s+/g, ' ').slice(0, 80), rows, plan });
  }
  return out;
}

describe('the review queue before the first ANALYZE', () => {
  it('is planned pattern by pattern: a few rows per pattern, no finding read by a scan of the table', async () => {
    const never = await raw.query<{ n: unknown }>(`SELECT count(*) AS n FROM pg_stats WHERE tablename IN ('sop_findings', 'sop_verdicts', 'sop_patterns', 'sop_finding_days')`);
    expect(Number(never.rows[0].n)).toBe(0);

    statements.length = 0;
    const all = await review.queries.reviewQueue(WS, { state: [...REVIEW_STATES], limit: 50 });
    expect(all.total).toBe(PATTERNS);
    expect(all.counts).toMatchObject({ needs_review: PATTERNS - VERDICTS, open: VERDICTS / 2, closed: VERDICTS / 2 });
    expect(all.items).toHaveLength(50);

    const plans = await touched(statements);
    expect(plans.length).toBeGreaterThan(0);
    for (const p of plans) {
      // 1,000 patterns, 800 verdicts, 10,000 findings: a join of every verdict to every pattern is 800,000
      expect([p.sql, p.rows < 60_000]).toEqual([p.sql, true]);
      expect(p.plan.filter((n) => n['Relation Name'] === 'sop_findings' && n['Node Type'] === 'Seq Scan').map(() => p.sql)).toEqual([]);
    }

    // and the same answer once analyzed
    await raw.exec('ANALYZE');
    expect(await review.queries.reviewQueue(WS, { state: [...REVIEW_STATES], limit: 50 })).toEqual(all);
  }, 120_000);
});
