import type { Queryable } from '@neatroots/ports';
import { iso } from '../sql';
import { jsonColumn } from './patterns.repo';
import type { VerdictName } from './queries';

/**
 * What calibration reads and writes (migration 0014): reviewed findings with what labels them
 * (their pattern's verdict, their rule pattern's, their override) and the decisions their
 * check kept; and the bands fitted per workspace, procedure, rule and question.
 */
export interface LabeledFindingRow {
  finding_id: string;
  session_id: string;
  procedure_id: string;
  rule_id: string;
  status: string;
  /** The rule pattern's lineage id and current wording (null: not assigned to a pattern yet). */
  lineage_id: string | null;
  wording_rule_id: string | null;
  reworded_at: string | null;
  /** The latest verdict of its most specific pattern, and of its rule pattern. */
  own_verdict: { verdict: VerdictName; created_at: string } | null;
  rule_verdict: { verdict: VerdictName; created_at: string } | null;
  override: { correct: boolean } | null;
  /** The decisions its check kept for the finding's rule ([] for checks made without them). */
  decisions: { field: string; p: number }[];
}

export interface StoredBand {
  procedure_id: string;
  rule_id: string;
  field: string;
  wording: string;
  band: [number, number, number];
  lineage_id: string;
  release_id: string | null;
  labels: number;
  negative_labels: number;
  fitted_at?: string;
}

export class CalibrationRepo {
  /**
   * Findings with a verdict on their pattern (or their rule pattern) or an override, in the
   * workspace (one procedure when given). Found from the few judged patterns and overrides,
   * not by reading every finding.
   */
  async labeledFindings(q: Queryable, workspace: string, procedureId: string | null): Promise<LabeledFindingRow[]> {
    const res = await q.query<RawLabeled>(
      `WITH judged AS (SELECT DISTINCT pattern_id FROM sop_verdicts WHERE workspace = $1),
       cand AS (
         SELECT f.id FROM sop_findings f JOIN judged j ON f.pattern_id = j.pattern_id
         UNION SELECT f.id FROM sop_findings f JOIN judged j ON f.rule_pattern_id = j.pattern_id
         UNION SELECT f.id FROM sop_overrides o JOIN sop_findings f ON f.session_id = o.session_id AND f.procedure_id = o.procedure_id AND f.rule_id = o.rule_id
          WHERE o.workspace = $1
       )
       SELECT f.id AS finding_id, f.session_id, f.procedure_id, f.rule_id, f.status,
              rp.lineage_id, rp.rule_id AS wording_rule_id, rp.reworded_at,
              pv.verdict AS own_verdict, pv.created_at AS own_verdict_at,
              rv.verdict AS rule_verdict, rv.created_at AS rule_verdict_at,
              o.correct AS override,
              (SELECT coalesce(jsonb_agg(jsonb_build_object('field', d->>'field', 'p', d->'p')), '[]'::jsonb)
                 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(c.body->'decisions') = 'array' THEN c.body->'decisions' ELSE '[]'::jsonb END) d
                WHERE d->>'rule_id' = f.rule_id) AS decisions
         FROM cand JOIN sop_findings f ON f.id = cand.id
         LEFT JOIN sop_patterns rp ON rp.id = f.rule_pattern_id
         LEFT JOIN LATERAL (SELECT verdict, created_at FROM sop_verdicts v WHERE v.pattern_id = f.pattern_id ORDER BY created_at DESC, seq DESC LIMIT 1) pv ON true
         LEFT JOIN LATERAL (SELECT verdict, created_at FROM sop_verdicts v WHERE v.pattern_id = f.rule_pattern_id ORDER BY created_at DESC, seq DESC LIMIT 1) rv ON true
         LEFT JOIN sop_overrides o ON o.session_id = f.session_id AND o.procedure_id = f.procedure_id AND o.rule_id = f.rule_id
         LEFT JOIN sop_checks c ON c.session_id = f.session_id AND c.procedure_id = f.procedure_id
        WHERE f.workspace = $1 AND ($2::text IS NULL OR f.procedure_id = $2)
        ORDER BY f.procedure_id, f.session_id, f.rule_id`,
      [workspace, procedureId],
    );
    return res.rows.map((r) => ({
      finding_id: r.finding_id,
      session_id: r.session_id,
      procedure_id: r.procedure_id,
      rule_id: r.rule_id,
      status: r.status,
      lineage_id: r.lineage_id,
      wording_rule_id: r.wording_rule_id,
      reworded_at: iso(r.reworded_at),
      own_verdict: r.own_verdict ? { verdict: r.own_verdict, created_at: iso(r.own_verdict_at)! } : null,
      rule_verdict: r.rule_verdict ? { verdict: r.rule_verdict, created_at: iso(r.rule_verdict_at)! } : null,
      override: r.override === null ? null : { correct: r.override },
      decisions: ((jsonColumn(r.decisions) ?? []) as { field: string; p: unknown }[])
        .map((d) => ({ field: d.field, p: Number(d.p) }))
        .filter((d) => Number.isFinite(d.p)),
    }));
  }

  async bands(q: Queryable, workspace: string): Promise<StoredBand[]> {
    const res = await q.query<RawBand>(
      `SELECT procedure_id, rule_id, field, wording, band_no, band_yes, band_decide, lineage_id, release_id, labels, negative_labels, fitted_at
         FROM sop_calibration_bands WHERE workspace = $1 ORDER BY procedure_id, rule_id, field`,
      [workspace],
    );
    return res.rows.map((r) => ({
      procedure_id: r.procedure_id,
      rule_id: r.rule_id,
      field: r.field,
      wording: r.wording,
      band: [Number(r.band_no), Number(r.band_yes), Number(r.band_decide)],
      lineage_id: r.lineage_id,
      release_id: r.release_id,
      labels: Number(r.labels),
      negative_labels: Number(r.negative_labels),
      fitted_at: iso(r.fitted_at) ?? undefined,
    }));
  }

  /** A fit replaces the procedure's bands: questions it did not widen go back to the settings'. */
  async replaceProcedureBands(q: Queryable, workspace: string, procedureId: string, rows: readonly StoredBand[]): Promise<void> {
    await q.query('DELETE FROM sop_calibration_bands WHERE workspace = $1 AND procedure_id = $2', [workspace, procedureId]);
    if (!rows.length) return;
    await q.query(
      `INSERT INTO sop_calibration_bands (workspace, procedure_id, rule_id, field, wording, band_no, band_yes, band_decide, lineage_id, release_id, labels, negative_labels)
       SELECT $1, $2, r.rule_id, r.field, r.wording, r.band_no, r.band_yes, r.band_decide, r.lineage_id, r.release_id, r.labels, r.negative_labels
         FROM jsonb_to_recordset($3::jsonb) AS r(rule_id text, field text, wording text, band_no float8, band_yes float8, band_decide float8,
                                                 lineage_id text, release_id text, labels int, negative_labels int)`,
      [
        workspace,
        procedureId,
        JSON.stringify(rows.map((r) => ({ ...r, band_no: r.band[0], band_yes: r.band[1], band_decide: r.band[2] }))),
      ],
    );
  }
}

interface RawLabeled {
  finding_id: string;
  session_id: string;
  procedure_id: string;
  rule_id: string;
  status: string;
  lineage_id: string | null;
  wording_rule_id: string | null;
  reworded_at: unknown;
  own_verdict: VerdictName | null;
  own_verdict_at: unknown;
  rule_verdict: VerdictName | null;
  rule_verdict_at: unknown;
  override: boolean | null;
  decisions: unknown;
}

interface RawBand {
  procedure_id: string;
  rule_id: string;
  field: string;
  wording: string;
  band_no: unknown;
  band_yes: unknown;
  band_decide: unknown;
  lineage_id: string;
  release_id: string | null;
  labels: unknown;
  negative_labels: unknown;
  fitted_at: unknown;
}
