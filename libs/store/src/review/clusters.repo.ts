import type { Queryable } from '@neatroots/ports';
import { SPLIT_MAX_FINDINGS } from '@neatroots/review-domain';
import { patternOfRuleLineage } from '../sop/lineage.repo';
import { iso, isoNonNull, text } from '../sql';
import { jsonColumn } from './patterns.repo';

/** What reclusterDue reads of one active rule pattern. */
export interface RuleClusterRow {
  id: string;
  procedure_id: string;
  lineage_id: string;
  clustered_at: string | null;
  findings: number;
  new_since_clustering: number;
  /** Of its newest SPLIT_MAX_FINDINGS findings (what a split shows the model), those in `other`. */
  in_other: number;
}

/** A finding as a split or an assignment to a failure mode reads it. */
export interface ClusterFinding {
  id: string;
  session_id: string;
  procedure_id: string;
  rule_id: string;
  pattern_id: string | null;
  rule_pattern_id: string;
  suppressed: boolean;
  evidence: unknown[];
  reason: string | null;
}

export interface ThemeRecord {
  id: string;
  procedure_id: string;
  name: string;
  position: number;
  grouped_at: string;
  retired_at: string | null;
}

const CLUSTER_FINDING = 'f.id, f.session_id, f.procedure_id, f.rule_id, f.pattern_id, f.rule_pattern_id, f.suppressed, f.evidence, f.reason';

/**
 * The writes and reads of failure modes and themes (the recluster job). I/O only: when a rule
 * is due, how a split is matched to the old one and which theme continues which are decided by
 * the review domain; every method takes the Queryable to run on, so the service keeps one
 * transaction (holding the workspace's lock) per change.
 */
export class ClustersRepo {
  /** Every active rule pattern with findings, with what decides whether it is due (filtered by procedure, and by a rule id: any wording of its lineage). */
  async ruleFacts(q: Queryable, workspace: string, filter: { procedure?: string; lineage?: string } = {}): Promise<RuleClusterRow[]> {
    // Totals from the day counts (a few rows per rule pattern, kept exact by triggers) rather
    // than every finding: this runs after each session's assignment. Findings new since a
    // clustering are counted on the (rule_pattern_id, created_at) index, for clustered rules only,
    // and so are those in `other` among the newest SPLIT_MAX_FINDINGS (what a split shows the model).
    const res = await q.query<{ id: string; procedure_id: string; lineage_id: string; clustered_at: unknown; findings: unknown; new_since: unknown; in_other: unknown }>(
      `WITH totals AS (
         SELECT d.rule_pattern_id AS id, sum(d.n) AS findings
           FROM sop_finding_days d
          WHERE d.workspace = $1 AND d.rule_pattern_id <> ''
          GROUP BY d.rule_pattern_id HAVING sum(d.n) > 0)
       SELECT p.id, p.procedure_id, p.lineage_id, p.clustered_at, t.findings,
              CASE WHEN p.clustered_at IS NULL THEN 0
                   ELSE (SELECT count(*) FROM sop_findings f WHERE f.rule_pattern_id = p.id AND f.created_at > p.clustered_at) END AS new_since,
              CASE WHEN p.clustered_at IS NULL THEN 0
                   ELSE (SELECT count(*) FROM (SELECT f.pattern_id FROM sop_findings f WHERE f.rule_pattern_id = p.id ORDER BY f.created_at DESC, f.id DESC LIMIT $4) r
                           JOIN sop_patterns o ON o.id = r.pattern_id WHERE o.kind = 'other') END AS in_other
         FROM sop_patterns p JOIN totals t ON t.id = p.id
        WHERE p.workspace = $1 AND p.kind = 'rule' AND p.retired_at IS NULL
          AND ($2::text IS NULL OR p.procedure_id = $2) AND ($3::text IS NULL OR ${patternOfRuleLineage('p', '$1', '$3::text')})
        ORDER BY p.created_at, p.id`,
      [workspace, filter.procedure ?? null, filter.lineage ?? null, SPLIT_MAX_FINDINGS],
    );
    return res.rows.map((r) => ({
      id: r.id,
      procedure_id: r.procedure_id,
      lineage_id: r.lineage_id,
      clustered_at: iso(r.clustered_at),
      findings: Number(r.findings),
      new_since_clustering: Number(r.new_since),
      in_other: Number(r.in_other),
    }));
  }

  /** Every finding of a rule pattern, oldest first. */
  async findingsOfRule(q: Queryable, rulePatternId: string): Promise<ClusterFinding[]> {
    const res = await q.query<ClusterFinding>(`SELECT ${CLUSTER_FINDING} FROM sop_findings f WHERE f.rule_pattern_id = $1 ORDER BY f.created_at, f.id`, [rulePatternId]);
    return res.rows.map(toFinding);
  }

  /** Findings still on a rule pattern that is split (it has an active failure mode): they wait for a decision. */
  async waitingForMode(q: Queryable, workspace: string, limit: number): Promise<ClusterFinding[]> {
    const res = await q.query<ClusterFinding>(
      `SELECT ${CLUSTER_FINDING} FROM sop_findings f
        WHERE f.workspace = $1 AND f.pattern_id = f.rule_pattern_id
          AND EXISTS (SELECT 1 FROM sop_patterns c WHERE c.parent_id = f.rule_pattern_id AND c.retired_at IS NULL)
        ORDER BY f.created_at, f.id LIMIT $2`,
      [workspace, limit],
    );
    return res.rows.map(toFinding);
  }

  /** Creates a failure mode (kind sub) or a rule's `other`, with its rule pattern's rule columns. */
  async insertChild(q: Queryable, c: { id: string; parent_id: string; kind: 'sub' | 'other'; name: string; named_by: 'model' | 'rule_text'; description: string | null }): Promise<void> {
    await q.query(
      `INSERT INTO sop_patterns (id, workspace, procedure_id, procedure_name, lineage_id, kind, parent_id, name, named_by, description, rule_id, rule_kind, rule_index, rule_text, rule_ran_at, reworded_at, theme_id, clustered_at)
       SELECT $1, workspace, procedure_id, procedure_name, lineage_id, $3, id, $4, $5, $6, rule_id, rule_kind, rule_index, rule_text, rule_ran_at, reworded_at, theme_id, clock_timestamp()
         FROM sop_patterns WHERE id = $2`,
      [c.id, c.parent_id, c.kind, text(c.name), c.named_by, text(c.description)],
    );
  }

  async setClustered(q: Queryable, ids: readonly string[], at: string): Promise<void> {
    if (ids.length) await q.query('UPDATE sop_patterns SET clustered_at = $2::timestamptz WHERE id = ANY($1::text[])', [ids, at]);
  }

  /**
   * A recluster kept less than half of these patterns' findings: older verdicts need review.
   * Stamped with the time of the write (not when the model was asked), so a verdict given while
   * the model was thinking is older than the change and needs review too.
   */
  async setMaterial(q: Queryable, ids: readonly string[]): Promise<void> {
    if (ids.length) await q.query('UPDATE sop_patterns SET materially_reclustered_at = clock_timestamp() WHERE id = ANY($1::text[])', [ids]);
  }

  /** Retired, not deleted: their verdicts and history stay readable. */
  async retire(q: Queryable, ids: readonly string[], at: string): Promise<void> {
    if (ids.length) await q.query('UPDATE sop_patterns SET retired_at = $2::timestamptz WHERE id = ANY($1::text[]) AND retired_at IS NULL', [ids, at]);
  }

  /**
   * A verdict carried over from a retired failure mode (carried_over until a new verdict confirms
   * it). It keeps the original's created_at: what a verdict covers (the wordings of the rule up to
   * then) is dated by it, so a carried verdict covers no more than the one it carries.
   */
  async carryVerdict(q: Queryable, workspace: string, patternId: string, v: { verdict: string; note: string | null; reviewer: string | null; created_at: string }): Promise<void> {
    await q.query(`INSERT INTO sop_verdicts (workspace, pattern_id, verdict, note, reviewer, carried_over, created_at) VALUES ($1, $2, $3, $4, $5, true, $6::timestamptz)`, [
      workspace,
      patternId,
      v.verdict,
      text(v.note),
      text(v.reviewer),
      v.created_at,
    ]);
  }

  /** Moves findings to another pattern of the same rule, only those still where `from` says (a concurrent move wins). */
  async moveFindings(q: Queryable, rows: readonly { id: string; from: string | null; pattern_id: string; suppressed: boolean }[]): Promise<number> {
    if (!rows.length) return 0;
    const res = await q.query<{ id: string }>(
      `UPDATE sop_findings f SET pattern_id = u.pattern_id, suppressed = u.suppressed
         FROM unnest($1::text[], $2::text[], $3::text[], $4::boolean[]) AS u(id, from_id, pattern_id, suppressed)
        WHERE f.id = u.id AND f.pattern_id IS NOT DISTINCT FROM u.from_id RETURNING f.id`,
      [rows.map((r) => r.id), rows.map((r) => r.from), rows.map((r) => r.pattern_id), rows.map((r) => r.suppressed)],
    );
    return res.rows.length;
  }

  /** The procedure's active themes, in session order, with their rule patterns. */
  async themes(q: Queryable, workspace: string, procedureId: string): Promise<(ThemeRecord & { patterns: string[] })[]> {
    const res = await q.query<RawTheme & { patterns: unknown }>(
      `SELECT t.id, t.procedure_id, t.name, t.position, t.grouped_at, t.retired_at,
              COALESCE((SELECT array_agg(p.id ORDER BY p.id) FROM sop_patterns p WHERE p.theme_id = t.id AND p.kind = 'rule'), '{}') AS patterns
         FROM sop_themes t WHERE t.workspace = $1 AND t.procedure_id = $2 AND t.retired_at IS NULL ORDER BY t.position, t.id`,
      [workspace, procedureId],
    );
    return res.rows.map((r) => ({ ...toTheme(r), patterns: (jsonColumn(r.patterns) as string[] | null) ?? [] }));
  }

  /** Every theme of the workspace by id (retired ones too: a pattern shows the theme it has). */
  async themesOf(q: Queryable, workspace: string): Promise<Map<string, ThemeRecord>> {
    const res = await q.query<RawTheme>('SELECT id, procedure_id, name, position, grouped_at, retired_at FROM sop_themes WHERE workspace = $1', [workspace]);
    return new Map(res.rows.map((r) => [r.id, toTheme(r)]));
  }

  async saveTheme(q: Queryable, workspace: string, t: { id: string; procedure_id: string; name: string; position: number }): Promise<void> {
    await q.query(
      `INSERT INTO sop_themes (id, workspace, procedure_id, name, position) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, position = EXCLUDED.position, grouped_at = clock_timestamp(), retired_at = NULL`,
      [t.id, workspace, t.procedure_id, text(t.name), t.position],
    );
  }

  async retireThemes(q: Queryable, ids: readonly string[]): Promise<void> {
    if (ids.length) await q.query('UPDATE sop_themes SET retired_at = clock_timestamp() WHERE id = ANY($1::text[]) AND retired_at IS NULL', [ids]);
  }

  /** Sets each rule pattern's theme (null: in none), and its failure modes' with it. */
  async setThemes(q: Queryable, rows: readonly { pattern_id: string; theme_id: string | null }[]): Promise<void> {
    if (!rows.length) return;
    await q.query(
      `UPDATE sop_patterns p SET theme_id = u.theme_id FROM unnest($1::text[], $2::text[]) AS u(id, theme_id) WHERE p.id = u.id OR p.parent_id = u.id`,
      [rows.map((r) => r.pattern_id), rows.map((r) => r.theme_id)],
    );
  }

  /**
   * Procedures with an active rule pattern in no theme that was created since their themes were
   * last grouped (one the model left out of every theme is not asked about again until then).
   */
  async ungroupedProcedures(q: Queryable, workspace: string): Promise<string[]> {
    const res = await q.query<{ procedure_id: string }>(
      `SELECT DISTINCT p.procedure_id FROM sop_patterns p
        WHERE p.workspace = $1 AND p.kind = 'rule' AND p.retired_at IS NULL AND p.theme_id IS NULL
          AND p.created_at > COALESCE((SELECT max(t.grouped_at) FROM sop_themes t WHERE t.workspace = $1 AND t.procedure_id = p.procedure_id), '-infinity'::timestamptz)
        ORDER BY 1`,
      [workspace],
    );
    return res.rows.map((r) => r.procedure_id);
  }

  /**
   * Whether the workspace knows a procedure, or a rule (in that procedure when one is given):
   * in one of its releases, in a finding, in a rule pattern, or (a rule) in its lineage. What a
   * recluster's filter must name, else it would match nothing and look done.
   */
  async knows(q: Queryable, workspace: string, filter: { procedure?: string; rule?: string }): Promise<boolean> {
    const res = await q.query<{ known: boolean }>(
      `SELECT (
         EXISTS (SELECT 1 FROM sop_releases r CROSS JOIN LATERAL jsonb_array_elements(
                   CASE WHEN jsonb_typeof(r.lock->'procedures') = 'array' THEN r.lock->'procedures' ELSE '[]'::jsonb END) p
                  WHERE r.workspace = $1 AND ($2::text IS NULL OR p->>'procedure_id' = $2)
                    AND ($3::text IS NULL OR (jsonb_typeof(p->'rules') = 'array' AND EXISTS (SELECT 1 FROM jsonb_array_elements(p->'rules') x WHERE x->>'rule_id' = $3))))
         OR EXISTS (SELECT 1 FROM sop_findings f WHERE f.workspace = $1 AND ($2::text IS NULL OR f.procedure_id = $2) AND ($3::text IS NULL OR f.rule_id = $3))
         OR EXISTS (SELECT 1 FROM sop_patterns p WHERE p.workspace = $1 AND ($2::text IS NULL OR p.procedure_id = $2)
                      AND ($3::text IS NULL OR ${patternOfRuleLineage('p', '$1', '$3::text')}))
         OR ($3::text IS NOT NULL AND EXISTS (SELECT 1 FROM rule_lineage l WHERE l.workspace = $1 AND ($2::text IS NULL OR l.procedure_id = $2) AND (l.rule_id = $3 OR l.previous_rule_id = $3)))
       ) AS known`,
      [workspace, filter.procedure ?? null, filter.rule ?? null],
    );
    return res.rows[0]?.known === true;
  }

  /** The workspace's last clustering (a split or a regrouping of themes), or null. */
  async lastClustering(q: Queryable, workspace: string): Promise<string | null> {
    const res = await q.query<{ at: unknown }>(
      `SELECT GREATEST((SELECT max(clustered_at) FROM sop_patterns WHERE workspace = $1), (SELECT max(grouped_at) FROM sop_themes WHERE workspace = $1)) AS at`,
      [workspace],
    );
    return iso(res.rows[0]?.at);
  }

  /** Workspaces with at least one rule pattern (the daily recluster goes through them). */
  async workspacesWithPatterns(q: Queryable): Promise<string[]> {
    const res = await q.query<{ workspace: string }>(`SELECT DISTINCT workspace FROM sop_patterns WHERE kind = 'rule' ORDER BY workspace`);
    return res.rows.map((r) => r.workspace);
  }
}

interface RawTheme extends Omit<ThemeRecord, 'grouped_at' | 'retired_at'> {
  grouped_at: unknown;
  retired_at: unknown;
}

function toTheme(r: RawTheme): ThemeRecord {
  return { id: r.id, procedure_id: r.procedure_id, name: r.name, position: Number(r.position), grouped_at: isoNonNull(r.grouped_at), retired_at: iso(r.retired_at) };
}

function toFinding(r: ClusterFinding): ClusterFinding {
  return { ...r, evidence: (jsonColumn(r.evidence) as unknown[]) ?? [] };
}
