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
  /** The repository it was opened in (owner/repo) and the REST API it was opened through; null or left out: the connection's. */
  repository?: string | null;
  apiUrl?: string | null;
}

/**
 * What the suggestions code implements (it comes next): the pull requests to follow, and
 * what to do when one was merged or closed. `settle` is idempotent: the job may run twice.
 */
export interface PullRequestsToFollow {
  open(): AsyncIterable<FollowedPullRequest> | Iterable<FollowedPullRequest>;
  settle(pr: FollowedPullRequest, transition: NonNullable<SuggestionTransition>): Promise<void>;
}

/** The code host, its REST API and the repository of a workspace's connection, or null when it has none. */
export type CodeHostOf = (workspace: string) => Promise<WorkspaceCodeHost | null>;
export interface WorkspaceCodeHost {
  host: CodeHost;
  repo: RepoRef;
  /** The connection's api_url (left out: taken to be the pull request's). */
  apiUrl?: string;
}

/**
 * Where a pull request is read: in the repository it was opened in, through the workspace's
 * connection (its token) when that connection is to the same REST API. The connection may name
 * another repository now: the pull request is still the one opened. Without a connection, or
 * with one to another API (its token is not sent elsewhere), it cannot be followed: the error
 * says so (a pr_open suggestion can be dismissed to stop following it).
 */
export function hostForPullRequest(c: WorkspaceCodeHost | null, pr: FollowedPullRequest): { host: CodeHost; repo: RepoRef } {
  const where = pr.repository ? `its pull request (#${pr.number} in ${pr.repository})` : `its pull request (#${pr.number})`;
  if (!c) throw new Error(`workspace ${pr.workspace} has no GitHub connection now: ${where} cannot be followed; dismiss the suggestion to stop following it`);
  if (!pr.repository) return { host: c.host, repo: c.repo };
  if (pr.apiUrl && c.apiUrl && pr.apiUrl !== c.apiUrl) {
    throw new Error(`workspace ${pr.workspace}'s GitHub connection is to ${c.apiUrl} now, and ${where} is on ${pr.apiUrl}: it cannot be followed; dismiss the suggestion to stop following it`);
  }
  const [owner, repo] = pr.repository.split('/');
  return { host: c.host, repo: { owner, repo } };
}

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
  const hosts = new Map<string, Promise<WorkspaceCodeHost | null>>();
  for await (const pr of deps.prs.open()) {
    try {
      if (!hosts.has(pr.workspace)) hosts.set(pr.workspace, deps.codeHostOf(pr.workspace));
      const c = hostForPullRequest(await hosts.get(pr.workspace)!, pr);
      report.checked++;
      const t = transitionForPullRequest(await c.host.pullRequestState(c.repo, pr.number));
      if (t) {
        await deps.prs.settle(pr, t);
        report.settled++;
      }
    } catch (err) {
      report.failed.push(`suggestion ${pr.suggestionId} (${pr.workspace}, pull request #${pr.number}${pr.repository ? ` in ${pr.repository}` : ''}): ${(err as Error).message}`);
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
