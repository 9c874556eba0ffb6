import { randomBytes } from 'node:crypto';
import { CodeHostChangedError, type CodeHost, type Db, type Jobs, type PullRequestRef, type RepoRef } from '@neatroots/ports';
import { freshness, REWRITE_VERSION, SUGGEST_VERSION, transitionForPullRequest, unifiedDiff, type SuggestionTransition } from '@neatroots/review-domain';
import {
  LineageRepo,
  PatternsRepo,
  SecretKeyError,
  SopError,
  SUGGESTION_STATUSES,
  SuggestionsRepo,
  WorkspaceRepo,
  type ListSuggestionsQuery,
  type PatternRecord,
  type SinceWritten,
  type SopFile,
  type SuggestionRecord,
  type SuggestionStatus,
  type SuggestionSummary,
  type SuggestionView,
} from '@neatroots/store';
import type { Lock } from '@neatroots/sop';
import type { SopWorkspaces } from '../sop/workspaces';
import { ReviewWrites } from '../review/writes';
import { releasedIn } from './fix';
import { SUGGEST_ATTEMPTS, SUGGEST_QUEUE, type SuggestJob } from './generate';
import { fileAt, issuesWith, procedurePath, ruleAtHead } from './head';
import { textFields } from './input';
import { hostForPullRequest } from '../github/pr-status';
import { followed } from './prs';

/** A suggestion's own branch: its pull request's (`name-N`: what versions before took when it existed). */
export function suggestionBranch(id: string): string {
  return `neatroots/suggestion-${id.replace(/^sug_/, '').toLowerCase().replace(/[^a-z0-9-]/g, '-')}`;
}

/** A workspace's code host (its GitHub connection), or null without one. */
export type CodeHostOfWorkspace = (workspace: string) => Promise<{ host: CodeHost; apiUrl: string; repo: RepoRef; branch: string; folder: string } | null>;

/** A pull request is looked at on read at most this often. */
export const PR_READ_INTERVAL_MS = 60_000;
/**
 * A read waits this long at most for its look at a pull request, then answers with the stored
 * state; the look goes on, and what it finds is there for the next read.
 */
export const PR_READ_WAIT_MS = 5_000;
/**
 * A stop waits this long at most for the GitHub calls suggestions left running in the background
 * (a look a read stopped waiting for, leftover branches being deleted), then says which it cut short.
 */
export const STOP_WAIT_MS = 5_000;
/**
 * An apply's claim on its suggestion lapses after this long (the apply crashed or was stopped):
 * far longer than an apply takes, GitHub's rate-limit waits and retries included.
 */
export const APPLY_CLAIM_LAPSE_MS = 15 * 60_000;
const REWRITTEN_NOTE = 'Rewritten against the current text.';
const SUGGESTS: readonly string[] = ['real', 'acceptable', 'sop_wrong'];
/** pr_open too: dismissing it stops following its pull request (e.g. once the connection is gone); the pull request stays on GitHub. */
const DISMISSABLE: readonly SuggestionStatus[] = ['generating', 'proposed', 'failed', 'pr_open'];

/**
 * Suggestions: made from a pattern's verdict (queued as sopops_suggest), read with their
 * freshness computed against head now, applied as a pull request (with a GitHub connection) or
 * a draft at head, rewritten against the file as it is now, dismissed. A pull request is
 * followed on read (at most once a minute) and by the sopops_pr_status job.
 */
export class Suggestions {
  readonly repo = new SuggestionsRepo();
  private readonly patterns = new PatternsRepo();
  private readonly lineage = new LineageRepo();
  private readonly head: WorkspaceRepo;
  /** The GitHub calls running in the background, each with what it is (a stop waits for them, or names them). */
  private readonly background = new Set<{ what: string; done: Promise<unknown> }>();
  private stopped = false;

  constructor(
    private readonly db: Db,
    private readonly jobs: Jobs,
    private readonly workspaces: Pick<SopWorkspaces, 'saveFile'>,
    private readonly codeHostOf: CodeHostOfWorkspace,
    private readonly writes: ReviewWrites = new ReviewWrites(),
    private readonly now: () => number = Date.now,
    /** Where a stop says what it cut short. */
    private readonly log?: { warn(msg: string): void },
  ) {
    this.head = new WorkspaceRepo(db);
  }

  /**
   * Waits, at most `waitMs`, for the GitHub calls running in the background (before the database
   * closes), and says which it cut short: what they would have stored is not, and is found again
   * later (a pull request looked at the next read after a minute or by sopops_pr_status).
   */
  async close(waitMs = STOP_WAIT_MS): Promise<void> {
    this.stopped = true;
    if (!this.background.size) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.background].map((b) => b.done)), new Promise<void>((r) => (timer = setTimeout(r, waitMs)))]);
    clearTimeout(timer);
    const left = [...this.background].map((b) => b.what);
    if (left.length) {
      this.log?.warn(
        `shutdown: ${left.length} GitHub call${left.length === 1 ? '' : 's'} of suggestions still running after ${waitMs / 1000} s, cut short: ${left.join('; ')} (a pull request is looked at again at the next read after a minute, or by the sopops_pr_status pass)`,
      );
    }
  }

  /** True once a stop began: a sopops_pr_status pass takes no pull request more. */
  get stopping(): boolean {
    return this.stopped;
  }

  /**
   * A sopops_pr_status pass, run as a background call a stop waits for or names; `at` says which
   * pull request it is at (named if the stop cuts it short).
   */
  pass<T>(run: (at: (what: string) => void) => Promise<T>): Promise<T> {
    const entry = { what: 'the sopops_pr_status pass', done: Promise.resolve() as Promise<unknown> };
    const p = run((what) => (entry.what = `the sopops_pr_status pass, at ${what}`));
    entry.done = p;
    this.background.add(entry);
    const gone = () => void this.background.delete(entry);
    p.then(gone, gone);
    return p;
  }

  /** A sopops_pr_status pass that stopped taking pull requests at a stop says how far it got. */
  passStopped(done: number, total: number): void {
    this.log?.warn(`shutdown: the sopops_pr_status pass stopped after ${done} of ${total} open pull requests; the others are looked at by the next pass (or a read)`);
  }

  private track(what: string, p: Promise<unknown>): void {
    const entry = { what, done: p };
    this.background.add(entry);
    void p.finally(() => this.background.delete(entry));
  }

  /** POST /patterns/{id}/suggest: a suggestion for the pattern's verdict, generating (409 unless real, acceptable or sop_wrong). */
  async suggest(workspace: string, patternId: string, raw: unknown): Promise<SuggestionView> {
    const input = textFields(raw, ['reviewer']);
    const pattern = await this.patterns.pattern(this.db, workspace, patternId);
    if (!pattern) throw new SopError(404, 'not_found', `no pattern ${patternId} in workspace ${workspace}`);
    const verdict = (await this.writes.contexts(this.db, [pattern])).get(pattern.id)?.verdict ?? null;
    if (!verdict || !SUGGESTS.includes(verdict.verdict)) {
      throw new SopError(409, 'no_suggestion_for_verdict', `pattern ${patternId} ${verdict ? `has the verdict ${verdict.verdict}` : 'has no verdict'}: suggestions answer a real, acceptable or sop_wrong verdict`);
    }
    const s = await this.create(workspace, pattern, { verdict: verdict.verdict as SuggestionRecord['verdict'], note: verdict.note, created_at: verdict.created_at }, { reviewer: input.reviewer ?? null });
    return this.view(s);
  }

  /** After a verdict with suggest: true (the verdict is saved first; this only queues). */
  async suggestForVerdict(workspace: string, patternId: string, reviewer: string | null): Promise<SuggestionView> {
    return this.suggest(workspace, patternId, reviewer ? { reviewer } : {});
  }

  async list(workspace: string, q: ListSuggestionsQuery): Promise<{ items: SuggestionSummary[] }> {
    for (const s of q.status ?? []) if (!(SUGGESTION_STATUSES as readonly string[]).includes(s)) throw new SopError(400, 'invalid_query', `status must be one of ${SUGGESTION_STATUSES.join(', ')}`);
    const rows = await this.repo.list(this.db, workspace, { status: q.status, pattern: q.pattern, limit: q.limit, before: q.before });
    const head = await this.head.headFiles(workspace);
    const items = await Promise.all(rows.map((r) => this.summary(r, head)));
    return { items };
  }

  /** The latest suggestion of each pattern (the review queue's item.suggestion). */
  async latestOf(workspace: string, patternIds: readonly string[]): Promise<Map<string, SuggestionSummary>> {
    const out = new Map<string, SuggestionSummary>();
    if (!patternIds.length) return out;
    const head = await this.head.headFiles(workspace);
    for (const r of await this.repo.ofPatterns(this.db, patternIds)) if (!out.has(r.pattern_id)) out.set(r.pattern_id, await this.summary(r, head));
    return out;
  }

  /** A pattern's suggestions, newest first (the pattern page). */
  async ofPattern(workspace: string, patternId: string): Promise<SuggestionSummary[]> {
    const head = await this.head.headFiles(workspace);
    return Promise.all((await this.repo.ofPatterns(this.db, [patternId])).map((r) => this.summary(r, head)));
  }

  async get(workspace: string, id: string): Promise<SuggestionView> {
    const s = await this.must(workspace, id);
    if (await this.followIfStale(s)) return this.view(await this.must(workspace, id));
    return this.view(s);
  }

  /**
   * The pattern's open pull requests looked at, each at most once a PR_READ_INTERVAL_MS (the
   * pattern page reads them: its review state follows a merge at once, not at the next cron).
   */
  async followPatternPullRequests(workspace: string, patternId: string): Promise<void> {
    const open = (await this.repo.ofPatterns(this.db, [patternId])).filter((r) => r.workspace === workspace && r.status === 'pr_open');
    await Promise.all(open.map((r) => this.followIfStale(r)));
  }

  /**
   * Follows an open pull request not looked at for a while; true when it looked. The look is
   * claimed first (pr_checked_at set, where it is still stale), so of the readers at one moment
   * one asks GitHub and the others answer at once; and the reader waits for it at most
   * PR_READ_WAIT_MS, so a GitHub that does not answer (4 tries of 10 s) holds no read.
   */
  private async followIfStale(s: SuggestionRecord): Promise<boolean> {
    if (s.status !== 'pr_open' || (s.pr_checked_at && this.now() - Date.parse(s.pr_checked_at) < PR_READ_INTERVAL_MS)) return false;
    const claimed = await this.db.query(
      `UPDATE sop_suggestions SET pr_checked_at = clock_timestamp()
        WHERE id = $1 AND status = 'pr_open' AND (pr_checked_at IS NULL OR pr_checked_at < clock_timestamp() - $2 * interval '1 millisecond') RETURNING id`,
      [s.id, PR_READ_INTERVAL_MS],
    );
    if (!claimed.rows.length) return false;
    // GitHub away or the token refused: the reader sees the last known state and why it is not
    // newer, and the next reads within the minute do not wait on GitHub again.
    const look = this.followOne(s)
      .catch((err: Error) => this.repo.set(this.db, s.id, { error: `the pull request could not be read: ${err.message}`, pr_checked_at: 'now' }, ['pr_open']))
      .catch(() => undefined); // the database gone meanwhile (a stop that cut it short, and said so)
    this.track(`the look at pull request #${s.pr_number}${s.pr_repository ? ` in ${s.pr_repository}` : ''} of suggestion ${s.id} (workspace ${s.workspace})`, look);
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, PR_READ_WAIT_MS);
      timer.unref();
    });
    await Promise.race([look, waited]);
    clearTimeout(timer);
    return true;
  }

  /** POST .../apply: a pull request with a repo connection, else a draft at head; the merged file when head changed since. */
  async apply(workspace: string, id: string, raw: unknown): Promise<SuggestionView> {
    const input = textFields(raw, ['reviewer']);
    const s = await this.must(workspace, id);
    if (s.status !== 'proposed') throw new SopError(409, 'not_proposed', `suggestion ${id} is ${s.status}: only a proposed suggestion can be applied`);
    // One apply at a time: the row is claimed before anything is written or GitHub is called, so
    // a second apply (another reviewer, a client retrying after its deadline) opens nothing.
    const claim = randomBytes(12).toString('base64url');
    if (!(await this.repo.claimApply(this.db, s.id, claim, APPLY_CLAIM_LAPSE_MS))) throw await this.notProposed(workspace, id, 'applied');
    try {
      return await this.applyClaimed(workspace, s, input.reviewer ?? s.reviewer, claim);
    } catch (err) {
      // Its error says why the latest apply failed (a conflict after a refused token: the conflict), not an earlier failure.
      if (err instanceof SopError && err.status === 409 && err.code !== 'not_proposed') {
        await this.repo.set(this.db, s.id, { error: err.message.replace(`suggestion ${id} stays proposed: `, '') }, ['proposed'], { claim });
      }
      throw err;
    } finally {
      await this.repo.set(this.db, s.id, { apply_claim: null, apply_claimed_at: null }, undefined, { claim });
    }
  }

  /** Why a suggestion cannot be applied, rewritten or dismissed now: not proposed, or an apply under way. */
  private async notProposed(workspace: string, id: string, what: string): Promise<SopError> {
    const now = await this.must(workspace, id);
    if (now.status !== 'proposed') return new SopError(409, 'not_proposed', `suggestion ${id} is ${now.status}: only a proposed suggestion can be ${what}`);
    return new SopError(409, 'not_proposed', `suggestion ${id} is being applied (since ${now.apply_claimed_at}): it cannot be ${what} now; read it again in a moment`);
  }

  private async applyClaimed(workspace: string, s: SuggestionRecord, reviewer: string | null, claim: string): Promise<SuggestionView> {
    const id = s.id;
    const pattern = await this.patterns.pattern(this.db, workspace, s.pattern_id);
    if (!pattern) throw new SopError(404, 'not_found', `the pattern of suggestion ${id} is gone`);
    await this.answersLatestVerdict(s, pattern);
    const head = await this.head.headFiles(workspace);
    const since = this.sinceWritten(s, head);
    if (since.state === 'conflict') throw new SopError(409, 'conflict', `suggestion ${id} conflicts with the file as it is now: ${since.reason}`, since.issues.length ? since.issues : undefined);
    const text = since.state === 'merges' ? since.merged_text! : s.new_text!;
    const mergedInto = since.state === 'merges' ? since.head_version : null;
    let c: Awaited<ReturnType<CodeHostOfWorkspace>>;
    try {
      c = await this.codeHostOf(workspace);
    } catch (err) {
      // A token stored under another NEATROOTS_SECRET_KEY: the connection is there, its token cannot be read.
      if (!(err instanceof SecretKeyError)) throw err;
      throw new SopError(409, 'pull_request_failed', `suggestion ${id} stays proposed: the pull request could not be opened: ${err.message}`);
    }
    if (c) {
      const path = c.folder ? `${c.folder}/${s.procedure_id}.md` : `${s.procedure_id}.md`;
      const where = `${path} on ${c.branch} of ${c.repo.owner}/${c.repo.repo}`;
      const refused = (err: Error): SopError =>
        err instanceof CodeHostChangedError
          ? new SopError(409, 'changed_on_code_host', `suggestion ${id} stays proposed: ${err.message}`)
          : new SopError(409, 'pull_request_failed', `suggestion ${id} stays proposed: the pull request could not be opened: ${err.message}`);
      // The pull request carries the suggestion's own edit onto the file as the branch has it:
      // edits made there since the workspace last had it are not undone, and the workspace's
      // edits not there yet are not brought in with it.
      let base: string | null;
      try {
        base = await c.host.readFile(c.repo, c.branch, path);
      } catch (err) {
        throw refused(err as Error);
      }
      let content = text;
      if (base !== null) {
        const onBase = freshness({ path, old_text: s.old_text, new_text: s.new_text ?? s.old_text }, base, (merged) => issuesWith(head, s.path, merged, s.procedure_id));
        if (onBase.state === 'conflict') {
          throw new SopError(409, 'conflict', `suggestion ${id} conflicts with ${where}: ${onBase.reason} (pull the repository into the workspace first)`, onBase.issues.length ? onBase.issues : undefined);
        }
        content = onBase.state === 'merges' ? onBase.merged_text! : (s.new_text ?? s.old_text);
      }
      let pr: PullRequestRef;
      try {
        pr = await c.host.openPullRequest({
          repo: c.repo,
          base: c.branch,
          branch: suggestionBranch(s.id),
          path,
          content,
          baseContent: base,
          message: `sopops: ${s.verdict} verdict on "${s.rule_text}"`,
          title: `sopops suggestion: ${s.procedure_id}`,
          body: `${s.rationale ?? ''}\n\nSuggested by sopops (suggestion ${s.id}) for a ${s.verdict} verdict${s.verdict_note ? `: ${s.verdict_note}` : ''}.`,
        });
      } catch (err) {
        throw refused(err as Error);
      }
      // merged_into_version is head's version only when the pull request's file is made from head's (a file new to the repository).
      const opened = { status: 'pr_open', pr_url: pr.url, pr_number: pr.number, pr_branch: pr.branch, pr_repository: `${c.repo.owner}/${c.repo.repo}`, pr_api_url: c.apiUrl, pr_opened_at: 'now', pr_checked_at: 'now', applied_text: content, merged_into_version: base === null ? mergedInto : null, reviewer, error: null } as const;
      // One an earlier apply opened (its answer lost) and merged since: recorded merged at once.
      const merged = pr.merged ? ({ ...opened, status: 'merged', merged_at: 'now', merge_commit_sha: pr.merged.mergeCommitSha } as const) : null;
      if (!(await this.repo.set(this.db, s.id, merged ?? opened, ['proposed'], { claim }))) {
        // Only when this apply outlived its claim and another took it over.
        throw new SopError(409, 'not_proposed', `suggestion ${id} changed while it was applied (its claim lapsed); the pull request ${pr.url} was opened`);
      }
    } else {
      // Saved only over the version the text was made from: an edit saved at head meanwhile
      // (another suggestion applied to the file) is merged with again, never overwritten.
      let draft = { text, mergedInto, version: since.head_version };
      for (let attempt = 1; ; attempt++) {
        try {
          await this.workspaces.saveFile(workspace, s.path, draft.text, { ifVersion: draft.version });
          break;
        } catch (err) {
          if (!(err instanceof SopError && err.code === 'head_changed')) throw err;
          if (attempt >= 3) throw new SopError(409, 'conflict', `suggestion ${id} stays proposed: ${s.path} kept changing at head while it was applied; apply again`);
        }
        const now = this.sinceWritten(s, await this.head.headFiles(workspace));
        if (now.state === 'conflict') throw new SopError(409, 'conflict', `suggestion ${id} conflicts with the file as it is now: ${now.reason}`, now.issues.length ? now.issues : undefined);
        draft = { text: now.state === 'merges' ? now.merged_text! : s.new_text!, mergedInto: now.state === 'merges' ? now.head_version : null, version: now.head_version };
      }
      if (!(await this.repo.set(this.db, s.id, { status: 'applied', applied_at: 'now', applied_text: draft.text, merged_into_version: draft.mergedInto, reviewer, error: null }, ['proposed'], { claim }))) {
        throw new SopError(409, 'not_proposed', `suggestion ${id} changed while it was applied`);
      }
    }
    return this.view(await this.must(workspace, id));
  }

  /** POST .../rewrite: a new suggestion against the file as it is now (suggest-2); the old one dismissed. */
  async rewrite(workspace: string, id: string, raw: unknown): Promise<SuggestionView> {
    const input = textFields(raw, ['reviewer']);
    const old = await this.must(workspace, id);
    if (old.status !== 'proposed') throw new SopError(409, 'not_proposed', `suggestion ${id} is ${old.status}: only a proposed suggestion can be rewritten`);
    if (this.claimed(old)) throw await this.notProposed(workspace, id, 'rewritten');
    const pattern = await this.patterns.pattern(this.db, workspace, old.pattern_id);
    if (!pattern) throw new SopError(404, 'not_found', `the pattern of suggestion ${id} is gone`);
    await this.answersLatestVerdict(old, pattern);
    const now = fileAt(await this.head.headFiles(workspace), old.path);
    if (!now) throw new SopError(409, 'not_at_head', `${old.path} is no longer at head: there is nothing to rewrite against`);
    const changes = unifiedDiff(old.old_text, now.text, { from: `a/${old.path}`, to: `b/${old.path}` });
    const fresh = await this.create(
      workspace,
      pattern,
      { verdict: old.verdict, note: old.verdict_note, created_at: old.verdict_at },
      { reviewer: input.reviewer ?? old.reviewer, rewrite_of: old.id, changes_since: changes, prompt_version: REWRITE_VERSION },
    );
    const dismissed = await this.repo.set(this.db, old.id, { status: 'dismissed', note: REWRITTEN_NOTE, rewritten_as: fresh.id, dismissed_at: 'now' }, ['proposed'], { unclaimedMs: APPLY_CLAIM_LAPSE_MS });
    if (!dismissed) {
      await this.repo.set(this.db, fresh.id, { status: 'dismissed', note: `suggestion ${id} changed while it was rewritten`, dismissed_at: 'now' });
      throw new SopError(409, 'not_proposed', `suggestion ${id} changed while it was rewritten`);
    }
    this.deleteLeftoverBranches(old);
    return this.view(await this.must(workspace, fresh.id));
  }

  async dismiss(workspace: string, id: string, raw: unknown): Promise<SuggestionView> {
    const input = textFields(raw, ['note', 'reviewer']);
    const s = await this.must(workspace, id);
    if (!DISMISSABLE.includes(s.status)) throw new SopError(409, 'not_dismissable', `suggestion ${id} is ${s.status}: only a generating, proposed, failed or pr_open suggestion can be dismissed`);
    if (this.claimed(s)) throw new SopError(409, 'not_dismissable', `suggestion ${id} is being applied (since ${s.apply_claimed_at}): read it again in a moment`);
    const ok = await this.repo.set(this.db, s.id, { status: 'dismissed', note: input.note ?? null, reviewer: input.reviewer ?? s.reviewer, dismissed_at: 'now' }, DISMISSABLE, { unclaimedMs: APPLY_CLAIM_LAPSE_MS });
    if (!ok) throw new SopError(409, 'not_dismissable', `suggestion ${id} changed while it was dismissed`);
    if (s.status === 'proposed' || s.status === 'pr_open') this.deleteLeftoverBranches(s);
    return this.view(await this.must(workspace, id));
  }

  /**
   * A 409 verdict_changed unless the suggestion answers the pattern's latest verdict. A rewrite
   * or an apply after a newer verdict would edit the procedure against the reviewer's latest
   * judgement, and not count toward that verdict's fix tracking (only suggestions made since it
   * count) or count toward it while editing for the old one.
   */
  private async answersLatestVerdict(s: SuggestionRecord, pattern: PatternRecord): Promise<void> {
    const latest = (await this.writes.contexts(this.db, [pattern])).get(pattern.id)?.verdict ?? null;
    if (latest && Date.parse(latest.created_at) === Date.parse(s.verdict_at)) return;
    throw new SopError(409, 'verdict_changed', `suggestion ${s.id} answers the ${s.verdict} verdict of ${s.verdict_at}; pattern ${pattern.id} ${latest ? `has a newer verdict (${latest.verdict}, ${latest.created_at})` : 'has no verdict now'}: ask for a new suggestion for it instead (POST /patterns/${pattern.id}/suggest)`);
  }

  /**
   * Settles a pull request that was merged or closed (idempotent: only an open one moves); then
   * the suggestion's leftover branches go (deleteLeftoverBranches).
   */
  async settle(workspace: string, id: string, t: NonNullable<SuggestionTransition>): Promise<void> {
    const moved =
      t.to === 'merged'
        ? await this.repo.set(this.db, id, { status: 'merged', merged_at: 'now', merge_commit_sha: t.mergeCommitSha, pr_checked_at: 'now', error: null }, ['pr_open'])
        : await this.repo.set(this.db, id, { status: 'dismissed', note: t.note, dismissed_at: 'now', pr_checked_at: 'now', error: null }, ['pr_open']);
    const s = moved ? await this.repo.get(this.db, workspace, id) : null;
    if (s) this.deleteLeftoverBranches(s);
  }

  /**
   * In the background, best effort: the `name-N` branches of the suggestion's own name that
   * versions before this one left on GitHub (one a failed apply) and that have no pull request
   * open, but its pull request's own branch. In the repository its pull request was opened in,
   * else the connection's; nothing without a connection.
   */
  private deleteLeftoverBranches(s: SuggestionRecord): void {
    const run = async () => {
      const conn = await this.codeHostOf(s.workspace);
      const c = s.pr_number !== null ? hostForPullRequest(conn, followed(s)) : conn;
      if (c) await c.host.deleteLeftoverBranches(c.repo, suggestionBranch(s.id), s.pr_branch);
    };
    // A branch that could not be deleted stays, as before; nothing depends on it.
    this.track(`deleting the leftover branches of suggestion ${s.id} (workspace ${s.workspace})`, run().catch(() => undefined));
  }

  /** Looks at one suggestion's pull request now. */
  async followOne(s: SuggestionRecord): Promise<void> {
    if (s.pr_number === null) return;
    // In the repository it was opened in, whatever the connection names now.
    const c = hostForPullRequest(await this.codeHostOf(s.workspace), followed(s));
    const t = transitionForPullRequest(await c.host.pullRequestState(c.repo, s.pr_number));
    if (t) await this.settle(s.workspace, s.id, t);
    else await this.repo.set(this.db, s.id, { pr_checked_at: 'now', error: null }, ['pr_open']);
  }

  private async create(
    workspace: string,
    pattern: PatternRecord,
    verdict: { verdict: SuggestionRecord['verdict']; note: string | null; created_at: string },
    more: { reviewer: string | null; rewrite_of?: string; changes_since?: string; prompt_version?: string },
  ): Promise<SuggestionRecord> {
    const path = procedurePath(pattern.procedure_id);
    const head = await this.head.headFiles(workspace);
    const file = fileAt(head, path);
    if (!file) throw new SopError(409, 'not_at_head', `${path} is not at head: a suggestion edits the procedure's file at head (push the procedures first)`);
    const rule = await this.ruleAtHead(head, pattern);
    const s = await this.repo.insert(this.db, {
      workspace,
      pattern_id: pattern.id,
      procedure_id: pattern.procedure_id,
      path,
      rule_id: rule.rule_id,
      rule_text: rule.text,
      verdict: verdict.verdict,
      verdict_note: verdict.note,
      verdict_at: verdict.created_at,
      prompt_version: more.prompt_version ?? SUGGEST_VERSION,
      base_version: file.version,
      old_text: file.text,
      changes_since: more.changes_since ?? null,
      rewrite_of: more.rewrite_of,
      reviewer: more.reviewer,
    });
    await this.jobs.add<SuggestJob>(SUGGEST_QUEUE, { workspace, id: s.id }, { jobId: `suggest-${s.id}`, attempts: SUGGEST_ATTEMPTS, backoffMs: 2000 });
    return s;
  }

  /** The rule as it reads at head, following its lineage (head.ts ruleAtHead). */
  private async ruleAtHead(head: readonly SopFile[], p: PatternRecord): Promise<{ rule_id: string; text: string }> {
    const links = (await this.lineage.rows(this.db, p.workspace)).filter((r) => r.procedure_id === p.procedure_id);
    const live = await this.head.release<Lock>(p.workspace, 'live');
    const rules = live?.lock.procedures?.find((x) => x.procedure_id === p.procedure_id)?.rules ?? null;
    const rule = ruleAtHead(head, p, links, rules);
    return { rule_id: rule.rule_id, text: rule.text };
  }

  private sinceWritten(s: SuggestionRecord, head: readonly SopFile[]): SinceWritten {
    const now = fileAt(head, s.path);
    const f = freshness({ path: s.path, old_text: s.old_text, new_text: s.new_text ?? s.old_text }, now?.text ?? null, (merged) => issuesWith(head, s.path, merged, s.procedure_id));
    return { state: f.state, head_version: now ? now.version : null, changes: f.changes, merged_text: f.merged_text, conflicts: f.conflicts, issues: f.issues, reason: f.reason };
  }

  private async summary(s: SuggestionRecord, head: readonly SopFile[]): Promise<SuggestionSummary> {
    const released = await releasedIn(this.db, s);
    return {
      id: s.id,
      pattern_id: s.pattern_id,
      procedure_id: s.procedure_id,
      path: s.path,
      rule_id: s.rule_id,
      verdict: s.verdict,
      status: s.status,
      prompt_version: s.prompt_version,
      model: s.model,
      rationale: s.rationale,
      pr_url: s.pr_url,
      error: s.error,
      note: s.note,
      reviewer: s.reviewer,
      rewrite_of: s.rewrite_of,
      rewritten_as: s.rewritten_as,
      created_at: s.created_at,
      applied_at: s.applied_at,
      pr_opened_at: s.pr_opened_at,
      merged_at: s.merged_at,
      merge_commit_sha: s.merge_commit_sha,
      dismissed_at: s.dismissed_at,
      released_in: released ? { id: released.id, number: released.number } : null,
      released_at: released?.created_at ?? null,
      freshness: s.status === 'proposed' ? this.sinceWritten(s, head).state : null,
    };
  }

  private async view(s: SuggestionRecord): Promise<SuggestionView> {
    const head = await this.head.headFiles(s.workspace);
    const p = await this.patterns.pattern(this.db, s.workspace, s.pattern_id);
    return {
      ...(await this.summary(s, head)),
      pattern: p ? { id: p.id, name: p.name, kind: p.kind, procedure_name: p.procedure_name, rule_text: p.rule_text } : null,
      verdict_note: s.verdict_note,
      base_version: s.base_version,
      old_text: s.old_text,
      new_text: s.new_text,
      plan: s.plan,
      changes_since: s.changes_since,
      merged_into_version: s.merged_into_version,
      since_written: s.status === 'proposed' ? this.sinceWritten(s, head) : null,
    };
  }

  /** An apply holds it (a claim that has not lapsed). */
  private claimed(s: SuggestionRecord): boolean {
    return s.apply_claim !== null && !!s.apply_claimed_at && this.now() - Date.parse(s.apply_claimed_at) < APPLY_CLAIM_LAPSE_MS;
  }

  private async must(workspace: string, id: string): Promise<SuggestionRecord> {
    const s = await this.repo.get(this.db, workspace, id);
    if (!s) throw new SopError(404, 'not_found', `no suggestion ${id} in workspace ${workspace}`);
    return s;
  }
}
