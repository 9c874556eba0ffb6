import { RESULT_ORDER, type ProcedureResult, type RuleStatus } from './body';
import type { RuleKind } from './types';

/**
 * A procedure check's result and counts, and a session's result: pure functions of the rule
 * statuses (the seed's tables).
 *
 *   deviated        a never rule violated, a required step skipped, or a step skipped and the
 *                   goal not reached (or unclear);
 *   partial         otherwise a step out of order or not reached, or a step that isn't required
 *                   skipped with the goal reached anyway (leniency: a gap, not a deviation);
 *   followed        every applicable step done, in order, no never rule violated;
 *   not_measurable  nothing to judge: no applicable step and no never rule violated, or the
 *                   agent never spoke.
 *
 * A rule nobody could check (not_checked) is never a pass: a step or never rule not checked
 * keeps the procedure from being followed (it is then not_measurable). It cannot hide a
 * deviation or a gap found among the rules that were checked, which keep their result: the
 * unchecked ones could only make it worse. Warning signs never change the result.
 */
export interface RolledRule {
  kind: RuleKind;
  status: RuleStatus;
  required: boolean;
  suppressed?: boolean;
  /**
   * A step not_checked only because nobody could tell whether it applied: it was seen not done
   * (its tool never called). Either way it was not reached, or did not apply.
   */
  seenNotDone?: boolean;
}

const APPLICABLE_STEP: readonly RuleStatus[] = ['done', 'out_of_order', 'skipped', 'not_reached'];

export function procedureResult(rules: readonly RolledRule[], goalReached: boolean | null, agentSpoke: boolean): ProcedureResult {
  if (!agentSpoke) return 'not_measurable';
  const steps = rules.filter((r) => r.kind === 'step');
  const skipped = steps.filter((r) => r.status === 'skipped');
  const violated = rules.some((r) => r.kind === 'never' && r.status === 'violated');
  if (violated || skipped.some((r) => r.required) || (skipped.length && goalReached !== true)) return 'deviated';
  if (skipped.length || steps.some((r) => r.status === 'out_of_order' || r.status === 'not_reached')) return 'partial';
  const unchecked = rules.some((r) => r.kind !== 'warning' && r.status === 'not_checked');
  if (unchecked || !steps.some((r) => APPLICABLE_STEP.includes(r.status))) return 'not_measurable';
  return 'followed';
}

/**
 * Why a procedure that applied is not checked, or null: the session ended before the procedure
 * started. Nothing of it was observed: every step known to apply is not_reached (no step done,
 * skipped, out of order or left undecided), no never rule violated or undecided, and no warning
 * sign came up. The check then has no result (it is left out of rates, like a procedure that did
 * not apply). A procedure the session had started and ended in the middle of is checked: its
 * steps after the last one done are not_reached and make it partial. A step left undecided only
 * because its condition was (seenNotDone: not done either way) does not stop the exclusion; one
 * that may have been done does. A session where the agent never spoke stays not_measurable.
 */
export function excludedReason(rules: readonly RolledRule[], agentSpoke: boolean): string | null {
  if (!agentSpoke) return null;
  const steps = rules.filter((r) => r.kind === 'step');
  const notReached = steps.filter((r) => r.status === 'not_reached').length;
  const unstarted = (r: RolledRule) => r.status === 'not_reached' || r.status === 'not_applicable' || (r.status === 'not_checked' && r.seenNotDone === true);
  if (!notReached || !steps.every(unstarted)) return null;
  if (rules.some((r) => (r.kind === 'never' && r.status !== 'ok') || (r.kind === 'warning' && (r.status === 'present' || r.status === 'unheeded')))) return null;
  const what = notReached === 1 ? 'its only applicable step was not reached' : `none of its ${notReached} applicable steps was reached`;
  return `The session ended before the procedure started: ${what}, so it isn't checked.`;
}

/** The result with suppressed findings read as passed: the check's `result` (checked_result is without this). */
export function resultWithSuppressed(rules: readonly RolledRule[], goalReached: boolean | null, agentSpoke: boolean): ProcedureResult {
  return procedureResult(
    rules.map((r) => (r.suppressed ? { ...r, status: passed(r.status) } : r)),
    goalReached,
    agentSpoke,
  );
}

function passed(s: RuleStatus): RuleStatus {
  switch (s) {
    case 'skipped':
    case 'out_of_order':
      return 'done';
    case 'violated':
      return 'ok';
    case 'unheeded':
      return 'present';
    default:
      return s;
  }
}

/** Findings: what the agent did or didn't do that someone may want to fix. */
export function isFinding(status: RuleStatus): boolean {
  return status === 'skipped' || status === 'violated' || status === 'out_of_order' || status === 'unheeded';
}

export interface Counts {
  steps_applicable: number;
  steps_done: number;
  nevers_violated: number;
}

/** steps_applicable: steps known to apply (not not_applicable, not not_checked); done includes out of order. */
export function counts(rules: readonly RolledRule[]): Counts {
  const steps = rules.filter((r) => r.kind === 'step');
  return {
    steps_applicable: steps.filter((r) => APPLICABLE_STEP.includes(r.status)).length,
    steps_done: steps.filter((r) => r.status === 'done' || r.status === 'out_of_order').length,
    nevers_violated: rules.filter((r) => r.kind === 'never' && r.status === 'violated').length,
  };
}

/** The worst of its checks' results (deviated, partial, followed, not_measurable); not_measurable when none has one. */
export function sessionResult(results: readonly (ProcedureResult | null)[]): ProcedureResult {
  let worst = RESULT_ORDER.length - 1;
  for (const r of results) if (r !== null) worst = Math.min(worst, RESULT_ORDER.indexOf(r));
  return RESULT_ORDER[worst];
}
