/**
 * The code host port: where a workspace's procedure files live (GitHub, GitHub Enterprise),
 * so an applied suggestion becomes a pull request a person merges, and the pull request's
 * fate (merged, closed) comes back to the suggestion. The GitHub REST adapter is in
 * @neatroots/platform (github/); domain code sees only this.
 */
/** GitHub.com's REST API, when a connection names none; GitHub Enterprise is `https://HOST/api/v3`. */
export const GITHUB_API_DEFAULT = 'https://api.github.com';

export interface RepoRef {
  owner: string;
  repo: string;
}

export interface OpenPullRequest {
  repo: RepoRef;
  /** The branch the pull request merges into (the connection's branch). */
  base: string;
  /**
   * The branch to create from base's head, a name of the caller's own (one per change): opening
   * again with the same name answers the pull request already opened from it (open, or merged),
   * and a branch of that name left without one (or with one closed without merging) is used
   * again, a new pull request opened from it.
   */
  branch: string;
  /** The file's path in the repository, e.g. procedures/refunds.md. */
  path: string;
  /** The file's full new content (UTF-8). */
  content: string;
  /**
   * The file's content at base that `content` was made from (null: no such file). Given, the
   * branch is made from the commit whose file was compared with it, and nothing is opened when
   * the file there differs (CodeHostChangedError): the pull request then changes exactly what
   * was made, and undoes no edit made at base meanwhile.
   */
  baseContent?: string | null;
  /** The commit message. */
  message: string;
  title: string;
  body: string;
}

export interface PullRequestRef {
  number: number;
  /** The pull request's page (html_url), recorded as the suggestion's pr_url. */
  url: string;
  /** The branch the pull request is from (branch; branch-N for one an earlier version opened there). */
  branch: string;
  /**
   * Set when the pull request answered is one opened earlier from the branch and merged since
   * (an earlier call whose answer was lost): it is merged already, with its merge commit.
   */
  merged?: { mergeCommitSha: string | null };
}

export type PullRequestStatus =
  | { state: 'open' }
  | { state: 'merged'; mergeCommitSha: string | null }
  | { state: 'closed' };

export interface CodeHost {
  openPullRequest(req: OpenPullRequest): Promise<PullRequestRef>;
  pullRequestState(repo: RepoRef, number: number): Promise<PullRequestStatus>;
  /**
   * Deletes the branches `name-N` (N a number: the names earlier versions took for `name`, one
   * a failed try) with no pull request open from them, but for `keep` (a pull request's own
   * branch); never `name` itself nor any other branch. Best effort; answers those deleted.
   * (openPullRequest does the same for its branch name.)
   */
  deleteLeftoverBranches(repo: RepoRef, name: string, keep?: string | null): Promise<string[]>;
  /** The file's content at `ref` (a branch or a sha), or null when there is no such file. */
  readFile(repo: RepoRef, ref: string, path: string): Promise<string | null>;
}

/** The code host refused the token (401, or 403 without a rate limit): not retried. */
export class CodeHostAuthError extends Error {
  constructor(readonly repo: string, status: number, detail: string) {
    super(`the code host refused the token for ${repo} (HTTP ${status}): ${detail}`);
    this.name = 'CodeHostAuthError';
  }
}

/** A repository, branch or pull request does not exist (or the token cannot see it). */
export class CodeHostNotFoundError extends Error {
  constructor(readonly repo: string, readonly missing: string) {
    super(`not found on the code host: ${missing} (repository ${repo})`);
    this.name = 'CodeHostNotFoundError';
  }
}

/** Anything else the code host answered that is not retried, or retries used up. */
export class CodeHostError extends Error {
  constructor(readonly repo: string, readonly status: number, detail: string) {
    super(`code host error for ${repo} (HTTP ${status}): ${detail}`);
    this.name = 'CodeHostError';
  }
}

/** The file at base is not the content a change was made from: it changed meanwhile (read it again). */
export class CodeHostChangedError extends Error {
  constructor(readonly repo: string, readonly path: string, readonly ref: string) {
    super(`${path} changed on ${ref} of ${repo} while the pull request was being opened: apply again`);
    this.name = 'CodeHostChangedError';
  }
}
