import { createHash } from 'node:crypto';
import type { Db, Queryable } from '@neatroots/ports';
import { decodeCursor, encodeCursor, iso, isoNonNull, json, pageLimit, text } from '../sql';

export type SopResult = 'deviated' | 'partial' | 'followed' | 'not_measurable';

/** A session as sent (POST /v1/workspaces/{ws}/sessions), validated by the caller. */
export interface SessionInput {
  external_id: string;
  agent: string;
  release_id: string | null;
  started_at: string | null;
  transcript_ref: string | null;
  turns: { role: 'user' | 'agent'; text: string }[];
  tool_calls: { turn: number; tool: string; input?: unknown; output?: unknown; error?: string | null }[];
}

export interface SessionRecord {
  id: string;
  workspace: string;
  external_id: string;
  agent: string;
  release_asked: string | null;
  release_id: string | null;
  started_at: string | null;
  transcript_ref: string | null;
  content_hash: string;
  status: 'queued' | 'checked' | 'failed';
  error: string | null;
  result: SopResult | null;
  checked_result: SopResult | null;
  run_id: string | null;
  received_at: string;
  checked_at: string | null;
  body: SessionInput;
}

/** One procedure's check as the API shows it (the checker builds `body`). */
export interface StoredCheck {
  procedure_id: string;
  result: SopResult | null;
  checked_result: SopResult | null;
  body: Record<string, unknown>;
}

export interface StoredFinding {
  id: string;
  procedure_id: string;
  rule_id: string;
  kind: 'step' | 'never' | 'warning';
  index: number;
  text: string;
  status: 'skipped' | 'violated' | 'out_of_order' | 'unheeded';
  evidence: unknown[];
  reason: string | null;
}

export interface CheckOutcome {
  release_id: string | null;
  result: SopResult | null;
  checked_result: SopResult | null;
  checks: StoredCheck[];
  findings: StoredFinding[];
}

export interface ListSessionsQuery {
  agent?: string;
  procedure?: string;
  result?: SopResult;
  release?: string;
  /** Sessions with a finding on this rule id. */
  rule?: string;
  from?: string;
  to?: string;
  cursor?: string;
  limit?: number;
}

/** A session's id: stable for its (workspace, external_id), so re-sending finds it again. */
export function sessionId(workspace: string, externalId: string): string {
  return `ses_${createHash('sha256').update(`${workspace}\0${externalId}`).digest('base64url').slice(0, 22)}`;
}

/** A finding's id: stable for its session, procedure and rule, so a re-check replaces it. */
export function sopFindingId(sessionId: string, procedureId: string, ruleId: string): string {
  return `sf_${createHash('sha256').update(`${sessionId}\0${procedureId}\0${ruleId}`).digest('base64url').slice(0, 22)}`;
}

/** The hash that tells re-sent content (nothing to do) from new content (check again). */
export function sessionContentHash(s: SessionInput): string {
  const canonical = JSON.stringify([s.agent, s.release_id, s.started_at, s.transcript_ref, s.turns, s.tool_calls]);
  return createHash('sha256').update(canonical).digest('hex');
}

/** Sessions and their SOP check results. I/O only: statuses and results come from @neatroots/sop. */
export class SopSessionsRepo {
  constructor(private readonly db: Db) {}

  /**
   * Records a session as sent. Re-sent content for its external_id writes nothing
   * (`unchanged`); new content replaces the session and clears its results until its check is
   * done (`queued`).
   */
  async receive(workspace: string, s: SessionInput, opts: { runId?: string } = {}): Promise<{ id: string; status: 'queued' | 'unchanged'; content_hash: string }> {
    const id = sessionId(workspace, s.external_id);
    const hash = sessionContentHash(s);
    return this.db.transaction(async (tx) => {
      await tx.query('INSERT INTO projects (name) VALUES ($1) ON CONFLICT (name) DO NOTHING', [text(workspace)]);
      const existing = await tx.query<{ content_hash: string }>('SELECT content_hash FROM sop_sessions WHERE id = $1 FOR UPDATE', [id]);
      if (existing.rows[0]?.content_hash === hash) return { id, status: 'unchanged' as const, content_hash: hash };
      if (existing.rows[0]) {
        await tx.query('DELETE FROM sop_findings WHERE session_id = $1', [id]);
        await tx.query('DELETE FROM sop_checks WHERE session_id = $1', [id]);
      }
      await tx.query(
        `INSERT INTO sop_sessions (id, workspace, external_id, agent, release_asked, started_at, transcript_ref, content_hash, body, status, run_id, received_at)
         VALUES ($1, $2, $3, $4, $5, $6::timestamptz, $7, $8, $9::jsonb, 'queued', $10, date_trunc('milliseconds', now()))
         ON CONFLICT (id) DO UPDATE SET agent = EXCLUDED.agent, release_asked = EXCLUDED.release_asked, release_id = NULL,
           started_at = EXCLUDED.started_at, transcript_ref = EXCLUDED.transcript_ref, content_hash = EXCLUDED.content_hash,
           body = EXCLUDED.body, status = 'queued', error = NULL, result = NULL, checked_result = NULL,
           run_id = COALESCE(EXCLUDED.run_id, sop_sessions.run_id), received_at = EXCLUDED.received_at, checked_at = NULL`,
        [id, workspace, text(s.external_id), text(s.agent), text(s.release_id), s.started_at, text(s.transcript_ref), hash, json(s), text(opts.runId ?? null)],
      );
      return { id, status: 'queued' as const, content_hash: hash };
    });
  }

  /**
   * Saves a check's outcome, replacing the session's results, unless the session's content
   * changed since the check started (`contentHash` no longer current: the newer content's own
   * check will write). Returns whether it wrote.
   */
  async saveOutcome(sessionId: string, contentHash: string, outcome: CheckOutcome): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const cur = await tx.query<{ workspace: string; content_hash: string; started_at: unknown }>(
        'SELECT workspace, content_hash, started_at FROM sop_sessions WHERE id = $1 FOR UPDATE',
        [sessionId],
      );
      const row = cur.rows[0];
      if (!row || row.content_hash !== contentHash) return false;
      await tx.query('DELETE FROM sop_findings WHERE session_id = $1', [sessionId]);
      await tx.query('DELETE FROM sop_checks WHERE session_id = $1', [sessionId]);
      let position = 0;
      for (const c of outcome.checks) {
        await tx.query(
          'INSERT INTO sop_checks (session_id, procedure_id, position, result, checked_result, body) VALUES ($1, $2, $3, $4, $5, $6::jsonb)',
          [sessionId, c.procedure_id, position++, c.result, c.checked_result, json(c.body)],
        );
      }
      for (const f of outcome.findings) {
        await tx.query(
          `INSERT INTO sop_findings (id, workspace, session_id, procedure_id, release_id, rule_id, kind, index, text, status, evidence, reason, started_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12, $13::timestamptz)`,
          [f.id, row.workspace, sessionId, f.procedure_id, outcome.release_id, f.rule_id, f.kind, f.index, text(f.text), f.status, json(f.evidence), text(f.reason), iso(row.started_at)],
        );
      }
      await tx.query(
        `UPDATE sop_sessions SET status = 'checked', error = NULL, release_id = $2, result = $3, checked_result = $4, checked_at = now() WHERE id = $1`,
        [sessionId, outcome.release_id, outcome.result, outcome.checked_result],
      );
      return true;
    });
  }

  /** Marks a session whose check job gave up, with the reason (shown on the session). */
  async markFailed(sessionId: string, contentHash: string, reason: string): Promise<void> {
    await this.db.query(`UPDATE sop_sessions SET status = 'failed', error = $3 WHERE id = $1 AND content_hash = $2`, [sessionId, contentHash, text(reason)]);
  }

  async get(workspace: string, id: string, q: Queryable = this.db): Promise<{ session: SessionRecord; checks: StoredCheck[] } | null> {
    const res = await q.query<RawSession>(`SELECT ${SESSION_COLUMNS} FROM sop_sessions WHERE workspace = $1 AND id = $2`, [workspace, id]);
    if (!res.rows[0]) return null;
    const checks = await q.query<{ procedure_id: string; result: SopResult | null; checked_result: SopResult | null; body: unknown }>(
      'SELECT procedure_id, result, checked_result, body FROM sop_checks WHERE session_id = $1 ORDER BY position',
      [id],
    );
    return {
      session: toSession(res.rows[0]),
      checks: checks.rows.map((c) => ({ procedure_id: c.procedure_id, result: c.result, checked_result: c.checked_result, body: parseJson(c.body) as Record<string, unknown> })),
    };
  }

  /** Sessions still waiting for their check (the embedded default queues them again at start). */
  async queued(limit = 1000): Promise<{ workspace: string; id: string; content_hash: string }[]> {
    const res = await this.db.query<{ workspace: string; id: string; content_hash: string }>(
      `SELECT workspace, id, content_hash FROM sop_sessions WHERE status = 'queued' ORDER BY received_at LIMIT $1`,
      [limit],
    );
    return res.rows;
  }

  /** Newest first, by when they were received (kept to the millisecond, as cursors hold it); cursor paging. */
  async list(workspace: string, q: ListSessionsQuery = {}): Promise<{ items: SessionRecord[]; next_cursor: string | null }> {
    const limit = pageLimit(q.limit);
    const where = ['s.workspace = $1'];
    const params: unknown[] = [workspace];
    const add = (sql: string, v: unknown) => {
      params.push(v);
      where.push(sql.replaceAll('?', `$${params.length}`));
    };
    if (q.agent !== undefined) add('s.agent = ?', q.agent);
    if (q.result !== undefined) add('s.result = ?', q.result);
    if (q.release !== undefined) add('(s.release_id = ? OR s.release_id IN (SELECT id FROM sop_releases r WHERE r.workspace = s.workspace AND r.number::text = ?))', q.release);
    if (q.procedure !== undefined) add('EXISTS (SELECT 1 FROM sop_checks c WHERE c.session_id = s.id AND c.procedure_id = ?)', q.procedure);
    if (q.rule !== undefined) add('EXISTS (SELECT 1 FROM sop_findings f WHERE f.session_id = s.id AND f.rule_id = ?)', q.rule);
    if (q.from !== undefined) add('s.received_at >= ?::timestamptz', q.from);
    if (q.to !== undefined) add('s.received_at < ?::timestamptz', q.to);
    if (q.cursor !== undefined) {
      const c = decodeCursor(q.cursor);
      params.push(c.at, c.id);
      where.push(`(s.received_at, s.id) < ($${params.length - 1}::timestamptz, $${params.length})`);
    }
    params.push(limit + 1);
    const res = await this.db.query<RawSession>(
      `SELECT ${SESSION_COLUMNS.split(', ').map((c) => `s.${c}`).join(', ')} FROM sop_sessions s WHERE ${where.join(' AND ')}
       ORDER BY s.received_at DESC, s.id DESC LIMIT $${params.length}`,
      params,
    );
    const items = res.rows.slice(0, limit).map(toSession);
    const last = items[items.length - 1];
    return { items, next_cursor: res.rows.length > limit && last ? encodeCursor(last.received_at, last.id) : null };
  }
}

const SESSION_COLUMNS =
  'id, workspace, external_id, agent, release_asked, release_id, started_at, transcript_ref, content_hash, body, status, error, result, checked_result, run_id, received_at, checked_at';

interface RawSession {
  id: string;
  workspace: string;
  external_id: string;
  agent: string;
  release_asked: string | null;
  release_id: string | null;
  started_at: unknown;
  transcript_ref: string | null;
  content_hash: string;
  body: unknown;
  status: SessionRecord['status'];
  error: string | null;
  result: SopResult | null;
  checked_result: SopResult | null;
  run_id: string | null;
  received_at: unknown;
  checked_at: unknown;
}

function parseJson(v: unknown): unknown {
  return typeof v === 'string' ? JSON.parse(v) : v;
}

function toSession(r: RawSession): SessionRecord {
  return {
    id: r.id,
    workspace: r.workspace,
    external_id: r.external_id,
    agent: r.agent,
    release_asked: r.release_asked,
    release_id: r.release_id,
    started_at: iso(r.started_at),
    transcript_ref: r.transcript_ref,
    content_hash: r.content_hash,
    status: r.status,
    error: r.error,
    result: r.result,
    checked_result: r.checked_result,
    run_id: r.run_id,
    received_at: isoNonNull(r.received_at),
    checked_at: iso(r.checked_at),
    body: parseJson(r.body) as SessionInput,
  };
}

