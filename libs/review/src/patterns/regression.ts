import type { RuleKind } from '@neatroots/sop';
import type { VerdictKind } from './verdicts';

/**
 * What a regression set expects of one finding (GET /patterns/{id}/regression):
 *
 *   agent    a real mistake: replay the conversation against the fixed instructions, and the
 *            rule should now pass;
 *   checker  acceptable, sop_wrong, checker_wrong, or a finding overridden as wrong: re-check
 *            the same transcript, and the rule should come out expected_status.
 *
 * expected_status is the rule's passing status: done (step), ok (never rule), present (a
 * warning sign, handled as it says). An override saying the checker was right on a
 * checker_wrong pattern makes that finding a real mistake again.
 */
export type RegressionExpect = 'agent' | 'checker';

export function regressionExpect(verdict: VerdictKind, override: { correct: boolean } | null): RegressionExpect {
  if (override && !override.correct) return 'checker';
  if (verdict === 'real') return 'agent';
  if (verdict === 'checker_wrong' && override?.correct) return 'agent';
  return 'checker';
}

export function passingStatus(kind: RuleKind): 'done' | 'ok' | 'present' {
  return kind === 'step' ? 'done' : kind === 'never' ? 'ok' : 'present';
}
