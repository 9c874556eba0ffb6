import { createHash } from 'node:crypto';
import type { Db, Queryable } from '@neatroots/ports';
import { Coalescer, coalescedInFlight } from '../coalesce';
import { decodeCursor, encodeCursor, iso, isoNonNull, json, num, pageLimit, text } from '../sql';
import { onRuleLineage } from './lineage.repo';

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

/**
 * A session as a list shows it: everything but its body (the transcript, megabytes for a long
 * session), which a list never reads, nor a session's own GET (get). The transcript is read one
 * session at a time, by body (GET …/transcript) and forCheck (the check job).
 */
export type SessionSummaryRecord = Omit<SessionRecord, 'body'>;

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
  /**
   * Why the check is not whole though it is saved: the model failed for a passing reason on
   * some questions (their rules not_checked). Kept as the session's `error`; a checked session
   * with an error is checked again when its content is sent again (receive) or it is re-checked.
   */
  error?: string | null;
}

export interface ListSessionsQuery {
  agent?: string;
  procedure?: string;
  result?: SopResult;
  release?: string;
  /** Sessions with a finding on this rule id, or on any other wording of its lineage. */
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
  return hashed(s).hash;
}

/** The content's hash, and its size as JSON (characters: about its bytes as sent). */
function hashed(s: SessionInput): { hash: string; bytes: number } {
  const canonical = JSON.stringify([s.agent, s.release_id, s.started_at, s.transcript_ref, s.turns, s.tool_calls]);
  return { hash: createHash('sha256').update(canonical).digest('hex'), bytes: canonical.length };
}

/**
 * Sessions received at once go into one insert up to this many bytes of transcript (a longer
 * session alone): on PGlite a statement's parameters are copied into its WebAssembly memory and
 * parsed there as jsonb, so the memory grows to the largest statement and never shrinks. Sixteen
 * sessions of 3.2 MB in one statement grew it from 174 MB to 555 MB, one at a time to 209 MB.
 */
export const SESSION_INSERT_BATCH_BYTES = 4 * 1024 * 1024;

/** Sessions and their SOP check results. I/O only: statuses and results come from @neatroots/sop. */
export class SopSessionsRepo {
  // What many callers do at once, coalesced into multi-row statements (see Coalescer).
  private readonly inserts: Coalescer<NewSession, boolean>;
  private readonly reads: Coalescer<{ workspace: string; id: string }, CheckRead | null>;
  private readonly firstSaves: Coalescer<{ id: string; content_hash: string; outcome: CheckOutcome }, boolean>;

  constructor(private readonly db: Db) {
    const opts = { maxBatch: 64, maxInFlight: coalescedInFlight(db.kind) };
    this.inserts = new Coalescer((items) => this.insertNew(items), { ...opts, maxBatchBytes: SESSION_INSERT_BATCH_BYTES, bytes: (row) => row.bytes });
    this.reads = new Coalescer((keys) => this.readForCheck(keys), opts);
    this.firstSaves = new Coalescer((items) => this.saveFirst(items), opts);
  }

  /**
   * Records a session as sent. Re-sent content for its external_id writes nothing
   * (`unchanged`), unless its check is owed: a session still queued answers `queued` as it is
   * (its job may have been lost: the caller queues it again), and one that failed (no live
   * release yet, tries run out) or was checked while the model failed (checked with an `error`)
   * is queued again to be checked (`queued`), its transcript as sent. New content replaces the
   * session and clears its results until its check is done (`queued`). A session never seen
   * (the usual case) costs one statement, no transaction: on PGlite every statement is a trip
   * to the database thread.
   */
  async receive(workspace: string, s: SessionInput, opts: { runId?: string } = {}): Promise<{ id: string; status: 'queued' | 'unchanged'; content_hash: string; bytes: number }> {
    const id = sessionId(workspace, s.external_id);
    const { hash, bytes } = hashed(s);
    const row: NewSession = { id, workspace: text(workspace)!, external_id: text(s.external_id)!, agent: text(s.agent)!, release_asked: text(s.release_id), started_at: s.started_at, transcript_ref: text(s.transcript_ref), content_hash: hash, body: s, run_id: text(opts.runId ?? null), bytes };
    if (await this.inserts.call(row)) return { id, status: 'queued', content_hash: hash, bytes };
    return { ...(await this.receiveSeen(row, s)), bytes };
  }

  /** receive's path for a session whose id exists. */
  private async receiveSeen(row: NewSession, s: SessionInput): Promise<{ id: string; status: 'queued' | 'unchanged'; content_hash: string }> {
    const { id, content_hash: hash } = row;
    // Seen before. Re-sent content is the common case of what is left: a plain read answers it
    // (as of the last commit, as the locked read would once a concurrent writer finished).
    const seen = await this.db.query<Owed>('SELECT content_hash, status, error FROM sop_sessions WHERE id = $1', [id]);
    const sameAsSeen = seen.rows[0]?.content_hash === hash;
    if (sameAsSeen && seen.rows[0].status === 'queued') return { id, status: 'queued', content_hash: hash };
    if (sameAsSeen && !checkAgain(seen.rows[0])) return { id, status: 'unchanged', content_hash: hash };
    return this.db.transaction(async (tx) => {
      const existing = await tx.query<Owed>('SELECT content_hash, status, error FROM sop_sessions WHERE id = $1 FOR UPDATE', [id]);
      const same = existing.rows[0]?.content_hash === hash;
      // The same content: nothing to do, unless its check is owed. Still queued: as it is.
      if (same && existing.rows[0].status === 'queued') return { id, status: 'queued' as const, content_hash: hash };
      if (same && !checkAgain(existing.rows[0])) return { id, status: 'unchanged' as const, content_hash: hash };
      // Under the row lock every check saved before is visible here, and none can be saved after.
      if (existing.rows[0]) await clearResults(tx, id);
      if (same) {
        // Failed, or checked while the model failed: queued again as it was sent (retention may
        // have emptied its transcript since).
        await tx.query(
          `UPDATE sop_sessions SET body = $2::jsonb, status = 'queued', error = NULL, release_id = NULL, result = NULL, checked_result = NULL,
             run_id = COALESCE($3, run_id), received_at = date_trunc('milliseconds', now()), checked_at = NULL, transcript_expired_at = NULL
           WHERE id = $1`,
          [id, json(s), row.run_id],
        );
        return { id, status: 'queued' as const, content_hash: hash };
      }
      await tx.query(
        `WITH p AS (INSERT INTO projects (name) VALUES ($2) ON CONFLICT (name) DO NOTHING)
         INSERT INTO sop_sessions (id, workspace, external_id, agent, release_asked, started_at, transcript_ref, content_hash, body, status, run_id, received_at)
         VALUES ($1, $2, $3, $4, $5, $6::timestamptz, $7, $8, $9::jsonb, 'queued', $10, date_trunc('milliseconds', now()))
         ON CONFLICT (id) DO UPDATE SET agent = EXCLUDED.agent, release_asked = EXCLUDED.release_asked, release_id = NULL,
           started_at = EXCLUDED.started_at, transcript_ref = EXCLUDED.transcript_ref, content_hash = EXCLUDED.content_hash,
           body = EXCLUDED.body, status = 'queued', error = NULL, result = NULL, checked_result = NULL,
           run_id = COALESCE(EXCLUDED.run_id, sop_sessions.run_id), received_at = EXCLUDED.received_at, checked_at = NULL,
           transcript_expired_at = NULL`,
        [id, row.workspace, row.external_id, row.agent, row.release_asked, row.started_at, row.transcript_ref, hash, json(s), row.run_id],
      );
      return { id, status: 'queued' as const, content_hash: hash };
    });
  }

  /**
   * Saves a check's outcome, replacing the session's results, unless the session's content
   * changed since the check started (`contentHash` no longer current: the newer content's own
   * check will write). Returns whether it wrote.
   *
   * A queued session has no results (receive cleared them when its content changed, under the
   * same row lock), so its first check is one statement: the session marked checked, its checks
   * and findings inserted, all or nothing. Anything else (checked again: a job run twice;
   * failed; content replaced; a queued session that has rows after all) takes the
   * transaction that locks, compares and replaces.
   */
  async saveOutcome(sessionId: string, contentHash: string, outcome: CheckOutcome): Promise<boolean> {
    try {
      if (await this.firstSaves.call({ id: sessionId, content_hash: contentHash, outcome })) return true;
    } catch (err) {
      // Rows a queued session should not have (left by hand, or by an older version): replace them.
      if ((err as { code?: string }).code !== UNIQUE_VIOLATION) throw err;
    }
    return this.db.transaction(async (tx) => {
      const cur = await tx.query<{ id: string; workspace: string; started_at: unknown }>(
        'SELECT id, workspace, started_at FROM sop_sessions WHERE id = $1 AND content_hash = $2 FOR UPDATE',
        [sessionId, contentHash],
      );
      if (!cur.rows[0]) return false;
      await clearResults(tx, sessionId);
      await tx.query(`WITH ${SAVE_CHECKED}`, saveParams([{ id: sessionId, content_hash: contentHash, outcome }]));
      return true;
    });
  }

  /**
   * Queues a session to be checked again, as it is stored (POST …/sessions/{id}/recheck): its
   * results are cleared until the check is done. A session still queued is answered as it is
   * (its job may have been lost: the caller queues it again). `transcript_expired` when
   * retention emptied its transcript (there is nothing left to check); null when there is no
   * such session.
   */
  async recheck(workspace: string, id: string): Promise<{ id: string; external_id: string; status: 'queued'; content_hash: string } | 'transcript_expired' | null> {
    return this.db.transaction(async (tx) => {
      const res = await tx.query<{ external_id: string; content_hash: string; status: SessionRecord['status']; transcript_expired_at: unknown }>(
        'SELECT external_id, content_hash, status, transcript_expired_at FROM sop_sessions WHERE workspace = $1 AND id = $2 FOR UPDATE',
        [workspace, id],
      );
      const row = res.rows[0];
      if (!row) return null;
      const queued = { id, external_id: row.external_id, status: 'queued' as const, content_hash: row.content_hash };
      if (row.status === 'queued') return queued;
      if (row.transcript_expired_at !== null && row.transcript_expired_at !== undefined) return 'transcript_expired' as const;
      await clearResults(tx, id);
      await tx.query(
        `UPDATE sop_sessions SET status = 'queued', error = NULL, release_id = NULL, result = NULL, checked_result = NULL, checked_at = NULL WHERE id = $1`,
        [id],
      );
      return queued;
    });
  }

  /** Marks a session whose check job gave up, with the reason (shown on the session). */
  async markFailed(sessionId: string, contentHash: string, reason: string): Promise<void> {
    // Only a session still waiting for this content: a check that got through meanwhile stands.
    await this.db.query(`UPDATE sop_sessions SET status = 'failed', error = $3 WHERE id = $1 AND content_hash = $2 AND status = 'queued'`, [sessionId, contentHash, text(reason)]);
  }

  async get(workspace: string, id: string, q: Queryable = this.db): Promise<{ session: SessionSummaryRecord; checks: StoredCheck[] } | null> {
    // Without the body: the session's GET shows no transcript (GET …/transcript does, from body()).
    const res = await q.query<RawSummary>(`SELECT ${SUMMARY_COLUMNS} FROM sop_sessions WHERE workspace = $1 AND id = $2`, [workspace, id]);
    if (!res.rows[0]) return null;
    const checks = await q.query<{ procedure_id: string; result: SopResult | null; checked_result: SopResult | null; body: unknown }>(
      'SELECT procedure_id, result, checked_result, body FROM sop_checks WHERE session_id = $1 ORDER BY position',
      [id],
    );
    return {
      session: toSummary(res.rows[0]),
      checks: checks.rows.map((c) => ({ procedure_id: c.procedure_id, result: c.result, checked_result: c.checked_result, body: parseJson(c.body) as Record<string, unknown> })),
    };
  }

  /**
   * A session's body as it was received (its turns and tool calls), without its checks: the
   * transcript's read. `transcript_expired_at`: when retention emptied its turns and tool calls.
   */
  async body(workspace: string, id: string): Promise<{ external_id: string; body: SessionInput; transcript_expired_at: string | null } | null> {
    const res = await this.db.query<{ external_id: string; body: unknown; transcript_expired_at: unknown }>(
      'SELECT external_id, body, transcript_expired_at FROM sop_sessions WHERE workspace = $1 AND id = $2',
      [workspace, id],
    );
    const row = res.rows[0];
    return row ? { external_id: row.external_id, body: parseJson(row.body) as SessionInput, transcript_expired_at: iso(row.transcript_expired_at) } : null;
  }

  /**
   * Transcript retention: empties the turns and tool calls of up to `limit` sessions received
   * before `before` (epoch ms), oldest first, and marks them; returns how many. A session
   * still waiting for its check keeps its transcript (the check reads it). The checks, their
   * findings and the evidence they quote stay, and so does the content hash: the same content
   * sent again is still "unchanged" (a failed session's, or one checked while the model failed,
   * is queued again, its transcript as sent), while new content is received and checked as
   * usual. Such a session cannot be re-checked as stored (recheck): it has nothing to check.
   */
  async expireTranscripts(before: number, limit = 500): Promise<number> {
    const res = await this.db.query<{ n: unknown }>(
      `WITH t AS (
         SELECT id FROM sop_sessions
          WHERE transcript_expired_at IS NULL AND received_at < $1::timestamptz AND status <> 'queued'
          ORDER BY received_at LIMIT $2
       ),
       u AS (
         -- checked again on the row as it is now: a session queued since (new content) keeps its transcript
         UPDATE sop_sessions s SET body = s.body || '{"turns":[],"tool_calls":[]}'::jsonb, transcript_expired_at = now()
           FROM t WHERE s.id = t.id AND s.status <> 'queued' RETURNING 1
       )
       SELECT count(*)::int AS n FROM u`,
      [new Date(before).toISOString(), limit],
    );
    return num(res.rows[0]?.n);
  }

  /**
   * A session as its check job reads it: without its checks (a queued session has none), with
   * the id of the workspace's live release as of now (null: none), in one statement.
   */
  forCheck(workspace: string, id: string): Promise<CheckRead | null> {
    return this.reads.call({ workspace, id });
  }

  private async readForCheck(keys: { workspace: string; id: string }[]): Promise<(CheckRead | null)[]> {
    const res = await this.db.query<RawSession & { live_release_id: string | null }>(
      // The body as text: parsed here, not by PGlite and then copied across threads as objects.
      `SELECT ${SESSION_COLUMNS.split(', ').map((c) => (c === 'body' ? 's.body::text AS body' : `s.${c}`)).join(', ')},
         (SELECT r.id FROM sop_releases r WHERE r.workspace = s.workspace AND r.live) AS live_release_id
       FROM sop_sessions s JOIN jsonb_to_recordset($1::jsonb) AS k(workspace text, id text) ON s.workspace = k.workspace AND s.id = k.id`,
      [json(keys)],
    );
    const found = new Map(res.rows.map((r) => [`${r.workspace}\0${r.id}`, r]));
    return keys.map((k) => {
      const row = found.get(`${k.workspace}\0${k.id}`);
      return row ? { session: toSession(row), live_release_id: row.live_release_id, bytes: typeof row.body === 'string' ? row.body.length : JSON.stringify(row.body).length } : null;
    });
  }

  /** Sessions never seen, in one statement: whether each was inserted (false: its id exists). */
  private async insertNew(rows: NewSession[]): Promise<boolean[]> {
    // An id twice in one batch (the same session sent twice at once): the first goes in, the
    // later ones take receive's path for a session seen before, after this statement.
    const first = new Set<string>();
    // In id order: concurrent batches on Postgres then take their rows' locks in one order.
    const sent = rows.filter((r) => !first.has(r.id) && first.add(r.id)).sort(byId).map(({ bytes: _size, ...r }) => r);
    // The project rows in the same statement: foreign keys are checked at its end.
    const res = await this.db.query<{ id: string }>(
      `WITH v AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS v(id text, workspace text, external_id text, agent text, release_asked text,
                    started_at timestamptz, transcript_ref text, content_hash text, body jsonb, run_id text)),
       p AS (INSERT INTO projects (name) SELECT DISTINCT workspace FROM v ON CONFLICT (name) DO NOTHING)
       INSERT INTO sop_sessions (id, workspace, external_id, agent, release_asked, started_at, transcript_ref, content_hash, body, status, run_id, received_at)
       SELECT id, workspace, external_id, agent, release_asked, started_at, transcript_ref, content_hash, body, 'queued', run_id, date_trunc('milliseconds', now()) FROM v
       ON CONFLICT (id) DO NOTHING RETURNING id`,
      [json(sent)],
    );
    const inserted = new Set(res.rows.map((r) => r.id));
    const answered = new Set<string>();
    return rows.map((r) => inserted.has(r.id) && !answered.has(r.id) && !!answered.add(r.id));
  }

  /** Queued sessions' first checks, in one statement: whether each was saved. */
  private async saveFirst(items: { id: string; content_hash: string; outcome: CheckOutcome }[]): Promise<boolean[]> {
    // A session twice in one batch (a job run twice at once): the later ones take the locked path.
    const first = new Set<string>();
    const sent = items.filter((i) => !first.has(i.id) && first.add(i.id)).sort(byId);
    const res = await this.db.query<{ id: string }>(`WITH ${SAVE_QUEUED}`, saveParams(sent));
    const saved = new Set(res.rows.map((r) => r.id));
    const answered = new Set<string>();
    return items.map((i) => saved.has(i.id) && !answered.has(i.id) && !!answered.add(i.id));
  }

  /** Sessions still waiting for their check (the embedded default queues them again at start). */
  async queued(limit = 1000, after?: string): Promise<{ workspace: string; id: string; content_hash: string }[]> {
    // By id, after the last one read: every queued session is reached whatever their number.
    const res = await this.db.query<{ workspace: string; id: string; content_hash: string }>(
      `SELECT workspace, id, content_hash FROM sop_sessions WHERE status = 'queued' AND ($2::text IS NULL OR id > $2) ORDER BY id LIMIT $1`,
      [limit, after ?? null],
    );
    return res.rows;
  }

  /** Newest first, by when they were received (kept to the millisecond, as cursors hold it); cursor paging. */
  async list(workspace: string, q: ListSessionsQuery = {}): Promise<{ items: SessionSummaryRecord[]; next_cursor: string | null }> {
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
    // Any wording of the rule: its lineage (rule_lineage_members).
    if (q.rule !== undefined) add(`EXISTS (SELECT 1 FROM sop_findings f WHERE f.session_id = s.id AND ${onRuleLineage('f', '$1', '?')})`, q.rule);
    if (q.from !== undefined) add('s.received_at >= ?::timestamptz', q.from);
    if (q.to !== undefined) add('s.received_at < ?::timestamptz', q.to);
    if (q.cursor !== undefined) {
      const c = decodeCursor('sessions', q.cursor);
      params.push(c.at, c.id);
      where.push(`(s.received_at, s.id) < ($${params.length - 1}::timestamptz, $${params.length})`);
    }
    params.push(limit + 1);
    // Without the body: a page of long sessions would otherwise read and parse every transcript.
    const res = await this.db.query<RawSummary>(
      `SELECT ${SUMMARY_COLUMNS.split(', ').map((c) => `s.${c}`).join(', ')} FROM sop_sessions s WHERE ${where.join(' AND ')}
       ORDER BY s.received_at DESC, s.id DESC LIMIT $${params.length}`,
      params,
    );
    const items = res.rows.slice(0, limit).map(toSummary);
    const last = items[items.length - 1];
    return { items, next_cursor: res.rows.length > limit && last ? encodeCursor('sessions', last.received_at, last.id) : null };
  }
}

const UNIQUE_VIOLATION = '23505';

/** What receive reads of a session seen before: its content, and whether its check is owed. */
interface Owed {
  content_hash: string;
  status: SessionRecord['status'];
  error: string | null;
}

/** The same content sent again is checked again when its check failed, or was saved while the model failed (checked with an error). */
function checkAgain(s: Owed): boolean {
  return s.status === 'failed' || (s.status === 'checked' && s.error !== null);
}

const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** A session never seen, as receive's multi-row insert takes it. */
interface NewSession {
  id: string;
  workspace: string;
  external_id: string;
  agent: string;
  release_asked: string | null;
  started_at: string | null;
  transcript_ref: string | null;
  content_hash: string;
  body: SessionInput;
  run_id: string | null;
  /** The content's size as JSON (not inserted: it bounds the batch). */
  bytes: number;
}

export interface CheckRead {
  session: SessionRecord;
  /** The workspace's live release when the session was read (null: none). */
  live_release_id: string | null;
  /** The body's size as read (JSON characters). */
  bytes: number;
}

// Checks saved, any number of sessions in one statement: the outcomes ($1), their checks ($2)
// and findings ($3) as one JSON parameter each (no statement nears the 65535-parameter
// limit). `s` is what the UPDATE marked checked; checks and findings are inserted only for
// those, so a session that changed meanwhile gets nothing. SAVE_QUEUED takes only queued
// sessions (they have no results to replace); SAVE_CHECKED, under the caller's row lock, any.
const SAVE_TEMPLATE = `k AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS k(id text, content_hash text, release_id text, result text, checked_result text, error text)),
  s AS (
    UPDATE sop_sessions x SET status = 'checked', error = k.error, release_id = k.release_id, result = k.result, checked_result = k.checked_result, checked_at = now()
    FROM k WHERE x.id = k.id AND x.content_hash = k.content_hash CONDITION
    RETURNING x.id, x.workspace, x.started_at, k.release_id),
  c AS (
    INSERT INTO sop_checks (session_id, procedure_id, position, result, checked_result, body)
    SELECT s.id, v.procedure_id, v.position, v.result, v.checked_result, v.body
    FROM s JOIN jsonb_to_recordset($2::jsonb) AS v(session_id text, procedure_id text, position integer, result text, checked_result text, body jsonb) ON v.session_id = s.id),
  f AS (
    INSERT INTO sop_findings (id, workspace, session_id, procedure_id, release_id, rule_id, kind, index, text, status, evidence, reason, started_at)
    SELECT v.id, s.workspace, s.id, v.procedure_id, s.release_id, v.rule_id, v.kind, v.index, v.text, v.status, COALESCE(v.evidence, '[]'::jsonb), v.reason, s.started_at
    FROM s JOIN jsonb_to_recordset($3::jsonb) AS v(session_id text, id text, procedure_id text, rule_id text, kind text, index integer, text text, status text, evidence jsonb, reason text) ON v.session_id = s.id)
  SELECT id FROM s`;
const SAVE_QUEUED = SAVE_TEMPLATE.replace('CONDITION', "AND x.status = 'queued'");
const SAVE_CHECKED = SAVE_TEMPLATE.replace('CONDITION', '');

function saveParams(items: { id: string; content_hash: string; outcome: CheckOutcome }[]): (string | null)[] {
  const outcomes = items.map(({ id, content_hash, outcome: o }) => ({ id, content_hash, release_id: o.release_id, result: o.result, checked_result: o.checked_result, error: text(o.error ?? null) }));
  const checks = items.flatMap(({ id, outcome: o }) =>
    o.checks.map((c, position) => ({ session_id: id, procedure_id: c.procedure_id, position, result: c.result, checked_result: c.checked_result, body: c.body })),
  );
  const findings = items.flatMap(({ id, outcome: o }) =>
    o.findings.map((f) => ({ session_id: id, id: f.id, procedure_id: f.procedure_id, rule_id: f.rule_id, kind: f.kind, index: f.index, text: f.text, status: f.status, evidence: f.evidence, reason: f.reason })),
  );
  return [json(outcomes), json(checks), json(findings)];
}

/** Deletes a session's checks and findings (the caller holds the session's row lock). */
async function clearResults(tx: Queryable, sessionId: string): Promise<void> {
  await tx.query('WITH f AS (DELETE FROM sop_findings WHERE session_id = $1) DELETE FROM sop_checks WHERE session_id = $1', [sessionId]);
}

/** A session's columns but its body (lists). */
const SUMMARY_COLUMNS =
  'id, workspace, external_id, agent, release_asked, release_id, started_at, transcript_ref, content_hash, status, error, result, checked_result, run_id, received_at, checked_at';
const SESSION_COLUMNS = `${SUMMARY_COLUMNS}, body`;

interface RawSummary {
  id: string;
  workspace: string;
  external_id: string;
  agent: string;
  release_asked: string | null;
  release_id: string | null;
  started_at: unknown;
  transcript_ref: string | null;
  content_hash: string;
  status: SessionRecord['status'];
  error: string | null;
  result: SopResult | null;
  checked_result: SopResult | null;
  run_id: string | null;
  received_at: unknown;
  checked_at: unknown;
}

interface RawSession extends RawSummary {
  body: unknown;
}

function parseJson(v: unknown): unknown {
  return typeof v === 'string' ? JSON.parse(v) : v;
}

function toSession(r: RawSession): SessionRecord {
  return { ...toSummary(r), body: parseJson(r.body) as SessionInput };
}

function toSummary(r: RawSummary): SessionSummaryRecord {
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
  };
}

