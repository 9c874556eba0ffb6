import { resultWithSuppressed, sessionResult, type ProcedureCheck, type ProcedureResult } from '@neatroots/sop';

/**
 * A stored procedure check's result rolled up again with its suppressed rules read as passed
 * (libs/sop's resultWithSuppressed); `checked_result` stays the checker's own. A session's
 * result is then the worst of its checks', so a session whose only deviation is suppressed
 * counts as followed.
 *
 * Two facts are not in the stored check: each rule's `required` (from the release's lock,
 * `requiredOf`) and whether the agent spoke. The latter follows from `checked_result`: a
 * session where the agent never spoke is not_measurable whatever its rules, and a check that
 * is not_measurable has no finding suppression could pass (no skipped or out-of-order step,
 * no violated never rule), so it stays as it is.
 */
export function rollUpCheck(
  check: Pick<ProcedureCheck, 'rules' | 'goal_reached' | 'checked_result'>,
  suppressedRuleIds: ReadonlySet<string>,
  requiredOf: (ruleId: string) => boolean,
): ProcedureResult | null {
  if (check.checked_result === null || check.checked_result === 'not_measurable') return check.checked_result;
  const rules = check.rules.map((r) => ({ kind: r.kind, status: r.status, required: requiredOf(r.rule_id), suppressed: suppressedRuleIds.has(r.rule_id) }));
  return resultWithSuppressed(rules, check.goal_reached, true);
}

/** A session's result and checked_result from its checks' (worst first), as the checker computes them. */
export function rollUpSession(checks: readonly { result: ProcedureResult | null; checked_result: ProcedureResult | null }[]): {
  result: ProcedureResult;
  checked_result: ProcedureResult;
} {
  return { result: sessionResult(checks.map((c) => c.result)), checked_result: sessionResult(checks.map((c) => c.checked_result)) };
}
