export { merge, type MergeConflict, type MergeResult } from './merge';
export { unifiedDiff, unifiedDiffFiles } from './unified-diff';
export { transitionForPullRequest, type PullRequestOutcome, type SuggestionTransition } from './pr-status';
export * from './suggest-prompt';
export { planAgents, type PlannedAgent } from './plan';
export { freshness, hasEdit, type Freshness, type FreshnessState } from './freshness';
