import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Db } from '@neatroots/ports';
import { checkSession, DEFAULT_DECISIONS, inBand, recordedDecider, type Decider, type Recorded } from '@neatroots/sop';
import { SopError, type SessionView } from '@neatroots/store';
import { ReviewSop } from '../review/service';
import type { CheckSession, SopSessions } from '../sop/sessions';
import { SopWorkspaces } from '../sop/workspaces';
import { FIXTURES, fixtureSession, useLuigisReview } from '../sop-fixtures.test';

/**
 * Calibration from the database alone: fixture sessions (the restaurant's procedures) checked
 * through real SopSessions with recorded decisions whose never-rule probability each test
 * sets, their findings judged by verdicts and overrides, then POST /calibrate's query run as
 * the sopops_calibrate job (inline), and the fitted band read by the next checks.
 */
const fixture = fixtureSession('phone-never-violated');
const recorded: Recorded = JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', 'phone-never-violated', 'decisions.json'), 'utf8'));

/**
 * The recorded answers, with the never rule's probability taken from the external id
 * ("call-8#3@0.95"), and sure or not as a model decider reads it: with the band the check was
 * given (the workspace's fitted one, else SOPOPS_DECISIONS').
 */
const checker: CheckSession = async ({ lock, releaseId, session, bands, onDecision }) => {
  const p = Number((session.external_id ?? '').split('@')[1] ?? '1');
  const base = recordedDecider(recorded);
  const decider: Decider = {
    ...base,
    async decide(q) {
      const a = await base.decide(q);
      if (!a.decided || q.kind !== 'never') return a;
      const band = bands ? bands.bandFor(q, DEFAULT_DECISIONS) : DEFAULT_DECISIONS.bands.never;
      return { ...a, probability: p, sure: inBand(p, band).sure };
    },
  };
  return checkSession(lock, session, { decider, releaseId, onDecision });
};

let db: Db;
let sessions: SopSessions;
let review: ReviewSop;
const WS = 'luigis';

useLuigisReview('sop_calibration_bands, sop_finding_days, sop_overrides, sop_verdicts, sop_findings, sop_patterns, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files, projects', checker, (s) => ({ db, sessions, review } = s), WS);

/** A copy of the fixture whose never rule was decided with probability p; waits until its finding is in a pattern. */
async function send(n: number, p: number): Promise<SessionView> {
  const sent = await sessions.receive(WS, { ...fixture, external_id: `call-8#${n}@${p}` });
  for (let i = 0; i < 400; i++) {
    const s = await sessions.get(WS, sent.id);
    const waiting = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM sop_findings WHERE pattern_id IS NULL');
    if (s.status !== 'queued' && Number(waiting.rows[0].n) === 0) return s;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`session ${sent.id} never settled`);
}

const finding = (s: SessionView) => s.checks.flatMap((c) => c.rules).find((r) => r.finding)!;
const storedDecision = async (id: string) =>
  (await db.query<{ d: unknown }>(`SELECT body->'decisions' AS d FROM sop_checks WHERE session_id = $1 AND procedure_id = 'take-order'`, [id])).rows[0].d;

describe('calibrate', () => {
  it('fits the never rule from a verdict and overrides (misjudged findings are negative labels); a dry run stores nothing; the next checks read the fitted band', async () => {
    const wrong = [await send(1, 0.93), await send(2, 0.94), await send(3, 0.95)];
    const right = [await send(4, 0.97), await send(5, 0.98), await send(6, 0.99)];
    // the check keeps its rule questions' decisions, and the session's GET does not show them
    expect(await storedDecision(wrong[0].id)).toEqual(expect.arrayContaining([{ rule_id: finding(wrong[0]).rule_id, field: 'never', p: 0.93, sure: true }]));
    expect(wrong[0].checks.every((c) => !('decisions' in c))).toBe(true);

    const patternId = finding(right[0]).pattern_id!;
    await review.queries.giveVerdict(WS, patternId, { verdict: 'real' });
    for (const s of wrong) await review.queries.overrideFinding(WS, finding(s).finding_id!, { correct: false, reviewer: 'ana' });

    const dry = await review.queries.calibrate(WS, { dry_run: true });
    expect(dry.workspace).toBe(WS);
    expect(dry.dry_run).toBe(true);
    const take = dry.procedures.find((p) => p.procedure_id === 'take-order')!;
    expect(take).toMatchObject({ labels: 6, negative_labels: 3, saved: false, skipped: null, score_before: 0.5, score: 1 });
    const never = take.rules.find((r) => r.kind === 'never')!;
    expect(never).toEqual({
      rule_id: finding(right[0]).rule_id, lineage_id: finding(right[0]).rule_id, kind: 'never', index: 1, text: finding(right[0]).text,
      field: 'never', before: [0.1, 0.9, 0.5], after: [0.1, 0.96, 0.5], skipped: null,
    });
    // its other questions keep their bands, saying why
    expect(take.rules.filter((r) => r.kind !== 'never').every((r) => r.skipped?.code === 'too_few_failures' && r.after.join() === r.before.join())).toBe(true);
    // procedures of the release without labels are refused, saying so
    expect(dry.procedures.find((p) => p.procedure_id === 'card-payment')).toMatchObject({ labels: 0, saved: false, skipped: { code: 'too_few_labeled_sessions', have: 0, need: 5 } });
    expect((await db.query('SELECT * FROM sop_calibration_bands')).rows).toEqual([]);

    // before the fit, the checker read p = 0.95 as a sure yes
    expect(await storedDecision(wrong[2].id)).toEqual(expect.arrayContaining([expect.objectContaining({ field: 'never', p: 0.95, sure: true })]));

    const saved = await review.queries.calibrate(WS, { procedure: 'take-order' });
    expect(saved.procedures.map((p) => p.procedure_id)).toEqual(['take-order']);
    expect(saved.procedures[0]).toMatchObject({ saved: true, skipped: null });
    const rows = (await db.query<{ rule_id: string; field: string; band_no: number; band_yes: number; labels: number; negative_labels: number }>('SELECT rule_id, field, band_no, band_yes, labels, negative_labels FROM sop_calibration_bands')).rows;
    expect(rows).toEqual([{ rule_id: never.rule_id, field: 'never', band_no: 0.1, band_yes: 0.96, labels: 6, negative_labels: 3 }]);

    // now 0.95 is unsure: the reasoning model would look again
    expect(await storedDecision((await send(8, 0.95)).id)).toEqual(expect.arrayContaining([expect.objectContaining({ field: 'never', p: 0.95, sure: false })]));
    // and calibrating again never narrows it
    const again = await review.queries.calibrate(WS, { procedure: 'take-order', dry_run: true });
    expect(again.procedures[0].rules.find((r) => r.kind === 'never')!.before).toEqual([0.1, 0.96, 0.5]);
  });

  it('a checker_wrong verdict labels every finding of the pattern negative; an override judged right keeps one positive', async () => {
    const all = [await send(1, 0.91), await send(2, 0.92), await send(3, 0.93), await send(4, 0.94), await send(5, 0.99)];
    await review.queries.giveVerdict(WS, finding(all[0]).pattern_id!, { verdict: 'checker_wrong' });
    await review.queries.overrideFinding(WS, finding(all[4]).finding_id!, { correct: true });
    const r = await review.queries.calibrate(WS, { procedure: 'take-order', dry_run: true });
    expect(r.procedures[0]).toMatchObject({ labels: 5, negative_labels: 4, skipped: null });
    expect(r.procedures[0].rules.find((x) => x.kind === 'never')!.after).toEqual([0.1, 0.965, 0.5]);
  });

  it('labels on an earlier wording of a rule count for the rule as the live release words it', async () => {
    const wrong = [await send(1, 0.93), await send(2, 0.94), await send(3, 0.95)];
    const right = [await send(4, 0.97), await send(5, 0.98)];
    const old = finding(right[0]);
    await review.queries.giveVerdict(WS, old.pattern_id!, { verdict: 'real' });
    for (const x of wrong) await review.queries.overrideFinding(WS, finding(x).finding_id!, { correct: false });
    // the never rule reworded and published: a new rule id, linked to the old one
    const workspaces = new SopWorkspaces(db);
    const file = readFileSync(path.join(FIXTURES, 'luigis', 'procedures', 'take-order.md'), 'utf8').replace('Volunteer a price or a description of a dish.', 'Volunteer a price or a description of any dish.');
    await workspaces.saveFile(WS, 'procedures/take-order.md', file);
    await workspaces.publish(WS);
    await review.queries.rebuildLineage(WS); // what publish does when the service runs it (startSop)

    const r = await review.queries.calibrate(WS, { procedure: 'take-order' });
    const never = r.procedures[0].rules.find((x) => x.kind === 'never')!;
    expect(never).toMatchObject({ lineage_id: old.rule_id, text: 'Volunteer a price or a description of any dish.', after: [0.1, 0.96, 0.5], skipped: null });
    expect(never.rule_id).not.toBe(old.rule_id);
    expect(r.procedures[0]).toMatchObject({ labels: 5, negative_labels: 3, saved: true });
    // stored for the live wording: the question the checker asks now
    expect((await db.query('SELECT rule_id, lineage_id FROM sop_calibration_bands')).rows).toEqual([{ rule_id: never.rule_id, lineage_id: old.rule_id }]);
  });

  it('refuses too few labeled sessions, a procedure not in the live release, and a wrong body', async () => {
    const s = [await send(1, 0.93), await send(2, 0.99)];
    await review.queries.giveVerdict(WS, finding(s[0]).pattern_id!, { verdict: 'checker_wrong' });
    const few = await review.queries.calibrate(WS, { procedure: 'take-order' });
    expect(few.procedures[0]).toMatchObject({
      labels: 2, negative_labels: 2, saved: false, score: null,
      skipped: { code: 'too_few_labeled_sessions', message: 'procedure take-order has 2 labeled sessions (a session with a finding that has a verdict or an override); calibration needs 5', have: 2, need: 5 },
    });
    const gone = await review.queries.calibrate(WS, { procedure: 'close-shop' });
    expect(gone.procedures).toEqual([expect.objectContaining({ procedure_id: 'close-shop', saved: false, rules: [], skipped: expect.objectContaining({ code: 'not_in_release', have: 0, need: 1 }) })]);
    await expect(review.queries.calibrate(WS, { dry_run: 'yes' } as never)).rejects.toThrow(SopError);
    await expect(review.queries.calibrate(WS, { procedure: 'Take Order' })).rejects.toThrow('"procedure" must be a procedure id');
    await expect(review.queries.calibrate(WS, { force: true } as never)).rejects.toThrow('unknown field "force"');
  });
});
