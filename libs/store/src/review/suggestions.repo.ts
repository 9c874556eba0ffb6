import { randomBytes } from 'node:crypto';
import type { Queryable } from '@neatroots/ports';
import { iso, isoNonNull, json, text } from '../sql';

export const SUGGESTION_STATUSES = ['generating', 'proposed', 'failed', 'applied', 'pr_open', 'merged', 'dismissed'] as const;
export type SuggestionStatus = (typeof SUGGESTION_STATUSES)[number];
/** Applied for fix tracking and lineage: a draft at head, or a pull request open or merged. */
export const APPLIED_STATUSES: readonly SuggestionStatus[] = ['applied', 'pr_open', 'merged'];

/** An agent whose compiled instructions the edit changes. */
export interface PlanAgent {
  agent: string;
  added: number;
  removed: number;
  /** A unified diff of the agent's compiled instructions. */
  diff: string;
}

export interface SuggestionRecord {
  id: string;
  workspace: string;
  pattern_id: string;
  procedure_id: string;
  path: string;
  rule_id: string;
  rule_text: string;
  verdict: 'real' | 'acceptable' | 'sop_wrong';
  verdict_note: string | null;
  verdict_at: string;
  status: SuggestionStatus;
  prompt_version: string;
  model: string | null;
  base_version: string;
  old_text: string;
  new_text: string | null;
  rationale: string | null;
  plan: { agents: PlanAgent[] } | null;
  error: string | null;
  changes_since: string | null;
  rewrite_of: string | null;
  rewritten_as: string | null;
  applied_text: string | null;
  merged_into_version: string | null;
  pr_url: string | null;
  pr_number: number | null;
  pr_branch: string | null;
  /** The pull request's repository (owner/repo) and the REST API it was opened through (null before they were recorded). */
  pr_repository: string | null;
  pr_api_url: string | null;
  merge_commit_sha: string | null;
  pr_checked_at: string | null;
  /** An apply under way: its claim (a random token) and when it was taken; null otherwise. */
  apply_claim: string | null;
  apply_claimed_at: string | null;
  note: string | null;
  reviewer: string | null;
  created_at: string;
  applied_at: string | null;
  pr_opened_at: string | null;
  merged_at: string | null;
  dismissed_at: string | null;
}

export type NewSuggestion = Pick<
  SuggestionRecord,
  'workspace' | 'pattern_id' | 'procedure_id' | 'path' | 'rule_id' | 'rule_text' | 'verdict' | 'verdict_note' | 'verdict_at' | 'prompt_version' | 'base_version' | 'old_text'
> &
  Partial<Pick<SuggestionRecord, 'changes_since' | 'rewrite_of' | 'reviewer'>>;

/** The columns a change may set (timestamps as ISO text, or 'now' for the database's clock). */
export type SuggestionPatch = Partial<
  Omit<SuggestionRecord, 'id' | 'workspace' | 'pattern_id' | 'procedure_id' | 'path' | 'created_at' | 'verdict' | 'verdict_at' | 'old_text' | 'base_version'>
>;

const TIMES = new Set(['pr_checked_at', 'applied_at', 'pr_opened_at', 'merged_at', 'dismissed_at', 'apply_claimed_at']);
const PATCHABLE = new Set([
  'rule_id', 'rule_text', 'verdict_note', 'status', 'prompt_version', 'model', 'new_text', 'rationale', 'plan', 'error', 'changes_since', 'rewrite_of', 'rewritten_as',
  'applied_text', 'merged_into_version', 'pr_url', 'pr_number', 'pr_branch', 'pr_repository', 'pr_api_url', 'merge_commit_sha', 'note', 'reviewer', 'apply_claim', ...TIMES,
]);

/** Conditions on a change besides the status: the apply claim it holds, or no claim younger than `unclaimedMs`. */
export interface SuggestionSetWhen {
  claim?: string;
  unclaimedMs?: number;
}

/** A release's copy of one file, for finding the first release with a suggestion's edit. */
export interface ReleaseFileAt {
  release_id: string;
  number: number;
  live: boolean;
  created_at: string;
  text: string | null;
}

/**
 * Suggestions in Postgres (the review service owns them). I/O only: what a suggestion may
 * become, and when, is decided by the suggestions service.
 */
export class SuggestionsRepo {
  async insert(q: Queryable, s: NewSuggestion): Promise<SuggestionRecord> {
    const id = `sug_${randomBytes(9).toString('base64url')}`;
    const res = await q.query<Raw>(
      `INSERT INTO sop_suggestions (id, workspace, pattern_id, procedure_id, path, rule_id, rule_text, verdict, verdict_note, verdict_at, status,
         prompt_version, base_version, old_text, changes_since, rewrite_of, reviewer)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'generating', $11, $12, $13, $14, $15, $16) RETURNING *`,
      [id, s.workspace, s.pattern_id, s.procedure_id, s.path, s.rule_id, text(s.rule_text), s.verdict, text(s.verdict_note), s.verdict_at, s.prompt_version, s.base_version, text(s.old_text), text(s.changes_since ?? null), s.rewrite_of ?? null, text(s.reviewer ?? null)],
    );
    return toRecord(res.rows[0]);
  }

  /** One suggestion; `forUpdate` locks its row for the rest of the transaction. */
  async get(q: Queryable, workspace: string, id: string, opts: { forUpdate?: boolean } = {}): Promise<SuggestionRecord | null> {
    const res = await q.query<Raw>(`SELECT * FROM sop_suggestions WHERE workspace = $1 AND id = $2${opts.forUpdate ? ' FOR UPDATE' : ''}`, [workspace, id]);
    return res.rows[0] ? toRecord(res.rows[0]) : null;
  }

  /** Newest first; `before`: those after that suggestion in this order (none when it is not in the workspace). */
  async list(q: Queryable, workspace: string, opts: { status?: readonly SuggestionStatus[]; pattern?: string; limit?: number; before?: string } = {}): Promise<SuggestionRecord[]> {
    const res = await q.query<Raw>(
      `SELECT * FROM sop_suggestions WHERE workspace = $1 AND ($2::text[] IS NULL OR status = ANY($2::text[])) AND ($3::text IS NULL OR pattern_id = $3)
         AND ($5::text IS NULL OR (created_at, id) < (SELECT b.created_at, b.id FROM sop_suggestions b WHERE b.workspace = $1 AND b.id = $5))
       ORDER BY created_at DESC, id DESC LIMIT $4`,
      [workspace, opts.status?.length ? [...opts.status] : null, opts.pattern ?? null, opts.limit ?? 500, opts.before ?? null],
    );
    return res.rows.map(toRecord);
  }

  /** The suggestions of these patterns, newest first. */
  async ofPatterns(q: Queryable, patternIds: readonly string[]): Promise<SuggestionRecord[]> {
    if (!patternIds.length) return [];
    const res = await q.query<Raw>('SELECT * FROM sop_suggestions WHERE pattern_id = ANY($1::text[]) ORDER BY created_at DESC, id DESC', [[...patternIds]]);
    return res.rows.map(toRecord);
  }

  /**
   * Claims a proposed suggestion for one apply: true when this caller has it (no one else
   * holds a claim younger than `lapseMs`); false when it is not proposed or another apply has it.
   */
  async claimApply(q: Queryable, id: string, claim: string, lapseMs: number): Promise<boolean> {
    const res = await q.query(
      `UPDATE sop_suggestions SET apply_claim = $2, apply_claimed_at = clock_timestamp()
        WHERE id = $1 AND status = 'proposed' AND (apply_claim IS NULL OR apply_claimed_at < clock_timestamp() - $3 * interval '1 millisecond')
        RETURNING id`,
      [id, claim, lapseMs],
    );
    return res.rows.length > 0;
  }

  /**
   * Sets these columns; with `whenStatus`, only while the suggestion is in one of them, and with
   * `when`, only while it holds that claim or no live one (false: it did not).
   */
  async set(q: Queryable, id: string, patch: SuggestionPatch, whenStatus?: readonly SuggestionStatus[], when: SuggestionSetWhen = {}): Promise<boolean> {
    const keys = Object.keys(patch).filter((k) => (patch as Record<string, unknown>)[k] !== undefined);
    for (const k of keys) if (!PATCHABLE.has(k)) throw new Error(`sop_suggestions.${k} cannot be set`);
    const params: unknown[] = [id];
    const sets = keys.map((k) => {
      const v = (patch as Record<string, unknown>)[k];
      if (TIMES.has(k) && v === 'now') return `${k} = clock_timestamp()`;
      params.push(k === 'plan' ? json(v) : typeof v === 'string' ? text(v) : v);
      return `${k} = $${params.length}${k === 'plan' ? '::jsonb' : ''}`;
    });
    if (!sets.length) return true;
    let where = 'id = $1';
    if (whenStatus) {
      params.push([...whenStatus]);
      where += ` AND status = ANY($${params.length}::text[])`;
    }
    if (when.claim !== undefined) {
      params.push(when.claim);
      where += ` AND apply_claim = $${params.length}`;
    }
    if (when.unclaimedMs !== undefined) {
      params.push(when.unclaimedMs);
      where += ` AND (apply_claim IS NULL OR apply_claimed_at < clock_timestamp() - $${params.length} * interval '1 millisecond')`;
    }
    const res = await q.query(`UPDATE sop_suggestions SET ${sets.join(', ')} WHERE ${where} RETURNING id`, params);
    return res.rows.length > 0;
  }

  /** Every suggestion whose pull request is open (the sopops_pr_status pass), oldest look first. */
  async openPullRequests(q: Queryable): Promise<SuggestionRecord[]> {
    const res = await q.query<Raw>("SELECT * FROM sop_suggestions WHERE status = 'pr_open' AND pr_number IS NOT NULL ORDER BY pr_checked_at NULLS FIRST, id");
    return res.rows.map(toRecord);
  }

  /** The workspace's applied suggestions (a draft, or a pull request open or merged), oldest first. */
  async applied(q: Queryable, workspace: string): Promise<SuggestionRecord[]> {
    const res = await q.query<Raw>("SELECT * FROM sop_suggestions WHERE workspace = $1 AND status IN ('applied', 'pr_open', 'merged') ORDER BY created_at, id", [workspace]);
    return res.rows.map(toRecord);
  }

  /** A release's copy of a file (null: not in it). */
  async releaseFile(q: Queryable, releaseId: string, path: string): Promise<string | null> {
    const res = await q.query<{ text: string }>('SELECT text FROM sop_release_files WHERE release_id = $1 AND path = $2', [releaseId, path]);
    return res.rows[0]?.text ?? null;
  }

  /** Rule pattern `from` merged into `into` (rule lineage): its suggestions move over. */
  async movePattern(q: Queryable, from: string, into: string): Promise<void> {
    await q.query('UPDATE sop_suggestions SET pattern_id = $2 WHERE pattern_id = $1', [from, into]);
  }

  /** Suggestions still generating (a stop left them so): queued again at start. */
  async generating(q: Queryable): Promise<{ workspace: string; id: string }[]> {
    const res = await q.query<{ workspace: string; id: string }>("SELECT workspace, id FROM sop_suggestions WHERE status = 'generating' ORDER BY created_at");
    return res.rows;
  }

  /** The workspace's releases since `since` (by number), each with its copy of `path` (null: not in it). */
  async releasesWithFile(q: Queryable, workspace: string, path: string, since: string): Promise<ReleaseFileAt[]> {
    const res = await q.query<{ release_id: string; number: number; live: boolean; created_at: unknown; text: string | null }>(
      `SELECT r.id AS release_id, r.number, r.live, r.created_at, f.text
         FROM sop_releases r LEFT JOIN sop_release_files f ON f.release_id = r.id AND f.path = $2
        WHERE r.workspace = $1 AND r.created_at >= $3 ORDER BY r.number`,
      [workspace, path, since],
    );
    return res.rows.map((r) => ({ release_id: r.release_id, number: Number(r.number), live: r.live, created_at: isoNonNull(r.created_at), text: r.text }));
  }

  /** Sessions with a finding in the pattern, all time (what the model is told about its size). */
  async patternSessions(q: Queryable, pattern: { id: string; kind: 'rule' | 'sub' | 'other' }): Promise<number> {
    const column = pattern.kind === 'rule' ? 'rule_pattern_id' : 'pattern_id';
    const res = await q.query<{ n: unknown }>(`SELECT count(DISTINCT session_id) AS n FROM sop_findings WHERE ${column} = $1`, [pattern.id]);
    return Number(res.rows[0]?.n ?? 0);
  }

  /**
   * Sessions checked on the procedure (applicable, measurable) on release `fromNumber` or later, and of those the ones
   * with a finding (not suppressed) in the pattern: a rule pattern counts every finding of its
   * rule, a failure mode its own.
   */
  async fixSessions(q: Queryable, workspace: string, procedureId: string, fromNumber: number, pattern: { id: string; kind: 'rule' | 'sub' | 'other' }): Promise<{ sessions: number; with_finding: number }> {
    const column = pattern.kind === 'rule' ? 'rule_pattern_id' : 'pattern_id';
    const res = await q.query<{ sessions: unknown; with_finding: unknown }>(
      `SELECT count(DISTINCT s.id) AS sessions,
              count(DISTINCT s.id) FILTER (WHERE EXISTS (
                SELECT 1 FROM sop_findings f WHERE f.session_id = s.id AND f.${column} = $4 AND NOT f.suppressed)) AS with_finding
         FROM sop_sessions s
         JOIN sop_releases r ON r.id = s.release_id
         JOIN sop_checks c ON c.session_id = s.id AND c.procedure_id = $2 AND c.checked_result IS NOT NULL AND c.checked_result <> 'not_measurable'
        WHERE s.workspace = $1 AND s.status = 'checked' AND r.number >= $3`,
      [workspace, procedureId, fromNumber, pattern.id],
    );
    return { sessions: Number(res.rows[0]?.sessions ?? 0), with_finding: Number(res.rows[0]?.with_finding ?? 0) };
  }
}

type Raw = Record<string, unknown>;

function toRecord(r: Raw): SuggestionRecord {
  const plan = typeof r.plan === 'string' ? JSON.parse(r.plan) : r.plan;
  return {
    ...(r as unknown as SuggestionRecord),
    plan: (plan ?? null) as SuggestionRecord['plan'],
    pr_number: r.pr_number === null || r.pr_number === undefined ? null : Number(r.pr_number),
    verdict_at: isoNonNull(r.verdict_at),
    created_at: isoNonNull(r.created_at),
    pr_checked_at: iso(r.pr_checked_at),
    applied_at: iso(r.applied_at),
    pr_opened_at: iso(r.pr_opened_at),
    merged_at: iso(r.merged_at),
    dismissed_at: iso(r.dismissed_at),
    apply_claimed_at: iso(r.apply_claimed_at),
  };
}
