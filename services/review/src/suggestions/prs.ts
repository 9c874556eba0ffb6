import type { Db, Jobs } from '@neatroots/ports';
import { followPullRequests, schedulePrStatus, type CodeHostOf, type FollowedPullRequest, type PrStatusReport, type PullRequestsToFollow } from '../github/pr-status';
import type { SuggestionRecord } from '@neatroots/store';
import type { Suggestions } from './suggestions';

/** A suggestion's pull request, where it was opened. */
export function followed(s: SuggestionRecord): FollowedPullRequest {
  return { workspace: s.workspace, suggestionId: s.id, number: s.pr_number!, repository: s.pr_repository, apiUrl: s.pr_api_url };
}

/** The suggestions with an open pull request, and what a merged or closed one becomes. */
export function pullRequestsOf(db: Db, suggestions: Suggestions): PullRequestsToFollow {
  return {
    open: async function* () {
      for (const s of await suggestions.repo.openPullRequests(db)) yield followed(s);
    },
    settle: (pr, t) => suggestions.settle(pr.workspace, pr.suggestionId, t),
  };
}

/** sopops_pr_status on SOPOPS_PR_STATUS_CRON (every 15 minutes by default). */
export function followPullRequestsEvery(jobs: Jobs, cron: string, db: Db, suggestions: Suggestions, codeHostOf: CodeHostOf): Promise<void> {
  return schedulePrStatus(jobs, cron, { prs: pullRequestsOf(db, suggestions), codeHostOf });
}

/** One pass now (`sopops pr-status` reaches it through reads; tests call it directly). */
export function followPullRequestsNow(db: Db, suggestions: Suggestions, codeHostOf: CodeHostOf): Promise<PrStatusReport> {
  return followPullRequests({ prs: pullRequestsOf(db, suggestions), codeHostOf });
}
