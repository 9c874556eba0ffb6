import type { Db, Jobs } from '@neatroots/ports';
import type { DecisionSettings } from '@neatroots/sop';
import type { ReviewSopQueries, SopQueries } from '@neatroots/store';
import { RuleLineage, type RuleLineageOptions } from '../lineage/service';
import type { GatewayOf } from '../review/namer';
import { ReviewSop } from '../review/service';
import type { GitHubConnections } from '../github/connections';
import { moveSuggestions, suggestionEditsOf } from '../suggestions/lineage-hooks';
import { RunSessions, type RunEnded, type RunSessionsOptions } from './from-runs';
import { SopSessions, type CheckSession } from './sessions';
import { SopWorkspaces, type OnPublished } from './workspaces';

export interface SopOptions {
  db: Db;
  jobs: Jobs;
  /** The checker with its models (or none: tool steps decided, the rest not checked). */
  checkSession: CheckSession;
  onPublished?: OnPublished;
  /** How many sessions one process checks at once (default 16). */
  concurrency?: number;
  /** A check's tries and the backoff between them (default CHECK_RETRY: 6 tries, about a minute). */
  checkRetry?: { attempts: number; backoffMs: number };
  /** The question service's decisions: patterns are named by the reasoning model through it. */
  gateway?: GatewayOf;
  /** SOPOPS_DECISIONS: the bands calibration widens per question (default DEFAULT_DECISIONS). */
  decisions?: DecisionSettings;
  /** Rule lineage's hooks: the suggestions applied in a release, and what moves when two rule patterns merge. */
  lineage?: RuleLineageOptions;
  /** When the daily sopops_recluster_daily job runs (SOPOPS_RECLUSTER_CRON). */
  reclusterCron?: string;
  /** Workspaces' GitHub connections: applied suggestions open pull requests (none: drafts at head). */
  github?: GitHubConnections | null;
  /** SOPOPS_PR_STATUS_CRON: when open pull requests are looked at (null: not scheduled). */
  prStatusCron?: string | null;
  /**
   * Where the start's rebuild of runs owed their sessions says what it queued (RunSessions.rebuild),
   * and a stop what it cut short (warn, else info).
   */
  log?: RunSessionsOptions['log'] & { warn?(msg: string): void };
  /** How long close() waits for the GitHub calls suggestions left running (default 5 s, STOP_WAIT_MS). */
  stopWaitMs?: number;
}

export interface Sop {
  queries: SopQueries;
  workspaces: SopWorkspaces;
  sessions: SopSessions;
  /** Patterns, verdicts, overrides, the review queue, regression sets, Insights. */
  review: ReviewSopQueries;
  /** Runs that ended: those of an agent of the live release become sessions. */
  runsEnded(runs: readonly RunEnded[]): Promise<void>;
  /** How many runs the start queued again that had ended without becoming sessions, once it is done. */
  runsRebuilt(): Promise<number>;
  /**
   * Stops what the start left running in the background (before the jobs and the database
   * close), and waits for the GitHub calls suggestions left running (at most stopWaitMs, then
   * saying which it cut short).
   */
  close(): Promise<void>;
}

/**
 * The SOP side of the review service: workspaces (head, releases) and sessions (in, checked by
 * the sopops_check job, out). Starts the jobs' handlers, and queues again what a stop left
 * queued (sessions still queued) or undone (runs that ended without becoming sessions).
 */
export async function startSop(opts: SopOptions): Promise<Sop> {
  // Rule lineage stores its links in the publish's transaction, and patterns follow them.
  const lineage = new RuleLineage(opts.db, undefined, { suggestionEdits: suggestionEditsOf, onMerged: moveSuggestions, ...opts.lineage });
  const workspaces = new SopWorkspaces(opts.db, opts.onPublished, (tx, ws, release, previous) => lineage.atPublish(tx, ws, release, previous));
  const sessions = new SopSessions(opts.db, workspaces, opts.jobs, opts.checkSession, opts.checkRetry);
  // Patterns follow the sessions: plugged in before the first check runs.
  const log = opts.log;
  const warn = log ? { warn: (m: string) => (log.warn ? log.warn(m) : log.info(m)) } : undefined;
  const review = new ReviewSop({ db: opts.db, jobs: opts.jobs, sessions, gateway: opts.gateway, decisions: opts.decisions, lineage: lineage.queries, reclusterCron: opts.reclusterCron, workspaces, github: opts.github, prStatusCron: opts.prStatusCron, log: warn, stopWaitMs: opts.stopWaitMs });
  await lineage.start();
  await review.start();
  await sessions.start({ concurrency: opts.concurrency });
  const fromRuns = new RunSessions(opts.db, workspaces, sessions, opts.jobs, { log: opts.log });
  await fromRuns.start();
  const queries: SopQueries = {
    saveHeadFile: (ws, path, text) => workspaces.saveFile(ws, path, text),
    deleteHeadFile: (ws, path) => workspaces.deleteFile(ws, path),
    pushHead: (ws, files) => workspaces.push(ws, files),
    head: (ws) => workspaces.head(ws),
    headFile: (ws, path) => workspaces.file(ws, path),
    publish: (ws) => workspaces.publish(ws),
    releases: (ws, q) => workspaces.releasesPage(ws, q),
    release: (ws, ref) => workspaces.release(ws, ref),
    receiveSession: (ws, body) => sessions.receive(ws, body),
    getSession: (ws, id) => sessions.get(ws, id),
    getSessionTranscript: (ws, id) => sessions.transcript(ws, id),
    listSessions: (ws, q) => sessions.list(ws, q),
    recheckSession: (ws, id) => sessions.recheck(ws, id),
  };
  return {
    queries,
    workspaces,
    sessions,
    review: review.queries,
    runsEnded: (runs) => fromRuns.ended(runs),
    runsRebuilt: () => fromRuns.rebuilt(),
    close: async () => {
      await Promise.all([fromRuns.close(), review.close()]);
    },
  };
}
