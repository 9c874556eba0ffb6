import { heldOutGain, putRight, widen, type Band, type Point } from './fit';
import { fieldOfRule, sideOf, type FitField } from './labels';

/**
 * Calibrating one procedure's check thresholds (the seed's "Calibration"): each rule's
 * question is fitted to the labels on the rule, in every wording it has had (its lineage),
 * and the fitted band is for the rule as the fitted release words it.
 *
 * Refused, with {code, message, have, need}:
 *   not_in_release             the procedure is not in the release being fitted
 *   too_few_labeled_sessions   fewer than 5 sessions with a reviewed finding on the procedure
 *   too_few_failures           no rule with 3 labeled failures (labeled findings with the
 *                              decision's probability kept)
 * A question keeps its band, and says why the same way, with:
 *   too_few_failures           fewer than 3 labeled failures on its rule
 *   too_alike                  its wrong answers were as sure as its right ones: no widening
 *                              sends more wrong answers to review than right ones
 *   held_out                   the widening did not hold up on sessions left out of the fit
 * A question with nothing to fix (no sure answer was judged wrong) keeps its band, skipped null.
 */
export const MIN_LABELED_SESSIONS = 5;
export const MIN_FAILURES = 3;

export type RefusalCode = 'too_few_labeled_sessions' | 'too_few_failures' | 'not_in_release' | 'too_alike' | 'held_out';

export interface Refusal {
  code: RefusalCode;
  message: string;
  have: number;
  need: number;
}

export interface CalibrationRule {
  /** The rule's id in the fitted release (its current wording). */
  rule_id: string;
  lineage_id: string;
  kind: 'step' | 'never' | 'warning';
  index: number;
  text: string;
  action: string | null;
}

/** One label on a rule's question: a reviewed finding whose decision's probability was kept. */
export interface CalibrationLabel extends Point {
  lineage_id: string;
  field: FitField;
}

export interface ProcedureInput {
  procedure_id: string;
  /** The procedure in the fitted release; null when that release has no such procedure. */
  rules: readonly CalibrationRule[] | null;
  /** The fitted release's number, for messages. */
  release_number: number | null;
  /** Sessions with a reviewed finding on the procedure (labels with or without a probability). */
  labeled_sessions: number;
  labels: readonly CalibrationLabel[];
  /** The band a rule's question is read with now (its fitted one, else the settings'). */
  bandOf(rule: CalibrationRule, field: FitField | 'warning'): Band;
}

export interface RuleFit {
  rule_id: string;
  lineage_id: string;
  kind: 'step' | 'never' | 'warning';
  index: number;
  text: string;
  field: FitField | 'warning';
  before: Band;
  after: Band;
  skipped: Refusal | null;
}

export interface ProcedureFit {
  procedure_id: string;
  /** Labels used: on a rule of the fitted release, with the decision's probability. */
  labels: number;
  negative_labels: number;
  skipped: Refusal | null;
  /** Share of the labels the current bands put right (null without labels). */
  score_before: number | null;
  /** The same with the fitted bands (null when the procedure is refused). */
  score: number | null;
  rules: RuleFit[];
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const share = (right: number, total: number) => (total ? Math.round((right / total) * 1000) / 1000 : null);

export function calibrateProcedure(input: ProcedureInput): ProcedureFit {
  const id = input.procedure_id;
  if (!input.rules) {
    const where = input.release_number === null ? 'the workspace has no live release' : `it is not in release ${input.release_number}, the live one`;
    return {
      procedure_id: id, labels: 0, negative_labels: 0, score_before: null, score: null, rules: [],
      skipped: { code: 'not_in_release', message: `procedure ${id} cannot be calibrated: ${where}; thresholds are fitted for the rules as the live release words them`, have: 0, need: 1 },
    };
  }
  const rules = input.rules.map((rule) => {
    const field = fieldOfRule(rule.kind, rule.action);
    const labels = input.labels.filter((l) => l.lineage_id === rule.lineage_id && l.field === field);
    return { rule, field, labels, before: input.bandOf(rule, field) };
  });
  const used = rules.flatMap((r) => r.labels);
  const base = {
    procedure_id: id,
    labels: used.length,
    negative_labels: used.filter((l) => !l.correct).length,
    score_before: share(rules.reduce((n, r) => n + putRight(r.labels, r.before), 0), used.length),
  };
  const kept = (skipped: Refusal | null = null) => rules.map((r) => ruleFit(r, r.before, skipped));

  if (input.labeled_sessions < MIN_LABELED_SESSIONS) {
    return {
      ...base, score: null, rules: kept(),
      skipped: {
        code: 'too_few_labeled_sessions',
        message: `procedure ${id} has ${plural(input.labeled_sessions, 'labeled session')} (a session with a finding that has a verdict or an override); calibration needs ${MIN_LABELED_SESSIONS}`,
        have: input.labeled_sessions,
        need: MIN_LABELED_SESSIONS,
      },
    };
  }
  const most = Math.max(0, ...rules.map((r) => r.labels.length));
  if (most < MIN_FAILURES) {
    return {
      ...base, score: null, rules: kept(),
      skipped: {
        code: 'too_few_failures',
        message: `no rule of procedure ${id} has ${MIN_FAILURES} labeled failures (the most on one rule: ${most}); a label needs a reviewed finding whose decision's probability the check kept`,
        have: most,
        need: MIN_FAILURES,
      },
    };
  }
  const fits = rules.map((r) => {
    const { after, skipped } = fitQuestion(r.labels, r.before, r.field);
    return { ...r, after, skipped };
  });
  return {
    ...base,
    skipped: null,
    score: share(fits.reduce((n, r) => n + putRight(r.labels, r.after), 0), used.length),
    rules: fits.map((r) => ruleFit(r, r.after, r.skipped)),
  };
}

/** One question's fit, or why it keeps its band. */
export function fitQuestion(points: readonly Point[], before: Band, field: FitField | 'warning'): { after: Band; skipped: Refusal | null } {
  if (points.length < MIN_FAILURES || field === 'warning') {
    return {
      after: before,
      skipped: { code: 'too_few_failures', message: `its rule has ${plural(points.length, 'labeled failure')}; a question is fitted from ${MIN_FAILURES}`, have: points.length, need: MIN_FAILURES },
    };
  }
  const side = sideOf(field);
  const fitted = widen(points, before, side);
  const sureWrong = points.filter((pt) => !pt.correct && (side === 'no' ? pt.p <= before[0] : pt.p >= before[1]));
  if (fitted === before) {
    if (!sureWrong.length) return { after: before, skipped: null };
    return {
      after: before,
      skipped: {
        code: 'too_alike',
        message: `its ${plural(sureWrong.length, 'wrong answer')} were as sure as its right ones: any wider band would send at least as many right answers to review`,
        have: 0,
        need: 1,
      },
    };
  }
  const held = heldOutGain(points, before, side);
  if (held < 1) {
    return {
      after: before,
      skipped: {
        code: 'held_out',
        message: `the wider band did not hold up on sessions left out of the fit (each labeled session left out in turn: ${held} more labels put right); it comes from too few sessions`,
        have: held,
        need: 1,
      },
    };
  }
  return { after: fitted, skipped: null };
}

function ruleFit(r: { rule: CalibrationRule; field: FitField | 'warning'; before: Band }, after: Band, skipped: Refusal | null): RuleFit {
  const { rule_id, lineage_id, kind, index, text } = r.rule;
  return { rule_id, lineage_id, kind, index, text, field: r.field, before: r.before, after, skipped };
}
