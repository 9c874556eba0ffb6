import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Db } from '@neatroots/ports';
import { checkSession, noModelDecider, recordedDecider } from '@neatroots/sop';
import { SopError, type SessionView } from '@neatroots/store';
import type { CheckSession, SopSessions } from '../sop/sessions';
import { SopWorkspaces } from '../sop/workspaces';
import { RuleLineage } from '../lineage/service';
import { FIXTURES, fixtureSession, recordedDecisions, useLuigisReview } from '../sop-fixtures.test';
import { ReviewSop } from './service';

/**
 * The review side driven through real SopSessions: fixture sessions of libs/sop (the
 * restaurant's procedures) sent, checked by the sopops_check job, their findings assigned by
 * the sopops_patterns job, then verdicts, overrides, the queue, patterns and insights.
 */
const fixture = fixtureSession;
const recorded = recordedDecisions();
// Copies of a fixture are sent as "<its external id>#<n>": the same model answers replayed.
const checker: CheckSession = async ({ lock, releaseId, session }) => {
  const rec = recorded.get((session.external_id ?? '').split('#')[0]);
  return checkSession(lock, session, { decider: rec ? recordedDecider(rec) : noModelDecider('no model is configured'), releaseId });
};
const DAY = 86_400_000;
const daysAgo = (n: number) => new Date(Date.now() - n * DAY).toISOString();

let db: Db;
let sessions: SopSessions;
let review: ReviewSop;
const WS = 'luigis';

useLuigisReview('sop_finding_days, sop_overrides, sop_verdicts, sop_findings, sop_patterns, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files, projects', checker, (s) => ({ db, sessions, review } = s), WS);

/** Sends a copy of a fixture session and waits until it is checked and its findings are in patterns. */
async function send(name: string, n: number, over: Record<string, unknown> = {}): Promise<SessionView> {
  const body = { ...fixture(name), started_at: daysAgo(n % 30), ...over };
  body.external_id = `${fixture(name).external_id}#${n}`;
  const sent = await sessions.receive(WS, body);
  return settled(sent.id);
}

async function settled(id: string): Promise<SessionView> {
  for (let i = 0; i < 400; i++) {
    const s = await sessions.get(WS, id);
    const waiting = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM sop_findings WHERE pattern_id IS NULL');
    if (s.status !== 'queued' && Number(waiting.rows[0].n) === 0) return s;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`session ${id} never settled`);
}

const err = (x: Promise<unknown>) => x.then(() => null, (e: unknown) => e as SopError);

const findingRules = (s: SessionView) => s.checks.flatMap((c) => c.rules.filter((r) => r.finding).map((r) => ({ ...r, procedure_id: c.procedure_id })));

describe('rule patterns', () => {
  it("puts every finding on one rule into one pattern, named from the rule's text, shown on the session's rules", async () => {
    const a = await send('phone-never-violated', 1);
    const b = await send('phone-never-violated', 2);
    const c = await send('payment-skipped', 3);
    const [fa, fb, fc] = [findingRules(a), findingRules(b), findingRules(c)];
    expect(fa).toHaveLength(1);
    expect(fa[0].pattern_id).toMatch(/^pat_/);
    expect(fb[0].pattern_id).toBe(fa[0].pattern_id);
    expect(fc[0].pattern_id).not.toBe(fa[0].pattern_id);
    expect(a.checks.flatMap((ch) => ch.rules).filter((r) => !r.finding).every((r) => r.pattern_id === null && !r.suppressed)).toBe(true);

    const list = await review.queries.patterns(WS, {});
    expect(list.items).toHaveLength(2);
    const never = list.items.find((p) => p.id === fa[0].pattern_id)!;
    expect(never).toMatchObject({
      kind: 'rule',
      name: 'Volunteer a price or a description of a dish',
      named_by: 'rule_text',
      procedure_id: 'take-order',
      procedure_name: 'Take an order',
      rule: { rule_id: fa[0].rule_id, kind: 'never', index: 1, label: 'Never rule 1', text: fa[0].text },
      findings: 2,
      sessions: 2,
      suppressed: 0,
      verdict: null,
      review_state: 'needs_review',
      review_reason: 'no_verdict',
      sub_patterns: [],
    });
    expect(list.items[0].id).toBe(never.id); // most findings first
    expect((await review.queries.patterns(WS, { procedure: 'card-payment' })).items.map((p) => p.procedure_id)).toEqual(['card-payment']);
    expect((await review.queries.patterns(WS, { rule: fa[0].rule_id })).items.map((p) => p.id)).toEqual([never.id]);
    // a window that ends before the sessions counts nothing
    expect((await review.queries.patterns(WS, { to: daysAgo(5) })).items).toEqual([]);

    const one = await review.queries.pattern(WS, never.id, {});
    expect(one.session_count).toBe(2);
    expect(one.sessions.map((s) => s.session_id).sort()).toEqual([a.id, b.id].sort());
    expect(one.wordings).toEqual([expect.objectContaining({ rule_id: fa[0].rule_id, findings: 2 })]);
    expect(one.example_phrasings.length).toBeGreaterThan(0);
    expect(one).toMatchObject({ failure_modes: [], suggestions: [], verdict_history: [], suppressed_count: 0 });
  });

  it('shows the rule as the most recent session ran it', async () => {
    const first = await send('payment-skipped', 5);
    const patternId = findingRules(first)[0].pattern_id!;
    expect((await review.queries.pattern(WS, patternId, {})).rule).toMatchObject({ label: 'Step 1', text: 'Find the order.' });
    // release 2: the procedure renamed and a step put before it (its wording, so its id, unchanged)
    const workspaces = new SopWorkspaces(db);
    const file = readFileSync(path.join(FIXTURES, 'luigis', 'procedures', 'card-payment.md'), 'utf8')
      .replace('# Take a card payment', '# Take a card payment by phone')
      .replace('3. Email', '4. Email')
      .replace('2. Charge', '3. Charge')
      .replace('1. Find the order.', '1. Greet the caller. [tool: greet]\n2. Find the order.');
    await workspaces.saveFile(WS, 'procedures/card-payment.md', file);
    await workspaces.publish(WS);
    const later = await send('payment-skipped', 2);
    expect(findingRules(later).find((r) => r.text === 'Find the order.')?.pattern_id).toBe(patternId);
    let p = await review.queries.pattern(WS, patternId, {});
    expect(p).toMatchObject({ procedure_name: 'Take a card payment by phone', rule: { label: 'Step 2', index: 2, text: 'Find the order.' }, session_count: 2 });
    // an older session on release 1 does not take the wording back
    await send('payment-skipped', 9, { release_id: '1' });
    p = await review.queries.pattern(WS, patternId, {});
    expect(p).toMatchObject({ procedure_name: 'Take a card payment by phone', rule: { label: 'Step 2' }, session_count: 3 });
  });

  it('assignment is idempotent and a re-check of the same content keeps one pattern per rule', async () => {
    const a = await send('phone-never-violated', 1);
    const before = await db.query('SELECT id, pattern_id, suppressed FROM sop_findings ORDER BY id');
    const hash = (await db.query<{ content_hash: string }>('SELECT content_hash FROM sop_sessions WHERE id = $1', [a.id])).rows[0].content_hash;
    await db.query(`UPDATE sop_sessions SET status = 'queued' WHERE id = $1`, [a.id]);
    await sessions.runCheck({ workspace: WS, session_id: a.id, content_hash: hash });
    await settled(a.id);
    expect((await db.query('SELECT id, pattern_id, suppressed FROM sop_findings ORDER BY id')).rows).toEqual(before.rows);
    expect(await review.assigner.assign(WS)).toBe(0);
    expect((await db.query('SELECT id FROM sop_patterns')).rows).toHaveLength(1);
  });
});

describe('verdicts, suppression and the roll-up', () => {
  it('acceptable suppresses the pattern now and later: a session whose only deviation is suppressed counts as followed', async () => {
    const a = await send('phone-never-violated', 1);
    expect([a.result, a.checked_result]).toEqual(['deviated', 'deviated']);
    const patternId = findingRules(a)[0].pattern_id!;
    const given = await review.queries.giveVerdict(WS, patternId, { verdict: 'acceptable', note: 'prices are public', reviewer: 'ana' });
    expect(given).toMatchObject({ pattern_id: patternId, verdict: 'acceptable', note: 'prices are public', reviewer: 'ana', inherited: false, suppressed_count: 1, review_state: 'closed', suggestion: null });

    const after = await sessions.get(WS, a.id);
    expect([after.result, after.checked_result]).toEqual(['followed', 'deviated']);
    const take = after.checks.find((c) => c.procedure_id === 'take-order')!;
    expect([take.result, take.checked_result]).toEqual(['followed', 'deviated']);
    expect(findingRules(after)[0]).toMatchObject({ suppressed: true, pattern_id: patternId, override: null });

    // later: a new session with the same mistake arrives suppressed
    const later = await send('phone-never-violated', 2);
    expect(findingRules(later)[0].suppressed).toBe(true);
    expect(later.result).toBe('followed');

    const ins = await review.queries.insights(WS, {});
    expect(ins.tiles).toMatchObject({ sessions: 2, findings: 0, suppressed: 2, follow_rate: 1 });
    expect(ins.tiles.results.followed).toBe(2);
    // Closed, every finding suppressed: its phrasings still show what the agent said.
    expect((await review.queries.pattern(WS, patternId, {})).example_phrasings.length).toBeGreaterThan(0);

    // real again: counting again, results back to the checker's
    const real = await review.queries.giveVerdict(WS, patternId, { verdict: 'real', suggest: true });
    expect(real).toMatchObject({ verdict: 'real', suppressed_count: 0, review_state: 'open' });
    // suggest: true queues a suggestion for the real verdict (generated by the sopops_suggest job)
    expect(real.suggestion).toMatchObject({ status: 'generating', verdict: 'real', pattern_id: patternId });
    expect((await sessions.get(WS, a.id)).result).toBe('deviated');
    const view = await review.queries.pattern(WS, patternId, {});
    expect(view.verdict?.verdict).toBe('real');
    expect(view.verdict_history.map((v) => v.verdict)).toEqual(['acceptable']);
  });

  it('checker_wrong suppresses except where an override says the checker was right; a wrong override suppresses one finding', async () => {
    const a = await send('phone-skipped-goal-not-reached', 1);
    const b = await send('phone-skipped-goal-not-reached', 2);
    const patternId = findingRules(a)[0].pattern_id!;
    const right = await review.queries.overrideFinding(WS, findingRules(a)[0].finding_id!, { correct: true, reviewer: 'bo' });
    expect(right).toMatchObject({ correct: true, suppressed: false, session_id: a.id, check_result: 'deviated', session_result: 'deviated' });
    const given = await review.queries.giveVerdict(WS, patternId, { verdict: 'checker_wrong' });
    expect(given.suppressed_count).toBe(1);
    expect(findingRules(await sessions.get(WS, a.id))[0]).toMatchObject({ suppressed: false, override: { correct: true } });
    expect(findingRules(await sessions.get(WS, b.id))[0].suppressed).toBe(true);
    expect((await sessions.get(WS, b.id)).result).toBe('followed');

    const lines = await review.queries.regression(WS, patternId);
    expect(lines.map((l) => [l.session_id, l.expect, l.expected_status, l.observed_status, l.verdict]).sort()).toEqual(
      [
        [a.id, 'agent', 'done', 'skipped', 'checker_wrong'],
        [b.id, 'checker', 'done', 'skipped', 'checker_wrong'],
      ].sort(),
    );
    expect(lines[0]).toMatchObject({ procedure_id: 'take-order', rule_kind: 'step' });

    // on a real pattern, an override with correct: false suppresses that finding alone
    const c = await send('phone-never-violated', 3);
    const d = await send('phone-never-violated', 4);
    await review.queries.giveVerdict(WS, findingRules(c)[0].pattern_id!, { verdict: 'real' });
    const wrong = await review.queries.overrideFinding(WS, findingRules(c)[0].finding_id!, { correct: false, note: 'the price was asked for' });
    expect(wrong).toMatchObject({ suppressed: true, check_result: 'followed', session_result: 'followed' });
    expect(findingRules(await sessions.get(WS, d.id))[0].suppressed).toBe(false);
  });

  it('an override outlives a re-check: new content for the session, checked again, is still overridden', async () => {
    const a = await send('phone-never-violated', 1);
    const f = findingRules(a)[0];
    await review.queries.overrideFinding(WS, f.finding_id!, { correct: false });
    expect((await sessions.get(WS, a.id)).result).toBe('followed');
    // the same session (external id) re-sent with other content that makes the same finding
    const again = await send('phone-never-violated', 1, { transcript_ref: 'https://example.test/calls/1?v=2' });
    expect(again.id).toBe(a.id);
    expect(again.checked_at).not.toBeNull();
    expect(findingRules(again)[0]).toMatchObject({ rule_id: f.rule_id, suppressed: true, override: { correct: false } });
    expect([again.result, again.checked_result]).toEqual(['followed', 'deviated']);
  });

  it('refuses bad verdicts and overrides, naming the field, and unknown ids', async () => {
    const a = await send('phone-never-violated', 1);
    const p = findingRules(a)[0].pattern_id!;
    expect(await err(review.queries.giveVerdict(WS, p, { verdict: 'fine' } as never))).toMatchObject({ status: 400, message: expect.stringContaining('verdict must be one of real, acceptable, sop_wrong, checker_wrong') });
    expect(await err(review.queries.giveVerdict(WS, p, { verdict: 'real', extra: 1 } as never))).toMatchObject({ status: 400, message: expect.stringContaining('unknown field extra') });
    expect(await err(review.queries.giveVerdict(WS, 'pat_nope', { verdict: 'real' }))).toMatchObject({ status: 404 });
    expect(await err(review.queries.giveVerdict('other', p, { verdict: 'real' }))).toMatchObject({ status: 404 });
    expect(await err(review.queries.overrideFinding(WS, findingRules(a)[0].finding_id!, { correct: 'yes' } as never))).toMatchObject({ status: 400, message: expect.stringContaining('correct must be') });
    expect(await err(review.queries.overrideFinding(WS, 'sf_nope', { correct: true }))).toMatchObject({ status: 404 });
    expect(await err(review.queries.regression(WS, p))).toMatchObject({ status: 409, code: 'no_verdict' });
    expect(await err(review.queries.insights(WS, { from: 'yesterday' }))).toMatchObject({ status: 400, message: expect.stringContaining('from must be an ISO-8601') });
    // A day that does not exist is refused, not rolled over to 3 March.
    expect(await err(review.queries.insights(WS, { from: '2026-02-31', to: '2026-03-10' }))).toMatchObject({ status: 400, message: expect.stringContaining('from must be an ISO-8601') });
    expect(await err(review.queries.patterns(WS, { from: '2026-11-30T24:00' }))).toMatchObject({ status: 400, code: 'invalid_query' });
    expect((await db.query('SELECT * FROM sop_verdicts')).rows).toHaveLength(0);
  });
});

describe('the review queue', () => {
  it('lists needs_review by default, most sessions first, with 5 examples, counts per state and each state on request', async () => {
    for (let i = 0; i < 6; i++) await send('phone-never-violated', i);
    await send('payment-skipped', 10);
    await send('payment-out-of-order', 11);
    const q = await review.queries.reviewQueue(WS, {});
    expect(q.total).toBe(3);
    expect(q.counts).toMatchObject({ needs_review: 3, open: 0, closed: 0 });
    expect(q.clustered_at).toBeNull();
    const top = q.items[0];
    expect(top).toMatchObject({ procedure_name: 'Take an order', label: 'Never rule 1', sessions: 6, new_findings: 6, suppressed_count: 0, verdict: null, review_state: 'needs_review', review_reason: 'no_verdict', theme: null, suggestion: null, fix_release: null });
    expect(top.examples).toHaveLength(5);
    expect(top.examples[0]).toEqual(expect.objectContaining({ finding_id: expect.stringMatching(/^sf_/), session_id: expect.stringMatching(/^ses_/), excerpt: expect.any(String), evidence: expect.any(Array) }));
    expect(top.examples[0].excerpt.length).toBeGreaterThan(0);

    await review.queries.giveVerdict(WS, top.pattern_id, { verdict: 'real' });
    await review.queries.giveVerdict(WS, q.items[1].pattern_id, { verdict: 'checker_wrong' });
    const after = await review.queries.reviewQueue(WS, {});
    expect(after.items.map((i) => i.pattern_id)).toEqual([q.items[2].pattern_id]);
    expect(after.counts).toMatchObject({ needs_review: 1, open: 1, closed: 1 });
    const open = await review.queries.reviewQueue(WS, { state: ['open'] });
    expect(open.items.map((i) => [i.pattern_id, i.verdict?.verdict, i.new_findings])).toEqual([[top.pattern_id, 'real', 0]]);
    expect((await review.queries.reviewQueue(WS, { state: ['open', 'closed', 'needs_review'], limit: 2 })).items).toHaveLength(2);
    // a finding after the verdict is new
    await send('phone-never-violated', 20);
    expect((await review.queries.reviewQueue(WS, { state: ['open'] })).items[0].new_findings).toBe(1);
  });
});

describe('release compare', () => {
  it('each procedure and rule on two releases side by side; a reworded rule is one row through its lineage', async () => {
    await send('phone-never-violated', 1);
    await send('phone-never-violated', 2);
    await send('phone-followed-pickup', 3);
    await send('payment-skipped', 4);
    // Only one release yet: nothing to compare it with.
    expect(await err(review.queries.compareReleases(WS, {}))).toMatchObject({ status: 409, code: 'no_earlier_release' });

    // The never rule reworded and published: its findings on the new wording join the same pattern.
    const lineage = new RuleLineage(db);
    const workspaces = new SopWorkspaces(db, undefined, (tx, ws, release, previous) => lineage.atPublish(tx, ws, release, previous));
    const file = await workspaces.file(WS, 'procedures/take-order.md');
    await workspaces.saveFile(WS, 'procedures/take-order.md', file.text.replace('Volunteer a price or a description of a dish.', 'Volunteer a price or a description of any dish.'));
    const second = await workspaces.publish(WS);
    await send('phone-never-violated', 5);
    await send('phone-followed-pickup', 6);
    await send('phone-followed-pickup', 7);

    const cmp = await review.queries.compareReleases(WS, {});
    expect([cmp.from.number, cmp.to.number, cmp.to.id]).toEqual([1, 2, second.id]);
    const take = cmp.procedures.find((p) => p.procedure_id === 'take-order')!;
    expect(take).toMatchObject({ procedure_name: 'Take an order', in_from: true, in_to: true });
    expect(take.from).toMatchObject({ sessions: 3, findings: 2, suppressed: 0, results: { deviated: 2, followed: 1 } });
    expect(take.to).toMatchObject({ sessions: 3, findings: 1, suppressed: 0, results: { deviated: 1, followed: 2 } });
    expect(take.from.follow_rate).toBeCloseTo(1 / 3);
    expect(take.to.follow_rate).toBeCloseTo(2 / 3);
    expect(take.rules).toHaveLength(1);
    const [rule] = take.rules;
    expect(rule).toMatchObject({ label: 'Never rule 1', from: { findings: 2 }, to: { findings: 1 } });
    expect(rule.from.rate).toBeCloseTo(2 / 3);
    expect(rule.to.rate).toBeCloseTo(1 / 3);
    // A procedure with sessions on one release only: the other side is empty, not missing.
    const pay = cmp.procedures.find((p) => p.procedure_id === 'card-payment')!;
    expect(pay.from).toMatchObject({ sessions: 1, findings: 1 });
    expect(pay.to).toMatchObject({ sessions: 0, findings: 0, follow_rate: null });

    // A verdict suppresses the pattern's findings: counted apart on both sides.
    await review.queries.giveVerdict(WS, rule.pattern_id, { verdict: 'acceptable' });
    const after = (await review.queries.compareReleases(WS, { from: '1', to: 'live' })).procedures.find((p) => p.procedure_id === 'take-order')!;
    expect(after.rules[0]).toMatchObject({ from: { findings: 0, suppressed: 2, rate: 0 }, to: { findings: 0, suppressed: 1, rate: 0 } });
    expect(after.to.follow_rate).toBe(1);

    const narrowed = await review.queries.compareReleases(WS, { procedure: 'card-payment' });
    expect(narrowed.procedures.map((p) => p.procedure_id)).toEqual(['card-payment']);
    expect(await err(review.queries.compareReleases(WS, { from: '2', to: second.id }))).toMatchObject({ status: 400, code: 'invalid_query' });
    expect(await err(review.queries.compareReleases(WS, { from: '9' }))).toMatchObject({ status: 404, message: expect.stringContaining('from: no release 9') });
  });

  it("a rule's rate is its share of the measurable sessions (in Insights too), and null on a release without the rule", async () => {
    // Release 1: step 1 of card-payment skipped once in 4 judged sessions; 6 not_measurable ones
    // (the agent never spoke), 3 of them with step 1 skipped too.
    const silent = { turns: fixture('payment-skipped').turns.map((t: { role: string; text: string }) => (t.role === 'agent' ? { ...t, text: '' } : t)) };
    let n = 200;
    const onRelease = [await send('payment-skipped', n++)];
    for (let i = 0; i < 3; i++) onRelease.push(await send('payment-followed', n++));
    for (let i = 0; i < 3; i++) onRelease.push(await send('payment-agent-never-spoke', n++));
    for (let i = 0; i < 3; i++) onRelease.push(await send('payment-skipped', n++, silent));
    const silentOne = onRelease[onRelease.length - 1];
    expect(silentOne.checks.find((c) => c.procedure_id === 'card-payment')).toMatchObject({ result: 'not_measurable' });
    expect(findingRules(silentOne).map((r) => [r.text, r.status])).toEqual([['Find the order.', 'skipped']]);

    // Release 2 drops the step; a session checked on it.
    const lineage = new RuleLineage(db);
    const workspaces = new SopWorkspaces(db, undefined, (tx, ws, release, previous) => lineage.atPublish(tx, ws, release, previous));
    const file = await workspaces.file(WS, 'procedures/card-payment.md');
    const without = file.text.replace('1. Find the order. [tool: lookup_order, required]\n2. Charge', '1. Charge').replace('3. Email', '2. Email');
    expect(without).not.toBe(file.text);
    await workspaces.saveFile(WS, 'procedures/card-payment.md', without);
    await workspaces.publish(WS);
    await send('payment-followed', n++);

    const pay = (await review.queries.compareReleases(WS, { from: '1', to: '2' })).procedures.find((p) => p.procedure_id === 'card-payment')!;
    expect(pay.from).toMatchObject({ sessions: 10, findings: 4, results: { deviated: 1, followed: 3, not_measurable: 6 } });
    expect(pay.to).toMatchObject({ sessions: 1, results: { followed: 1 } });
    const step = pay.rules.find((r) => r.text === 'Find the order.')!;
    // 1 of the 4 measurable sessions, not 4 findings of 10 sessions; no rate where the rule is not.
    expect(step).toMatchObject({ label: 'Step 1', from: { findings: 4, rate: 0.25 }, to: { findings: 0, rate: null } });
    // The procedure's findings per session count the same way: 1 finding in its 4 measurable sessions, 0 in 1.
    expect([pay.from.rate, pay.to.rate]).toEqual([0.25, 0]);
    const back = (await review.queries.compareReleases(WS, { from: '2', to: '1' })).procedures.find((p) => p.procedure_id === 'card-payment')!;
    expect(back.rules.find((r) => r.pattern_id === step.pattern_id)).toMatchObject({ from: { findings: 0, rate: null }, to: { findings: 4, rate: 0.25 } });
    // Insights' top patterns give the same share over the window (both releases: 1 of 5 measurable sessions).
    expect((await review.queries.insights(WS, {})).ladder.find((l) => l.pattern_id === step.pattern_id)).toMatchObject({ findings: 4, sessions: 11, rate: 0.2 });
  });
});

describe('insights', () => {
  it("a session in the last second of a Sunday counts in that Sunday's week", async () => {
    // 2026-11-29 is a Sunday: its week is Monday 2026-11-23's.
    await send('phone-never-violated', 101, { started_at: '2026-11-29T23:59:59.700Z' });
    const ins = await review.queries.insights(WS, { from: '2026-11-16', to: '2026-11-30' });
    expect(ins.weeks).toEqual(['2026-11-16', '2026-11-23']);
    expect(ins.scoreboard.find((r) => r.procedure_id === 'take-order')!.weekly_follow_rate).toEqual([null, 0]);
    expect(ins.ladder.find((r) => r.procedure_id === 'take-order')!.trend).toEqual([0, 1]);
  });

  it('tiles, a scoreboard row per procedure and a ladder row per rule with a weekly trend; suppressed findings apart', async () => {
    const takeOrder = [
      [await send('phone-never-violated', 1), 'deviated'],
      [await send('phone-never-violated', 8), 'deviated'],
      [await send('phone-followed-pickup', 2), 'followed'],
    ] as const;
    await send('payment-skipped', 3);
    await send('payment-followed', 4);
    const ins = await review.queries.insights(WS, {});
    expect(ins.tiles).toMatchObject({ sessions: 5, findings: 3, suppressed: 0 });
    expect(ins.tiles.results).toEqual({ deviated: 3, partial: 0, followed: 2, not_measurable: 0 });
    expect(ins.tiles.follow_rate).toBeCloseTo(2 / 5);
    const take = ins.scoreboard.find((r) => r.procedure_id === 'take-order')!;
    expect(take).toMatchObject({ procedure_name: 'Take an order', sessions: 3, findings: 2, suppressed: 0 });
    expect(take.results).toMatchObject({ deviated: 2, followed: 1 });
    expect(ins.weeks.length).toBeGreaterThanOrEqual(52);
    // Its follow rate week by week (the weeks' Mondays, UTC): a rate where it had judged sessions, else null.
    const mondayOf = (iso: string) => {
      const d = new Date(iso);
      return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()) - ((d.getUTCDay() + 6) % 7) * DAY).toISOString().slice(0, 10);
    };
    const expected = ins.weeks.map((w) => {
      const those = takeOrder.filter(([s]) => mondayOf(s.started_at!) === w);
      return those.length ? those.filter(([, r]) => r === 'followed').length / those.length : null;
    });
    expect(expected.filter((r) => r !== null).length).toBeGreaterThanOrEqual(2); // one and eight days ago: two weeks
    expect(take.weekly_follow_rate).toEqual(expected);
    for (const row of ins.scoreboard) expect(row.weekly_follow_rate).toHaveLength(ins.weeks.length);
    const rung = ins.ladder[0];
    expect(rung).toMatchObject({ procedure_id: 'take-order', label: 'Never rule 1', findings: 2, sessions: 3 });
    expect(rung.rate).toBeCloseTo(2 / 3);
    expect(rung.trend).toHaveLength(ins.weeks.length);
    expect(rung.trend.reduce((a, b) => a + b, 0)).toBe(2);
    expect(rung.trend.filter((n) => n > 0).length).toBe(2); // one and eight days ago: two weeks

    await review.queries.giveVerdict(WS, rung.pattern_id, { verdict: 'acceptable' });
    const after = await review.queries.insights(WS, {});
    expect(after.tiles).toMatchObject({ findings: 1, suppressed: 2 });
    expect(after.tiles.results).toEqual({ deviated: 1, partial: 0, followed: 4, not_measurable: 0 });
    expect(after.scoreboard.find((r) => r.procedure_id === 'take-order')).toMatchObject({ findings: 0, suppressed: 2, follow_rate: 1 });
    // Suppressed findings read as passed week by week too.
    expect(after.scoreboard.find((r) => r.procedure_id === 'take-order')!.weekly_follow_rate).toEqual(expected.map((r) => (r === null ? null : 1)));
    expect(after.ladder.find((r) => r.pattern_id === rung.pattern_id)).toMatchObject({ findings: 0, suppressed: 2, rate: 0 });

    const onlyPayment = await review.queries.insights(WS, { procedure: 'card-payment' });
    expect(onlyPayment.tiles).toMatchObject({ sessions: 2, findings: 1 });
    expect(onlyPayment.scoreboard.map((r) => r.procedure_id)).toEqual(['card-payment']);
    const oneDay = await review.queries.insights(WS, { days: 2 });
    expect(oneDay.tiles.sessions).toBe(1);
  });

  it('look back 365 days unless asked, like the patterns list; suppressed findings are in no count or rate there either', async () => {
    const inside = await send('phone-never-violated', 1, { started_at: daysAgo(364) });
    await send('phone-never-violated', 2, { started_at: daysAgo(366) });
    await send('phone-followed-pickup', 3, { started_at: daysAgo(10) });
    const ins = await review.queries.insights(WS, {});
    expect(Date.parse(ins.window.to) - Date.parse(ins.window.from)).toBe(365 * DAY);
    expect(ins.tiles).toMatchObject({ sessions: 2, findings: 1, suppressed: 0, follow_rate: 0.5 });
    expect(ins.ladder).toEqual([expect.objectContaining({ findings: 1, sessions: 2, rate: 0.5 })]);
    const pats = await review.queries.patterns(WS, {});
    expect(pats.items.map((p) => [p.findings, p.suppressed, p.sessions])).toEqual([[1, 0, 1]]);
    expect((await review.queries.insights(WS, { days: 3650 })).tiles).toMatchObject({ sessions: 3, findings: 2 });

    // The one finding in the window judged wrong: shown apart, the session followed, every rate 0.
    await review.queries.overrideFinding(WS, findingRules(inside)[0].finding_id!, { correct: false });
    const after = await review.queries.insights(WS, {});
    expect(after.tiles).toMatchObject({ sessions: 2, findings: 0, suppressed: 1, follow_rate: 1 });
    expect(after.scoreboard.find((r) => r.procedure_id === 'take-order')).toMatchObject({ findings: 0, suppressed: 1, follow_rate: 1 });
    expect(after.ladder).toEqual([expect.objectContaining({ findings: 0, suppressed: 1, rate: 0 })]);
    expect(after.ladder[0].trend.reduce((a, b) => a + b, 0)).toBe(0);
    expect((await review.queries.patterns(WS, {})).items.map((p) => [p.findings, p.suppressed])).toEqual([[0, 1]]);
  });
});
