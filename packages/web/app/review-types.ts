/**
 * The review API's answers (docs/review.md) as the pages read them: the store's own types
 * (type-only imports, erased from the bundle), so the pages follow the API as it grows.
 */
import type { PatternView, ReviewStateName, VerdictName } from '@neatroots/store';

export type {
  ExampleFinding,
  InsightsView as Insights,
  OverrideView as OverrideGiven,
  PatternSummary,
  PatternView as Pattern,
  QueueItem,
  ReleaseCompareView as ReleaseCompare,
  ReviewFields,
  ReviewQueueView as ReviewQueue,
  ReviewStateName as ReviewState,
  SuggestionSummary as Suggestion,
  SuggestionView,
  VerdictGivenView as VerdictGiven,
  VerdictName,
  VerdictView as Verdict,
} from '@neatroots/store';

/** One of a pattern's sessions (its finding there, and the reviewer's override). */
export type PatternSession = PatternView['sessions'][number];

/** The states in the order the queue's filter shows them: what needs a reviewer first. */
export const REVIEW_STATES: readonly ReviewStateName[] = ['needs_review', 'regressed', 'open', 'fixing', 'fixed', 'closed'];
export const VERDICTS: readonly VerdictName[] = ['real', 'acceptable', 'sop_wrong', 'checker_wrong'];
/** The verdicts a suggested edit answers (checker_wrong is the checker's mistake, not the procedure's). */
export const SUGGESTING_VERDICTS: readonly VerdictName[] = ['real', 'acceptable', 'sop_wrong'];

/** How a state or a verdict reads on the page. */
export function words(v: string): string {
  return v.replace(/_/g, ' ');
}
