export { merge, type MergeConflict, type MergeResult } from './merge';
export { unifiedDiff, unifiedDiffFiles } from './unified-diff';
export { transitionForPullRequest, type PullRequestOutcome, type SuggestionTransition } from './pr-status';
