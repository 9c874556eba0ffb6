import type { Db, Jobs } from '@neatroots/ports';
import { followPullRequests, PR_STATUS_QUEUE, PR_STATUS_SCHEDULE, type CodeHostOf, type FollowedPullRequest, type PrStatusReport, type PullRequestsToFollow } from '../github/pr-status';
import type { SuggestionRecord } from '@neatroots/store';
import type { Suggestions } from './suggestions';

/** A suggestion's pull request, where it was opened. */
export function followed(s: SuggestionRecord): FollowedPullRequest {
  return { workspace: s.workspace, suggestionId: s.id, number: s.pr_number!, repository: s.pr_repository, apiUrl: s.pr_api_url };
}

/**
 * The suggestions with an open pull request, and what a merged or closed one becomes. Once a stop
 * began, no pull request more (the pass says how far it got); `at` is told which one is next.
 */
export function pullRequestsOf(db: Db, suggestions: Suggestions, at?: (what: string) => void): PullRequestsToFollow {
  return {
    open: async function* () {
      const open = await suggestions.repo.openPullRequests(db);
      for (const [i, s] of open.entries()) {
        if (suggestions.stopping) return suggestions.passStopped(i, open.length);
        at?.(`pull request #${s.pr_number}${s.pr_repository ? ` in ${s.pr_repository}` : ''} of suggestion ${s.id} (${i + 1} of ${open.length})`);
        yield followed(s);
      }
    },
    settle: (pr, t) => suggestions.settle(pr.workspace, pr.suggestionId, t),
  };
}

/** sopops_pr_status on SOPOPS_PR_STATUS_CRON (every 15 minutes by default): each run is followPullRequestsNow. */
export async function followPullRequestsEvery(jobs: Jobs, cron: string, db: Db, suggestions: Suggestions, codeHostOf: CodeHostOf): Promise<void> {
  // schedulePrStatus's schedule (a bad pattern refused before anything is registered), with a stop's waiting on the pass.
  await jobs.schedule(PR_STATUS_QUEUE, PR_STATUS_SCHEDULE, cron, {});
  await jobs.work(PR_STATUS_QUEUE, () => followPullRequestsNow(db, suggestions, codeHostOf));
}

/**
 * One pass now (the job's body; `sopops pr-status` reaches it through reads; tests call it
 * directly). A stop waits for it (Suggestions.close), bounded, or names the pull request it was at.
 */
export function followPullRequestsNow(db: Db, suggestions: Suggestions, codeHostOf: CodeHostOf): Promise<PrStatusReport> {
  return suggestions.pass((at) => followPullRequests({ prs: pullRequestsOf(db, suggestions, at), codeHostOf }));
}
