import type { Db } from '@neatroots/ports';
import { migrate, openPglite } from '@neatroots/platform';
import { SopError, SopSessionsRepo, sopFindingId } from '@neatroots/store';
import { ReviewSop } from './service';

/**
 * GET /patterns/{id}/regression on a pattern without a verdict answers 409 no_verdict from the
 * pattern and its verdicts alone: not one statement reads the pattern's findings (thousands on
 * a big pattern, read for nothing before). With a verdict, its lines come as before.
 */
const WS = 'regress';
const SESSIONS = 20;

let raw: Db;
let review: ReviewSop;
let patternId: string;
/** Every statement the review service ran, as SQL text. */
const statements: string[] = [];

/** `db`, with the SQL of every statement noted (queries, and those of transactions). */
function noting(db: Db): Db {
  return {
    kind: db.kind,
    query: (sql, params) => (statements.push(sql), db.query(sql, params)),
    exec: (sql) => (statements.push(sql), db.exec(sql)),
    transaction: (fn) => db.transaction((tx) => fn({ query: (sql, params) => (statements.push(sql), tx.query(sql, params)) })),
    close: () => db.close(),
  };
}

beforeAll(async () => {
  raw = await openPglite();
  await migrate(raw);
  const sessions = new SopSessionsRepo(raw);
  for (let s = 0; s < SESSIONS; s++) {
    const r = await sessions.receive(WS, { external_id: `call-${s}`, agent: 'a', release_id: null, started_at: null, transcript_ref: null, turns: [{ role: 'agent', text: 'hi' }], tool_calls: [] });
    const rule = { procedure_id: 'take-order', rule_id: 'never-price', kind: 'never' as const, index: 1, text: 'Volunteer a price.', status: 'violated' as const, evidence: [], reason: null };
    await sessions.saveOutcome(r.id, r.content_hash, { release_id: null, result: 'deviated', checked_result: 'deviated', checks: [{ procedure_id: 'take-order', result: 'deviated', checked_result: 'deviated', body: {} }], findings: [{ id: sopFindingId(r.id, 'take-order', 'never-price'), ...rule }] });
  }
  const jobs = { work: async () => undefined, add: async () => 'x', run: async () => undefined as never, schedule: async () => undefined, close: async () => undefined };
  review = new ReviewSop({ db: noting(raw), jobs });
  await review.assigner.assign(WS);
  patternId = (await raw.query<{ id: string }>(`SELECT id FROM sop_patterns WHERE workspace = $1`, [WS])).rows[0].id;
}, 60_000);
afterAll(async () => {
  await raw?.close();
});

const readsFindings = () => statements.filter((sql) => /\bsop_findings\b/.test(sql));

describe('GET /patterns/{id}/regression without a verdict', () => {
  it("answers 409 no_verdict without reading the pattern's findings; with a verdict, one line per finding", async () => {
    statements.length = 0;
    const refused = await review.queries.regression(WS, patternId).then(() => null, (e: unknown) => e as SopError);
    expect(refused).toMatchObject({ status: 409, code: 'no_verdict' });
    expect(statements.length).toBeGreaterThan(0);
    expect(readsFindings()).toEqual([]);

    await review.queries.giveVerdict(WS, patternId, { verdict: 'real', reviewer: 'ana' });
    statements.length = 0;
    const lines = await review.queries.regression(WS, patternId);
    expect(lines).toHaveLength(SESSIONS);
    expect(lines.every((l) => l.verdict === 'real' && l.expect === 'agent')).toBe(true);
    // what the 409 must not do, the answer with a verdict does
    expect(readsFindings().length).toBeGreaterThan(0);
  });

  it('answers 404 for a pattern that is not there, as before', async () => {
    expect(await review.queries.regression(WS, 'pat_nope').then(() => null, (e: unknown) => e as SopError)).toMatchObject({ status: 404, code: 'not_found' });
  });
});
