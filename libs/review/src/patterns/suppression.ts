import { suppresses, type VerdictKind } from './verdicts';

/**
 * Whether one finding is suppressed (kept, flagged, and left out of every Insights count and
 * rate). The seed, exactly:
 *
 *   - acceptable and checker_wrong suppress the pattern's findings, now and later;
 *   - an override with correct: false (the checker got this one wrong) suppresses it;
 *   - an override with correct: true overrides a checker_wrong pattern for that finding;
 *   - acceptable suppresses either way (the finding is right, and fine in this situation).
 *
 * `verdictCovers` is false for a finding on a wording of the rule newer than the verdict: the
 * verdict judged the old wording, so it does not suppress the new findings until a verdict
 * confirms it (the pattern is then needs_review, reason reworded).
 */
export interface SuppressionFacts {
  /** The pattern's verdict (its own or inherited), or null. */
  verdict: VerdictKind | null;
  verdictCovers: boolean;
  /** The reviewer's override of this finding (kept by session and rule), or null. */
  override: { correct: boolean } | null;
}

export function isSuppressed(f: SuppressionFacts): boolean {
  if (f.override && !f.override.correct) return true;
  if (!f.verdict || !f.verdictCovers || !suppresses(f.verdict)) return false;
  if (f.verdict === 'checker_wrong' && f.override?.correct) return false;
  return true;
}

/** Whether a verdict given at `verdictAt` covers a finding: false on a wording that came after it. */
export function verdictCovers(verdictAt: string | null, finding: { rule_id: string }, wording: { rule_id: string; since: string | null }): boolean {
  if (verdictAt === null) return false;
  if (finding.rule_id !== wording.rule_id || wording.since === null) return true;
  return verdictAt >= wording.since;
}
