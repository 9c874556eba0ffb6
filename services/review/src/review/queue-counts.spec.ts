import type { Db } from '@neatroots/ports';
import { recordingDb, type Answered } from '../../../../libs/store/src/test-db.test';
import { migrate, openPglite } from '@neatroots/platform';
import { REVIEW_STATES, type ReviewState } from '@neatroots/review-domain';
import { ReviewReadRepo, SopSessionsRepo, sopFindingId } from '@neatroots/store';
import { fixFactsOf } from '../suggestions/fix';
import { stateOf } from './facts';
import { activeLeaves } from './queue';
import { ReviewSop } from './service';
import { ReviewWrites } from './writes';

/**
 * The review queue's counts per state cover every active leaf pattern (3,000 in a busy
 * workspace). They were worked out from every pattern's record, verdict history, findings per
 * wording and fix facts on each request (100-240 ms); now from one small row of facts a pattern,
 * only the few whose state depends on more being read in full. Same answers: a workspace with a
 * pattern in every state and every reason (split rules, inherited verdicts, a retired pattern,
 * rewordings, suggestions applied before and after a verdict, releases with and without the
 * edit) gives the counts and states the full computation gives, and the queue reads no more
 * pattern records than its page and those few.
 */
const WS = 'states';
const P = 'take-order';
const SESSIONS = 12;
/** Rules 0-15 are set up below; the rest (no verdict) make the workspace bigger than a page. */
const RULES = 46;
const ruleId = (r: number) => `rule-${String(r).padStart(2, '0')}`;

let db: Db;
let review: ReviewSop;
/** Rule pattern id by rule index. */
const pid: Record<number, string> = {};
let sub: { mode: string; other: string };

/** What the database answered, statement by statement. */
let answered: Answered[];

beforeAll(async () => {
  const raw = await openPglite();
  await migrate(raw);
  ({ db, answered } = recordingDb(raw));
  const jobs = { work: async () => undefined, add: async () => 'x', run: async () => undefined as never, schedule: async () => undefined, close: async () => undefined };
  review = new ReviewSop({ db, jobs });
  const sessions = new SopSessionsRepo(db);
  // Rule r has findings in sessions s >= r % 12; rule 11 (fixed below) only in sessions 0 and 1.
  const has = (r: number, s: number) => (r === 11 ? s < 2 : s >= r % SESSIONS);
  for (let s = 0; s < SESSIONS; s++) {
    const got = await sessions.receive(WS, { external_id: `call-${s}`, agent: 'a', release_id: null, started_at: null, transcript_ref: null, turns: [{ role: 'agent', text: 'hi' }], tool_calls: [] });
    const findings = Array.from({ length: RULES }, (_, r) => r)
      .filter((r) => has(r, s))
      .map((r) => ({ id: sopFindingId(got.id, P, ruleId(r)), procedure_id: P, rule_id: ruleId(r), kind: 'never' as const, index: r + 1, text: `Never do thing ${r}.`, status: 'violated' as const, evidence: [], reason: null }));
    await sessions.saveOutcome(got.id, got.content_hash, { release_id: null, result: 'deviated', checked_result: 'deviated', checks: [{ procedure_id: P, result: 'deviated', checked_result: 'deviated', body: {} }], findings });
  }
  await review.assigner.assign(WS);
  for (const r of (await db.query<{ id: string; rule_id: string }>(`SELECT id, rule_id FROM sop_patterns WHERE workspace = $1 AND kind = 'rule'`, [WS])).rows) pid[Number(r.rule_id.slice(5))] = r.id;

  // Rule 13 split into a failure mode and other, its findings spread over both.
  await db.query(
    `INSERT INTO sop_patterns (id, workspace, procedure_id, procedure_name, lineage_id, kind, parent_id, name, named_by, description, rule_id, rule_kind, rule_index, rule_text, rule_ran_at, clustered_at)
     SELECT p.id || '_' || k, p.workspace, p.procedure_id, p.procedure_name, p.lineage_id, CASE WHEN k = 1 THEN 'other' ELSE 'sub' END, p.id, 'Mode ' || k, 'model', null, p.rule_id, p.rule_kind, p.rule_index, p.rule_text, p.rule_ran_at, now()
       FROM sop_patterns p, generate_series(0, 1) k WHERE p.id = $1`,
    [pid[13]],
  );
  await db.query(
    `UPDATE sop_findings f SET pattern_id = f.rule_pattern_id || '_' || (n.rn % 2)
       FROM (SELECT id, row_number() OVER (ORDER BY id) AS rn FROM sop_findings WHERE rule_pattern_id = $1) n WHERE f.id = n.id`,
    [pid[13]],
  );
  sub = { mode: `${pid[13]}_0`, other: `${pid[13]}_1` };

  const verdict = (id: string, v: 'real' | 'acceptable' | 'sop_wrong' | 'checker_wrong') => review.queries.giveVerdict(WS, id, { verdict: v });
  // rule 0: no verdict (needs_review, no_verdict); rule 1: carried over by a recluster
  await db.query(`INSERT INTO sop_verdicts (workspace, pattern_id, verdict, carried_over) VALUES ($1, $2, 'acceptable', true)`, [WS, pid[1]]);
  for (const [r, v] of [[2, 'real'], [3, 'acceptable'], [4, 'acceptable'], [5, 'acceptable'], [6, 'checker_wrong'], [7, 'real'], [8, 'sop_wrong'], [9, 'real'], [10, 'real'], [11, 'real'], [12, 'real'], [13, 'real'], [15, 'acceptable']] as const) {
    await verdict(pid[r], v);
  }
  await verdict(sub.other, 'acceptable');
  // rule 2: a recluster since its verdict kept less than half its findings
  await db.query(`UPDATE sop_patterns SET materially_reclustered_at = clock_timestamp() WHERE id = $1`, [pid[2]]);
  // rule 3: reworded since its verdict, its findings on the new wording (reworded);
  // rule 4: reworded since, its findings all on the wording the verdict judged (closed)
  await db.query(`UPDATE sop_patterns SET reworded_at = clock_timestamp() WHERE id = $1`, [pid[3]]);
  await db.query(`UPDATE sop_patterns SET reworded_at = clock_timestamp(), rule_id = 'rule-04-b' WHERE id = $1`, [pid[4]]);
  // rule 14: retired
  await db.query(`UPDATE sop_patterns SET retired_at = now() WHERE id = $1`, [pid[14]]);

  // Suggestions applied for rules 9-12 and 15: each edits its own file.
  const suggest = (r: number, path: string) =>
    db.query(
      `INSERT INTO sop_suggestions (id, workspace, pattern_id, procedure_id, path, rule_id, rule_text, verdict, verdict_at, status, prompt_version, base_version, old_text, new_text)
       VALUES ($1, $2, $3, $4, $5, $6, 'Never do it.', 'real', now(), 'applied', 'v1', 'v0', 'old text', $7)`,
      [`sug-${r}`, WS, pid[r], P, path, ruleId(r), `new text ${path}`],
    );
  await suggest(15, 'e.md');
  // rule 15: a newer real verdict than the suggestion: open again
  await verdict(pid[15], 'real');
  await suggest(9, 'd.md'); // no release with the edit: fixing
  await suggest(10, 'c.md'); // the edit in release 3, no session on it yet: fixing
  await suggest(11, 'a.md'); // the edit in release 2, 10 sessions on it, none with a finding: fixed
  await suggest(12, 'b.md'); // the edit in release 2, findings on it: regressed
  await db.query(`INSERT INTO sop_releases (id, workspace, number, live, lock, created_at) VALUES ('rel_1', $1, 1, false, '{}'::jsonb, now() - interval '1 day')`, [WS]);
  await db.query(`INSERT INTO sop_releases (id, workspace, number, live, lock) VALUES ('rel_2', $1, 2, false, '{}'::jsonb), ('rel_3', $1, 3, true, '{}'::jsonb)`, [WS]);
  await db.query(
    `INSERT INTO sop_release_files (release_id, path, text, version) VALUES
       ('rel_2', 'a.md', 'new text a.md', 'v'), ('rel_2', 'b.md', 'new text b.md', 'v'), ('rel_3', 'a.md', 'new text a.md', 'v'),
       ('rel_3', 'b.md', 'new text b.md', 'v'), ('rel_3', 'c.md', 'new text c.md', 'v')`,
  );
  await db.query(`UPDATE sop_sessions SET release_id = CASE WHEN external_id IN ('call-0', 'call-1') THEN 'rel_1' ELSE 'rel_2' END WHERE workspace = $1`, [WS]);
}, 120_000);
afterAll(async () => {
  await db?.close();
});

/** Every active leaf's review state the way the queue used to work it out: each pattern read in full. */
async function fullStates(): Promise<Map<string, ReviewState>> {
  const writes = new ReviewWrites();
  const counts = new Map(
    (
      await db.query<{ pattern_id: string; n: unknown }>(`SELECT pattern_id, sum(n) AS n FROM sop_finding_days WHERE workspace = $1 AND pattern_id <> '' GROUP BY pattern_id`, [WS])
    ).rows.map((r) => [r.pattern_id, Number(r.n)]),
  );
  const leaves = activeLeaves(await writes.repo.patternsOf(db, WS)).filter((p) => (counts.get(p.id) ?? 0) > 0);
  const ctx = await writes.contexts(db, leaves);
  const wordings = await new ReviewReadRepo(db).wordingCounts(leaves.filter((p) => ctx.get(p.id)!.wording.since !== null));
  const fixes = await fixFactsOf(db, ctx.values());
  return new Map(leaves.map((p) => [p.id, stateOf(ctx.get(p.id)!, wordings.get(p.id) ?? [], fixes.get(p.id) ?? null).review_state]));
}

describe('the review queue counts per state', () => {
  it('gives the counts and states of the full computation, with a pattern in every state', async () => {
    const expected = await fullStates();
    const byState = Object.fromEntries(REVIEW_STATES.map((s) => [s, 0])) as Record<ReviewState, number>;
    for (const s of expected.values()) byState[s]++;
    // the workspace has them all
    for (const s of REVIEW_STATES) expect(byState[s]).toBeGreaterThan(0);
    expect(expected.get(pid[14])).toBeUndefined();
    expect(expected.has(pid[13])).toBe(false);

    const all = await review.queries.reviewQueue(WS, { state: [...REVIEW_STATES], limit: 500 });
    expect(all.counts).toEqual(byState);
    expect(all.total).toBe(expected.size);
    expect(new Map(all.items.map((i) => [i.pattern_id, i.review_state]))).toEqual(expected);
    // each as its own page says
    for (const r of [0, 1, 2, 3, 4, 7, 9, 10, 11, 12, 15]) {
      expect((await review.queries.pattern(WS, pid[r], {})).review_state).toBe(expected.get(pid[r]));
    }
    expect(Object.fromEntries([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15].map((r) => [r, expected.get(pid[r])]))).toEqual({
      0: 'needs_review',
      1: 'needs_review',
      2: 'needs_review',
      3: 'needs_review',
      4: 'closed',
      5: 'closed',
      6: 'closed',
      7: 'open',
      8: 'open',
      9: 'fixing',
      10: 'fixing',
      11: 'fixed',
      12: 'regressed',
      15: 'open',
    });
    expect([expected.get(sub.mode), expected.get(sub.other)]).toEqual(['open', 'closed']);
    expect(all.items.find((i) => i.pattern_id === pid[3])).toMatchObject({ review_reason: 'reworded' });
    expect(all.items.find((i) => i.pattern_id === pid[12])).toMatchObject({ review_reason: 'came_back', fix_release: { id: 'rel_2', number: 2 } });

    // Every page of the default queue, and of each state alone, the same as the full list's.
    for (const s of REVIEW_STATES) {
      const page = await review.queries.reviewQueue(WS, { state: [s], limit: 3 });
      expect(page.counts).toEqual(byState);
      expect(page.total).toBe(byState[s]);
      expect(page.items.map((i) => i.pattern_id)).toEqual(all.items.filter((i) => i.review_state === s).slice(0, 3).map((i) => i.pattern_id));
      expect(page.items).toEqual(all.items.filter((i) => i.review_state === s).slice(0, 3));
    }
  }, 60_000);

  it('reads in full only the page and the patterns whose state needs their wordings or fix facts', async () => {
    const leaves = (await fullStates()).size;
    answered.length = 0;
    const page = await review.queries.reviewQueue(WS, { limit: 1 });
    expect(page.items).toHaveLength(1);
    // the pattern records read (every column of sop_patterns, lineage_id and rule_text among them)
    const records = new Set(answered.flatMap((a) => a.rows).filter((r) => 'lineage_id' in r && 'rule_text' in r).map((r) => r.id as string));
    // the page's one, the two reworded (3 and 4), the four with a suggestion applied since the
    // verdict (9-12) and rule 15 (one applied before its verdict): 8 of the 40-odd leaves
    expect(records.size).toBeLessThanOrEqual(8);
    expect(leaves).toBeGreaterThan(40);
    // and no verdict history of the others
    const verdicts = answered.filter((a) => /FROM sop_verdicts WHERE pattern_id = ANY/.test(a.sql)).flatMap((a) => a.rows);
    expect(verdicts.length).toBeLessThanOrEqual(10);
  }, 60_000);
});
