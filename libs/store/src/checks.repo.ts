import type { Db, Queryable } from '@neatroots/ports';
import { isoNonNull, StoreInputError, text } from './sql';

/**
 * The fourth check source (the seed: "questions the planner or a coding agent wrote, kept in
 * the database until you save them"). The YAML is stored as written; the check loader
 * validates it like a file.
 */
export type DbCheckOrigin = 'planner' | 'agent' | 'app' | 'cli';

export interface DbCheckRecord {
  id: string;
  yaml: string;
  source: 'database';
  origin: DbCheckOrigin;
  project: string | null;
  workflow: string | null;
  saved: boolean;
  created_at: string;
  updated_at: string;
}

export interface DbCheckInput {
  id: string;
  yaml: string;
  origin: DbCheckOrigin;
  project?: string | null;
  workflow?: string | null;
  saved?: boolean;
  /**
   * A coding agent's check (origin agent) in a project bounded to this many of them
   * (NEATROOTS_MAX_AGENT_CHECKS): a new one is refused with AgentChecksFullError when the project
   * already has that many, counted and saved under one lock of the project's agent checks, so
   * agents saving at once cannot pass the bound. Replacing one of its checks is not a new one.
   */
  agent_checks_max?: number;
}

/** A new check of a coding agent's refused: the project has `agents` of them, `max` allowed. */
export class AgentChecksFullError extends StoreInputError {
  constructor(
    readonly project: string,
    readonly agents: number,
    readonly max: number,
  ) {
    super('too_many_checks', `too_many_checks: project ${project} has ${agents} checks saved by coding agents, the most allowed (${max})`);
    this.name = 'AgentChecksFullError';
  }
}

/** AgentChecksFullError's message, as it reaches a caller over gRPC: the agents' checks and the bound. */
export function agentChecksFull(message: string): { agents: number; max: number } | null {
  const m = /^too_many_checks: project .* has (\d+) checks saved by coding agents, the most allowed \((\d+)\)$/s.exec(message);
  return m ? { agents: Number(m[1]), max: Number(m[2]) } : null;
}

export interface ListDbChecksQuery {
  project?: string;
  origin?: DbCheckOrigin;
  saved?: boolean;
}

type Row = Record<string, unknown>;

function toCheck(r: Row): DbCheckRecord {
  return {
    id: String(r.id),
    yaml: String(r.yaml),
    source: 'database',
    origin: r.origin as DbCheckOrigin,
    project: (r.project as string | null) ?? null,
    workflow: (r.workflow as string | null) ?? null,
    saved: Boolean(r.saved),
    created_at: isoNonNull(r.created_at),
    updated_at: isoNonNull(r.updated_at),
  };
}

const COLUMNS = 'id, yaml, source, origin, project, workflow, saved, created_at, updated_at';

export class ChecksRepo {
  constructor(private readonly db: Queryable) {}

  /**
   * Creates or replaces a check by project and id (created_at is kept; origin becomes the
   * writer of this version). A project's checks never touch another project's of the same id.
   * The planner's write (origin planner) replaces only the planner's own unsaved version, and
   * only when it changed: a check a person saved or edited stays theirs, and a question written
   * again as it is writes nothing. Either way the check as stored is returned.
   */
  async put(c: DbCheckInput): Promise<DbCheckRecord> {
    if (c.origin !== 'agent' || c.agent_checks_max === undefined || !(c.agent_checks_max > 0)) return this.write(this.db, c);
    const project = c.project ?? '';
    const max = c.agent_checks_max;
    const bounded = async (q: Queryable): Promise<DbCheckRecord> => {
      // One at a time per project, whichever replica saves: the count below is read after the
      // lock is held (a statement's own snapshot), so it sees every agent check saved before.
      await q.query(`SELECT pg_advisory_xact_lock(hashtext('neatroots.agent_checks'), hashtext($1))`, [project]);
      const res = await q.query<{ agents: unknown; replaces: boolean | null }>(
        `SELECT count(*) FILTER (WHERE origin = 'agent') AS agents, bool_or(id = $2) AS replaces FROM db_checks WHERE coalesce(project, '') = $1`,
        [project, c.id],
      );
      const agents = Number(res.rows[0]?.agents ?? 0);
      if (!res.rows[0]?.replaces && agents >= max) throw new AgentChecksFullError(project, agents, max);
      return this.write(q, c);
    };
    const db = this.db as Partial<Db>;
    // A transaction handle given to the repository is already one: the lock lasts until it ends.
    return typeof db.transaction === 'function' ? db.transaction(bounded) : bounded(this.db);
  }

  private async write(q: Queryable, c: DbCheckInput): Promise<DbCheckRecord> {
    const res = await q.query(
      `INSERT INTO db_checks (id, yaml, origin, project, workflow, saved) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT ((coalesce(project, '')), id) DO UPDATE SET yaml = EXCLUDED.yaml, origin = EXCLUDED.origin,
         workflow = EXCLUDED.workflow, saved = EXCLUDED.saved, updated_at = now()
       WHERE EXCLUDED.origin <> 'planner'
         OR (db_checks.origin = 'planner' AND NOT db_checks.saved
             AND (db_checks.yaml, db_checks.workflow) IS DISTINCT FROM (EXCLUDED.yaml, EXCLUDED.workflow))
       RETURNING ${COLUMNS}`,
      [text(c.id), text(c.yaml), c.origin, text(c.project ?? null), text(c.workflow ?? null), c.saved ?? false],
    );
    if (res.rows[0]) return toCheck(res.rows[0] as Row);
    // The planner's write changed nothing: the check stays as stored.
    const kept = await this.get(c.project ?? null, c.id, q);
    if (!kept) throw new Error(`database check ${c.id} was deleted while the planner wrote it`);
    return kept;
  }

  /** A project's check (project null: one of no project). */
  async get(project: string | null, id: string, q: Queryable = this.db): Promise<DbCheckRecord | null> {
    const res = await q.query(`SELECT ${COLUMNS} FROM db_checks WHERE coalesce(project, '') = $1 AND id = $2`, [project ?? '', id]);
    return res.rows[0] ? toCheck(res.rows[0]) : null;
  }

  /** Oldest first, so a later check wins on the same id when loaded in order. */
  async list(q: ListDbChecksQuery = {}): Promise<DbCheckRecord[]> {
    const params: unknown[] = [];
    const where: string[] = [];
    if (q.project !== undefined) {
      params.push(q.project);
      where.push(`(project = $${params.length} OR project IS NULL)`);
    }
    if (q.origin !== undefined) {
      params.push(q.origin);
      where.push(`origin = $${params.length}`);
    }
    if (q.saved !== undefined) {
      params.push(q.saved);
      where.push(`saved = $${params.length}`);
    }
    const res = await this.db.query(
      `SELECT ${COLUMNS} FROM db_checks ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at, id`,
      params,
    );
    return res.rows.map(toCheck);
  }

  /** Marks a project's check saved; false when there is no such check. */
  async markSaved(project: string | null, id: string, saved = true): Promise<boolean> {
    const res = await this.db.query<{ id: string }>(
      `UPDATE db_checks SET saved = $3, updated_at = now() WHERE coalesce(project, '') = $1 AND id = $2 RETURNING id`,
      [project ?? '', id, saved],
    );
    return res.rows.length > 0;
  }

  /**
   * Deletes a project's check; false when there is no such check. A question the planner wrote
   * leaves its workflow's plan too (question_plans, the Plan of @neatroots/questions): its id
   * moves from `written` to `deleted`, so the scheduler no longer asks it from the plan and the
   * planner never writes it again, whoever saved it last. A written question with no check
   * left (deleted by a version before plans kept `deleted`, which went on asking it) is deleted
   * from its plans the same way, and counts as found.
   */
  async delete(project: string | null, id: string): Promise<boolean> {
    const res = await this.db.query<{ id: string }>(
      `WITH gone AS (DELETE FROM db_checks WHERE coalesce(project, '') = $1 AND id = $2 RETURNING id),
       unplanned AS (
         UPDATE question_plans SET plan = jsonb_set(
             jsonb_set(plan, '{written}', coalesce(
               (SELECT jsonb_agg(w.value ORDER BY w.n) FROM jsonb_array_elements(plan->'written') WITH ORDINALITY AS w(value, n) WHERE w.value->>'id' <> $2),
               '[]'::jsonb)),
             '{deleted}', coalesce(plan->'deleted', '[]'::jsonb) || to_jsonb($2::text)),
           updated_at = now()
         WHERE project = $1 AND plan->'written' @> jsonb_build_array(jsonb_build_object('id', $2::text))
         RETURNING 1
       )
       SELECT id FROM gone UNION ALL SELECT $2 FROM unplanned`,
      [project ?? '', id],
    );
    return res.rows.length > 0;
  }
}
