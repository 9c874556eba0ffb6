import type { CodeHost, Jobs, RepoRef } from '@neatroots/ports';
import { transitionForPullRequest, type SuggestionTransition } from '@neatroots/review-domain';

/** The repeatable job that looks at open pull requests of suggestions (SOPOPS_PR_STATUS_CRON). */
export const PR_STATUS_QUEUE = 'sopops_pr_status';
export const PR_STATUS_SCHEDULE = 'sopops_pr_status';

/** A suggestion whose pull request is open, as the suggestions code lists them. */
export interface FollowedPullRequest {
  workspace: string;
  suggestionId: string;
  number: number;
}

/**
 * What the suggestions code implements (it comes next): the pull requests to follow, and
 * what to do when one was merged or closed. `settle` is idempotent: the job may run twice.
 */
export interface PullRequestsToFollow {
  open(): AsyncIterable<FollowedPullRequest> | Iterable<FollowedPullRequest>;
  settle(pr: FollowedPullRequest, transition: NonNullable<SuggestionTransition>): Promise<void>;
}

/** The code host and repository of a workspace's connection, or null when it has none. */
export type CodeHostOf = (workspace: string) => Promise<{ host: CodeHost; repo: RepoRef } | null>;

export interface PrStatusDeps {
  prs: PullRequestsToFollow;
  codeHostOf: CodeHostOf;
}

export interface PrStatusReport {
  checked: number;
  settled: number;
  /** One line per pull request that could not be read: the others go on. */
  failed: string[];
}

/**
 * One pass over the open pull requests (the job's body, and `sopops pr-status` from cron
 * where there is no Redis). One failing repository (a refused token, GitHub down) does not
 * stop the others; it is reported and tried again at the next pass.
 */
export async function followPullRequests(deps: PrStatusDeps): Promise<PrStatusReport> {
  const report: PrStatusReport = { checked: 0, settled: 0, failed: [] };
  const hosts = new Map<string, Promise<{ host: CodeHost; repo: RepoRef } | null>>();
  for await (const pr of deps.prs.open()) {
    try {
      if (!hosts.has(pr.workspace)) hosts.set(pr.workspace, deps.codeHostOf(pr.workspace));
      const c = await hosts.get(pr.workspace)!;
      if (!c) throw new Error(`workspace ${pr.workspace} has no GitHub connection`);
      report.checked++;
      const t = transitionForPullRequest(await c.host.pullRequestState(c.repo, pr.number));
      if (t) {
        await deps.prs.settle(pr, t);
        report.settled++;
      }
    } catch (err) {
      report.failed.push(`suggestion ${pr.suggestionId} (${pr.workspace}, pull request #${pr.number}): ${(err as Error).message}`);
    }
  }
  return report;
}

/**
 * Registers the schedule (once, however many replicas call this), then the job's handler: a
 * bad pattern is refused before anything is registered.
 */
export async function schedulePrStatus(jobs: Jobs, cron: string, deps: PrStatusDeps): Promise<void> {
  await jobs.schedule(PR_STATUS_QUEUE, PR_STATUS_SCHEDULE, cron, {});
  await jobs.work(PR_STATUS_QUEUE, () => followPullRequests(deps));
}
