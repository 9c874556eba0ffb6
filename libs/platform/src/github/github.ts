import {
  CodeHostAuthError,
  CodeHostError,
  CodeHostChangedError,
  CodeHostNotFoundError,
  GITHUB_API_DEFAULT,
  type CodeHost,
  type OpenPullRequest,
  type PullRequestRef,
  type PullRequestStatus,
  type RepoRef,
} from '@neatroots/ports';

const API_VERSION = '2022-11-28';

export interface GitHubOptions {
  token: string;
  /** Default GITHUB_API_DEFAULT. */
  baseUrl?: string;
  /** Tries of one request in all, for 5xx and rate limits (default 4). */
  attempts?: number;
  /** A rate limit asking for a longer wait than this fails instead of blocking the caller (default 60 s). */
  maxWaitMs?: number;
  /** Before the second try after a 5xx, doubled after each (default 500 ms). */
  backoffMs?: number;
  /** One request without an answer after this long is given up, as no answer (default 10 s). */
  timeoutMs?: number;
}

interface Answer {
  status: number;
  json: unknown;
}

/** The fields read from GitHub's answers. */
interface GhRef { object: { sha: string } }
interface GhContent { sha: string; content?: string; encoding?: string }
interface GhPull { number: number; html_url: string; state: string; merged?: boolean; merged_at?: string | null; merge_commit_sha?: string | null }
interface GhError { message?: unknown; errors?: { message?: unknown }[] }
/** A file as read: its blob sha, its content base64 (empty with encoding 'none': over 1 MB). */
interface Content { sha: string; content: string; encoding?: string }

/**
 * The GitHub REST adapter of the CodeHost port, plain fetch: a branch from base's head
 * (git refs), the file committed on it (contents), the pull (pulls), and the pull's state.
 * Opening one again for the same branch name answers the pull request already opened.
 * Rate limits are waited out and 5xx retried, both bounded; a refused token is not retried.
 */
export class GitHubCodeHost implements CodeHost {
  private readonly base: string;
  private readonly attempts: number;
  private readonly maxWaitMs: number;
  private readonly backoffMs: number;
  private readonly timeoutMs: number;

  constructor(private readonly opts: GitHubOptions) {
    this.base = (opts.baseUrl ?? GITHUB_API_DEFAULT).replace(/\/+$/, '');
    this.attempts = opts.attempts ?? 4;
    this.maxWaitMs = opts.maxWaitMs ?? 60_000;
    this.backoffMs = opts.backoffMs ?? 500;
    this.timeoutMs = opts.timeoutMs ?? 10_000;
  }

  /**
   * Idempotent for one branch name: a pull request already opened from it (or from the
   * `name-N` an earlier version took), open or merged, is the one answered (a merged one with
   * `merged`), and nothing is made; one closed without merging is not: a new pull request is
   * opened from the branch, as a first call would have; a branch of that
   * name left by an earlier call is used again, not replaced by `name-2`. When a step after the
   * branch fails, the branch this call created is deleted (best effort), unless a pull request
   * may have been opened from it (GitHub's answer lost, and not found either). Once one is
   * answered, the `name-N` branches other than its own with no pull request open are deleted
   * (deleteLeftoverBranches).
   */
  async openPullRequest(req: OpenPullRequest): Promise<PullRequestRef> {
    const r = req.repo;
    const mine = await this.branchesNamed(r, req.branch);
    const pulls = await this.pullsFrom(r, mine);
    const pr = await this.open(req, mine, pulls);
    // The name-N branches earlier versions left (one a failed try) go, but for one with a pull
    // request open: best effort, the pull request is opened either way.
    await this.deleteUnlessOpen(r, mine.filter((b) => b !== req.branch && b !== pr.branch), pulls).catch(() => undefined);
    return pr;
  }

  /**
   * Deletes the branches `name-N` (N a number: what earlier versions made for `name`, one a
   * failed try) that have no pull request open, but for `keep`; never `name` itself nor any other
   * branch. Best effort for each; answers those deleted.
   */
  async deleteLeftoverBranches(repo: RepoRef, name: string, keep?: string | null): Promise<string[]> {
    const left = (await this.branchesNamed(repo, name)).filter((b) => b !== name && b !== keep);
    return this.deleteUnlessOpen(repo, left);
  }

  /** Deletes each of `branches` with no pull request open from it (`pulls`: their pull requests, read already). */
  private async deleteUnlessOpen(r: RepoRef, branches: readonly string[], pulls?: ReadonlyMap<string, readonly GhPull[]>): Promise<string[]> {
    const deleted: string[] = [];
    for (const b of branches) {
      try {
        const of = pulls?.get(b) ?? (await this.pullsFrom(r, [b], 'open')).get(b) ?? [];
        if (of.some((p) => p.state === 'open')) continue;
        await this.call(r, 'DELETE', `/git/refs/heads/${encodePath(b)}`, undefined, undefined, [404, 422]);
        deleted.push(b);
      } catch {
        // the next one all the same
      }
    }
    return deleted;
  }

  private async open(req: OpenPullRequest, mine: readonly string[], pulls: ReadonlyMap<string, readonly GhPull[]>): Promise<PullRequestRef> {
    const r = req.repo;
    // One open or merged is the one answered; one closed without merging is not: a new one is
    // opened from the branch (whoever applies again wants a pull request open, not one closed).
    const opened = bestPull(pulls);
    if (opened && opened.state !== 'closed') return opened.ref;
    const head = await this.call(r, 'GET', `/git/ref/heads/${encodePath(req.base)}`, undefined, `branch ${req.base}`);
    const sha = (head.json as GhRef).object.sha;
    // The file in the commit the branch is made from must be what the content was made from, or
    // nothing is opened. Read once: the caller read the repository, branch and folder already.
    let atBase: Content | null | undefined;
    if (req.baseContent !== undefined) {
      atBase = await this.contents(r, sha, req.path);
      const same = atBase === null ? req.baseContent === null : atBase.encoding !== 'none' && decode(atBase.content) === req.baseContent;
      if (!same) throw new CodeHostChangedError(slug(r), req.path, req.base);
    }
    const branch = req.branch;
    const created = !mine.includes(branch) && (await this.createBranch(r, branch, sha));
    let pulling = false;
    try {
      // A branch this call just made from that commit has the file as read there: not read again.
      await this.putFile(r, branch, req.path, req.content, req.message, created ? atBase : undefined);
      pulling = true;
      const pull = await this.call(r, 'POST', '/pulls', { title: req.title, body: req.body, head: branch, base: req.base }, undefined, [422]);
      if (pull.status === 422) {
        // A retry after an answer that never came back (GitHub opened it): the pull request from this branch is the one this opened.
        const why = ghMessage(pull.json, '');
        if (/pull request already exists/i.test(why)) {
          const p = await this.pullFrom(r, [branch]);
          if (p?.state === 'open') return p.ref;
        }
        throw new CodeHostError(slug(r), 422, `POST /pulls: ${why}`);
      }
      const p = pull.json as GhPull;
      return { number: p.number, url: p.html_url, branch };
    } catch (err) {
      // No answer to POST /pulls (5xx, none at all): GitHub may have opened it all the same.
      let known = true;
      if (pulling && err instanceof CodeHostError && (err.status === 0 || err.status >= 500)) {
        const p = await this.pullFrom(r, [branch]).catch(() => {
          known = false; // whether it was opened is not known: its branch is kept (the next call finds it)
          return null;
        });
        // Only an open one is the one this opened (one closed before is not).
        if (p?.state === 'open') return p.ref;
      }
      if (created && known) await this.call(r, 'DELETE', `/git/refs/heads/${encodePath(branch)}`, undefined, undefined, [404, 422]).catch(() => undefined);
      throw err;
    }
  }

  /** The branches named `name` or `name-N` (what earlier calls for that name made), `name` first. */
  private async branchesNamed(r: RepoRef, name: string): Promise<string[]> {
    const a = await this.call(r, 'GET', `/git/matching-refs/heads/${encodePath(name)}`);
    const refs = Array.isArray(a.json) ? (a.json as { ref?: unknown }[]) : [];
    const prefix = 'refs/heads/';
    const names = refs.map((x) => (typeof x?.ref === 'string' && x.ref.startsWith(prefix) ? x.ref.slice(prefix.length) : '')).filter((b) => b === name || (b.startsWith(`${name}-`) && /^\d+$/.test(b.slice(name.length + 1))));
    const n = (b: string) => (b === name ? 1 : Number(b.slice(name.length + 1)));
    return names.sort((a, b) => n(a) - n(b));
  }

  /** The pull request opened from one of `branches` (any state) and its state (bestPull). */
  private async pullFrom(r: RepoRef, branches: readonly string[]): Promise<PulledRef | null> {
    return bestPull(await this.pullsFrom(r, branches));
  }

  /** The pull requests from each of `branches`. */
  private async pullsFrom(r: RepoRef, branches: readonly string[], state: 'all' | 'open' = 'all'): Promise<Map<string, GhPull[]>> {
    const found = new Map<string, GhPull[]>();
    for (const branch of branches) {
      const a = await this.call(r, 'GET', `/pulls?head=${encodeURIComponent(`${r.owner}:${branch}`)}&state=${state}`);
      found.set(branch, Array.isArray(a.json) ? (a.json as GhPull[]) : []);
    }
    return found;
  }

  /**
   * Commits the file on the branch, unless the branch has it already (a branch an earlier call
   * left). A PUT whose answer did not come (a 5xx, no answer) may have been carried out: the
   * file is read again and written again only when it is not what was sent, with the sha it has
   * now, instead of repeating a PUT with a sha that is no longer it.
   */
  private async putFile(r: RepoRef, branch: string, path: string, content: string, message: string, known?: Content | null): Promise<void> {
    let existing = known !== undefined ? known : await this.contents(r, branch, path);
    const written = () => !!existing && existing.encoding !== 'none' && decode(existing.content) === content;
    if (written()) return;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.call(r, 'PUT', `/contents/${encodePath(path)}`, { message, content: Buffer.from(content, 'utf8').toString('base64'), branch, ...(existing ? { sha: existing.sha } : {}) }, undefined, [], true);
        return;
      } catch (err) {
        if (!(err instanceof NoAnswerError) || attempt >= this.attempts) throw err;
      }
      await sleep(this.backoffMs * 2 ** (attempt - 1));
      existing = await this.contents(r, branch, path);
      if (written()) return; // it was written
    }
  }

  async pullRequestState(repo: RepoRef, number: number): Promise<PullRequestStatus> {
    const a = await this.call(repo, 'GET', `/pulls/${number}`, undefined, `pull request #${number}`);
    const p = a.json as GhPull;
    if (p.merged === true) return { state: 'merged', mergeCommitSha: p.merge_commit_sha ?? null };
    return p.state === 'closed' ? { state: 'closed' } : { state: 'open' };
  }

  /**
   * GitHub answers 404 alike for a missing file, folder, branch or repository: null only when
   * the repository, the branch (a ref that is not a commit sha) and the file's folder are
   * there; otherwise a CodeHostNotFoundError naming which is missing.
   */
  async readFile(repo: RepoRef, ref: string, path: string): Promise<string | null> {
    const c = await this.contents(repo, ref, path);
    if (!c) {
      await this.call(repo, 'GET', '', undefined, `repository ${slug(repo)}`);
      if (!/^[0-9a-f]{40}$/i.test(ref)) await this.call(repo, 'GET', `/git/ref/heads/${encodePath(ref)}`, undefined, `branch ${ref}`);
      const folder = path.split('/').slice(0, -1).join('/');
      if (folder) {
        const f = await this.call(repo, 'GET', `/contents/${encodePath(folder)}?ref=${encodeURIComponent(ref)}`, undefined, undefined, [404]);
        if (f.status === 404) throw new CodeHostNotFoundError(slug(repo), `folder ${folder} on ${ref}`);
        if (!Array.isArray(f.json)) throw new CodeHostError(slug(repo), 200, `${folder} on ${ref} is a file, not a folder`);
      }
      return null;
    }
    // Over 1 MB GitHub sends the sha but not the content ("encoding": "none"): not an empty file.
    if (c.encoding === 'none') throw new CodeHostError(slug(repo), 200, `${path} at ${ref} is over 1 MB: GitHub does not return its content`);
    return decode(c.content);
  }

  /**
   * True when this created the branch; false on a 422 "Reference already exists" (made meanwhile
   * by another call for the same name: used as it is). Any other 422 (a name GitHub refuses) is an error.
   */
  private async createBranch(r: RepoRef, name: string, sha: string): Promise<boolean> {
    const a = await this.call(r, 'POST', '/git/refs', { ref: `refs/heads/${name}`, sha }, undefined, [422]);
    if (a.status !== 422) return true;
    const why = ghMessage(a.json, '');
    if (!/reference already exists/i.test(why)) throw new CodeHostError(slug(r), 422, `POST /git/refs (branch ${name}): ${why}`);
    return false;
  }

  private async contents(r: RepoRef, ref: string, path: string): Promise<Content | null> {
    const a = await this.call(r, 'GET', `/contents/${encodePath(path)}?ref=${encodeURIComponent(ref)}`, undefined, undefined, [404]);
    if (a.status === 404) return null;
    if (Array.isArray(a.json)) throw new CodeHostError(slug(r), 200, `${path} is a folder, not a file`);
    const c = a.json as GhContent;
    return { sha: c.sha, content: c.content ?? '', encoding: c.encoding };
  }

  /**
   * One REST call with the retries. `what` names the missing thing on a 404 (else the
   * repository); statuses in `pass` are returned to the caller instead of thrown. `once`: a
   * 5xx or no answer is not tried again but thrown as NoAnswerError (the call may have been
   * carried out: the caller finds out); rate limits are still waited out.
   */
  private async call(r: RepoRef, method: string, path: string, body?: unknown, what?: string, pass: number[] = [], once = false): Promise<Answer> {
    const repo = slug(r);
    const url = `${this.base}/repos/${encodeURIComponent(r.owner)}/${encodeURIComponent(r.repo)}${path}`;
    let last = '';
    for (let attempt = 1; attempt <= this.attempts; attempt++) {
      let res: Response;
      let text: string;
      try {
        res = await fetch(url, {
          method,
          headers: {
            Authorization: `Bearer ${this.opts.token}`,
            Accept: 'application/vnd.github+json',
            'X-GitHub-Api-Version': API_VERSION,
            'User-Agent': 'neatroots',
            ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          // A host that accepts the connection and never answers must not hold the caller (a read of a suggestion) for minutes.
          signal: AbortSignal.timeout(this.timeoutMs),
        });
        text = await res.text();
      } catch (err) {
        // The host unreachable or silent: as a 5xx, bounded.
        const e = err as Error;
        last = `${method} ${url}: ${e.name === 'TimeoutError' ? `no answer in ${this.timeoutMs / 1000} s` : e.message}`;
        if (once) throw new NoAnswerError(repo, 0, last);
        if (attempt < this.attempts) await sleep(this.backoffMs * 2 ** (attempt - 1));
        continue;
      }
      const json = text ? safeJson(text) : null;
      if (res.ok || pass.includes(res.status)) return { status: res.status, json };
      const message = ghMessage(json, text);
      const wait = rateLimitWaitMs(res);
      if (wait !== null) {
        if (wait > this.maxWaitMs) throw new CodeHostError(repo, res.status, `rate limited for ${Math.ceil(wait / 1000)} s more (over the ${this.maxWaitMs / 1000} s this waits): ${message}`);
        last = `rate limited: ${message}`;
        if (attempt < this.attempts) await sleep(wait);
        continue;
      }
      if (res.status === 401 || res.status === 403) throw new CodeHostAuthError(repo, res.status, message);
      if (res.status === 404) throw new CodeHostNotFoundError(repo, what ?? `repository ${repo}`);
      if (res.status >= 500) {
        last = `HTTP ${res.status}: ${message}`;
        if (once) throw new NoAnswerError(repo, res.status, `${method} ${path}: ${message}`);
        if (attempt < this.attempts) await sleep(this.backoffMs * 2 ** (attempt - 1));
        continue;
      }
      throw new CodeHostError(repo, res.status, `${method} ${path}: ${message}`);
    }
    throw new CodeHostError(repo, 0, `gave up after ${this.attempts} tries: ${last}`);
  }
}

/**
 * How long GitHub asks to wait, or null when the answer is no rate limit: 429, or 403 with
 * retry-after or x-ratelimit-remaining 0 (a 403 without them is a refused token). Without a
 * usable retry-after or x-ratelimit-reset, a minute.
 */
export function rateLimitWaitMs(res: { status: number; headers: { get(name: string): string | null } }, nowMs = Date.now()): number | null {
  if (res.status !== 403 && res.status !== 429) return null;
  const after = res.headers.get('retry-after');
  if (after !== null && /^\d+$/.test(after.trim())) return Number(after) * 1000;
  const reset = res.headers.get('x-ratelimit-reset');
  if (res.headers.get('x-ratelimit-remaining') === '0') {
    if (reset !== null && /^\d+$/.test(reset.trim())) return Math.max(0, Number(reset) * 1000 - nowMs) + 250; // reset is whole seconds: a little past it
    return 60_000; // out of requests, no time given: a minute, as below
  }
  // A 429 with no hint: a minute, GitHub's documented default for secondary limits.
  return res.status === 429 ? 60_000 : null;
}

type PulledRef = { ref: PullRequestRef; state: 'open' | 'merged' | 'closed' };

/**
 * Of the pull requests from some branches, the suggestion's and its state: an open one first,
 * then merged (answered with `merged`), then closed; the latest.
 */
function bestPull(pulls: ReadonlyMap<string, readonly GhPull[]>): PulledRef | null {
  const found = [...pulls].flatMap(([branch, ps]) => ps.map((p) => ({ p, branch })));
  // GitHub's list of pulls has merged_at, not merged.
  const state = (p: GhPull) => (p.state === 'open' ? 'open' : p.merged === true || !!p.merged_at ? 'merged' : 'closed');
  const rank = { open: 0, merged: 1, closed: 2 } as const;
  const best = found.sort((a, b) => rank[state(a.p)] - rank[state(b.p)] || b.p.number - a.p.number)[0];
  if (!best) return null;
  const s = state(best.p);
  const ref: PullRequestRef = { number: best.p.number, url: best.p.html_url, branch: best.branch };
  if (s === 'merged') ref.merged = { mergeCommitSha: best.p.merge_commit_sha ?? null };
  return { ref, state: s };
}

/** A 5xx or no answer to a call that is not repeated blindly (it may have been carried out). */
class NoAnswerError extends CodeHostError {}

/** GitHub's message, with the messages of its `errors` (where a 422 says what was wrong). */
function ghMessage(json: unknown, text: string): string {
  const e = json as GhError | null;
  const m = typeof e?.message === 'string' ? e.message : text.slice(0, 200);
  const more = Array.isArray(e?.errors) ? e.errors.map((x) => (typeof x?.message === 'string' ? x.message : null)).filter((x): x is string => !!x) : [];
  return more.length ? `${m}: ${more.join('; ')}` : m;
}

function decode(base64: string): string {
  return Buffer.from(base64, 'base64').toString('utf8');
}

function slug(r: RepoRef): string {
  return `${r.owner}/${r.repo}`;
}

function encodePath(p: string): string {
  return p.split('/').map(encodeURIComponent).join('/');
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
