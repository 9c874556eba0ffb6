import type { Db } from '@neatroots/ports';
import { iso, num } from '../sql';
import { onRuleLineage, patternOfRuleLineage } from '../sop/lineage.repo';
import { jsonColumn } from './patterns.repo';
import { APPLIED_STATUSES } from './suggestions.repo';

/** [from, to) by when each session happened (started_at, else when it was received or its finding stored). */
export interface ReviewWindow {
  from: string;
  to: string;
}

export interface FindingCounts {
  rule_pattern_id: string;
  pattern_id: string;
  findings: number;
  suppressed: number;
  /** Not suppressed, stored after the latest verdict of pattern_id (all of them without one). */
  new_findings: number;
  first_seen: string | null;
  last_seen: string | null;
}

/** A rule pattern's findings on one wording of its rule (procedure and rule id), suppressed or not. */
export interface WordingCount {
  procedure_id: string;
  rule_id: string;
  n: number;
}

/** An active leaf pattern's review queue facts (ReviewReadRepo.queueFacts). */
export interface QueueFacts {
  id: string;
  kind: PatternRef['kind'];
  parent_id: string | null;
  findings: number;
  suppressed: number;
  /** The verdict it goes by (own latest, else its rule pattern's), null without one. */
  verdict: 'real' | 'acceptable' | 'sop_wrong' | 'checker_wrong' | null;
  verdict_at: string | null;
  carried_over: boolean;
  inherited: boolean;
  materially_reclustered_at: string | null;
  /** Its rule's: the rule pattern's (its parent's for a failure mode). */
  reworded_at: string | null;
  /** A suggestion in an applied status for it or its rule pattern, at any time. */
  applied: boolean;
}

export interface ExampleRow {
  pattern_id: string;
  finding_id: string;
  session_id: string;
  external_id: string;
  started_at: string | null;
  status: string;
  evidence: unknown[];
  reason: string | null;
  suppressed: boolean;
}

const AT = 'f.at';

/** A pattern whose findings are read: a rule pattern has every finding of its rule (rule_pattern_id), a failure mode its own (pattern_id). */
export interface PatternRef {
  id: string;
  kind: 'rule' | 'sub' | 'other';
}
const column = (p: Pick<PatternRef, 'kind'>) => (p.kind === 'rule' ? 'f.rule_pattern_id' : 'f.pattern_id');
const SESSION_AT = 's.at';
const DAY_MS = 86_400_000;
const WEEK_MS = 7 * DAY_MS;

export interface WeekCount {
  procedure_id: string | null;
  rule_pattern_id: string | null;
  /** Monday of the week (UTC, YYYY-MM-DD). */
  week: string;
  suppressed: boolean;
  n: number;
}

/** A week counted as a whole number (Monday-aligned, from the epoch) as its Monday, YYYY-MM-DD (UTC). */
function weekLabel(week: unknown): string {
  return new Date(Number(week) * WEEK_MS - 3 * DAY_MS).toISOString().slice(0, 10);
}

function weekRow(r: { procedure_id: string | null; rule_pattern_id: string | null; week: unknown; suppressed: boolean; n: unknown }): WeekCount {
  return { procedure_id: r.procedure_id, rule_pattern_id: r.rule_pattern_id, suppressed: r.suppressed, week: weekLabel(r.week), n: num(r.n) };
}

/**
 * The read side of patterns: counts, examples and the Insights aggregates, in SQL over the
 * finding and session tables (what counts as suppressed is already written on each finding
 * by the review service, so these only count).
 */
export class ReviewReadRepo {
  constructor(private readonly db: Db) {}

  /**
   * An aggregate over most of a workspace's findings or sessions, read from a covering index.
   * Postgres's default random_page_cost (4, for spinning disks) makes it scan the wide rows
   * instead (evidence, check bodies), about twice as slow at 300,000 findings on an SSD
   * (bench/review.js); the SSD value applies to this statement's transaction only.
   */
  private async aggregate<R>(sql: string, params: readonly unknown[]): Promise<{ rows: R[] }> {
    if (this.db.kind !== 'postgres') return this.db.query<R>(sql, params);
    return this.db.transaction(async (tx) => {
      await tx.query('SET LOCAL random_page_cost = 1.1');
      return tx.query<R>(sql, params);
    });
  }

  /** Per (rule pattern, most specific pattern): findings and suppressed ones, in the window (null: all time). */
  async findingCounts(workspace: string, window: ReviewWindow | null, filter: { procedure?: string; lineage?: string; rulePattern?: string } = {}): Promise<FindingCounts[]> {
    const params: unknown[] = [workspace];
    const where = ['f.workspace = $1', 'f.pattern_id IS NOT NULL'];
    if (window) {
      params.push(window.from, window.to);
      where.push(`${AT} >= $2::timestamptz`, `${AT} < $3::timestamptz`);
    }
    if (filter.procedure !== undefined) {
      params.push(filter.procedure);
      where.push(`f.procedure_id = $${params.length}`);
    }
    if (filter.lineage !== undefined) {
      params.push(filter.lineage);
      where.push(`(${onRuleLineage('f', '$1', `$${params.length}`)} OR f.rule_pattern_id IN (SELECT id FROM sop_patterns WHERE workspace = $1 AND lineage_id = $${params.length}))`);
    }
    if (filter.rulePattern !== undefined) {
      params.push(filter.rulePattern);
      where.push(`f.rule_pattern_id = $${params.length}`);
    }
    const res = await this.aggregate<{ rule_pattern_id: string; pattern_id: string; findings: unknown; suppressed: unknown; new_findings: unknown; first_seen: unknown; last_seen: unknown }>(
      `WITH v AS (SELECT pattern_id, max(created_at) AS at FROM sop_verdicts WHERE workspace = $1 GROUP BY pattern_id)
       SELECT f.rule_pattern_id, f.pattern_id,
              count(*) FILTER (WHERE NOT f.suppressed) AS findings,
              count(*) FILTER (WHERE f.suppressed) AS suppressed,
              count(*) FILTER (WHERE NOT f.suppressed AND (v.at IS NULL OR f.created_at > v.at)) AS new_findings,
              min(${AT}) AS first_seen, max(${AT}) AS last_seen
         FROM sop_findings f LEFT JOIN v ON v.pattern_id = f.pattern_id
        WHERE ${where.join(' AND ')}
        GROUP BY f.rule_pattern_id, f.pattern_id`,
      params,
    );
    return res.rows.map((r) => ({
      rule_pattern_id: r.rule_pattern_id,
      pattern_id: r.pattern_id,
      findings: num(r.findings),
      suppressed: num(r.suppressed),
      new_findings: num(r.new_findings),
      first_seen: iso(r.first_seen),
      last_seen: iso(r.last_seen),
    }));
  }

  /**
   * The review queue's facts of every active leaf pattern with findings (a rule pattern that is
   * not split, else its failure modes and other; retired ones left out), one small row each:
   * its all-time counts from sop_finding_days, the verdict it goes by (its own latest, else its
   * rule pattern's), when it was materially reclustered, when its rule was reworded, and whether
   * a suggestion was ever applied for it (or, inherited, for its rule pattern). What its review
   * state needs but for the findings per wording and the fix facts, which the few patterns whose
   * state depends on them read on their own. No pattern's other columns, verdict history or
   * findings are read.
   */
  async queueFacts(workspace: string): Promise<QueueFacts[]> {
    const res = await this.db.query<{
      id: string;
      kind: PatternRef['kind'];
      parent_id: string | null;
      findings: unknown;
      suppressed: unknown;
      verdict: QueueFacts['verdict'];
      verdict_at: unknown;
      carried_over: boolean | null;
      inherited: boolean | null;
      materially_reclustered_at: unknown;
      reworded_at: unknown;
      applied: boolean;
    }>(
      // The verdicts by LATERAL ... LIMIT 1 on their index, one pattern at a time, not joined as a
      // set: before the first ANALYZE of an embedded database the planner took a set of 2,400
      // verdicts for 5 rows and joined it by a nested loop over the 3,000 patterns (14 s).
      `WITH days AS (
              SELECT pattern_id, sum(n) FILTER (WHERE NOT suppressed) AS findings, sum(n) FILTER (WHERE suppressed) AS suppressed
                FROM sop_finding_days WHERE workspace = $1 AND pattern_id <> '' GROUP BY pattern_id)
       SELECT p.id, p.kind, p.parent_id, COALESCE(d.findings, 0) AS findings, COALESCE(d.suppressed, 0) AS suppressed,
              COALESCE(o.verdict, po.verdict) AS verdict,
              CASE WHEN o.verdict IS NOT NULL THEN o.created_at ELSE po.created_at END AS verdict_at,
              CASE WHEN o.verdict IS NOT NULL THEN o.carried_over ELSE po.carried_over END AS carried_over,
              CASE WHEN o.verdict IS NOT NULL THEN false WHEN po.verdict IS NOT NULL THEN true END AS inherited,
              p.materially_reclustered_at,
              CASE WHEN r.id IS NOT NULL THEN r.reworded_at ELSE p.reworded_at END AS reworded_at,
              EXISTS (SELECT 1 FROM sop_suggestions s WHERE s.pattern_id IN (p.id, p.parent_id) AND s.status = ANY($2::text[])) AS applied
         FROM days d JOIN sop_patterns p ON p.id = d.pattern_id
         LEFT JOIN sop_patterns r ON r.id = p.parent_id
         LEFT JOIN LATERAL (SELECT v.verdict, v.created_at, v.carried_over FROM sop_verdicts v WHERE v.pattern_id = p.id ORDER BY v.created_at DESC, v.seq DESC LIMIT 1) o ON true
         LEFT JOIN LATERAL (SELECT v.verdict, v.created_at, v.carried_over FROM sop_verdicts v WHERE v.pattern_id = p.parent_id ORDER BY v.created_at DESC, v.seq DESC LIMIT 1) po ON true
        WHERE p.workspace = $1 AND p.retired_at IS NULL AND COALESCE(d.findings, 0) + COALESCE(d.suppressed, 0) > 0
          AND NOT (p.kind = 'rule' AND EXISTS (SELECT 1 FROM sop_patterns c WHERE c.parent_id = p.id AND c.retired_at IS NULL))`,
      [workspace, [...APPLIED_STATUSES]],
    );
    return res.rows.map((r) => ({
      id: r.id,
      kind: r.kind,
      parent_id: r.parent_id,
      findings: num(r.findings),
      suppressed: num(r.suppressed),
      verdict: r.verdict,
      verdict_at: iso(r.verdict_at),
      carried_over: r.carried_over ?? false,
      inherited: r.inherited ?? false,
      materially_reclustered_at: iso(r.materially_reclustered_at),
      reworded_at: iso(r.reworded_at),
      applied: r.applied,
    }));
  }

  /**
   * For these patterns with a verdict, the findings stored since it (not suppressed), from the
   * index on (pattern_id, created_at). The verdict is the one the pattern goes by: its own
   * latest, else (a failure mode without one) its rule pattern's latest. Patterns without a
   * verdict are left out (every finding is new).
   */
  async newSinceVerdict(workspace: string, patternIds: readonly string[]): Promise<Map<string, number>> {
    if (!patternIds.length) return new Map();
    const res = await this.db.query<{ pattern_id: string; n: unknown }>(
      // Pattern by pattern on the indexes (verdicts by pattern and time, findings by pattern and
      // time), whatever the planner's statistics: no set of verdicts joined to every finding.
      `SELECT p.id AS pattern_id,
              (SELECT count(*) FROM sop_findings f WHERE f.pattern_id = p.id AND f.created_at > v.at AND NOT f.suppressed) AS n
         FROM sop_patterns p
        CROSS JOIN LATERAL (SELECT COALESCE(
                (SELECT max(created_at) FROM sop_verdicts WHERE workspace = $1 AND pattern_id = p.id),
                (SELECT max(created_at) FROM sop_verdicts WHERE workspace = $1 AND pattern_id = p.parent_id)) AS at) v
        WHERE p.workspace = $1 AND p.id = ANY($2::text[]) AND v.at IS NOT NULL`,
      [workspace, [...patternIds]],
    );
    return new Map(res.rows.map((r) => [r.pattern_id, num(r.n)]));
  }

  /**
   * Each pattern's own findings (suppressed or not) per wording of its rule, by pattern id: a
   * rule pattern's all, a failure mode's (or other's) only its own, not its siblings'. The
   * reworded review state counts those on a wording newer than the verdict.
   */
  async wordingCounts(patterns: readonly Pick<PatternRef, 'id' | 'kind'>[]): Promise<Map<string, WordingCount[]>> {
    const out = new Map<string, WordingCount[]>();
    for (const kind of ['rule', 'sub'] as const) {
      const ids = [...new Set(patterns.filter((p) => (p.kind === 'rule') === (kind === 'rule')).map((p) => p.id))];
      if (!ids.length) continue;
      const col = column({ kind });
      const res = await this.db.query<{ id: string; procedure_id: string; rule_id: string; n: unknown }>(
        `SELECT ${col} AS id, f.procedure_id, f.rule_id, count(*) AS n FROM sop_findings f
          WHERE ${col} = ANY($1::text[]) GROUP BY 1, 2, 3`,
        [ids],
      );
      for (const r of res.rows) (out.get(r.id) ?? out.set(r.id, []).get(r.id)!).push({ procedure_id: r.procedure_id, rule_id: r.rule_id, n: num(r.n) });
    }
    return out;
  }

  /** The newest `per` findings of each pattern, with their session. */
  async examples(patterns: readonly PatternRef[], per: number): Promise<ExampleRow[]> {
    const out: ExampleRow[] = [];
    for (const kind of ['rule', 'sub'] as const) {
      const ids = patterns.filter((p) => (p.kind === 'rule') === (kind === 'rule')).map((p) => p.id);
      if (ids.length) out.push(...(await this.examplesBy(ids, per, column({ kind }))));
    }
    return out;
  }

  private async examplesBy(patternIds: readonly string[], per: number, col: string): Promise<ExampleRow[]> {
    const res = await this.db.query<Omit<ExampleRow, 'started_at' | 'evidence'> & { started_at: unknown; evidence: unknown }>(
      `SELECT p.id AS pattern_id, e.* FROM unnest($1::text[]) AS p(id) CROSS JOIN LATERAL (
         SELECT f.id AS finding_id, f.session_id, s.external_id, s.started_at, f.status, f.evidence, f.reason, f.suppressed
           FROM sop_findings f JOIN sop_sessions s ON s.id = f.session_id
          WHERE ${col} = p.id
          ORDER BY f.created_at DESC LIMIT $2) e`,
      [patternIds, per],
    );
    return res.rows.map((r) => ({ ...r, started_at: iso(r.started_at), evidence: (jsonColumn(r.evidence) as unknown[]) ?? [] }));
  }

  /** A pattern's sessions in the window, newest first, with the finding, its suppression and override. */
  async sessionsOf(p: PatternRef, window: ReviewWindow, limit: number): Promise<{ session_id: string; external_id: string; started_at: string | null; finding_id: string; status: string; suppressed: boolean; correct: boolean | null; note: string | null; reviewer: string | null }[]> {
    const res = await this.db.query<{ session_id: string; external_id: string; started_at: unknown; finding_id: string; status: string; suppressed: boolean; correct: boolean | null; note: string | null; reviewer: string | null }>(
      `SELECT f.session_id, s.external_id, s.started_at, f.id AS finding_id, f.status, f.suppressed, o.correct, o.note, o.reviewer
         FROM sop_findings f JOIN sop_sessions s ON s.id = f.session_id
         LEFT JOIN sop_overrides o ON o.session_id = f.session_id AND o.procedure_id = f.procedure_id AND o.rule_id = f.rule_id
        WHERE ${column(p)} = $1 AND ${AT} >= $2::timestamptz AND ${AT} < $3::timestamptz
        ORDER BY ${AT} DESC, f.id LIMIT $4`,
      [p.id, window.from, window.to, limit],
    );
    return res.rows.map((r) => ({ ...r, started_at: iso(r.started_at) }));
  }

  /** Every wording of the rule with findings in the pattern, newest first. */
  async wordings(p: PatternRef): Promise<{ rule_id: string; text: string; findings: number; last_seen: string | null }[]> {
    const res = await this.db.query<{ rule_id: string; text: string; findings: unknown; last_seen: unknown }>(
      `SELECT f.rule_id, f.text, count(*) AS findings, max(${AT}) AS last_seen FROM sop_findings f
        WHERE ${column(p)} = $1 GROUP BY f.rule_id, f.text ORDER BY max(${AT}) DESC`,
      [p.id],
    );
    return res.rows.map((r) => ({ rule_id: r.rule_id, text: r.text, findings: num(r.findings), last_seen: iso(r.last_seen) }));
  }

  /**
   * Distinct quotes of the newest findings' evidence: of its findings not suppressed, or when it
   * has no such quote (a closed pattern), of the suppressed ones.
   */
  async phrasings(p: PatternRef, limit: number): Promise<string[]> {
    const res = await this.db.query<{ quote: string }>(
      `WITH q AS (
         SELECT e->>'quote' AS quote, bool_or(NOT f.suppressed) AS live,
                COALESCE(max(f.created_at) FILTER (WHERE NOT f.suppressed), max(f.created_at)) AS at
           FROM sop_findings f CROSS JOIN LATERAL jsonb_array_elements(f.evidence) e
          WHERE ${column(p)} = $1 AND COALESCE(e->>'quote', '') <> ''
          GROUP BY e->>'quote')
       SELECT quote FROM q WHERE live OR NOT EXISTS (SELECT 1 FROM q WHERE live) ORDER BY at DESC LIMIT $2`,
      [p.id, limit],
    );
    return res.rows.map((r) => r.quote);
  }

  /** Every finding of a pattern with its session, for the regression set. */
  async regressionRows(p: PatternRef): Promise<{ id: string; session_id: string; external_id: string; transcript_ref: string | null; procedure_id: string; rule_id: string; kind: 'step' | 'never' | 'warning'; text: string; status: string; pattern_id: string }[]> {
    const res = await this.db.query<{ id: string; session_id: string; external_id: string; transcript_ref: string | null; procedure_id: string; rule_id: string; kind: 'step' | 'never' | 'warning'; text: string; status: string; pattern_id: string }>(
      `SELECT f.id, f.session_id, s.external_id, s.transcript_ref, f.procedure_id, f.rule_id, f.kind, f.text, f.status, f.pattern_id
         FROM sop_findings f JOIN sop_sessions s ON s.id = f.session_id
        WHERE ${column(p)} = $1 ORDER BY ${AT}, f.id`,
      [p.id],
    );
    return res.rows;
  }

  /**
   * Checked sessions in the window by result (a procedure's check result when one is given).
   * Checks carry their session's workspace and time (0017_check_windows.sql) and exist only
   * for checked sessions, so they are counted from their own covering index, without a join.
   */
  async sessionResults(workspace: string, window: ReviewWindow, procedures?: readonly string[]): Promise<{ result: string | null; n: number }[]> {
    const res = procedures
      ? await this.aggregate<{ result: string | null; n: unknown }>(
          `SELECT c.result, count(*) AS n FROM sop_checks c
            WHERE c.workspace = $1 AND c.at >= $2::timestamptz AND c.at < $3::timestamptz
              AND c.procedure_id = ANY($4::text[]) AND c.checked_result IS NOT NULL GROUP BY c.result`,
          [workspace, window.from, window.to, procedures],
        )
      : await this.aggregate<{ result: string | null; n: unknown }>(
          `SELECT s.result, count(*) AS n FROM sop_sessions s
            WHERE s.workspace = $1 AND s.status = 'checked' AND ${SESSION_AT} >= $2::timestamptz AND ${SESSION_AT} < $3::timestamptz GROUP BY s.result`,
          [workspace, window.from, window.to],
        );
    return res.rows.map((r) => ({ result: r.result, n: num(r.n) }));
  }

  /**
   * Checks of the sessions checked on these releases, per release, procedure and result (checks
   * that were checked only): a release compare's follow rates.
   */
  async checksByRelease(workspace: string, releaseIds: readonly string[]): Promise<{ release_id: string; procedure_id: string; result: string | null; n: number }[]> {
    const res = await this.db.query<{ release_id: string; procedure_id: string; result: string | null; n: unknown }>(
      `SELECT s.release_id, c.procedure_id, c.result, count(*) AS n FROM sop_sessions s JOIN sop_checks c ON c.session_id = s.id
        WHERE s.workspace = $1 AND s.release_id = ANY($2::text[]) AND s.status = 'checked' AND c.checked_result IS NOT NULL GROUP BY 1, 2, 3`,
      [workspace, releaseIds],
    );
    return res.rows.map((r) => ({ release_id: r.release_id, procedure_id: r.procedure_id, result: r.result, n: num(r.n) }));
  }

  /**
   * Findings of the sessions checked on these releases, per release, rule pattern (null: not in
   * one yet), procedure, suppression and whether their check was measurable (followed, partial
   * or deviated: the checks a rate counts).
   */
  async findingsByRelease(
    workspace: string,
    releaseIds: readonly string[],
  ): Promise<{ release_id: string; rule_pattern_id: string | null; procedure_id: string; suppressed: boolean; measurable: boolean; n: number }[]> {
    const res = await this.db.query<{ release_id: string; rule_pattern_id: string | null; procedure_id: string; suppressed: boolean; measurable: boolean; n: unknown }>(
      `SELECT f.release_id, f.rule_pattern_id, f.procedure_id, f.suppressed,
              coalesce(c.checked_result IS NOT NULL AND c.result IN ('followed', 'partial', 'deviated'), false) AS measurable, count(*) AS n
         FROM sop_findings f LEFT JOIN sop_checks c ON c.session_id = f.session_id AND c.procedure_id = f.procedure_id
        WHERE f.workspace = $1 AND f.release_id = ANY($2::text[]) GROUP BY 1, 2, 3, 4, 5`,
      [workspace, releaseIds],
    );
    return res.rows.map((r) => ({ ...r, measurable: r.measurable === true, n: num(r.n) }));
  }

  /**
   * Checks of sessions in the window, per procedure, week (Monday, UTC) and result (checks that
   * were checked only), from their covering index: the scoreboard sums the weeks, and each
   * procedure's follow rate week by week is read from the same rows.
   */
  async checkResults(workspace: string, window: ReviewWindow): Promise<{ procedure_id: string; week: string; result: string | null; n: number }[]> {
    const res = await this.aggregate<{ procedure_id: string; week: unknown; result: string | null; n: unknown }>(
      // weeks as whole numbers, as weeksFromFindings counts them
      `SELECT c.procedure_id, (floor(extract(epoch FROM c.at))::bigint + ${3 * 86400}) / ${7 * 86400} AS week, c.result, count(*) AS n FROM sop_checks c
        WHERE c.workspace = $1 AND c.at >= $2::timestamptz AND c.at < $3::timestamptz
          AND c.checked_result IS NOT NULL GROUP BY 1, 2, 3`,
      [workspace, window.from, window.to],
    );
    return res.rows.map((r) => ({ procedure_id: r.procedure_id, week: weekLabel(r.week), result: r.result, n: num(r.n) }));
  }

  /**
   * The procedures of the workspace's live release, with their names (null: none in the lock),
   * read from the lock in the database: Insights names its rows with them, and a lock of 100
   * procedures of 40 rules is most of a megabyte to read and parse for the names alone.
   */
  async liveProcedureNames(workspace: string): Promise<{ procedure_id: string; name: string | null }[]> {
    const res = await this.db.query<{ procedure_id: string | null; name: string | null }>(
      `SELECT p->>'procedure_id' AS procedure_id, p->>'name' AS name
         FROM sop_releases r
        CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(r.lock->'procedures') = 'array' THEN r.lock->'procedures' ELSE '[]'::jsonb END) WITH ORDINALITY AS e(p, i)
        WHERE r.workspace = $1 AND r.live ORDER BY e.i`,
      [workspace],
    );
    return res.rows.filter((r): r is { procedure_id: string; name: string | null } => r.procedure_id !== null);
  }

  /**
   * Findings (not suppressed) per rule pattern in the window's not_measurable checks: Insights
   * leaves them out of its rates, as it leaves those sessions out. Read from the not_measurable
   * checks of the window (their own partial index, sop_checks_unmeasured: the window index has
   * no session id, and reading the checks themselves read every check of the window, bodies and
   * all, to find the few not measurable), then their findings.
   */
  async unmeasuredFindings(workspace: string, window: ReviewWindow): Promise<{ rule_pattern_id: string; n: number }[]> {
    const res = await this.aggregate<{ rule_pattern_id: string; n: unknown }>(
      `SELECT f.rule_pattern_id, count(*) AS n FROM sop_checks c
         JOIN sop_findings f ON f.session_id = c.session_id AND f.procedure_id = c.procedure_id
        WHERE c.workspace = $1 AND c.at >= $2::timestamptz AND c.at < $3::timestamptz AND c.checked_result IS NOT NULL AND c.result = 'not_measurable'
          AND f.rule_pattern_id IS NOT NULL AND NOT f.suppressed GROUP BY 1`,
      [workspace, window.from, window.to],
    );
    return res.rows.map((r) => ({ rule_pattern_id: r.rule_pattern_id, n: num(r.n) }));
  }

  /**
   * Findings in the window per rule pattern, week (Monday, UTC) and suppression; findings not
   * yet in a pattern per procedure (rule_pattern_id null). The whole days of the window are read
   * from sop_finding_days (kept by triggers), the partial days at its ends from the findings.
   */
  async findingsByWeek(workspace: string, window: ReviewWindow, filter: { procedure?: string; lineage?: string }): Promise<WeekCount[]> {
    const from = Date.parse(window.from);
    const to = Date.parse(window.to);
    const firstDay = Math.ceil(from / DAY_MS) * DAY_MS;
    const lastDay = Math.floor(to / DAY_MS) * DAY_MS;
    const parts =
      firstDay >= lastDay
        ? [this.weeksFromFindings(workspace, window.from, window.to, filter)]
        : [
            this.weeksFromFindings(workspace, window.from, new Date(firstDay).toISOString(), filter),
            this.weeksFromDays(workspace, new Date(firstDay).toISOString().slice(0, 10), new Date(lastDay).toISOString().slice(0, 10), filter),
            this.weeksFromFindings(workspace, new Date(lastDay).toISOString(), window.to, filter),
          ];
    const merged = new Map<string, WeekCount>();
    for (const rows of await Promise.all(parts)) {
      for (const r of rows) {
        const key = `${r.rule_pattern_id}\0${r.procedure_id}\0${r.week}\0${r.suppressed}`;
        const cur = merged.get(key);
        if (cur) cur.n += r.n;
        else merged.set(key, { ...r });
      }
    }
    return [...merged.values()].filter((r) => r.n !== 0);
  }

  private async weeksFromFindings(workspace: string, from: string, to: string, filter: { procedure?: string; lineage?: string }): Promise<WeekCount[]> {
    if (from >= to) return [];
    const params: unknown[] = [workspace, from, to];
    const where = ['f.workspace = $1', `${AT} >= $2::timestamptz`, `${AT} < $3::timestamptz`];
    if (filter.procedure !== undefined) {
      params.push(filter.procedure);
      where.push(`f.procedure_id = $${params.length}`);
    }
    if (filter.lineage !== undefined) {
      params.push(filter.lineage);
      where.push(`(${onRuleLineage('f', '$1', `$${params.length}`)} OR f.rule_pattern_id IN (SELECT id FROM sop_patterns WHERE workspace = $1 AND lineage_id = $${params.length}))`);
    }
    const res = await this.aggregate<{ procedure_id: string | null; rule_pattern_id: string | null; week: unknown; suppressed: boolean; n: unknown }>(
      // weeks as whole numbers (Monday-aligned: 1970-01-01 was a Thursday), cheaper to group than dates
      `SELECT f.rule_pattern_id, CASE WHEN f.rule_pattern_id IS NULL THEN f.procedure_id END AS procedure_id,
              (floor(extract(epoch FROM ${AT}))::bigint + ${3 * 86400}) / ${7 * 86400} AS week, f.suppressed, count(*) AS n
         FROM sop_findings f WHERE ${where.join(' AND ')} GROUP BY 1, 2, 3, 4`,
      params,
    );
    return res.rows.map(weekRow);
  }

  private async weeksFromDays(workspace: string, fromDay: string, toDay: string, filter: { procedure?: string; lineage?: string }): Promise<WeekCount[]> {
    const params: unknown[] = [workspace, fromDay, toDay];
    const where = ['d.workspace = $1', 'd.day >= $2::date', 'd.day < $3::date'];
    if (filter.procedure !== undefined) {
      params.push(filter.procedure);
      where.push(`d.procedure_id = $${params.length}`);
    }
    if (filter.lineage !== undefined) {
      params.push(filter.lineage);
      where.push(`d.rule_pattern_id IN (SELECT p.id FROM sop_patterns p WHERE p.workspace = $1 AND ${patternOfRuleLineage('p', '$1', `$${params.length}`)})`);
    }
    const res = await this.db.query<{ procedure_id: string | null; rule_pattern_id: string | null; week: unknown; suppressed: boolean; n: unknown }>(
      `SELECT NULLIF(d.rule_pattern_id, '') AS rule_pattern_id, CASE WHEN d.rule_pattern_id = '' THEN d.procedure_id END AS procedure_id,
              ((d.day - date '1970-01-01') + 3) / 7 AS week, d.suppressed, sum(d.n) AS n
         FROM sop_finding_days d WHERE ${where.join(' AND ')} GROUP BY 1, 2, 3, 4`,
      params,
    );
    return res.rows.map(weekRow);
  }

  /** The procedures a rule (lineage) has findings or a pattern in. */
  async proceduresOfRule(workspace: string, lineage: string): Promise<string[]> {
    const res = await this.db.query<{ procedure_id: string }>(
      `SELECT procedure_id FROM sop_patterns WHERE workspace = $1 AND kind = 'rule' AND (lineage_id = $2 OR rule_id = $2)
       UNION SELECT DISTINCT procedure_id FROM sop_findings WHERE workspace = $1 AND rule_id = $2
       UNION SELECT procedure_id FROM rule_lineage_members($1, $2)`,
      [workspace, lineage],
    );
    return res.rows.map((r) => r.procedure_id);
  }
}
