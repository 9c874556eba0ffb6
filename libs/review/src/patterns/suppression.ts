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
 * `verdictCovers` is false for a finding on a wording of the rule newer than the verdict (the
 * current wording, or one between the verdict's and the current): the verdict judged the old
 * wording, so it does not suppress the newer findings until a verdict confirms it (the pattern
 * is then needs_review, reason reworded).
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

/**
 * Whether a verdict given at `verdictAt` covers a finding: only when the verdict is not older
 * than the finding's own wording of the rule (when that wording came in, with the release that
 * introduced it). A verdict judged the wording(s) of its time: their findings stay covered, and
 * the findings of every wording that came after it (the current one, or one in between) are not.
 *
 * `wording` is the rule's current wording, with `since` when it came in (the rule pattern's
 * `reworded_at`, null for a first wording): it dates findings on the current wording.
 * `finding.wording_since` dates a finding on an earlier wording (for a rule that replaced
 * another, when the first release with it was published, or for a wording that came back, when the
 * latest release that brought it back was: `wordingSince(rows, returns)(procedure, rule_id)`
 * in @neatroots/store); null is a first wording, or a date nobody knows, and is covered. A
 * caller that leaves it out gets the old reading, where every earlier wording is covered.
 */
export function verdictCovers(
  verdictAt: string | null,
  finding: { rule_id: string; wording_since?: string | null },
  wording: { rule_id: string; since: string | null },
): boolean {
  if (verdictAt === null) return false;
  const since = finding.rule_id === wording.rule_id ? wording.since : (finding.wording_since ?? null);
  return since === null || verdictAt >= since;
}
