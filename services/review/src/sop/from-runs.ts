import { createHash } from 'node:crypto';
import type { Db, Jobs } from '@neatroots/ports';
import { sessionFromRun, type Lock, type RunSpanLike } from '@neatroots/sop';
import { RunSessionsRepo, RunsRepo, type OwedRunsCursor } from '@neatroots/store';
import { REQUEUE_WINDOW_MS, type SopSessions } from './sessions';
import type { SopWorkspaces } from './workspaces';

/** The job that makes a SOP session of a neatroots run that ended. */
export const SOP_RUN_QUEUE = 'sopops_run_session';

/** A run longer than this is checked on its first spans (a session is a conversation, not a crawl). */
export const MAX_RUN_SPANS = 5_000;

export interface RunEnded {
  project: string;
  run_id: string;
}

/** The start's rebuild looks at runs that started this long before a workspace's newest run. */
export const REBUILD_LOOKBACK_MS = 24 * 60 * 60_000;
/** Runs the rebuild reads per statement (the embedded database answers one statement at a time). */
export const REBUILD_PAGE = 1000;

const RUN_JOB = { attempts: 3, backoffMs: 2000 };

/** A run's key in its jobs' ids: the same run, the same key. */
const runKey = (r: RunEnded): string => `run.${createHash('sha256').update(`${r.project}\0${r.run_id}`).digest('base64url').slice(0, 22)}`;

export interface RunSessionsOptions {
  /** Where the start's rebuild says what it queued, and why it stopped short. */
  log?: { info(msg: string): void; error(msg: string, err?: unknown): void };
  /** How far back the rebuild looks (default REBUILD_LOOKBACK_MS). */
  lookbackMs?: number;
  /** Runs the rebuild reads per statement (default REBUILD_PAGE). */
  pageSize?: number;
}

/**
 * One span stream feeds both halves: when a run ends and its workflow names an agent of the
 * project's live release (a workspace is a project), the run becomes a session of that agent
 * (external_id run:<run_id>) and is checked like any session sent in. Runs of workflows that
 * are no agent, or of projects without a release, are left alone.
 */
export class RunSessions {
  private readonly runs: RunsRepo;
  private readonly owed: RunSessionsRepo;
  private stopping = false;
  private rebuilding: Promise<number> = Promise.resolve(0);

  constructor(
    db: Db,
    private readonly workspaces: SopWorkspaces,
    private readonly sessions: SopSessions,
    private readonly jobs: Jobs,
    private readonly opts: RunSessionsOptions = {},
  ) {
    this.runs = new RunsRepo(db);
    this.owed = new RunSessionsRepo(db);
  }

  /**
   * Registers the job's handler, then queues again, in the background, the runs a stop or a crash
   * left without their session (rebuild): a run's job is queued once its run_end is stored and
   * the bus's position moved past it, and the embedded default's jobs live in memory.
   */
  async start(): Promise<void> {
    await this.jobs.work<RunEnded>(SOP_RUN_QUEUE, (j) => this.fromRun(j), { concurrency: 2 });
    this.rebuilding = this.rebuild().catch((err) => {
      if (!this.stopping) this.opts.log?.error('queueing the runs that ended without becoming sessions failed (tried again at the next start)', err);
      return 0;
    });
  }

  /** How many runs the start's rebuild queued, once it is done. */
  rebuilt(): Promise<number> {
    return this.rebuilding;
  }

  /** Stops the start's rebuild between two of its steps (before the jobs and the database close). */
  async close(): Promise<void> {
    this.stopping = true;
    await this.rebuilding;
  }

  /**
   * Queues a job for each run that ended and is owed a session: in a workspace with a live
   * release, of one of its agents, received once it had a live release, its spans kept, and no
   * session run:<run_id> yet. Bounded: the runs that started up to `lookbackMs` before the
   * workspace's newest run (a stop loses the runs that ended just before it, however long ago it
   * was), and the longer ones that ended since then, read a page at a time. The job's id follows from the run and the REQUEUE_WINDOW_MS
   * window the pass starts in, so replicas starting together queue each run once; a run whose
   * session is made meanwhile (its job was still waiting) is made once (the second job finds the
   * same content and writes nothing).
   */
  async rebuild(now = Date.now()): Promise<number> {
    const pageSize = this.opts.pageSize ?? REBUILD_PAGE;
    const pass = Math.floor(now / REQUEUE_WINDOW_MS).toString(36);
    const lookback = this.opts.lookbackMs ?? REBUILD_LOOKBACK_MS;
    let n = 0;
    for (const ws of await this.owed.workspaces()) {
      if (!ws.newest_run) continue;
      const from = new Date(Math.min(now, Date.parse(ws.newest_run)) - lookback).toISOString();
      // The runs that started within the look back, then those longer than it that ended within it.
      for (const agent of ws.agents) {
        for (const read of [this.owed.owedRuns, this.owed.owedLongRuns]) {
          for (let after: OwedRunsCursor | undefined; ; ) {
            if (this.stopping) return n;
            const page = await read.call(this.owed, ws.workspace, agent, { from, liveSince: ws.live_since, after, limit: pageSize });
            for (const run_id of page.owed) {
              if (this.stopping) return n;
              const r = { project: ws.workspace, run_id };
              await this.jobs.add(SOP_RUN_QUEUE, r, { jobId: `${runKey(r)}.rebuilt.${pass}`, ...RUN_JOB });
              n++;
            }
            if (!page.next) break;
            after = page.next;
          }
        }
      }
    }
    if (n) this.opts.log?.info(`${n} run${n === 1 ? '' : 's'} that ended without becoming ${n === 1 ? 'a session' : 'sessions'} (a stop or a crash came before ${n === 1 ? 'its' : 'their'} job) queued again`);
    return n;
  }

  /**
   * After the events that ended these runs are stored. Only runs of projects with a live
   * release get a job (one read per project of the batch): most projects have none, and a job
   * per ended run, each reading the release to find there is none, was a seventh of the review
   * service's CPU in the distributed benchmark.
   */
  async ended(runs: readonly RunEnded[]): Promise<void> {
    const live = new Map<string, boolean>();
    for (const project of new Set(runs.map((r) => r.project))) live.set(project, (await this.workspaces.releaseRecord(project, 'live')) !== null);
    for (const r of runs) {
      if (!live.get(r.project)) continue;
      // A run_end delivered twice makes two jobs; the second finds the same content and writes nothing.
      await this.jobs.add(SOP_RUN_QUEUE, r, { jobId: `${runKey(r)}.${Date.now().toString(36)}`, ...RUN_JOB });
    }
  }

  /**
   * Returns the session's id, or null when the run is not a session of the workspace, or when
   * retention deleted its spans (`spans_expired_at`): a run_end that comes after (a late
   * export, a redelivery) finds nothing to build from, or only the spans received since, and a
   * session made of that would replace the one made when it ended, its checks cleared and done
   * again on an empty transcript. The session stays as it is.
   */
  async fromRun(r: RunEnded): Promise<string | null> {
    const release = await this.workspaces.releaseRecord(r.project, 'live');
    if (!release) return null;
    const detail = await this.runs.detail(r.project, r.run_id);
    const run = detail?.run;
    if (!detail || !run?.workflow || !(release.lock as Lock).agents.some((a) => a.agent === run.workflow)) return null;
    if (run.spans_expired_at !== null) return null;
    const spans: RunSpanLike[] = [...detail.spans];
    for (let cursor = detail.spans_next_cursor; cursor && spans.length < MAX_RUN_SPANS; ) {
      const page = await this.runs.spans(r.project, r.run_id, { cursor });
      if (!page) break;
      spans.push(...page.items);
      cursor = page.next_cursor;
    }
    const session = sessionFromRun({
      run_id: r.run_id,
      workflow: run.workflow,
      started_at: run.started_at,
      user_message: run.run_start?.user_message ?? null,
      final_output: run.final_output,
      spans: spans.slice(0, MAX_RUN_SPANS),
    });
    const got = await this.sessions.receive(r.project, session, { runId: r.run_id });
    return got.id;
  }
}
