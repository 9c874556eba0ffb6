import { createHash } from 'node:crypto';
import type { Db, Jobs } from '@neatroots/ports';
import { sessionFromRun, type Lock, type RunSpanLike } from '@neatroots/sop';
import { RunsRepo } from '@neatroots/store';
import type { SopSessions } from './sessions';
import type { SopWorkspaces } from './workspaces';

/** The job that makes a SOP session of a neatroots run that ended. */
export const SOP_RUN_QUEUE = 'sopops_run_session';

/** A run longer than this is checked on its first spans (a session is a conversation, not a crawl). */
export const MAX_RUN_SPANS = 5_000;

export interface RunEnded {
  project: string;
  run_id: string;
}

/**
 * One span stream feeds both halves: when a run ends and its workflow names an agent of the
 * project's live release (a workspace is a project), the run becomes a session of that agent
 * (external_id run:<run_id>) and is checked like any session sent in. Runs of workflows that
 * are no agent, or of projects without a release, are left alone.
 */
export class RunSessions {
  private readonly runs: RunsRepo;

  constructor(
    db: Db,
    private readonly workspaces: SopWorkspaces,
    private readonly sessions: SopSessions,
    private readonly jobs: Jobs,
  ) {
    this.runs = new RunsRepo(db);
  }

  async start(): Promise<void> {
    await this.jobs.work<RunEnded>(SOP_RUN_QUEUE, (j) => this.fromRun(j), { concurrency: 2 });
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
      const id = `run.${createHash('sha256').update(`${r.project}\0${r.run_id}`).digest('base64url').slice(0, 22)}.${Date.now().toString(36)}`;
      await this.jobs.add(SOP_RUN_QUEUE, r, { jobId: id, attempts: 3, backoffMs: 2000 });
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
