import fc from 'fast-check';
import { calibrateProcedure, fitQuestion, type CalibrationLabel, type CalibrationRule, type ProcedureInput } from './calibrate';
import { putRight, widen, type Band, type Point } from './fit';
import { verdictCovers } from '../patterns/suppression';
import { fieldOfFinding, labelOf } from './labels';

const STEP: Band = [0.2, 0.8, 0.5];
const NEVER: Band = [0.1, 0.9, 0.5];

describe('labels from verdicts and overrides', () => {
  it.each([
    ['no verdict, no override', { verdict: null, verdictCovers: false, override: null }, null],
    ['real', { verdict: 'real', verdictCovers: true, override: null }, true],
    ['acceptable', { verdict: 'acceptable', verdictCovers: true, override: null }, true],
    ['sop_wrong', { verdict: 'sop_wrong', verdictCovers: true, override: null }, true],
    ['checker_wrong: a negative label', { verdict: 'checker_wrong', verdictCovers: true, override: null }, false],
    ['checker_wrong on a wording newer than the verdict', { verdict: 'checker_wrong', verdictCovers: false, override: null }, null],
    ['override wrong on a real pattern', { verdict: 'real', verdictCovers: true, override: { correct: false } }, false],
    ['override right on a checker_wrong pattern', { verdict: 'checker_wrong', verdictCovers: true, override: { correct: true } }, true],
    ['override wrong without a verdict', { verdict: null, verdictCovers: false, override: { correct: false } }, false],
  ] as const)('%s', (_, facts, label) => {
    expect(labelOf({ ...facts, override: facts.override })).toBe(label);
  });

  it.each([
    ['skipped', 'step'],
    ['violated', 'never'],
    ['unheeded', 'responded'],
    ['out_of_order', null],
  ])('a %s finding labels the %s question', (status, field) => expect(fieldOfFinding(status)).toBe(field));

  it('a verdict given while wording A was current labels A\'s findings, not those of B or C (A -> B -> C, C current)', () => {
    const current = { rule_id: 'C', since: '2026-11-20T00:00:00.000Z' };
    const findings = [{ rule_id: 'A', wording_since: null }, { rule_id: 'B', wording_since: '2026-11-10T00:00:00.000Z' }, { rule_id: 'C' }];
    const label = (verdict: 'checker_wrong' | 'acceptable', at: string) =>
      findings.map((f) => labelOf({ verdict, verdictCovers: verdictCovers(at, f, current), override: null }));
    expect(label('checker_wrong', '2026-11-01T00:00:00.000Z')).toEqual([false, null, null]);
    expect(label('acceptable', '2026-11-01T00:00:00.000Z')).toEqual([true, null, null]);
    expect(label('checker_wrong', '2026-11-15T00:00:00.000Z')).toEqual([false, false, null]);
    // an override labels its finding whatever the wording
    expect(labelOf({ verdict: 'acceptable', verdictCovers: verdictCovers('2026-11-01T00:00:00.000Z', findings[1], current), override: { correct: false } })).toBe(false);
  });
});

const pt = (session_id: string, p: number, correct: boolean): Point => ({ session_id, p, correct });

describe('widening a band', () => {
  it.each<[string, Point[], Band, 'no' | 'yes', Band]>([
    ['nothing wrong: kept', [pt('a', 0.05, true), pt('b', 0.1, true)], STEP, 'no', STEP],
    ['wrong sure no answers above the right ones: no moves between them', [pt('a', 0.05, true), pt('b', 0.15, false), pt('c', 0.18, false)], STEP, 'no', [0.1, 0.8, 0.5]],
    ['the smallest widening that gains the most', [pt('a', 0.02, false), pt('b', 0.05, true), pt('c', 0.06, true), pt('d', 0.15, false)], STEP, 'no', [0.105, 0.8, 0.5]],
    ['wrong sure yes answers: yes moves up', [pt('a', 0.92, false), pt('b', 0.95, false), pt('c', 0.99, true)], NEVER, 'yes', [0.1, 0.97, 0.5]],
    ['p = 0 cannot be made unsure', [pt('a', 0, false), pt('b', 0, false)], STEP, 'no', STEP],
    ['answers already unsure are not the band\'s doing', [pt('a', 0.3, false), pt('b', 0.4, false)], STEP, 'no', STEP],
  ])('%s', (_, points, band, side, want) => {
    expect(widen(points, band, side)).toEqual(want);
  });

  const band = fc
    .tuple(fc.double({ min: 0, max: 0.49, noNaN: true }), fc.double({ min: 0.51, max: 1, noNaN: true }))
    .map(([no, yes]): Band => [no, yes, 0.5]);
  const points = fc.array(
    fc.record({ session_id: fc.constantFrom('a', 'b', 'c', 'd', 'e'), p: fc.oneof(fc.double({ min: 0, max: 1, noNaN: true }), fc.constantFrom(0, 0.1, 0.2, 0.8, 0.9, 1)), correct: fc.boolean() }),
    { maxLength: 30 },
  );

  it('next to p = 1, widens the yes end without moving it past the answers it keeps sure (a rounding did)', () => {
    const pts: Point[] = [
      { session_id: 'a', p: 0.9999999990000006, correct: false },
      { session_id: 'a', p: 0.9999999999999992, correct: true },
      { session_id: 'a', p: 0.9999999999999992, correct: true },
    ];
    const b: Band = [0, 0.51, 0.5];
    const w = widen(pts, b, 'yes');
    expect(w[1]).toBeGreaterThan(0.9999999990000006);
    expect(w[1]).toBeLessThanOrEqual(0.9999999999999992);
    expect(putRight(pts, w)).toBe(3);
  });

  it('never narrows a band, never moves decide, and never puts fewer labels right', () => {
    fc.assert(
      fc.property(points, band, fc.constantFrom<'no' | 'yes'>('no', 'yes'), (pts, b, side) => {
        const w = widen(pts, b, side);
        expect(w[0]).toBeLessThanOrEqual(b[0]);
        expect(w[1]).toBeGreaterThanOrEqual(b[1]);
        expect(w[2]).toBe(b[2]);
        expect(w[0]).toBeLessThan(w[1]);
        // only the side asked for moves
        if (side === 'no') expect(w[1]).toBe(b[1]);
        else expect(w[0]).toBe(b[0]);
        expect(putRight(pts, w)).toBeGreaterThanOrEqual(putRight(pts, b));
      }),
      { numRuns: 500 },
    );
  });

  it("a question's fit, kept or not, is never narrower than its band", () => {
    fc.assert(
      fc.property(points, band, fc.constantFrom<'step' | 'never' | 'responded'>('step', 'never', 'responded'), (pts, b, field) => {
        const { after } = fitQuestion(pts, b, field);
        expect(after[0]).toBeLessThanOrEqual(b[0]);
        expect(after[1]).toBeGreaterThanOrEqual(b[1]);
      }),
      { numRuns: 500 },
    );
  });
});

describe('a question that keeps its band says why', () => {
  it('too_few_failures: fewer than 3 labels on its rule', () => {
    expect(fitQuestion([pt('a', 0.1, false), pt('b', 0.1, false)], STEP, 'step')).toEqual({
      after: STEP,
      skipped: { code: 'too_few_failures', message: 'its rule has 2 labeled failures; a question is fitted from 3', have: 2, need: 3 },
    });
  });

  it('too_alike: the wrong answers are as sure as the right ones', () => {
    const r = fitQuestion([pt('a', 0.15, false), pt('b', 0.15, true), pt('c', 0.16, true), pt('d', 0.05, true)], STEP, 'step');
    expect(r.after).toEqual(STEP);
    expect(r.skipped).toMatchObject({ code: 'too_alike', have: 0, need: 1 });
  });

  it('held_out: one session alone does not move the band', () => {
    // two wrong answers, both in session a: left out, the others fit nothing
    const r = fitQuestion([pt('a', 0.15, false), pt('a', 0.16, false), pt('b', 0.02, true), pt('c', 0.03, true)], STEP, 'step');
    expect(r.after).toEqual(STEP);
    expect(r.skipped).toMatchObject({ code: 'held_out', have: 0, need: 1 });
  });

  it('the same wrong answers in three sessions hold up: the band is widened', () => {
    const r = fitQuestion([pt('a', 0.15, false), pt('b', 0.16, false), pt('c', 0.17, false), pt('d', 0.02, true)], STEP, 'step');
    expect(r).toEqual({ after: [0.085, 0.8, 0.5], skipped: null });
  });
});

describe('calibrating a procedure', () => {
  const rules: CalibrationRule[] = [
    { rule_id: 'r_greet_v2', lineage_id: 'r_greet', kind: 'step', index: 1, text: 'Greet the caller by name.', action: null },
    { rule_id: 'r_price', lineage_id: 'r_price', kind: 'never', index: 1, text: 'Volunteer a price.', action: null },
  ];
  const label = (session_id: string, lineage_id: string, field: CalibrationLabel['field'], p: number, correct: boolean): CalibrationLabel => ({ session_id, lineage_id, field, p, correct });
  const labels = [
    label('s1', 'r_greet', 'step', 0.15, false),
    label('s2', 'r_greet', 'step', 0.16, false),
    label('s3', 'r_greet', 'step', 0.17, false),
    label('s4', 'r_greet', 'step', 0.02, true),
    label('s5', 'r_price', 'never', 0.95, true),
  ];
  const input = (over: Partial<ProcedureInput> = {}): ProcedureInput => ({
    procedure_id: 'take-order',
    rules,
    release_number: 2,
    labeled_sessions: 5,
    labels,
    bandOf: (_r, field) => (field === 'never' ? NEVER : STEP),
    ...over,
  });

  it("fits each rule's question from the labels on every wording of the rule; scores before and after", () => {
    const fit = calibrateProcedure(input());
    expect(fit).toMatchObject({ procedure_id: 'take-order', labels: 5, negative_labels: 3, skipped: null, score_before: 0.4, score: 1 });
    expect(fit.rules).toEqual([
      { rule_id: 'r_greet_v2', lineage_id: 'r_greet', kind: 'step', index: 1, text: 'Greet the caller by name.', field: 'step', before: STEP, after: [0.085, 0.8, 0.5], skipped: null },
      {
        rule_id: 'r_price', lineage_id: 'r_price', kind: 'never', index: 1, text: 'Volunteer a price.', field: 'never', before: NEVER, after: NEVER,
        skipped: { code: 'too_few_failures', message: 'its rule has 1 labeled failure; a question is fitted from 3', have: 1, need: 3 },
      },
    ]);
  });

  it('not_in_release: the procedure is not in the live release', () => {
    expect(calibrateProcedure(input({ rules: null })).skipped).toEqual({
      code: 'not_in_release',
      message: 'procedure take-order cannot be calibrated: it is not in release 2, the live one; thresholds are fitted for the rules as the live release words them',
      have: 0,
      need: 1,
    });
  });

  it('too_few_labeled_sessions: fewer than 5', () => {
    const fit = calibrateProcedure(input({ labeled_sessions: 4 }));
    expect(fit.skipped).toMatchObject({ code: 'too_few_labeled_sessions', have: 4, need: 5 });
    expect(fit.score).toBeNull();
    expect(fit.rules.every((r) => r.after === r.before)).toBe(true);
  });

  it('too_few_failures: no rule with 3 labeled failures', () => {
    const fit = calibrateProcedure(input({ labels: labels.filter((l) => l.session_id !== 's3' && l.session_id !== 's4') }));
    expect(fit.skipped).toMatchObject({ code: 'too_few_failures', have: 2, need: 3 });
  });

  it('labels on a rule the release no longer has are not used', () => {
    const fit = calibrateProcedure(input({ labels: [...labels, label('s6', 'r_removed', 'step', 0.1, false)] }));
    expect(fit).toMatchObject({ labels: 5, negative_labels: 3 });
  });
});
