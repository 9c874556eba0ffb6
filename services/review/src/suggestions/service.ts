import type { Db, Jobs } from '@neatroots/ports';
import { SopError, type ReviewSopQueries, type SuggestionQueries, type SuggestionStatus, type VerdictInput } from '@neatroots/store';
import type { GitHubConnections } from '../github/connections';
import type { GatewayOf } from '../review/namer';
import type { ReviewWrites } from '../review/writes';
import type { SopWorkspaces } from '../sop/workspaces';
import { SuggestionGenerator, SUGGEST_ATTEMPTS, SUGGEST_QUEUE, type SuggestJob } from './generate';
import { followPullRequestsEvery } from './prs';
import { Suggestions } from './suggestions';

export interface SuggestionOptions {
  db: Db;
  jobs: Jobs;
  /** The question service's decisions: SuggestEdit is asked of the reasoning model through it. */
  gateway?: GatewayOf;
  /** Where a draft is saved (head, compiled with sopc). */
  workspaces: Pick<SopWorkspaces, 'saveFile'>;
  /** Workspaces' GitHub connections (none: apply saves drafts, the connection endpoints answer 404). */
  github?: GitHubConnections | null;
  /** SOPOPS_PR_STATUS_CRON (default every 15 minutes); null: no schedule (tests). */
  prStatusCron?: string | null;
  /** Where a stop says which GitHub calls it cut short. */
  log?: { warn(msg: string): void };
  /** How long a stop waits for the GitHub calls running in the background (default STOP_WAIT_MS, 5 s). */
  stopWaitMs?: number;
}

/** What the suggestions add to the review side's queries, and what they fill in of the rest. */
type Others = Omit<ReviewSopQueries, keyof SuggestionQueries>;

const SUGGESTS = new Set(['real', 'acceptable', 'sop_wrong']);

/**
 * Suggestions served with the rest of the review side: the endpoints, the sopops_suggest job,
 * the sopops_pr_status schedule; the review queue's latest suggestion per item, the pattern
 * page's suggestions, and the verdict's suggest: true.
 */
export class SuggestionService {
  readonly suggestions: Suggestions;
  readonly generator: SuggestionGenerator;

  constructor(private readonly opts: SuggestionOptions, writes: ReviewWrites) {
    const codeHostOf = async (ws: string) => (opts.github ? opts.github.codeHost(ws) : null);
    this.suggestions = new Suggestions(opts.db, opts.jobs, opts.workspaces, codeHostOf, writes, undefined, opts.log);
    this.generator = new SuggestionGenerator(opts.db, opts.gateway ?? (async () => null));
  }

  /** The job's handler, the PR schedule, and suggestions a stop left generating queued again. */
  async start(): Promise<void> {
    await this.opts.jobs.work<SuggestJob>(SUGGEST_QUEUE, (job, info) => this.generator.run(job, info));
    if (this.opts.github && this.opts.prStatusCron) {
      const github = this.opts.github;
      await followPullRequestsEvery(this.opts.jobs, this.opts.prStatusCron, this.opts.db, this.suggestions, (ws) => github.codeHost(ws));
    }
    for (const s of await this.suggestions.repo.generating(this.opts.db)) await this.opts.jobs.add<SuggestJob>(SUGGEST_QUEUE, s, { jobId: `suggest-${s.id}`, attempts: SUGGEST_ATTEMPTS, backoffMs: 2000 });
  }

  /** Before the jobs and the database close: the GitHub calls left running waited for, at most stopWaitMs. */
  close(): Promise<void> {
    return this.suggestions.close(this.opts.stopWaitMs);
  }

  /** The review side's queries with suggestions in. */
  around(q: Others): ReviewSopQueries {
    const s = this.suggestions;
    const noGitHub = (): never => {
      throw new SopError(404, 'not_found', 'GitHub connections are not served by this review service');
    };
    const github = this.opts.github;
    return {
      ...q,
      reviewQueue: async (ws, query) => {
        const view = await q.reviewQueue(ws, query);
        const latest = await s.latestOf(ws, view.items.map((i) => i.pattern_id));
        return { ...view, items: view.items.map((i) => ({ ...i, suggestion: latest.get(i.pattern_id) ?? null })) };
      },
      // Its open pull requests looked at first: a merge seen now moves the review state in this answer.
      pattern: async (ws, id, query) => {
        await s.followPatternPullRequests(ws, id);
        return { ...(await q.pattern(ws, id, query)), suggestions: await s.ofPattern(ws, id) };
      },
      giveVerdict: async (ws, id, input) => {
        const view = await q.giveVerdict(ws, id, input);
        if (!(input as VerdictInput | undefined)?.suggest) return view;
        if (!SUGGESTS.has(view.verdict)) return { ...view, suggestion_note: `a ${view.verdict} verdict has no suggestion: nothing was queued` };
        try {
          return { ...view, suggestion: await s.suggestForVerdict(ws, id, view.reviewer) };
        } catch (err) {
          // The verdict is saved either way; say why no suggestion was queued.
          return { ...view, suggestion_note: `no suggestion was queued: ${(err as Error).message}` };
        }
      },
      suggest: (ws, id, input) => s.suggest(ws, id, input),
      listSuggestions: (ws, query) => s.list(ws, { ...query, status: query.status as SuggestionStatus[] | undefined }),
      getSuggestion: (ws, id) => s.get(ws, id),
      applySuggestion: (ws, id, input) => s.apply(ws, id, input),
      rewriteSuggestion: (ws, id, input) => s.rewrite(ws, id, input),
      dismissSuggestion: (ws, id, input) => s.dismiss(ws, id, input),
      getRepoConnection: (ws) => (github ? github.get(ws) : noGitHub()),
      putRepoConnection: (ws, body) => (github ? github.put(ws, body) : noGitHub()),
      deleteRepoConnection: (ws) => (github ? github.delete(ws) : noGitHub()),
    };
  }
}
