export { Suggestions, PR_READ_INTERVAL_MS, type CodeHostOfWorkspace } from './suggestions';
export { SuggestionGenerator, SUGGEST_QUEUE, type SuggestJob } from './generate';
export { fixFactsOf, releasedIn, type FixInfo } from './fix';
export { followPullRequestsEvery, followPullRequestsNow, pullRequestsOf } from './prs';
