import type { Db, Jobs } from '@neatroots/ports';
import { checkSession, noModelDecider, type LockRule } from '@neatroots/sop';
import { LineageRepo, SopError, SuggestionsRepo } from '@neatroots/store';
import { startSop, type Sop } from '../sop/service';
import { SopWorkspaces } from '../sop/workspaces';
import { RuleLineage } from './service';
import { LOOKUP_WORDINGS, refundFolder, refundSession, rewordedFolder } from './refunds.test';

/**
 * Rule lineage in the review service as it runs (startSop, inline jobs, sessions checked by
 * their tool calls): links stored at publish, patterns following them, the manual link and
 * unlink, the rebuild. Run on PGlite (lineage.spec.ts) and on a Postgres server
 * (lineage.integration.spec.ts): `open` gives a migrated database and inline jobs; each
 * workspace is named with `suffix`.
 */
export function lineageSuite(open: () => Promise<{ db: Db; jobs: Jobs }>, suffix = ''): void {
  const WS = `shop${suffix}`;
  const SUGGESTED = `suggested${suffix}`;
  let db: Db;
  let jobs: Jobs;
  let sop: Sop;
  const repo = new LineageRepo();

  beforeAll(async () => {
    ({ db, jobs } = await open());
    sop = await startSop({ db, jobs, checkSession: ({ lock, releaseId, session }) => checkSession(lock, session, { decider: noModelDecider('no model is configured'), releaseId }) });
  }, 60_000);
  afterAll(async () => {
    await jobs.close();
    await db.close();
  });

  async function publish(n: number, ws = WS, folder = refundFolder): Promise<LockRule[]> {
    await sop.queries.pushHead(ws, folder(n));
    const r = await sop.queries.publish(ws);
    expect(r.number).toBe(n);
    return r.procedures[0].rules;
  }
  const ruleId = (rules: LockRule[], text: string) => {
    const r = rules.find((x) => x.text === text);
    if (!r) throw new Error(`no rule "${text}"`);
    return r.rule_id;
  };

  let minute = 0;
  /** When the next session started: a minute after the last one. */
  const nextStart = () => new Date(Date.UTC(2026, 10, 20, 9, minute++)).toISOString();
  /**
   * Sends a session and waits until it is checked and its finding is in a pattern; returns the
   * session, that pattern and the finding. `release` is the release the session says it ran
   * (default: the live one).
   */
  async function sessionWithFinding(
    externalId: string,
    skip: string,
    opts: { ws?: string; release?: string; at?: string } = {},
  ): Promise<{ id: string; pattern: string; rule: string; finding: string }> {
    const ws = opts.ws ?? WS;
    const sent = await sop.queries.receiveSession(ws, { ...refundSession(externalId, skip, opts.at ?? nextStart()), release_id: opts.release ?? null });
    for (let i = 0; i < 500; i++) {
      const s = await sop.queries.getSession(ws, sent.id);
      const rule = s.checks.flatMap((c) => c.rules).find((r) => r.finding);
      if (rule?.pattern_id) return { id: sent.id, pattern: rule.pattern_id, rule: rule.rule_id, finding: rule.finding_id! };
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`${externalId} never got a pattern`);
  }
  const result = async (id: string, ws = WS) => (await sop.queries.getSession(ws, id)).result;
  const suppressed = async (id: string, ws = WS) => (await sop.queries.getSession(ws, id)).checks.flatMap((c) => c.rules).find((r) => r.finding)?.suppressed;

  async function refusal(p: Promise<unknown>): Promise<SopError> {
    const err = await p.then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(SopError);
    return err as SopError;
  }

  describe('rule lineage in the review service', () => {
    const ids: Record<string, string> = {};
    const s: Record<string, { id: string; pattern: string; rule: string }> = {};

    it('stores a publish\'s links: rewordings at their position, every rule of the first release new', async () => {
      const r1 = await publish(1);
      ids.look1 = ruleId(r1, 'Look up the order of the caller.');
      ids.check1 = ruleId(r1, 'Check that the payment is within the refund window of 30 days.');
      ids.email1 = ruleId(r1, 'Email the refund receipt to the caller.');
      ids.never1 = ruleId(r1, 'Promise a refund before the payment is checked.');
      expect((await repo.rows(db, WS)).map((r) => [r.how, r.previous_rule_id, r.release_number])).toEqual(r1.map(() => ['new', null, 1]));

      // A verdict on the first wording, before the reword.
      s.a = await sessionWithFinding('refund-a', 'lookup_order');
      expect(s.a.rule).toBe(ids.look1);
      const verdict = await sop.review.giveVerdict(WS, s.a.pattern, { verdict: 'acceptable', note: 'the caller gave the order number', reviewer: 'ana' });
      expect(verdict).toMatchObject({ suppressed_count: 1, review_state: 'closed' });
      expect(await suppressed(s.a.id)).toBe(true);
      expect(await result(s.a.id)).not.toBe('deviated');

      const r2 = await publish(2);
      ids.look2 = ruleId(r2, "Look up the caller's order by order number.");
      ids.check2 = ruleId(r2, 'Check that the payment is less than 30 days old.');
      const look = await sop.review.ruleLineage(WS, ids.look2, {});
      expect(look).toMatchObject({ procedure_id: 'refund', rule_id: ids.look2, lineage_id: ids.look1, previous_rule_id: ids.look1, how: 'matched' });
      expect(look.rules).toEqual([
        { rule_id: ids.look1, previous_rule_id: null, how: 'new', similarity: null, release_id: expect.stringMatching(/^rel_/), text: 'Look up the order of the caller.', from_release: 1 },
        { rule_id: ids.look2, previous_rule_id: ids.look1, how: 'matched', similarity: 0.8, release_id: expect.stringMatching(/^rel_/), text: "Look up the caller's order by order number.", from_release: 2 },
      ]);
      // 0.4 keeps a rule only in its place (the bar anywhere else is 0.5).
      expect(await sop.review.ruleLineage(WS, ids.check2, {})).toMatchObject({ lineage_id: ids.check1, how: 'matched', rules: [{ rule_id: ids.check1 }, { rule_id: ids.check2, similarity: 0.4 }] });
    });

    it('keeps a verdict and its suppression through a reword; the new wording needs review until a verdict confirms it', async () => {
      s.b = await sessionWithFinding('refund-b', 'lookup_order');
      expect(s.b.rule).toBe(ids.look2);
      expect(s.b.pattern).toBe(s.a.pattern);
      // The old wording's finding stays suppressed; the new one is not: the verdict judged the old wording.
      expect(await suppressed(s.a.id)).toBe(true);
      expect(await result(s.a.id)).not.toBe('deviated');
      expect(await suppressed(s.b.id)).toBe(false);
      expect(await result(s.b.id)).toBe('deviated');
      const p = await sop.review.pattern(WS, s.a.pattern, { days: 3650 });
      expect(p).toMatchObject({
        rule: { rule_id: ids.look1, current_rule_id: ids.look2, text: "Look up the caller's order by order number." },
        verdict: { verdict: 'acceptable' },
        review_state: 'needs_review',
        review_reason: 'reworded',
      });
      expect(p.wordings.map((w) => w.rule_id).sort()).toEqual([ids.look1, ids.look2].sort());

      const confirmed = await sop.review.giveVerdict(WS, s.a.pattern, { verdict: 'acceptable' });
      expect(confirmed).toMatchObject({ suppressed_count: 2, review_state: 'closed' });
      expect(await suppressed(s.b.id)).toBe(true);
      expect(await result(s.b.id)).not.toBe('deviated');
    });

    it('follows the lineage in Insights and the sessions filter, by any wording', async () => {
      s.c = await sessionWithFinding('refund-c', 'check_payment');
      for (const id of [ids.look1, ids.look2]) {
        const ins = await sop.review.insights(WS, { rule: id, days: 3650 });
        expect(ins.ladder.map((r) => [r.pattern_id, r.rule_id, r.suppressed])).toEqual([[s.a.pattern, ids.look1, 2]]);
        const listed = await sop.queries.listSessions(WS, { rule: id });
        expect(listed.items.map((x) => x.id).sort()).toEqual([s.a.id, s.b.id].sort());
      }
      expect((await sop.queries.listSessions(WS, { rule: ids.check1 })).items.map((x) => x.id)).toEqual([s.c.id]);
    });

    it('matches a moved rule anywhere; a rewrite below the bar is new and removed; kinds never cross', async () => {
      const r3 = await publish(3);
      ids.confirm = ruleId(r3, 'Confirm who the caller is.');
      ids.sure = ruleId(r3, 'Make sure the charge happened this month.');
      ids.email3 = ruleId(r3, 'Email the caller the receipt of the refund.');
      ids.warning3 = ruleId(r3, 'The agent promises a refund before the payment is checked.');
      const rows = new Map((await repo.rows(db, WS)).map((r) => [r.rule_id, r]));
      expect(rows.get(ids.email3)).toMatchObject({ previous_rule_id: ids.email1, how: 'matched', similarity: 1, release_number: 3 });
      expect(rows.get(ids.sure)).toMatchObject({ previous_rule_id: null, how: 'new' });
      expect(rows.get(ids.confirm)).toMatchObject({ previous_rule_id: null, how: 'new' });
      // The warning sign shares 4 of 7 words with the dropped never rule: another kind, so new.
      expect(rows.get(ids.warning3)).toMatchObject({ previous_rule_id: null, how: 'new' });
      expect([...rows.values()].some((r) => r.previous_rule_id === ids.never1 || r.previous_rule_id === ids.check2)).toBe(false);
    });

    it('keeps a revert in its own lineage (a row is never overwritten by a later publish), its return a step at the release that brought it back', async () => {
      await publish(4);
      const back = await sop.review.ruleLineage(WS, ids.email1, {});
      expect(back).toMatchObject({ rule_id: ids.email1, lineage_id: ids.email1, previous_rule_id: null, how: 'new' });
      expect(back.rules.map((r) => [r.rule_id, r.from_release, r.previous_rule_id, r.how, r.similarity])).toEqual([
        [ids.email1, 1, null, 'new', null],
        [ids.email3, 3, ids.email1, 'matched', 1],
        [ids.email1, 4, ids.email3, 'matched', 1],
      ]);
      expect((await sop.review.ruleLineage(WS, ids.email3, {})).previous_rule_id).toBe(ids.email1);
      expect((await repo.returns(db, WS)).map((r) => [r.rule_id, r.release_number])).toEqual([[ids.email1, 4]]);
    });

    it('links a rule by hand, merging the two patterns into the older one with their verdicts and suggestions; refuses a cycle with 409; unlinks', async () => {
      // The payment check's old wording has a pattern (session c, release 2); the rewrite gets its own.
      await sop.review.giveVerdict(WS, s.c.pattern, { verdict: 'sop_wrong', note: '30 days is too strict' });
      s.d = await sessionWithFinding('refund-d', 'check_payment');
      expect(s.d.rule).toBe(ids.sure);
      expect(s.d.pattern).not.toBe(s.c.pattern);
      await sop.review.giveVerdict(WS, s.d.pattern, { verdict: 'real', reviewer: 'bo' });
      // The older pattern is split (its other failure mode), and the newer one has a failure mode of its own.
      const child = (id: string, parent: string, kind: 'sub' | 'other') =>
        db.query(
          `INSERT INTO sop_patterns (id, workspace, procedure_id, lineage_id, kind, parent_id, name, named_by, procedure_name, rule_id, rule_kind, rule_index, rule_text, rule_ran_at)
           SELECT $1, workspace, procedure_id, lineage_id, $3, id, $1, 'model', procedure_name, rule_id, rule_kind, rule_index, rule_text, rule_ran_at FROM sop_patterns WHERE id = $2`,
          [id, parent, kind],
        );
      await child(`pat_other_of_c${suffix}`, s.c.pattern, 'other');
      await child(`pat_mode_of_d${suffix}`, s.d.pattern, 'sub');
      // The newer one is split too: its other failure mode becomes the older one's.
      await child(`pat_other_of_d${suffix}`, s.d.pattern, 'other');

      // A suggestion for the newer pattern's verdict goes with it, and one made on its other failure mode goes to the older one's.
      const suggestion = (pattern: string) => new SuggestionsRepo().insert(db, { workspace: WS, pattern_id: pattern, procedure_id: 'refund', path: 'procedures/refund.md', rule_id: ids.sure, rule_text: 'Make sure the charge happened this month.', verdict: 'real', verdict_note: null, verdict_at: new Date().toISOString(), prompt_version: 'suggest-1', base_version: 'v', old_text: '# Refund\n' });
      const sug = await suggestion(s.d.pattern);
      const ofOther = await suggestion(`pat_other_of_d${suffix}`);

      const linked = await sop.review.linkRule(WS, ids.sure, { previous_rule_id: ids.check2 });
      expect(linked).toMatchObject({ rule_id: ids.sure, lineage_id: ids.check1, previous_rule_id: ids.check2, how: 'manual' });
      expect(linked.rules.map((r) => r.rule_id)).toEqual([ids.check1, ids.check2, ids.sure]);
      // The moved finding waits in the older pattern's other failure mode for the next recluster; the failure mode moved over.
      const moved = await db.query<{ pattern_id: string; rule_pattern_id: string }>('SELECT pattern_id, rule_pattern_id FROM sop_findings WHERE session_id = $1', [s.d.id]);
      expect(moved.rows).toEqual([{ pattern_id: `pat_other_of_c${suffix}`, rule_pattern_id: s.c.pattern }]);
      expect((await db.query('SELECT parent_id FROM sop_patterns WHERE id = $1', [`pat_mode_of_d${suffix}`])).rows).toEqual([{ parent_id: s.c.pattern }]);
      const merged = await sop.review.pattern(WS, s.c.pattern, { days: 3650 });
      expect(merged).toMatchObject({ session_count: 2, rule: { rule_id: ids.check1, current_rule_id: ids.sure }, verdict: { verdict: 'real', reviewer: 'bo' } });
      expect(merged.verdict_history.map((v) => v.verdict)).toEqual(['sop_wrong']);
      expect(merged.suggestions.map((x) => [x.id, x.pattern_id])).toEqual([[sug.id, s.c.pattern]]);
      expect((await db.query('SELECT id FROM sop_patterns WHERE id = $1', [`pat_other_of_d${suffix}`])).rows).toEqual([]);
      expect((await db.query('SELECT pattern_id FROM sop_suggestions WHERE id = $1', [ofOther.id])).rows).toEqual([{ pattern_id: `pat_other_of_c${suffix}` }]);
      expect((await refusal(sop.review.pattern(WS, s.d.pattern, {}))).status).toBe(404);

      const cycle = await refusal(sop.review.linkRule(WS, ids.check1, { previous_rule_id: ids.sure }));
      expect(cycle).toMatchObject({ status: 409, code: 'lineage_cycle' });
      expect((await refusal(sop.review.linkRule(WS, ids.sure, { previous_rule_id: ids.sure }))).status).toBe(409);
      expect((await refusal(sop.review.linkRule(WS, ids.sure, { previous_rule_id: 'nope' }))).status).toBe(404);
      expect((await refusal(sop.review.linkRule(WS, ids.sure, {} as never))).message).toContain('previous_rule_id');

      const unlinked = await sop.review.unlinkRule(WS, ids.sure, {});
      expect(unlinked).toMatchObject({ rule_id: ids.sure, lineage_id: ids.sure, previous_rule_id: null, how: 'manual' });
      const after = await sop.queries.getSession(WS, s.d.id);
      const own = after.checks[0].rules.find((r) => r.finding)!.pattern_id!;
      expect(own).not.toBe(s.c.pattern);
      expect(await sop.review.pattern(WS, own, { days: 3650 })).toMatchObject({ verdict: null, review_reason: 'no_verdict', rule: { rule_id: ids.sure } });
      expect(await sop.review.pattern(WS, s.c.pattern, { days: 3650 })).toMatchObject({ session_count: 1, rule: { current_rule_id: ids.check2 } });
    });

    it('rebuilds the same rows from the releases, keeping the manual ones; twice changes nothing', async () => {
      const before = await repo.rows(db, WS);
      const returnsBefore = await repo.returns(db, WS);
      expect(returnsBefore).toHaveLength(1);
      const patternsBefore = (await sop.review.patterns(WS, { days: 3650 })).items.map((p) => [p.id, p.findings + p.suppressed]);
      await db.query(`DELETE FROM rule_lineage WHERE workspace = $1 AND how <> 'manual'`, [WS]);
      await db.query('DELETE FROM rule_lineage_returns WHERE workspace = $1', [WS]);
      const rebuilt = await sop.review.rebuildLineage(WS);
      expect(rebuilt).toEqual({ workspace: WS, links: before.length + returnsBefore.length, procedures: 1 });
      expect(await repo.returns(db, WS)).toEqual(returnsBefore);
      const strip = (rows: typeof before) => rows.map(({ procedure_id, rule_id, previous_rule_id, how, similarity, release_id }) => ({ procedure_id, rule_id, previous_rule_id, how, similarity, release_id }));
      expect(strip(await repo.rows(db, WS))).toEqual(strip(before));
      expect(await sop.review.rebuildLineage(WS)).toEqual(rebuilt);
      expect(strip(await repo.rows(db, WS))).toEqual(strip(before));
      expect((await sop.review.patterns(WS, { days: 3650 })).items.map((p) => [p.id, p.findings + p.suppressed])).toEqual(patternsBefore);
    });
  });

  describe('a verdict through three wordings of a rule (A -> B -> C)', () => {
    const THREE = `three${suffix}`;
    const [A, B, C] = LOOKUP_WORDINGS;
    const state = async (pattern: string) => {
      const p = await sop.review.pattern(THREE, pattern, { days: 3650 });
      return { current_rule_id: p.rule.current_rule_id, verdict: p.verdict?.verdict, review_state: p.review_state, review_reason: p.review_reason, review_note: p.review_note };
    };
    const queued = async (pattern: string) => (await sop.review.reviewQueue(THREE, {})).items.find((i) => i.pattern_id === pattern);

    it("a verdict given on A suppresses A's findings only: B's (live or sent late) and C's count, and the pattern needs review while any does", async () => {
      const a = ruleId(await publish(1, THREE, rewordedFolder), A);
      const sa = await sessionWithFinding('three-a', 'lookup_order', { ws: THREE });
      expect(sa.rule).toBe(a);
      const given = await sop.review.giveVerdict(THREE, sa.pattern, { verdict: 'acceptable', note: 'the caller gave the order number', reviewer: 'ana' });
      expect(given).toMatchObject({ suppressed_count: 1, review_state: 'closed' });

      // B is live: its finding is in the same pattern and counts; A's stays suppressed.
      const b = ruleId(await publish(2, THREE, rewordedFolder), B);
      const sb = await sessionWithFinding('three-b', 'lookup_order', { ws: THREE });
      expect(sb).toMatchObject({ rule: b, pattern: sa.pattern });
      expect(await suppressed(sb.id, THREE)).toBe(false);
      expect(await result(sb.id, THREE)).toBe('deviated');
      expect(await suppressed(sa.id, THREE)).toBe(true);
      expect(await result(sa.id, THREE)).not.toBe('deviated');
      const ranOnB = nextStart(); // a session that runs B now, sent only after C comes in

      // C is published (matched to B, in A's lineage); a session on C with a finding on another
      // rule makes C the pattern's wording: no finding on C yet, B's still not covered.
      const c = ruleId(await publish(3, THREE, rewordedFolder), C);
      expect(await sop.review.ruleLineage(THREE, c, {})).toMatchObject({ lineage_id: a, previous_rule_id: b, how: 'matched', rules: [{ rule_id: a }, { rule_id: b }, { rule_id: c }] });
      const other = await sessionWithFinding('three-c-payment', 'check_payment', { ws: THREE });
      expect(other.pattern).not.toBe(sa.pattern);
      expect(await state(sa.pattern)).toMatchObject({ current_rule_id: c, verdict: 'acceptable', review_state: 'needs_review', review_reason: 'reworded', review_note: expect.stringContaining('1 finding on a newer wording') });
      expect(await queued(sa.pattern)).toMatchObject({ review_state: 'needs_review', review_reason: 'reworded' });

      // The session that ran B, sent now: its finding is on B, which came after the verdict.
      const late = await sessionWithFinding('three-b-late', 'lookup_order', { ws: THREE, release: '2', at: ranOnB });
      expect(late).toMatchObject({ rule: b, pattern: sa.pattern });
      expect(await suppressed(late.id, THREE)).toBe(false);
      expect(await result(late.id, THREE)).toBe('deviated');
      // An override saying the checker got B's finding right suppresses it again: still counted.
      expect(await sop.review.overrideFinding(THREE, sb.finding, { correct: true })).toMatchObject({ suppressed: false, session_result: 'deviated' });
      expect(await suppressed(sa.id, THREE)).toBe(true);
      expect(await state(sa.pattern)).toMatchObject({ current_rule_id: c, review_state: 'needs_review', review_reason: 'reworded', review_note: expect.stringContaining('2 findings on a newer wording') });

      // C's finding counts too; A's is still suppressed.
      const sc = await sessionWithFinding('three-c', 'lookup_order', { ws: THREE });
      expect(sc).toMatchObject({ rule: c, pattern: sa.pattern });
      expect(await suppressed(sc.id, THREE)).toBe(false);
      expect(await result(sc.id, THREE)).toBe('deviated');
      expect(await suppressed(sa.id, THREE)).toBe(true);
      expect(await state(sa.pattern)).toMatchObject({ review_state: 'needs_review', review_reason: 'reworded', review_note: expect.stringContaining('3 findings on a newer wording') });

      // A verdict given now covers every wording.
      expect(await sop.review.giveVerdict(THREE, sa.pattern, { verdict: 'acceptable' })).toMatchObject({ suppressed_count: 4, review_state: 'closed' });
      for (const s of [sa, sb, late, sc]) expect(await result(s.id, THREE)).not.toBe('deviated');
    });
  });

  describe("a verdict given on B after a revert of the rule's wording (A -> B -> A)", () => {
    const BACK = `back${suffix}`;
    const [A, B] = LOOKUP_WORDINGS;
    const folder = (n: number) => rewordedFolder(n === 2 ? 2 : 1);
    const state = async (pattern: string) => {
      const p = await sop.review.pattern(BACK, pattern, { days: 3650 });
      return { current_rule_id: p.rule.current_rule_id, verdict: p.verdict?.verdict, review_state: p.review_state, review_reason: p.review_reason };
    };

    it("does not cover A's findings once A is back: they count, and the pattern needs review until a verdict confirms it", async () => {
      const a = ruleId(await publish(1, BACK, folder), A);
      const sa = await sessionWithFinding('back-a', 'lookup_order', { ws: BACK });
      expect(sa.rule).toBe(a);
      const b = ruleId(await publish(2, BACK, folder), B);
      const sb = await sessionWithFinding('back-b', 'lookup_order', { ws: BACK });
      expect(sb).toMatchObject({ rule: b, pattern: sa.pattern });
      // The verdict is given while B is live: it judged B (and A's findings of then).
      expect(await sop.review.giveVerdict(BACK, sa.pattern, { verdict: 'acceptable', reviewer: 'ana' })).toMatchObject({ suppressed_count: 2, review_state: 'closed' });
      expect(await state(sa.pattern)).toMatchObject({ current_rule_id: b, review_state: 'closed' });

      // A comes back with release 3: a finding on it counts, as one on any wording after the verdict.
      expect(ruleId(await publish(3, BACK, folder), A)).toBe(a);
      const again = await sessionWithFinding('back-a-again', 'lookup_order', { ws: BACK });
      expect(again).toMatchObject({ rule: a, pattern: sa.pattern });
      expect(await state(sa.pattern)).toMatchObject({ current_rule_id: a, verdict: 'acceptable', review_state: 'needs_review', review_reason: 'reworded' });
      expect(await suppressed(again.id, BACK)).toBe(false);
      expect(await result(again.id, BACK)).toBe('deviated');
      // B's finding, judged by the verdict, stays covered.
      expect(await suppressed(sb.id, BACK)).toBe(true);
      // A's findings of its first time count again too (the verdict is older than A's return).
      expect(await suppressed(sa.id, BACK)).toBe(false);
      expect(await result(sa.id, BACK)).toBe('deviated');
      expect((await sop.review.pattern(BACK, sa.pattern, { days: 3650 })).review_note).toContain('2 findings on a newer wording');

      // A verdict given now covers every wording.
      expect(await sop.review.giveVerdict(BACK, sa.pattern, { verdict: 'acceptable' })).toMatchObject({ suppressed_count: 3, review_state: 'closed' });
      for (const s of [sa, sb, again]) expect(await result(s.id, BACK)).not.toBe('deviated');
    });
  });

  describe('suggestion links at publish', () => {
    it('links the rule an applied suggestion edited to the new rule at its position as a suggestion link, the hook reading through the publish\'s transaction', async () => {
      const seen: (number | null)[] = [];
      let check1 = '';
      const lineage = new RuleLineage(db, undefined, {
        // What the suggestions service answers: the rule (of the release before) each applied suggestion in this release edited.
        suggestionEdits: async (q, _ws, release) => {
          // The release is visible through the publish's transaction, not yet committed.
          const row = await q.query<{ number: number }>('SELECT number FROM sop_releases WHERE id = $1', [release.id]);
          seen.push(row.rows[0] ? Number(row.rows[0].number) : null);
          return release.number === 2 ? [{ procedure_id: 'refund', rule_id: check1 }] : [];
        },
      });
      const workspaces = new SopWorkspaces(db, undefined, (tx, ws, release, previous) => lineage.atPublish(tx, ws, release, previous));
      for (const n of [1, 2]) {
        await workspaces.push(SUGGESTED, refundFolder(n));
        const r = await workspaces.publish(SUGGESTED);
        if (n === 1) check1 = r.procedures[0].rules.find((x) => x.text === 'Check that the payment is within the refund window of 30 days.')!.rule_id;
      }
      expect(seen).toEqual([1, 2]);
      const rows = await repo.rows(db, SUGGESTED);
      const r2 = (await workspaces.release(SUGGESTED, '2')).procedures[0].rules;
      const check2 = r2.find((x) => x.text === 'Check that the payment is less than 30 days old.')!.rule_id;
      const look2 = r2.find((x) => x.text === "Look up the caller's order by order number.")!.rule_id;
      expect(rows.find((r) => r.rule_id === check2)).toMatchObject({ previous_rule_id: check1, how: 'suggestion', similarity: 0.4, release_number: 2 });
      // A rule no suggestion edited is matched as before.
      expect(rows.find((r) => r.rule_id === look2)).toMatchObject({ how: 'matched' });
    });
  });
}
