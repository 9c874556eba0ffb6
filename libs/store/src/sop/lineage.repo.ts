import type { Queryable } from '@neatroots/ports';
import { iso, isoNonNull, num } from '../sql';
import { jsonColumn } from '../review/patterns.repo';
import type { LineageHow } from './lineage.queries';

/** A rule_lineage row: which rule a rule replaced, and when its wording came to be. */
export interface LineageRow {
  procedure_id: string;
  rule_id: string;
  previous_rule_id: string | null;
  how: LineageHow;
  similarity: number | null;
  /** The first release with this wording. */
  release_id: string | null;
  /** That release's number and when it was published (the wording's birth), when it still exists. */
  release_number: number | null;
  release_at: string | null;
}

export type NewLineageRow = Pick<LineageRow, 'procedure_id' | 'rule_id' | 'previous_rule_id' | 'how' | 'similarity' | 'release_id'>;

/**
 * A rule_lineage_returns row: a wording that came back (in a release, not in the one before,
 * in an earlier one), a step of its lineage at `release_id`, with the wording it replaced
 * there. Its rule_lineage row is untouched, so it changes no lineage id.
 */
export interface LineageReturnRow extends Omit<LineageRow, 'release_id' | 'how'> {
  how: Exclude<LineageHow, 'manual'>;
  /** The release that brought it back. */
  release_id: string;
}

export type NewLineageReturnRow = Pick<LineageReturnRow, 'procedure_id' | 'rule_id' | 'previous_rule_id' | 'how' | 'similarity' | 'release_id'>;

/** A release as lineage reads it: its number, time and compiled procedures. */
export interface LineageRelease<Lock = unknown> {
  id: string;
  number: number;
  created_at: string;
  lock: Lock;
}

/** A misplaced-finding check's unit: the findings of one rule in one rule pattern. */
export interface RuleGroup {
  procedure_id: string;
  rule_id: string;
  rule_pattern_id: string;
}

const ROW = `l.procedure_id, l.rule_id, l.previous_rule_id, l.how, l.similarity, l.release_id, r.number AS release_number, r.created_at AS release_at`;

/**
 * The rule_lineage rows, and the statements that move findings, failure modes and verdicts
 * between rule patterns when the lineage changes. I/O only: which links a publish makes, and
 * which findings move, is decided by the review domain (@neatroots/review-domain lineage).
 * Every method takes the Queryable to run on (publish and the lineage endpoints run in one
 * transaction, under the workspace's row lock).
 */
export class LineageRepo {
  async rows(q: Queryable, workspace: string): Promise<LineageRow[]> {
    const res = await q.query<Omit<LineageRow, 'release_at' | 'release_number' | 'similarity'> & { release_number: unknown; release_at: unknown; similarity: unknown }>(
      `SELECT ${ROW} FROM rule_lineage l LEFT JOIN sop_releases r ON r.id = l.release_id WHERE l.workspace = $1 ORDER BY l.procedure_id, l.rule_id`,
      [workspace],
    );
    return res.rows.map((r) => ({
      ...r,
      similarity: r.similarity === null ? null : Number(r.similarity),
      release_number: r.release_number === null ? null : num(r.release_number),
      release_at: iso(r.release_at),
    }));
  }

  /** The wordings that came back, each at the release that brought it back (rule_lineage_returns), by release. */
  async returns(q: Queryable, workspace: string): Promise<LineageReturnRow[]> {
    const res = await q.query<Omit<LineageReturnRow, 'release_at' | 'release_number' | 'similarity'> & { release_number: unknown; release_at: unknown; similarity: unknown }>(
      `SELECT ${ROW} FROM rule_lineage_returns l JOIN sop_releases r ON r.id = l.release_id WHERE l.workspace = $1 ORDER BY r.number, l.procedure_id, l.rule_id`,
      [workspace],
    );
    return res.rows.map((r) => ({ ...r, similarity: r.similarity === null ? null : Number(r.similarity), release_number: num(r.release_number), release_at: iso(r.release_at) }));
  }

  /** Records wordings that came back (a publish's, or the rebuild's); one at a release is written once. */
  async writeReturns(q: Queryable, workspace: string, rows: readonly NewLineageReturnRow[]): Promise<number> {
    if (!rows.length) return 0;
    const res = await q.query(
      `INSERT INTO rule_lineage_returns (workspace, procedure_id, rule_id, release_id, previous_rule_id, how, similarity)
       SELECT $1, u.procedure_id, u.rule_id, u.release_id, u.previous_rule_id, u.how, u.similarity
         FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[]) AS u(procedure_id, rule_id, release_id, previous_rule_id, how, similarity)
       ON CONFLICT (workspace, procedure_id, rule_id, release_id) DO NOTHING RETURNING rule_id`,
      [
        workspace,
        rows.map((r) => r.procedure_id),
        rows.map((r) => r.rule_id),
        rows.map((r) => r.release_id),
        rows.map((r) => r.previous_rule_id),
        rows.map((r) => r.how),
        rows.map((r) => r.similarity),
      ],
    );
    return res.rows.length;
  }

  /**
   * Writes rows. `published`: a rule that has a row keeps it (links are never overwritten by a
   * publish or a rebuild). `manual`: replaces the rule's row, keeping the release it came in.
   */
  async write(q: Queryable, workspace: string, rows: readonly NewLineageRow[], mode: 'published' | 'manual'): Promise<number> {
    if (!rows.length) return 0;
    const conflict =
      mode === 'published'
        ? 'DO NOTHING'
        : 'DO UPDATE SET previous_rule_id = EXCLUDED.previous_rule_id, how = EXCLUDED.how, similarity = EXCLUDED.similarity, release_id = COALESCE(rule_lineage.release_id, EXCLUDED.release_id), created_at = now()';
    const res = await q.query(
      `INSERT INTO rule_lineage (workspace, procedure_id, rule_id, previous_rule_id, how, similarity, release_id)
       SELECT $1, u.procedure_id, u.rule_id, u.previous_rule_id, u.how, u.similarity, u.release_id
         FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::float8[], $7::text[]) AS u(procedure_id, rule_id, previous_rule_id, how, similarity, release_id)
       ON CONFLICT (workspace, procedure_id, rule_id) ${conflict} RETURNING rule_id`,
      [
        workspace,
        rows.map((r) => r.procedure_id),
        rows.map((r) => r.rule_id),
        rows.map((r) => r.previous_rule_id),
        rows.map((r) => r.how),
        rows.map((r) => r.similarity),
        rows.map((r) => r.release_id),
      ],
    );
    return res.rows.length;
  }

  /** The rebuild starts over from the manual rows: the others go, and every return (it recomputes them). */
  async deleteComputed(q: Queryable, workspace: string): Promise<void> {
    await q.query(`DELETE FROM rule_lineage WHERE workspace = $1 AND how <> 'manual'`, [workspace]);
    await q.query('DELETE FROM rule_lineage_returns WHERE workspace = $1', [workspace]);
  }

  /** Every release of the workspace, oldest first. */
  async releases<Lock>(q: Queryable, workspace: string): Promise<LineageRelease<Lock>[]> {
    const res = await q.query<{ id: string; number: unknown; created_at: unknown; lock: unknown }>(
      'SELECT id, number, created_at, lock FROM sop_releases WHERE workspace = $1 ORDER BY number',
      [workspace],
    );
    return res.rows.map((r) => ({ id: r.id, number: num(r.number), created_at: isoNonNull(r.created_at), lock: jsonColumn(r.lock) as Lock }));
  }

  /** Workspaces with releases and no lineage row yet (published before lineage was stored). */
  async workspacesToRebuild(q: Queryable): Promise<string[]> {
    const res = await q.query<{ workspace: string }>(
      'SELECT DISTINCT r.workspace FROM sop_releases r WHERE NOT EXISTS (SELECT 1 FROM rule_lineage l WHERE l.workspace = r.workspace) ORDER BY 1',
    );
    return res.rows.map((r) => r.workspace);
  }

  /** The rules with findings in each rule pattern (one row per rule and pattern). */
  async ruleGroups(q: Queryable, workspace: string): Promise<RuleGroup[]> {
    const res = await q.query<RuleGroup>(
      'SELECT procedure_id, rule_id, rule_pattern_id FROM sop_findings WHERE workspace = $1 AND rule_pattern_id IS NOT NULL GROUP BY 1, 2, 3',
      [workspace],
    );
    return res.rows;
  }

  /** Whether any of these rules of the workspace has a finding. */
  async anyFindings(q: Queryable, workspace: string, rules: readonly { procedure_id: string; rule_id: string }[]): Promise<boolean> {
    if (!rules.length) return false;
    const res = await q.query(
      `SELECT 1 FROM sop_findings WHERE workspace = $1 AND (procedure_id, rule_id) IN (SELECT * FROM unnest($2::text[], $3::text[])) LIMIT 1`,
      [workspace, rules.map((r) => r.procedure_id), rules.map((r) => r.rule_id)],
    );
    return res.rows.length > 0;
  }

  /** The newest finding of these rules of a procedure, as the wording of a pattern made for them. */
  async latestFinding(q: Queryable, workspace: string, procedureId: string, ruleIds: readonly string[]): Promise<{ rule_id: string; kind: 'step' | 'never' | 'warning'; index: number; text: string; at: string } | null> {
    const res = await q.query<{ rule_id: string; kind: 'step' | 'never' | 'warning'; index: unknown; text: string; at: unknown }>(
      `SELECT f.rule_id, f.kind, f.index, f.text, f.at FROM sop_findings f
        WHERE f.workspace = $1 AND f.procedure_id = $2 AND f.rule_id = ANY($3::text[]) ORDER BY f.at DESC, f.id LIMIT 1`,
      [workspace, procedureId, ruleIds],
    );
    const r = res.rows[0];
    return r ? { rule_id: r.rule_id, kind: r.kind, index: num(r.index), text: r.text, at: isoNonNull(r.at) } : null;
  }

  /** A rule pattern takes another key (its lineage id). */
  async setKey(q: Queryable, patternId: string, lineageId: string): Promise<void> {
    await q.query('UPDATE sop_patterns SET lineage_id = $2 WHERE id = $1', [patternId, lineageId]);
  }

  /**
   * Merges rule pattern `from` into `into`: its failure modes become `into`'s (two `other`
   * sub-patterns become one, `into`'s, with the findings, verdicts and suggestions of both), its
   * verdicts and findings move, and it is deleted.
   * Findings that were in `from` itself go to `into`'s other when `into` is split (they wait
   * there for the next recluster), else to `into`. Only active `other`s count: a retired one
   * (a rule split and then made whole) takes nothing.
   */
  async merge(q: Queryable, from: string, into: string): Promise<void> {
    const others = await q.query<{ id: string; parent_id: string }>(
      // Active ones only (as otherOf): a rule split and then made whole again keeps its other, retired.
      `SELECT id, parent_id FROM sop_patterns WHERE parent_id = ANY($1::text[]) AND kind = 'other' AND retired_at IS NULL ORDER BY created_at, id`,
      [[from, into]],
    );
    const intoOther = others.rows.find((r) => r.parent_id === into)?.id;
    const fromOther = others.rows.find((r) => r.parent_id === from)?.id;
    if (intoOther && fromOther) {
      await q.query('UPDATE sop_findings SET pattern_id = $2 WHERE pattern_id = $1', [fromOther, intoOther]);
      await q.query('UPDATE sop_verdicts SET pattern_id = $2 WHERE pattern_id = $1', [fromOther, intoOther]);
      // Its suggestions too: deleting it would delete them (a pull request open no longer followed).
      await q.query('UPDATE sop_suggestions SET pattern_id = $2 WHERE pattern_id = $1', [fromOther, intoOther]);
      await q.query('DELETE FROM sop_patterns WHERE id = $1', [fromOther]);
    }
    await q.query('UPDATE sop_patterns SET parent_id = $2 WHERE parent_id = $1', [from, into]);
    await q.query('UPDATE sop_verdicts SET pattern_id = $2 WHERE pattern_id = $1', [from, into]);
    const leaf = intoOther ?? fromOther ?? into;
    await q.query(
      `UPDATE sop_findings SET rule_pattern_id = $2, pattern_id = CASE WHEN pattern_id = $1 OR pattern_id = $2 THEN $3 ELSE pattern_id END
        WHERE rule_pattern_id = $1 OR (rule_pattern_id = $2 AND pattern_id = $2 AND $3 <> $2)`,
      [from, into, leaf],
    );
    await q.query('DELETE FROM sop_patterns WHERE id = $1', [from]);
  }

  /** The findings of one rule go to rule pattern `into` (and, in it, to `leaf`: its other when it is split). */
  async moveRule(q: Queryable, workspace: string, procedureId: string, ruleId: string, into: string, leaf: string): Promise<void> {
    await q.query(
      `UPDATE sop_findings SET rule_pattern_id = $4, pattern_id = $5
        WHERE workspace = $1 AND procedure_id = $2 AND rule_id = $3 AND rule_pattern_id IS NOT NULL AND rule_pattern_id <> $4`,
      [workspace, procedureId, ruleId, into, leaf],
    );
  }

  /** A rule pattern's other sub-pattern, when it is split. */
  async otherOf(q: Queryable, patternId: string): Promise<string | null> {
    const res = await q.query<{ id: string }>(`SELECT id FROM sop_patterns WHERE parent_id = $1 AND kind = 'other' AND retired_at IS NULL ORDER BY created_at, id LIMIT 1`, [patternId]);
    return res.rows[0]?.id ?? null;
  }

  /** Whether a pattern id is taken (rule pattern ids are derived from their first key). */
  async idTaken(q: Queryable, id: string): Promise<boolean> {
    return (await q.query('SELECT 1 FROM sop_patterns WHERE id = $1', [id])).rows.length > 0;
  }
}

/**
 * When a rule's wording came to be, for a rule that replaced another: when the first release
 * with it was published; for a wording that came back (A, B, then A again: its
 * rule_lineage_returns rows, `returns`), when the latest release that brought it back was
 * published, since a verdict given while another wording was live did not judge it as it
 * runs again. Null when unknown (a first wording never gone). A verdict older than that
 * judged an earlier wording (the reworded review state).
 */
export function wordingSince(rows: readonly LineageRow[], returns: readonly LineageReturnRow[] = []): (procedureId: string, ruleId: string) => string | null {
  const at = new Map(rows.filter((r) => r.previous_rule_id !== null).map((r) => [`${r.procedure_id}\0${r.rule_id}`, r.release_at]));
  for (const r of returns) {
    const k = `${r.procedure_id}\0${r.rule_id}`;
    const cur = at.get(k);
    if (r.release_at !== null && (cur === undefined || cur === null || r.release_at > cur)) at.set(k, r.release_at);
  }
  return (procedureId, ruleId) => at.get(`${procedureId}\0${ruleId}`) ?? null;
}

/**
 * SQL true for a finding (table alias `f`) on any wording of a rule's lineage: the rule id
 * itself, or any (procedure, rule) linked to it either way (rule_lineage_members). `ws` and
 * `rule` are SQL expressions (parameters); any wording's id names the whole lineage.
 */
export function onRuleLineage(f: string, ws: string, rule: string): string {
  return `(${f}.rule_id = ${rule} OR (${f}.procedure_id, ${f}.rule_id) IN (SELECT m.procedure_id, m.rule_id FROM rule_lineage_members(${ws}, ${rule}) m))`;
}

/** SQL true for a rule pattern (alias `p`) keyed by the lineage of a rule id (any of its wordings). */
export function patternOfRuleLineage(p: string, ws: string, rule: string): string {
  return `(${p}.lineage_id = ${rule} OR (${p}.procedure_id, ${p}.lineage_id) IN (SELECT m.procedure_id, m.rule_id FROM rule_lineage_members(${ws}, ${rule}) m))`;
}
