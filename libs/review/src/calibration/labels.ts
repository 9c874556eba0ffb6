import type { VerdictKind } from '../patterns/verdicts';

/**
 * Calibration labels (the seed's "Calibration"): what reviewers said about the checker's
 * findings, read from the database alone. A finding with an override, or in a pattern with a
 * verdict (its own, or its rule pattern's), is labeled:
 *
 *   override correct: false            negative: the checker misjudged this one
 *   override correct: true             positive (it also overrides a checker_wrong pattern)
 *   verdict checker_wrong              negative
 *   verdict real, acceptable, sop_wrong positive: the checker saw right (the mistake is real,
 *                                      fine here, or the rule is wrong; the rule was not followed)
 *   neither                            not labeled
 *
 * A verdict given before the rule's current wording does not label findings on that wording
 * (it judged the old one), exactly as it does not suppress them.
 */
export type LabelFacts = {
  verdict: VerdictKind | null;
  verdictCovers: boolean;
  override: { correct: boolean } | null;
};

/** true: the checker got the finding right; false: a negative label; null: nobody reviewed it. */
export function labelOf(f: LabelFacts): boolean | null {
  if (f.override) return f.override.correct;
  if (!f.verdict || !f.verdictCovers) return null;
  return f.verdict !== 'checker_wrong';
}

/**
 * The rule question whose answer made a finding, and so the question its label is about:
 * a skipped step is the step question answered no, a violated never rule the never question
 * answered yes, an unheeded warning sign the "handled as the sign says" question answered no.
 * out_of_order comes from the order of evidence, not from a question's probability: no band
 * to fit.
 */
export type FitField = 'step' | 'never' | 'responded';

export function fieldOfFinding(status: string): FitField | null {
  if (status === 'skipped') return 'step';
  if (status === 'violated') return 'never';
  if (status === 'unheeded') return 'responded';
  return null;
}

/** The question a rule of this kind is fitted on (a warning sign without an action has no "responded" question). */
export function fieldOfRule(kind: 'step' | 'never' | 'warning', action: string | null): FitField | 'warning' {
  if (kind === 'step') return 'step';
  if (kind === 'never') return 'never';
  return action ? 'responded' : 'warning';
}

/**
 * Which end of the band a field's findings were answered at: a finding is a "no" (step,
 * responded) or a "yes" (never), so widening that end is what sends such answers to review.
 */
export function sideOf(field: FitField): 'no' | 'yes' {
  return field === 'never' ? 'yes' : 'no';
}
