import type { Db } from '@neatroots/ports';
import { recordingDb, type Answered } from '../../../../libs/store/src/test-db.test';
import { migrate, openPglite } from '@neatroots/platform';
import { ReviewSop } from './service';

/**
 * Insights over a busy workspace of 100 procedures of 40 rules took 1-2.5 s. Two of its reads
 * grew with it for nothing: the findings of not_measurable checks (left out of the rule rates)
 * were found by reading every check of the window, bodies and all, to keep none or a few; and
 * the live release's whole lock (most of a megabyte) was read and parsed for the procedures'
 * names. Now the not_measurable checks have their own index, and the names are read from the
 * lock in the database. Same answers.
 */
const WS = 'busy';
const PROCEDURES = 100;
const RULES = 40;
const SESSIONS = 4_000;

let db: Db;
let review: ReviewSop;
/** What the database answered, statement by statement. */
let answered: Answered[];

const lock = () => ({
  procedures: Array.from({ length: PROCEDURES }, (_, p) => ({
    procedure_id: `proc-${p}`,
    name: `Procedure ${p}`,
    version: 'v1',
    goal: 'The caller is helped.',
    applies_when: null,
    rules: Array.from({ length: RULES }, (_, r) => ({ rule_id: `r_p${p}_${r}`, kind: 'step', index: r + 1, text: `Rule ${r} of procedure ${p}: do the thing the caller needs, in order, and say so.`, tool: null, required: r < 3, when: null })),
  })),
  agents: [{ agent: 'agent', procedures: Array.from({ length: PROCEDURES }, (_, p) => `proc-${p}`), instructions: '' }],
});

beforeAll(async () => {
  const raw = await openPglite();
  await migrate(raw);
  ({ db, answered } = recordingDb(raw));
  const jobs = { work: async () => undefined, add: async () => 'x', run: async () => undefined as never, schedule: async () => undefined, close: async () => undefined };
  review = new ReviewSop({ db, jobs });
  await db.query('INSERT INTO projects (name) VALUES ($1)', [WS]);
  await db.query(`INSERT INTO sop_releases (id, workspace, number, live, lock) VALUES ('rel_1', $1, 1, true, $2::jsonb)`, [WS, JSON.stringify(lock())]);
  // A week of sessions, each checked on one procedure; one check in 50 not measurable.
  await db.query(
    `INSERT INTO sop_sessions (id, workspace, external_id, agent, release_id, started_at, content_hash, body, status, result, checked_result, received_at, checked_at)
     SELECT 'ses_' || i, $1, 'ext-' || i, 'agent', 'rel_1', t, md5(i::text), '{"turns":[]}'::jsonb, 'checked', r, r, t, t
       FROM generate_series(1, $2::int) i,
            LATERAL (SELECT now() - ((i::float8 / $2::int) * 7) * interval '1 day' AS t,
                            CASE WHEN i % 50 = 0 THEN 'not_measurable' WHEN i % 4 = 0 THEN 'followed' ELSE 'deviated' END AS r) x`,
    [WS, SESSIONS],
  );
  // Each check's body as the checker writes it: its procedure's 40 rules, each with a reason.
  await db.query(
    `INSERT INTO sop_checks (session_id, procedure_id, position, result, checked_result, body)
     SELECT s.id, 'proc-' || (i % ${PROCEDURES}), 0, s.result, s.result,
            jsonb_build_object('rules', (SELECT jsonb_agg(jsonb_build_object('rule_id', 'r' || r, 'status', 'done', 'reason', 'Turn ' || r || ' of call ' || i || ': ' || md5(i::text || r)))
                                           FROM generate_series(0, ${RULES - 1}) r))
       FROM generate_series(1, $1::int) i JOIN sop_sessions s ON s.id = 'ses_' || i`,
    [SESSIONS],
  );
  await db.query(
    `INSERT INTO sop_findings (id, workspace, session_id, procedure_id, release_id, rule_id, kind, index, text, status, started_at, created_at)
     SELECT 'sf_' || i || '_' || k, $1, s.id, 'proc-' || (i % ${PROCEDURES}), 'rel_1', 'r_p' || (i % ${PROCEDURES}) || '_' || k, 'step', k + 1, 'Rule ' || k, 'skipped', s.started_at, s.started_at
       FROM generate_series(1, $2::int) i JOIN sop_sessions s ON s.id = 'ses_' || i, generate_series(0, 2) k
      WHERE s.result <> 'followed'`,
    [WS, SESSIONS],
  );
  await review.assigner.assign(WS);
  // the roll-up read these bodies as checks of nothing measured: their results as the checker gave them
  await db.query(`UPDATE sop_checks SET result = checked_result WHERE result IS DISTINCT FROM checked_result`);
  await db.query(`UPDATE sop_sessions SET result = checked_result WHERE result IS DISTINCT FROM checked_result`);
  await db.exec('ANALYZE');
}, 180_000);
afterAll(async () => {
  await db?.close();
});

/** Every node of a plan, depth first. */
function nodes(plan: Record<string, unknown>): Record<string, unknown>[] {
  return [plan, ...((plan.Plans as Record<string, unknown>[] | undefined) ?? []).flatMap(nodes)];
}

describe('Insights over 100 procedures of 40 rules', () => {
  it('finds the window’s not_measurable checks from their own index, not by reading every check', async () => {
    answered.length = 0;
    const view = await review.queries.insights(WS, { days: 30 });
    const statement = answered.find((a) => /result = 'not_measurable'/.test(a.sql));
    expect(statement).toBeDefined();
    // the answer: the findings of the not_measurable checks, per rule pattern (3 per session, 80 sessions)
    const counted = statement!.rows.reduce((n, r) => n + Number(r.n), 0);
    const direct = await db.query<{ n: unknown }>(
      `SELECT count(*) AS n FROM sop_findings f JOIN sop_sessions s ON s.id = f.session_id WHERE s.workspace = $1 AND s.result = 'not_measurable' AND f.rule_pattern_id IS NOT NULL`,
      [WS],
    );
    expect(counted).toBe(Number(direct.rows[0].n));
    expect(counted).toBe((SESSIONS / 50) * 3);
    // a rung's rate leaves them out: 3 findings of a rule in its procedure's 40 checks, 0 or 1 not measurable
    expect(view.ladder.length).toBeGreaterThan(0);

    const plan = await db.query<Record<string, unknown>>(`EXPLAIN (FORMAT JSON) ${statement!.sql}`, statement!.params);
    const raw = Object.values(plan.rows[0])[0];
    const root = ((typeof raw === 'string' ? JSON.parse(raw) : raw) as { Plan: Record<string, unknown> }[])[0].Plan;
    const onChecks = nodes(root).filter((n) => n['Relation Name'] === 'sop_checks');
    expect(onChecks.map((n) => [n['Node Type'], n['Index Name']])).toEqual([['Index Only Scan', 'sop_checks_unmeasured']]);
  }, 60_000);

  it('names its procedures from the live release without reading the lock', async () => {
    answered.length = 0;
    const view = await review.queries.insights(WS, { days: 30 });
    expect(view.scoreboard).toHaveLength(PROCEDURES);
    for (const row of view.scoreboard) expect(row.procedure_name).toBe(`Procedure ${row.procedure_id.slice(5)}`);
    // the lock is about 800 KB: no row of any statement carries it
    for (const a of answered) for (const row of a.rows) expect(Object.keys(row)).not.toContain('lock');
    const bytes = answered.filter((a) => /sop_releases/.test(a.sql)).reduce((n, a) => n + JSON.stringify(a.rows).length, 0);
    expect(bytes).toBeLessThan(20_000);
    expect(JSON.stringify(lock()).length).toBeGreaterThan(500_000);
  }, 60_000);

  it('names a procedure from its patterns when the live release does not have it, and keeps the lock’s name over them', async () => {
    await db.query(`UPDATE sop_patterns SET procedure_name = 'Old name' WHERE workspace = $1 AND procedure_id IN ('proc-1', 'proc-2')`, [WS]);
    const one = lock();
    one.procedures = one.procedures.filter((p) => p.procedure_id !== 'proc-2');
    await db.query(`UPDATE sop_releases SET lock = $2::jsonb WHERE workspace = $1 AND live`, [WS, JSON.stringify(one)]);
    const view = await review.queries.insights(WS, { days: 30 });
    const name = (id: string) => view.scoreboard.find((r) => r.procedure_id === id)?.procedure_name;
    expect([name('proc-1'), name('proc-2'), name('proc-3')]).toEqual(['Procedure 1', 'Old name', 'Procedure 3']);
  }, 60_000);
});
