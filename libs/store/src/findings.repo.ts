import { systemClock, type Clock, type Queryable, type Statement } from '@neatroots/ports';
import type { FindingMessage, NoteDelivered } from '@neatroots/messages';
import { checkStat, findingState, isQuiet, problemKey, QUIET_AFTER_DISMISSALS } from './life';
import type { CheckStat, DismissInput, FindingRecord, FindingStateFilter, ListFindingsQuery, Page, Problem } from './records';
import { FINDING_STATE_FILTERS } from './records';
import {
  chunks, decodeCursor, encodeCursor, filterText, iso, isoNonNull, json, num, pageLimit, StoreInputError, text, tsParam, valuesList,
} from './sql';

const ROWS_PER_STATEMENT = 500;

/** One finding's events of a batch, folded in order. */
interface Folded {
  ev: FindingMessage;
  count: number;
  span_ids: string[];
  guidance: string;
  status: 'open' | 'resolved';
  raised_ms: number;
  updated_ms: number;
  resolved_ms: number | null;
}

type Row = Record<string, unknown>;

/** A note that reached an agent (the deliveries topic's NoteDelivered). */
export type DeliveryInput = Pick<NoteDelivered, 'finding_id' | 'project' | 'at_ms'> & { note_id?: string };

const FINDING_COLUMNS = `f.id, f.project, f.run_id, f.workflow, f.check_id, f.check_source, f.kind, f.title, f.guidance,
  f.action, f.halt_suppressed, f.group_name, f.priority, f.span_ids, f.count, f.status, f.quiet, f.raised_at,
  f.updated_at, f.resolved_at, f.active_at, f.dismissed_at, f.dismissed_by, f.dismiss_note,
  f.quote, f.probability, f.confidence, f.answered_by`;

function toFinding(row: Row): FindingRecord {
  const rec = {
    id: String(row.id),
    project: String(row.project),
    run_id: String(row.run_id),
    workflow: (row.workflow as string | null) ?? null,
    check_id: String(row.check_id),
    check_source: String(row.check_source),
    kind: String(row.kind),
    title: String(row.title),
    guidance: String(row.guidance ?? ''),
    action: row.action === 'halt' ? 'halt' as const : 'flag' as const,
    halt_suppressed: Boolean(row.halt_suppressed),
    group: (row.group_name as string | null) ?? null,
    priority: num(row.priority),
    span_ids: Array.isArray(row.span_ids) ? (row.span_ids as string[]) : [],
    count: num(row.count),
    status: row.status === 'resolved' ? 'resolved' as const : 'open' as const,
    state: 'open' as FindingRecord['state'],
    quiet: Boolean(row.quiet),
    raised_at: isoNonNull(row.raised_at),
    updated_at: isoNonNull(row.updated_at),
    resolved_at: iso(row.resolved_at),
    active_at: iso(row.active_at),
    dismissed_at: iso(row.dismissed_at),
    dismissed_by: (row.dismissed_by as string | null) ?? null,
    dismiss_note: (row.dismiss_note as string | null) ?? null,
    quote: (row.quote as string | null) ?? null,
    probability: row.probability === null || row.probability === undefined ? null : Number(row.probability),
    confidence: (row.confidence as string | null) ?? null,
    answered_by: (row.answered_by as string | null) ?? null,
  };
  rec.state = findingState(rec);
  return rec;
}

function stateWhere(state: FindingStateFilter, a: string): string {
  switch (state) {
    case 'open': return `${a}.status = 'open' AND ${a}.dismissed_at IS NULL`;
    case 'active': return `${a}.status = 'open' AND ${a}.dismissed_at IS NULL AND ${a}.active_at IS NOT NULL`;
    case 'resolved': return `${a}.status = 'resolved' AND ${a}.dismissed_at IS NULL`;
    case 'dismissed': return `${a}.dismissed_at IS NOT NULL`;
    case 'all': return 'TRUE';
  }
}

/**
 * The statements that apply finding events, to run in order in one transaction (FindingsRepo.apply;
 * the StoreWriter sends them with the batch's runs and spans). Events of one finding in one
 * batch are folded first: one row, one statement a chunk. The check_stats counts move only by
 * the rows the insert created (xmax = 0), so a redelivered event never counts twice.
 */
export function findingStatements(events: readonly FindingMessage[]): Statement[] {
  const folded = new Map<string, Folded>();
  for (const ev of events) {
    const f = folded.get(ev.id);
    if (!f) {
      folded.set(ev.id, {
        ev, count: ev.count, span_ids: ev.span_ids, guidance: ev.guidance,
        status: ev.status === 'resolved' ? 'resolved' : 'open',
        raised_ms: ev.at_ms, updated_ms: ev.at_ms, resolved_ms: ev.status === 'resolved' ? ev.at_ms : null,
      });
      continue;
    }
    if (ev.status === 'raised') f.raised_ms = Math.min(f.raised_ms, ev.at_ms);
    if (ev.count > f.count) {
      f.count = ev.count;
      f.span_ids = ev.span_ids;
      f.guidance = ev.guidance;
      f.updated_ms = Math.max(f.updated_ms, ev.at_ms);
    }
    if (ev.status === 'resolved' && f.status === 'open') {
      f.status = 'resolved';
      f.resolved_ms = ev.at_ms;
      f.updated_ms = Math.max(f.updated_ms, ev.at_ms);
    }
  }
  return chunks([...folded.values()], ROWS_PER_STATEMENT).map(upsertFindingsStatement);
}

/**
 * One statement for a chunk of folded findings, the rows as one JSON parameter unpacked by
 * json_to_recordset (as the spans are): bound one parameter a column, a chunk was thousands of
 * parameters, and PGlite spent several times a span's cost on each finding binding them.
 */
function upsertFindingsStatement(part: Folded[]): Statement {
  const rows = part.map((f) => {
    const e = f.ev;
    return {
      id: text(e.id), project: text(e.project), run_id: text(e.run_id), workflow: text(e.workflow), check_id: text(e.check_id),
      check_source: text(e.source), kind: text(e.kind), title: text(e.title), guidance: text(f.guidance), action: text(e.action),
      halt_suppressed: e.halt_suppressed === true, group_name: text(e.group || null), priority: e.priority ?? 0,
      span_ids: f.span_ids, count: f.count, status: f.status, raised_at: tsParam(f.raised_ms), updated_at: tsParam(f.updated_ms),
      resolved_at: tsParam(f.resolved_ms), quote: text(e.quote ?? null), probability: e.probability ?? null,
      confidence: text(e.confidence ?? null), answered_by: text(e.answered_by ?? null),
    };
  });
  return {
    sql: `WITH v AS (
       SELECT * FROM json_to_recordset($1::json) AS v (id text, project text, run_id text, workflow text, check_id text,
         check_source text, kind text, title text, guidance text, action text, halt_suppressed boolean, group_name text,
         priority float8, span_ids jsonb, count int4, status text, raised_at timestamptz, updated_at timestamptz,
         resolved_at timestamptz, quote text, probability float8, confidence text, answered_by text)
     ),
     ins AS (
       INSERT INTO findings AS f (id, project, run_id, workflow, check_id, check_source, kind, title, guidance, action,
         halt_suppressed, group_name, priority, span_ids, count, status, raised_at, updated_at, resolved_at,
         quote, probability, confidence, answered_by, quiet, active_at)
       SELECT v.*, COALESCE(cs.dismissals >= ${QUIET_AFTER_DISMISSALS}, FALSE), d.delivered_at
       FROM v
       LEFT JOIN check_stats cs ON cs.project = v.project AND cs.check_id = v.check_id
       LEFT JOIN note_deliveries d ON d.finding_id = v.id
       ON CONFLICT (id) DO UPDATE SET
         -- written again: a run page following the run gives it again (migration 0038)
         changed_xid = pg_current_xact_id(),
         count = GREATEST(f.count, EXCLUDED.count),
         span_ids = CASE WHEN EXCLUDED.count > f.count THEN EXCLUDED.span_ids ELSE f.span_ids END,
         guidance = CASE WHEN EXCLUDED.count > f.count THEN EXCLUDED.guidance ELSE f.guidance END,
         status = CASE WHEN EXCLUDED.status = 'resolved' THEN 'resolved' ELSE f.status END,
         -- the quote that raised it stays (a redelivery or a resolution carries none, or the same)
         quote = COALESCE(f.quote, EXCLUDED.quote),
         probability = COALESCE(f.probability, EXCLUDED.probability),
         confidence = COALESCE(f.confidence, EXCLUDED.confidence),
         answered_by = COALESCE(f.answered_by, EXCLUDED.answered_by),
         resolved_at = CASE WHEN f.resolved_at IS NULL AND EXCLUDED.status = 'resolved' THEN EXCLUDED.resolved_at ELSE f.resolved_at END,
         updated_at = CASE WHEN EXCLUDED.count > f.count OR (EXCLUDED.status = 'resolved' AND f.status = 'open')
                           THEN GREATEST(f.updated_at, EXCLUDED.updated_at) ELSE f.updated_at END
       -- xmax = 0 only on a freshly inserted row: count each finding once, never on redelivery
       RETURNING f.project, f.check_id, f.quiet, (f.xmax = 0) AS inserted
     )
     INSERT INTO check_stats AS cs (project, check_id, findings)
     SELECT project, check_id, count(*) FROM ins WHERE inserted AND NOT quiet GROUP BY project, check_id
     ON CONFLICT (project, check_id) DO UPDATE SET findings = cs.findings + EXCLUDED.findings, updated_at = now()`,
    params: [json(rows)],
  };
}

/**
 * The statements that record deliveries and make their findings active (FindingsRepo.markActive),
 * to run in order in one transaction.
 */
export function deliveryStatements(deliveries: readonly DeliveryInput[]): Statement[] {
  const seen = new Map<string, DeliveryInput>();
  for (const d of deliveries) {
    const prev = seen.get(d.finding_id);
    if (!prev || d.at_ms < prev.at_ms) seen.set(d.finding_id, d);
  }
  const out: Statement[] = [];
  for (const part of chunks([...seen.values()], ROWS_PER_STATEMENT)) {
    const params: unknown[] = [];
    for (const d of part) params.push(text(d.finding_id), text(d.project), text(d.note_id ?? null), tsParam(d.at_ms));
    out.push({
      sql: `INSERT INTO note_deliveries (finding_id, project, note_id, delivered_at)
            VALUES ${valuesList(part.length, ['text', 'text', 'text', 'timestamptz'])}
            ON CONFLICT (finding_id) DO UPDATE SET delivered_at = LEAST(note_deliveries.delivered_at, EXCLUDED.delivered_at)`,
      params,
    });
    out.push({
      sql: `UPDATE findings f SET active_at = LEAST(COALESCE(f.active_at, d.delivered_at), d.delivered_at), changed_xid = pg_current_xact_id()
            FROM note_deliveries d WHERE d.finding_id = f.id AND f.id = ANY($1::text[])`,
      params: [part.map((d) => text(d.finding_id))],
    });
  }
  return out;
}

/**
 * Findings and their life: raised -> active (a note reached the agent) -> resolved, and
 * dismissed by a person (the seed, Findings). Also keeps check_stats, the per-project
 * dismissal counts that make a check quiet and give its precision.
 */
export class FindingsRepo {
  constructor(
    private readonly db: Queryable,
    private readonly clock: Clock = systemClock,
  ) {}

  /**
   * Applies finding events in order, idempotently: `raised` inserts (a redelivered one finds
   * its row and changes nothing), `updated` takes the new count and spans only if the count
   * grew, `resolved` sets status and resolved_at once. A finding raised while its check is
   * quiet in the project is stored with quiet = true and does not count (findingStatements).
   */
  async apply(events: readonly FindingMessage[]): Promise<void> {
    for (const st of findingStatements(events)) await this.db.query(st.sql, st.params);
  }

  /**
   * A note about these findings reached the agent: they become active (once; the first
   * delivery's time is kept). Recorded apart too, so a finding stored after its delivery
   * (the two topics are read by separate consumers) is inserted active.
   */
  async markActive(deliveries: readonly DeliveryInput[]): Promise<void> {
    for (const st of deliveryStatements(deliveries)) await this.db.query(st.sql, st.params);
  }

  async get(project: string, id: string): Promise<FindingRecord | null> {
    const res = await this.db.query(`SELECT ${FINDING_COLUMNS} FROM findings f WHERE f.project = $1 AND f.id = $2`, [project, filterText('id', id)]);
    return res.rows[0] ? toFinding(res.rows[0]) : null;
  }

  /**
   * The run page's findings: the run's newest `limit` (by raised_at, then id), quiet ones too,
   * given oldest first, and how many the run has in all. A run of 50,000 findings is 500 of them
   * here, not an answer of 75 MB; the rest are paged through `list` with its `run_id`.
   */
  async newestForRun(project: string, runId: string, limit: number): Promise<{ items: FindingRecord[]; total: number }> {
    const res = await this.db.query(
      `SELECT * FROM (
         SELECT ${FINDING_COLUMNS} FROM findings f WHERE f.project = $1 AND f.run_id = $2 ORDER BY f.raised_at DESC, f.id DESC LIMIT $3
       ) n ORDER BY n.raised_at ASC, n.id ASC`,
      [project, runId, limit],
    );
    const items = res.rows.map(toFinding);
    return { items, total: items.length < limit ? items.length : await this.countForRun(project, runId) };
  }

  /** How many findings the run has, quiet ones too. */
  async countForRun(project: string, runId: string): Promise<number> {
    const res = await this.db.query<{ n: unknown }>('SELECT count(*) AS n FROM findings WHERE project = $1 AND run_id = $2', [project, runId]);
    return num(res.rows[0]?.n);
  }

  /**
   * A findings watermark: the database's snapshot now (pg_snapshot text, `xmin:xmax:xip,...`),
   * which says which transactions had committed. A finding written by a transaction that had
   * not (running then, or begun since) is after it, whenever that commits. Read it before the
   * findings it covers.
   */
  async watermark(): Promise<string> {
    const res = await this.db.query<{ s: string }>('SELECT pg_current_snapshot()::text AS s');
    return String(res.rows[0]!.s);
  }

  /**
   * The run's findings written (stored, counted again, resolved, made active, dismissed,
   * reopened) after `watermark` (by a transaction that had not committed then), oldest first,
   * at most `limit` (null when there are more: read the newest again). One committed after the
   * watermark was read and read with it may be given again. The snapshot's oldest transaction
   * bounds the index range read; those committed before it are left out by the snapshot itself,
   * so a long transaction elsewhere on the server does not bring the run's findings back.
   */
  async changedForRun(project: string, runId: string, watermark: string, limit: number): Promise<FindingRecord[] | null> {
    const res = await this.db.query(
      `SELECT ${FINDING_COLUMNS} FROM findings f
       WHERE f.project = $1 AND f.run_id = $2 AND f.changed_xid >= pg_snapshot_xmin($3::pg_snapshot)
         AND NOT pg_visible_in_snapshot(f.changed_xid, $3::pg_snapshot)
       ORDER BY f.raised_at ASC, f.id ASC LIMIT $4`,
      [project, runId, watermark, limit + 1],
    );
    return res.rows.length > limit ? null : res.rows.map(toFinding);
  }

  /**
   * Problems of a project in a state, newest first (by the head's raised_at). The state filter
   * applies to findings before they are grouped, so each problem is headed by the most
   * specific finding in that state. Quiet findings are left out unless asked for; a dismissed
   * one is listed under `dismissed` whatever it was.
   *
   * A page costs what its problems hold, not what the project holds: the heads are read newest
   * first through an index (findings_status_newest for open, active and resolved, findings_newest
   * for the others), a grouped finding kept only if it heads its group (one look at the group
   * through findings_run_group), and the scan stops at the page's last head; then only those
   * heads' groups are read. Ranking every finding in the state to pick the heads took about 1 s a
   * page with 75,000 open findings, and 8-16 s on an embedded database with no statistics.
   */
  async list(project: string, q: ListFindingsQuery = {}): Promise<Page<Problem>> {
    // One run's findings: what happened in it, whatever became of it (a repeated call that
    // stopped is resolved, and still worth seeing). The project's: what is open now.
    const state = q.state ?? (q.run_id !== undefined ? 'all' : 'open');
    if (!(FINDING_STATE_FILTERS as readonly string[]).includes(state)) {
      throw new StoreInputError('invalid_state', `state must be one of ${FINDING_STATE_FILTERS.join(', ')}`);
    }
    const limit = pageLimit(q.limit);
    const params: unknown[] = [project];
    if (q.run_id !== undefined) params.push(filterText('run_id', q.run_id));
    const runParam = q.run_id !== undefined ? params.length : undefined;
    /** The findings listed, as `a`: the same filter on the candidates, their groups and the groups read. */
    const listed = (a: string): string => {
      const where = [`${a}.project = $1`, stateWhere(state, a)];
      if (!q.include_quiet) where.push(`(NOT ${a}.quiet OR ${a}.dismissed_at IS NOT NULL)`);
      if (runParam !== undefined) where.push(`${a}.run_id = $${runParam}`);
      return where.join(' AND ');
    };
    let cursorWhere = 'TRUE';
    if (q.cursor !== undefined) {
      const c = decodeCursor('findings', q.cursor);
      params.push(c.at, c.id);
      cursorWhere = `(f.raised_at, f.id) < ($${params.length - 1}::timestamptz, $${params.length}::text)`;
    }
    params.push(limit + 1);
    // A finding heads its problem when it is ungrouped, or first of its group (in the state asked
    // for) by priority DESC, raised_at, id: the subquery runs once a candidate, and the index scan
    // in raised_at DESC, id DESC order stops once the page has its heads. A group is read by its
    // key alone (OFFSET 0 keeps the state's conditions out of that scan) and filtered after: with
    // them in, a database with no statistics yet took findings_status_newest for a group's
    // lookup, reading every open finding of the project for each candidate.
    const res = await this.db.query(
      `WITH heads AS MATERIALIZED (
         SELECT f.id, f.run_id, f.group_name, f.raised_at
         FROM findings f
         WHERE ${listed('f')} AND ${cursorWhere}
           AND (f.group_name IS NULL OR f.id = (
             SELECT g.id
             FROM (SELECT * FROM findings g WHERE g.project = $1 AND g.run_id = f.run_id AND g.group_name = f.group_name OFFSET 0) g
             WHERE ${listed('g')}
             ORDER BY g.priority DESC, g.raised_at ASC, g.id ASC LIMIT 1))
         ORDER BY f.raised_at DESC, f.id DESC LIMIT $${params.length}
       ),
       members AS (
         SELECT ${FINDING_COLUMNS}, h.raised_at AS head_raised_at, h.id AS head_id
         FROM heads h CROSS JOIN LATERAL (
           SELECT * FROM findings f WHERE f.project = $1 AND f.run_id = h.run_id AND f.group_name = h.group_name OFFSET 0
         ) f
         WHERE h.group_name IS NOT NULL AND ${listed('f')}
         UNION ALL
         SELECT ${FINDING_COLUMNS}, h.raised_at AS head_raised_at, h.id AS head_id
         FROM heads h JOIN findings f ON f.id = h.id
         WHERE h.group_name IS NULL
       )
       SELECT m.*, row_number() OVER (PARTITION BY m.head_id ORDER BY m.priority DESC, m.raised_at ASC, m.id ASC) AS rn
       FROM members m
       ORDER BY m.head_raised_at DESC, m.head_id DESC, rn ASC`,
      params,
    );
    const problems: Problem[] = [];
    let current: Problem | undefined;
    for (const row of res.rows) {
      const f = toFinding(row);
      if (num(row.rn) === 1) {
        current = { ...f, related: [] };
        problems.push(current);
      } else if (current && problemKey(current) === problemKey(f)) {
        current.related.push(f);
      }
    }
    const items = problems.slice(0, limit);
    const last = items[items.length - 1];
    return { items, next_cursor: problems.length > limit && last ? encodeCursor('findings', last.raised_at, last.id) : null };
  }

  /**
   * A person disagrees. The first dismissal of a finding counts toward its check's dismissals
   * in the project (3 make the check quiet there); dismissing again changes nothing.
   * Null when the finding is not in the project. Run it in a transaction (the review
   * queries do) so the finding and its check's counts change together.
   */
  async dismiss(project: string, id: string, input: DismissInput = {}): Promise<FindingRecord | null> {
    const res = await this.db.query<{ check_id: string; quiet: boolean }>(
      `UPDATE findings SET dismissed_at = $3::timestamptz, dismissed_by = $4, dismiss_note = $5, changed_xid = pg_current_xact_id()
       WHERE project = $1 AND id = $2 AND dismissed_at IS NULL
       RETURNING check_id, quiet`,
      [project, filterText('id', id), tsParam(this.clock.now()), text(input.by ?? null), text(input.note ?? null)],
    );
    const changed = res.rows[0];
    if (changed) {
      // A quiet finding a person judged counts toward precision after all.
      await this.db.query(
        `INSERT INTO check_stats AS cs (project, check_id, findings, dismissals) VALUES ($1, $2, $3, 1)
         ON CONFLICT (project, check_id) DO UPDATE
         SET dismissals = cs.dismissals + 1, findings = cs.findings + EXCLUDED.findings, updated_at = now()`,
        [project, changed.check_id, changed.quiet ? 1 : 0],
      );
    }
    return this.get(project, id);
  }

  /** Takes a dismissal back: the finding counts again, and so may its check. Null when unknown. */
  async reopen(project: string, id: string): Promise<FindingRecord | null> {
    const res = await this.db.query<{ check_id: string; quiet: boolean }>(
      `UPDATE findings SET dismissed_at = NULL, dismissed_by = NULL, dismiss_note = NULL, changed_xid = pg_current_xact_id()
       WHERE project = $1 AND id = $2 AND dismissed_at IS NOT NULL
       RETURNING check_id, quiet`,
      [project, filterText('id', id)],
    );
    const changed = res.rows[0];
    if (changed) {
      await this.db.query(
        `UPDATE check_stats SET dismissals = GREATEST(dismissals - 1, 0),
           findings = GREATEST(findings - $3::int, 0), updated_at = now()
         WHERE project = $1 AND check_id = $2`,
        [project, changed.check_id, changed.quiet ? 1 : 0],
      );
    }
    return this.get(project, id);
  }

  /** Precision, dismissals, quiet and the retire flag of every check with findings in the project. */
  async checkStats(project: string): Promise<CheckStat[]> {
    const res = await this.db.query<{ check_id: string; findings: number; dismissals: number }>(
      `SELECT check_id, findings, dismissals FROM check_stats WHERE project = $1 ORDER BY check_id`,
      [project],
    );
    return res.rows.map((r) => checkStat(r.check_id, num(r.findings), num(r.dismissals)));
  }

  /** The checks quiet in a project: the domain's rule (isQuiet) on each check's dismissals there. */
  async quietChecks(project: string): Promise<string[]> {
    const res = await this.db.query<{ check_id: string; dismissals: number }>(
      'SELECT check_id, dismissals FROM check_stats WHERE project = $1 AND dismissals > 0',
      [project],
    );
    return res.rows.filter((r) => isQuiet(num(r.dismissals))).map((r) => r.check_id);
  }
}
