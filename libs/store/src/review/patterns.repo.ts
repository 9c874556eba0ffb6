import type { Queryable } from '@neatroots/ports';
import { iso, isoNonNull, text } from '../sql';
import type { FindingKind, PatternKind, VerdictName } from './queries';

/** A pattern row (a rule pattern, or once clustering exists a failure mode). */
export interface PatternRecord {
  id: string;
  workspace: string;
  procedure_id: string;
  procedure_name: string;
  lineage_id: string;
  kind: PatternKind;
  parent_id: string | null;
  name: string;
  named_by: 'rule_text' | 'model';
  description: string | null;
  rule_id: string;
  rule_kind: FindingKind;
  rule_index: number;
  rule_text: string;
  rule_ran_at: string;
  reworded_at: string | null;
  materially_reclustered_at: string | null;
  theme_id: string | null;
  created_at: string;
  clustered_at: string | null;
  retired_at: string | null;
}

export type NewRulePattern = Pick<
  PatternRecord,
  'id' | 'workspace' | 'procedure_id' | 'procedure_name' | 'lineage_id' | 'name' | 'rule_id' | 'rule_kind' | 'rule_index' | 'rule_text' | 'rule_ran_at'
>;

/** The wording a rule pattern shows: the rule as the most recent session ran it. */
export type Wording = Pick<PatternRecord, 'procedure_name' | 'rule_id' | 'rule_kind' | 'rule_index' | 'rule_text' | 'rule_ran_at' | 'reworded_at'>;

export interface VerdictRecord {
  pattern_id: string;
  verdict: VerdictName;
  note: string | null;
  reviewer: string | null;
  carried_over: boolean;
  created_at: string;
}

export interface OverrideRecord {
  session_id: string;
  procedure_id: string;
  rule_id: string;
  correct: boolean;
  note: string | null;
  reviewer: string | null;
  created_at: string;
}

/** A finding as assignment and suppression read it. */
export interface FindingRef {
  id: string;
  session_id: string;
  procedure_id: string;
  rule_id: string;
  kind: FindingKind;
  index: number;
  text: string;
  pattern_id: string | null;
  rule_pattern_id: string | null;
  suppressed: boolean;
  /** When its session happened (started_at, else when the finding was stored). */
  at: string;
}

/** A stored check as the roll-up reads it. */
export interface RollupCheck {
  session_id: string;
  procedure_id: string;
  release_id: string | null;
  result: string | null;
  checked_result: string | null;
  goal_reached: boolean | null;
  rules: { rule_id: string; kind: FindingKind; status: string }[];
}

const PATTERN_COLUMNS =
  'id, workspace, procedure_id, procedure_name, lineage_id, kind, parent_id, name, named_by, description, rule_id, rule_kind, rule_index, rule_text, rule_ran_at, reworded_at, materially_reclustered_at, theme_id, created_at, clustered_at, retired_at';
const FINDING_REF = `f.id, f.session_id, f.procedure_id, f.rule_id, f.kind, f.index, f.text, f.pattern_id, f.rule_pattern_id, f.suppressed, f.at`;

/**
 * Patterns, verdicts, overrides and the finding columns they set (pattern_id, suppressed).
 * I/O only: which pattern a finding belongs to, what is suppressed and every result are
 * decided by the review domain (@neatroots/review-domain) in the review service. Every method
 * takes the Queryable to run on, so the service keeps one transaction per change.
 */
export class PatternsRepo {
  /**
   * Serialises the changes of one workspace (assignment, verdicts, overrides): each reads the
   * verdicts and overrides it is about to apply, and nothing changes them meanwhile.
   */
  async lockWorkspace(q: Queryable, workspace: string): Promise<void> {
    await q.query('SELECT name FROM projects WHERE name = $1 FOR UPDATE', [workspace]);
  }

  async workspacesWithUnassigned(q: Queryable): Promise<string[]> {
    const res = await q.query<{ workspace: string }>('SELECT DISTINCT workspace FROM sop_findings WHERE pattern_id IS NULL');
    return res.rows.map((r) => r.workspace);
  }

  /** Findings not yet in a pattern, oldest first. */
  async unassigned(q: Queryable, workspace: string, limit: number): Promise<FindingRef[]> {
    const res = await q.query<RawFindingRef>(
      `SELECT ${FINDING_REF} FROM sop_findings f WHERE f.workspace = $1 AND f.pattern_id IS NULL ORDER BY f.created_at, f.id LIMIT $2`,
      [workspace, limit],
    );
    return res.rows.map(toFindingRef);
  }

  /** Each session's time, and its checks' procedure names and rules (for the wording a pattern shows). */
  async sessionRules(q: Queryable, sessionIds: readonly string[]): Promise<{ session_id: string; at: string; procedure_id: string; procedure_name: string; rules: { rule_id: string; kind: FindingKind; index: number; text: string }[] }[]> {
    if (!sessionIds.length) return [];
    const res = await q.query<{ session_id: string; at: unknown; procedure_id: string; procedure_name: string | null; rules: unknown }>(
      `SELECT c.session_id, s.at, c.procedure_id, c.body->>'procedure_name' AS procedure_name,
              (SELECT COALESCE(jsonb_agg(jsonb_build_object('rule_id', r->'rule_id', 'kind', r->'kind', 'index', r->'index', 'text', r->'text')), '[]'::jsonb)
                 FROM jsonb_array_elements(c.body->'rules') r) AS rules
         FROM sop_checks c JOIN sop_sessions s ON s.id = c.session_id
        WHERE c.session_id = ANY($1::text[])`,
      [sessionIds],
    );
    return res.rows.map((r) => ({ session_id: r.session_id, at: isoNonNull(r.at), procedure_id: r.procedure_id, procedure_name: r.procedure_name ?? r.procedure_id, rules: jsonColumn(r.rules) as never }));
  }

  async rulePatterns(q: Queryable, workspace: string, keys: readonly { procedure_id: string; lineage_id: string }[]): Promise<PatternRecord[]> {
    if (!keys.length) return [];
    const res = await q.query<RawPattern>(
      `SELECT ${PATTERN_COLUMNS} FROM sop_patterns WHERE workspace = $1 AND kind = 'rule'
          AND (procedure_id, lineage_id) IN (SELECT * FROM unnest($2::text[], $3::text[]))`,
      [workspace, keys.map((k) => k.procedure_id), keys.map((k) => k.lineage_id)],
    );
    return res.rows.map(toPattern);
  }

  /** Creates a rule pattern unless its key has one (a concurrent writer): returns whether it did. */
  async insertRulePattern(q: Queryable, p: NewRulePattern): Promise<boolean> {
    const res = await q.query(
      `INSERT INTO sop_patterns (id, workspace, procedure_id, procedure_name, lineage_id, kind, name, named_by, rule_id, rule_kind, rule_index, rule_text, rule_ran_at)
       VALUES ($1, $2, $3, $4, $5, 'rule', $6, 'rule_text', $7, $8, $9, $10, $11::timestamptz)
       ON CONFLICT DO NOTHING RETURNING id`,
      [p.id, p.workspace, p.procedure_id, text(p.procedure_name), p.lineage_id, text(p.name), p.rule_id, p.rule_kind, p.rule_index, text(p.rule_text), p.rule_ran_at],
    );
    return res.rows.length > 0;
  }

  async updateWording(q: Queryable, id: string, w: Wording): Promise<void> {
    await q.query(
      `UPDATE sop_patterns SET procedure_name = $2, rule_id = $3, rule_kind = $4, rule_index = $5, rule_text = $6, rule_ran_at = $7::timestamptz, reworded_at = $8::timestamptz WHERE id = $1`,
      [id, text(w.procedure_name), w.rule_id, w.rule_kind, w.rule_index, text(w.rule_text), w.rule_ran_at, w.reworded_at],
    );
  }

  async pattern(q: Queryable, workspace: string, id: string): Promise<PatternRecord | null> {
    const res = await q.query<RawPattern>(`SELECT ${PATTERN_COLUMNS} FROM sop_patterns WHERE workspace = $1 AND id = $2`, [workspace, id]);
    return res.rows[0] ? toPattern(res.rows[0]) : null;
  }

  async patternsByIds(q: Queryable, ids: readonly string[]): Promise<PatternRecord[]> {
    if (!ids.length) return [];
    const res = await q.query<RawPattern>(`SELECT ${PATTERN_COLUMNS} FROM sop_patterns WHERE id = ANY($1::text[])`, [ids]);
    return res.rows.map(toPattern);
  }

  /** Every pattern of the workspace (hundreds to thousands: one per rule with a finding, and failure modes). */
  async patternsOf(q: Queryable, workspace: string): Promise<PatternRecord[]> {
    const res = await q.query<RawPattern>(`SELECT ${PATTERN_COLUMNS} FROM sop_patterns WHERE workspace = $1 ORDER BY created_at, id`, [workspace]);
    return res.rows.map(toPattern);
  }

  /** Active rule patterns to name with the model: those still named from their rule's text, or every one (`all`). */
  async toName(q: Queryable, workspace: string, opts: { all?: boolean; ids?: readonly string[] } = {}): Promise<PatternRecord[]> {
    const res = await q.query<RawPattern>(
      `SELECT ${PATTERN_COLUMNS} FROM sop_patterns WHERE workspace = $1 AND kind = 'rule' AND retired_at IS NULL
          AND ($2 OR named_by = 'rule_text') AND ($3::text[] IS NULL OR id = ANY($3::text[])) ORDER BY created_at, id`,
      [workspace, opts.all === true, opts.ids ? [...opts.ids] : null],
    );
    return res.rows.map(toPattern);
  }

  /** A name the reasoning model gave (named_by model). */
  async setModelName(q: Queryable, id: string, name: string): Promise<void> {
    await q.query(`UPDATE sop_patterns SET name = $2, named_by = 'model' WHERE id = $1`, [id, text(name)]);
  }

  /** A failure mode's children (a rule pattern's failure modes). */
  async children(q: Queryable, id: string): Promise<PatternRecord[]> {
    const res = await q.query<RawPattern>(`SELECT ${PATTERN_COLUMNS} FROM sop_patterns WHERE parent_id = $1 ORDER BY created_at, id`, [id]);
    return res.rows.map(toPattern);
  }

  /** The failure modes and `other` of these rule patterns, in one read (ordered as children()). */
  async childrenOf(q: Queryable, ids: readonly string[]): Promise<PatternRecord[]> {
    if (!ids.length) return [];
    const res = await q.query<RawPattern>(`SELECT ${PATTERN_COLUMNS} FROM sop_patterns WHERE parent_id = ANY($1::text[]) ORDER BY created_at, id`, [ids]);
    return res.rows.map(toPattern);
  }

  /** The verdicts of these patterns, newest first (the first per pattern is its verdict). */
  async verdicts(q: Queryable, patternIds: readonly string[]): Promise<VerdictRecord[]> {
    if (!patternIds.length) return [];
    const res = await q.query<RawVerdict>(
      'SELECT pattern_id, verdict, note, reviewer, carried_over, created_at FROM sop_verdicts WHERE pattern_id = ANY($1::text[]) ORDER BY created_at DESC, seq DESC',
      [patternIds],
    );
    return res.rows.map(toVerdict);
  }

  /** Appends a verdict (never edits one). */
  async addVerdict(q: Queryable, workspace: string, patternId: string, v: { verdict: VerdictName; note: string | null; reviewer: string | null }): Promise<VerdictRecord> {
    const res = await q.query<RawVerdict>(
      `INSERT INTO sop_verdicts (workspace, pattern_id, verdict, note, reviewer) VALUES ($1, $2, $3, $4, $5)
       RETURNING pattern_id, verdict, note, reviewer, carried_over, created_at`,
      [workspace, patternId, v.verdict, text(v.note), text(v.reviewer)],
    );
    return toVerdict(res.rows[0]);
  }

  async overrides(q: Queryable, keys: readonly { session_id: string; procedure_id: string; rule_id: string }[]): Promise<OverrideRecord[]> {
    if (!keys.length) return [];
    const res = await q.query<RawOverride>(
      `SELECT session_id, procedure_id, rule_id, correct, note, reviewer, created_at FROM sop_overrides
        WHERE (session_id, procedure_id, rule_id) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))`,
      [keys.map((k) => k.session_id), keys.map((k) => k.procedure_id), keys.map((k) => k.rule_id)],
    );
    return res.rows.map(toOverride);
  }

  async overridesOfSession(q: Queryable, sessionId: string): Promise<OverrideRecord[]> {
    const res = await q.query<RawOverride>('SELECT session_id, procedure_id, rule_id, correct, note, reviewer, created_at FROM sop_overrides WHERE session_id = $1', [sessionId]);
    return res.rows.map(toOverride);
  }

  /** The latest override of a session's rule replaces the one before (kept by session and rule, not by finding row). */
  async saveOverride(q: Queryable, workspace: string, o: Omit<OverrideRecord, 'created_at'>): Promise<OverrideRecord> {
    const res = await q.query<RawOverride>(
      `INSERT INTO sop_overrides (session_id, procedure_id, rule_id, workspace, correct, note, reviewer) VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (session_id, procedure_id, rule_id) DO UPDATE SET correct = EXCLUDED.correct, note = EXCLUDED.note, reviewer = EXCLUDED.reviewer, created_at = clock_timestamp()
       RETURNING session_id, procedure_id, rule_id, correct, note, reviewer, created_at`,
      [o.session_id, o.procedure_id, o.rule_id, workspace, o.correct, text(o.note), text(o.reviewer)],
    );
    return toOverride(res.rows[0]);
  }

  async finding(q: Queryable, workspace: string, id: string): Promise<FindingRef | null> {
    const res = await q.query<RawFindingRef>(`SELECT ${FINDING_REF} FROM sop_findings f WHERE f.workspace = $1 AND f.id = $2`, [workspace, id]);
    return res.rows[0] ? toFindingRef(res.rows[0]) : null;
  }

  /** The findings whose rule pattern or most specific pattern is one of these. */
  async findingsOfPatterns(q: Queryable, patternIds: readonly string[]): Promise<FindingRef[]> {
    if (!patternIds.length) return [];
    const res = await q.query<RawFindingRef>(
      `SELECT ${FINDING_REF} FROM sop_findings f WHERE f.rule_pattern_id = ANY($1::text[]) OR f.pattern_id = ANY($1::text[])`,
      [patternIds],
    );
    return res.rows.map(toFindingRef);
  }

  /** Writes each finding's patterns and suppression. */
  async setAssignment(q: Queryable, rows: readonly { id: string; pattern_id: string; rule_pattern_id: string; suppressed: boolean }[]): Promise<void> {
    if (!rows.length) return;
    await q.query(
      `UPDATE sop_findings f SET pattern_id = u.pattern_id, rule_pattern_id = u.rule_pattern_id, suppressed = u.suppressed
         FROM unnest($1::text[], $2::text[], $3::text[], $4::boolean[]) AS u(id, pattern_id, rule_pattern_id, suppressed) WHERE f.id = u.id`,
      [rows.map((r) => r.id), rows.map((r) => r.pattern_id), rows.map((r) => r.rule_pattern_id), rows.map((r) => r.suppressed)],
    );
  }

  async setSuppressed(q: Queryable, rows: readonly { id: string; suppressed: boolean }[]): Promise<void> {
    if (!rows.length) return;
    await q.query(
      `UPDATE sop_findings f SET suppressed = u.suppressed FROM unnest($1::text[], $2::boolean[]) AS u(id, suppressed) WHERE f.id = u.id`,
      [rows.map((r) => r.id), rows.map((r) => r.suppressed)],
    );
  }

  /** Every check of these sessions, with what the roll-up needs of its body. */
  async checksForRollup(q: Queryable, sessionIds: readonly string[]): Promise<RollupCheck[]> {
    if (!sessionIds.length) return [];
    const res = await q.query<{ session_id: string; procedure_id: string; release_id: string | null; result: string | null; checked_result: string | null; goal_reached: unknown; rules: unknown }>(
      `SELECT c.session_id, c.procedure_id, s.release_id, c.result, c.checked_result, c.body->'goal_reached' AS goal_reached,
              (SELECT COALESCE(jsonb_agg(jsonb_build_object('rule_id', r->'rule_id', 'kind', r->'kind', 'status', r->'status')), '[]'::jsonb)
                 FROM jsonb_array_elements(c.body->'rules') r) AS rules
         FROM sop_checks c JOIN sop_sessions s ON s.id = c.session_id
        WHERE c.session_id = ANY($1::text[]) ORDER BY c.session_id, c.position`,
      [sessionIds],
    );
    return res.rows.map((r) => {
      const goal = jsonColumn(r.goal_reached);
      return { session_id: r.session_id, procedure_id: r.procedure_id, release_id: r.release_id, result: r.result, checked_result: r.checked_result, goal_reached: typeof goal === 'boolean' ? goal : null, rules: jsonColumn(r.rules) as RollupCheck['rules'] };
    });
  }

  /** The (session, procedure, rule) of each suppressed finding of these sessions. */
  async suppressedRules(q: Queryable, sessionIds: readonly string[]): Promise<{ session_id: string; procedure_id: string; rule_id: string }[]> {
    if (!sessionIds.length) return [];
    const res = await q.query<{ session_id: string; procedure_id: string; rule_id: string }>(
      'SELECT session_id, procedure_id, rule_id FROM sop_findings WHERE session_id = ANY($1::text[]) AND suppressed',
      [sessionIds],
    );
    return res.rows;
  }

  /** Each release's lock (for its rules' `required`). */
  async releaseLocks(q: Queryable, ids: readonly string[]): Promise<Map<string, unknown>> {
    if (!ids.length) return new Map();
    const res = await q.query<{ id: string; lock: unknown }>('SELECT id, lock FROM sop_releases WHERE id = ANY($1::text[])', [ids]);
    return new Map(res.rows.map((r) => [r.id, jsonColumn(r.lock)]));
  }

  async setCheckResults(q: Queryable, rows: readonly { session_id: string; procedure_id: string; result: string | null }[]): Promise<void> {
    if (!rows.length) return;
    await q.query(
      `UPDATE sop_checks c SET result = u.result FROM unnest($1::text[], $2::text[], $3::text[]) AS u(session_id, procedure_id, result)
        WHERE c.session_id = u.session_id AND c.procedure_id = u.procedure_id`,
      [rows.map((r) => r.session_id), rows.map((r) => r.procedure_id), rows.map((r) => r.result)],
    );
  }

  async setSessionResults(q: Queryable, rows: readonly { session_id: string; result: string | null; checked_result: string | null }[]): Promise<void> {
    if (!rows.length) return;
    await q.query(
      `UPDATE sop_sessions s SET result = u.result, checked_result = u.checked_result
         FROM unnest($1::text[], $2::text[], $3::text[]) AS u(id, result, checked_result) WHERE s.id = u.id AND s.status = 'checked'`,
      [rows.map((r) => r.session_id), rows.map((r) => r.result), rows.map((r) => r.checked_result)],
    );
  }

  /** A session's findings as its GET shows them on its rules (pattern, suppressed). */
  async findingsOfSession(q: Queryable, sessionId: string): Promise<FindingRef[]> {
    const res = await q.query<RawFindingRef>(`SELECT ${FINDING_REF} FROM sop_findings f WHERE f.session_id = $1`, [sessionId]);
    return res.rows.map(toFindingRef);
  }
}

interface RawPattern extends Omit<PatternRecord, 'rule_ran_at' | 'reworded_at' | 'materially_reclustered_at' | 'created_at' | 'clustered_at' | 'retired_at'> {
  rule_ran_at: unknown;
  reworded_at: unknown;
  materially_reclustered_at: unknown;
  created_at: unknown;
  clustered_at: unknown;
  retired_at: unknown;
}
interface RawVerdict extends Omit<VerdictRecord, 'created_at'> {
  created_at: unknown;
}
interface RawOverride extends Omit<OverrideRecord, 'created_at'> {
  created_at: unknown;
}
interface RawFindingRef extends Omit<FindingRef, 'at'> {
  at: unknown;
}

export function jsonColumn(v: unknown): unknown {
  return typeof v === 'string' ? JSON.parse(v) : v;
}

function toPattern(r: RawPattern): PatternRecord {
  return {
    ...r,
    rule_index: Number(r.rule_index),
    rule_ran_at: isoNonNull(r.rule_ran_at),
    reworded_at: iso(r.reworded_at),
    materially_reclustered_at: iso(r.materially_reclustered_at),
    created_at: isoNonNull(r.created_at),
    clustered_at: iso(r.clustered_at),
    retired_at: iso(r.retired_at),
  };
}

function toVerdict(r: RawVerdict): VerdictRecord {
  return { pattern_id: r.pattern_id, verdict: r.verdict, note: r.note, reviewer: r.reviewer, carried_over: r.carried_over, created_at: isoNonNull(r.created_at) };
}

function toOverride(r: RawOverride): OverrideRecord {
  return { session_id: r.session_id, procedure_id: r.procedure_id, rule_id: r.rule_id, correct: r.correct, note: r.note, reviewer: r.reviewer, created_at: isoNonNull(r.created_at) };
}

function toFindingRef(r: RawFindingRef): FindingRef {
  return { ...r, index: Number(r.index), at: isoNonNull(r.at) };
}
