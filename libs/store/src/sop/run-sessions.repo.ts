import type { Queryable } from '@neatroots/ports';
import { iso } from '../sql';

/** A workspace whose runs become sessions: it has a live release. */
export interface RunSessionWorkspace {
  workspace: string;
  /** The live release's agents: runs whose workflow names one become sessions. */
  agents: string[];
  /** When its first release was published: runs received before then never became sessions. */
  live_since: string;
  /** The start of its newest run (none later than now), null when it has none. */
  newest_run: string | null;
}

/** Where a page of OwedRuns ended: the next page starts after this run (newest first). */
export interface OwedRunsCursor {
  /** started_at (ended_at for owedLongRuns) to the microsecond, as the database holds it. */
  at: string;
  run_id: string;
}

/** Whether a run of the page is owed its session (see owedRuns): the page's SQL, alias `p`. */
const OWED = `(p.end_status IS NOT NULL AND p.spans_expired_at IS NULL AND p.last_seen_at >= $4::timestamptz
               -- a run's session is run:<run_id> (runExternalId in @neatroots/sop)
               AND NOT EXISTS (SELECT 1 FROM sop_sessions s WHERE s.workspace = $1 AND s.external_id = 'run:' || p.run_id))`;

/**
 * The runs that ended and should be sessions but are not: what a stop or a crash left between a
 * run's `run_end` being stored and the job that makes its session (sopops_run_session), which
 * the embedded default keeps in memory only. Read at the review service's start and queued again.
 */
export class RunSessionsRepo {
  constructor(private readonly db: Queryable) {}

  /** Workspaces with a live release (the sop_releases_live index), by name. */
  async workspaces(): Promise<RunSessionWorkspace[]> {
    const res = await this.db.query<{ workspace: string; agents: string[] | null; live_since: unknown; newest_run: unknown }>(
      `SELECT l.workspace,
              ARRAY(SELECT DISTINCT a->>'agent' FROM jsonb_array_elements(l.lock->'agents') a WHERE a->>'agent' IS NOT NULL ORDER BY 1) AS agents,
              (SELECT min(f.created_at) FROM sop_releases f WHERE f.workspace = l.workspace) AS live_since,
              (SELECT max(r.started_at) FROM runs r WHERE r.project = l.workspace AND r.started_at <= now()) AS newest_run
       FROM sop_releases l WHERE l.live ORDER BY l.workspace`,
    );
    return res.rows.map((r) => ({ workspace: r.workspace, agents: r.agents ?? [], live_since: iso(r.live_since)!, newest_run: iso(r.newest_run) }));
  }

  /**
   * One page of an agent's runs in a workspace, newest first, that started at `from` or later
   * (at most `limit` of them read, through the runs_workflow_newest index, so a page is one short
   * statement however few are owed): `owed` those among them that ended (their run_end stored),
   * were last received once the workspace had a live release, still have their spans, and have no
   * session `run:<run_id>` (the sessions' unique (workspace, external_id)). `next` is null after
   * the last page.
   */
  async owedRuns(
    workspace: string,
    agent: string,
    opts: { from: string; liveSince: string; after?: OwedRunsCursor; limit: number },
  ): Promise<{ owed: string[]; next: OwedRunsCursor | null }> {
    return this.owedPage('started_at', workspace, agent, opts);
  }

  /**
   * owedRuns' runs that it leaves out: those that started before `from` but ended at `from` or
   * later (runs longer than the look back that ended just before a stop), newest end first, a
   * page of at most `limit` read through the runs_workflow_ended index. The cursor is by ended_at.
   */
  async owedLongRuns(
    workspace: string,
    agent: string,
    opts: { from: string; liveSince: string; after?: OwedRunsCursor; limit: number },
  ): Promise<{ owed: string[]; next: OwedRunsCursor | null }> {
    return this.owedPage('ended_at', workspace, agent, opts);
  }

  /**
   * A page of a workspace agent's runs at `from` or later by `by` (started_at: owedRuns, through
   * runs_workflow_newest; ended_at: owedLongRuns, through runs_workflow_ended, and only those that
   * started before `from`, the others being owedRuns'), newest first, the cursor by the same column.
   */
  private async owedPage(
    by: 'started_at' | 'ended_at',
    workspace: string,
    agent: string,
    opts: { from: string; liveSince: string; after?: OwedRunsCursor; limit: number },
  ): Promise<{ owed: string[]; next: OwedRunsCursor | null }> {
    const params: unknown[] = [workspace, agent, opts.from, opts.liveSince, opts.limit];
    let after = '';
    if (opts.after) {
      params.push(opts.after.at, opts.after.run_id);
      after = `AND (r.${by}, r.run_id) < ($6::timestamptz, $7::text)`;
    }
    const ended = by === 'ended_at';
    const res = await this.db.query<{ run_id: string; at: string; owed: boolean }>(
      `WITH page AS (
         SELECT r.run_id, r.started_at, r.ended_at, r.end_status, r.spans_expired_at, r.last_seen_at FROM runs r
         WHERE r.project = $1 AND r.workflow = $2 ${ended ? 'AND r.ended_at IS NOT NULL ' : ''}AND r.${by} >= $3::timestamptz ${after}
         ORDER BY r.${by} DESC, r.run_id DESC
         LIMIT $5)
       SELECT p.run_id, to_char(p.${by} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at,
              ${ended ? `(p.started_at < $3::timestamptz AND ${OWED})` : OWED} AS owed
       FROM page p ORDER BY p.${by} DESC, p.run_id DESC`,
      params,
    );
    return paged(res.rows, opts.limit);
  }
}

/** A page of owed runs: those owed, and where the next page starts (null after the last). */
function paged(rows: readonly { run_id: string; at: string; owed: boolean }[], limit: number): { owed: string[]; next: OwedRunsCursor | null } {
  const last = rows[rows.length - 1];
  return { owed: rows.filter((r) => r.owed).map((r) => r.run_id), next: rows.length === limit && last ? { at: last.at, run_id: last.run_id } : null };
}
