import { runStatements, type Queryable, type Statement } from '@neatroots/ports';
import type { Envelope, RunEndStatus, RunStart, Span } from '@neatroots/spans';
import { FindingsRepo } from './findings.repo';
import { QuestionsRepo } from './questions.repo';
import { groupProblems } from './life';
import { RUN_END_FILTERS, RUN_PAGE_FINDINGS, SPAN_BODIES, SPAN_PREVIEW_CHARS, type ListRunsQuery, type NotChecked, type Page, type RunDetail, type RunDetailQuery, type RunRecord, type SpanPage, type SpanPageQuery } from './records';
import {
  chunks, decodeCursor, decodeSpanCursor, DEFAULT_SPAN_PAGE, encodeCursor, encodeSpanCursor, filterText, iso, isoNonNull, json,
  MAX_SPAN_PAGE, num, pageLimit, SPAN_PAGE_BYTES, StoreInputError, storableJson, text, tsParam, valuesList,
} from './sql';

/**
 * At most this many rows per statement: a whole bus batch (the writer takes up to 2,000 items)
 * in one. Spans go as one JSON parameter; runs take 10 parameters each, 20,000 at most, far
 * from the 65535 limit. Measured against 500 a statement with bench/store.js: no slower.
 */
const ROWS_PER_STATEMENT = 2000;

/** What one write batch says about a run, folded from its items. */
interface RunPatch {
  project: string;
  run_id: string;
  /** project and run_id joined: the order the runs are locked in (envelopeStatements). */
  key: string;
  workflow: string | null;
  session_id: string | null;
  started_ms: number;
  ended_ms: number | null;
  end_status: RunEndStatus | null;
  final_output: unknown;
  run_start: RunStart | null;
  last_seen_ms: number;
  /** The batch's spans of this run: each span id's place in the batch's rows (a later copy takes it). */
  spans: Map<string, number> | undefined;
  /** project and run_id as text columns take them (text()), once a run: every span row repeats them. */
  p: string | null;
  r: string | null;
}

interface SpanRow {
  run: RunPatch;
  span: Span;
  received_ms: number;
}

/** A time filter as the database reads it; one that is no time is the caller's error, not a 500. */
function timeFilter(name: string, v: string): string {
  const ms = Date.parse(v);
  if (Number.isNaN(ms)) throw new StoreInputError('invalid_argument', `${name} must be an ISO-8601 time`);
  return new Date(ms).toISOString();
}

/** A run's start as ISO-8601 text to the microsecond (a page's cursor). */
const EXACT_START = `to_char(r.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

const RUN_COLUMNS = `r.project, r.run_id, r.workflow, r.session_id, r.started_at, r.ended_at, r.end_status,
  r.span_count, r.error_count, r.layer_count, r.layer_error_count, r.total_tokens, r.last_seen_at, r.spans_expired_at`;

/** Open problems of run r: a group counts once; quiet and dismissed findings do not count. */
const OPEN_PROBLEMS = `(SELECT count(DISTINCT COALESCE('g' || f.group_name, 'f' || f.id)) FROM findings f
  WHERE f.project = r.project AND f.run_id = r.run_id AND f.status = 'open' AND f.dismissed_at IS NULL AND NOT f.quiet)`;

/** Problems run r had, open or resolved: counted as OPEN_PROBLEMS is. */
const ALL_PROBLEMS = `(SELECT count(DISTINCT COALESCE('g' || f.group_name, 'f' || f.id)) FROM findings f
  WHERE f.project = r.project AND f.run_id = r.run_id AND f.dismissed_at IS NULL AND NOT f.quiet)`;

/**
 * A run's spans in order: by start (spans without one last), then by arrival. No index holds
 * this order (migration 0018 dropped spans_order, which every stored span paid for): a page
 * reads the run's spans through the primary key's prefix (project, run_id) and sorts them.
 */
const SPAN_START = `COALESCE(start_exact, 'Infinity'::double precision)`;

/** A JSON value's text: a string as it is, any other value as its JSON text (as stored). */
const valueText = (v: string) => `(CASE WHEN json_typeof(${v}) = 'string' THEN (${v}) #>> '{}' ELSE (${v})::text END)`;
/** The length of a body field past the preview (SQL NULL when within it). */
const cutLength = (f: string) => `(CASE WHEN length(${valueText(`payload->'${f}'`)}) > ${SPAN_PREVIEW_CHARS} THEN length(${valueText(`payload->'${f}'`)}) END)`;
/**
 * A span with its input and output cut to a preview (SpanBodies), in SQL so the bodies never
 * leave the database: the span's fields in their order, input and output cut to their first
 * SPAN_PREVIEW_CHARS characters, then `truncated` ({ field: full length }); a span with
 * neither past the preview is as stored.
 */
const PREVIEW_PAYLOAD = `(CASE WHEN ${cutLength('input')} IS NULL AND ${cutLength('output')} IS NULL THEN payload ELSE (
  SELECT json_object_agg(e.k, CASE WHEN e.k IN ('input', 'output') AND length(${valueText('e.v')}) > ${SPAN_PREVIEW_CHARS}
    THEN to_json(left(${valueText('e.v')}, ${SPAN_PREVIEW_CHARS})) ELSE e.v END ORDER BY e.n)
  FROM (
    SELECT x.k, x.v, x.n FROM json_each(payload) WITH ORDINALITY AS x(k, v, n) WHERE x.k <> 'truncated'
    UNION ALL
    SELECT 'truncated', json_strip_nulls(json_build_object('input', ${cutLength('input')}, 'output', ${cutLength('output')})), 9223372036854775807
  ) e
) END)`;

const HAS_OPEN = `EXISTS (SELECT 1 FROM findings f
  WHERE f.project = r.project AND f.run_id = r.run_id AND f.status = 'open' AND f.dismissed_at IS NULL AND NOT f.quiet)`;

/**
 * A span row as the span statements unpack it from their JSON parameter. One-letter keys: the
 * database parses the whole document on every batch, and the columns' names as keys were a
 * seventh of its bytes (bench/store.js measures the write beside the one before). The span
 * itself is not in it: its JSON goes in a parameter of its own (spanPayloads).
 */
function spanRecord(r: SpanRow): Record<string, unknown> {
  // A tool call's layer (migration 0033): its tool and parent as columns, so linking layers
  // parses no stored JSON and the index of tool spans by parent is kept only for tool spans.
  const s = r.span;
  const p = r.run.p;
  const run = r.run.r;
  const id = text(s.span_id);
  const t = s.start_ms ?? null;
  const e = s.status === 'error';
  const k = spanTokens(s);
  const m = r.received_ms;
  // only on a tool span (a key left out is NULL): the other spans' JSON stays as short as it was.
  // Two literals, not a spread: the keys in the same order, without an object made to be copied.
  if ((s.type === 'tool' || s.type === 'mcp_tool') && typeof s.tool === 'string') return { p, r: run, s: id, t, e, k, m, c: text(s.tool), q: text(s.parent_id ?? null) };
  return { p, r: run, s: id, t, e, k, m };
}

/**
 * The batch's spans (JSON text, one a line, in the batch's order) as one text parameter:
 * JSON.stringify writes no line break (one in a string is escaped), so a line is a span. The
 * database splits the text and reads each span's JSON once, as the payload column takes it,
 * where inside the rows' document json_to_recordset parsed it a first time and copied it out.
 */
function spanPayloads(part: SpanRow[]): string {
  const lines = new Array<string>(part.length);
  for (let i = 0; i < part.length; i++) lines[i] = JSON.stringify(part[i].span);
  // the escapes Postgres refuses are rewritten in the joined text, once (storableJson)
  return storableJson(lines.join('\n'));
}

/**
 * The batch's rows (parameter $1, keyed as spanRecord writes them) beside their spans ($3, a
 * line each: spanPayloads), numbered in the batch's order: ROWS FROM takes the two a row each.
 */
const SPAN_ROWS = `SELECT x.ord, x.p AS project, x.r AS run_id, x.s AS span_id, x.j::json AS payload, round(x.t)::bigint AS start_ms, x.t AS start_exact,
         x.e AS is_error, round(x.k)::bigint AS total_tokens, to_timestamp(x.m / 1000.0) AS received_at,
         x.c AS call_tool, x.q AS call_parent
  FROM ROWS FROM (json_to_recordset($1::json) AS (p text, r text, s text, t float8, e boolean, k float8, m float8, c text, q text),
                  string_to_table($3::text, E'\\n'))
       WITH ORDINALITY AS x(p, r, s, t, e, k, m, c, q, j, ord)`;

/**
 * The batch's spans and the counters they move, in one statement. Spans not stored yet are
 * inserted (in the batch's order, so the arrival sequence, the column's default, numbers them
 * as they arrived) and counted from the rows the insert returns: a span stored before (a
 * redelivered batch, a re-exported span) is not returned, so it is never counted twice. Those
 * the insert skipped are compared with the stored copy, read as it was when the statement
 * began (the statement's snapshot: not the rows its own insert added), and replaced only when
 * they differ, the error and token counters moved by the difference; a redelivered batch
 * differs in nothing and writes nothing. A replaced span keeps its first arrival: its place
 * among spans that started at the same time does not move. When every span is new, the
 * comparison reads nothing ($2, the batch's number of spans, against the rows inserted).
 * It answers one row when a run's tool spans were replaced (layers_recount set): RECOUNT_LAYERS,
 * sent after it only then (Statement.when), counts their layers again.
 */
const WRITE_SPANS = `WITH x AS (${SPAN_ROWS}),
  ins AS (
    INSERT INTO spans (project, run_id, span_id, payload, start_ms, start_exact, is_error, total_tokens, received_at, call_tool, call_parent)
    SELECT project, run_id, span_id, payload, start_ms, start_exact, is_error, total_tokens, received_at, call_tool, call_parent FROM x ORDER BY ord
    ON CONFLICT (project, run_id, span_id) DO NOTHING
    RETURNING project, run_id, span_id, is_error, total_tokens, call_tool AS tool, call_parent AS parent_id, arrival
  ),
  skipped AS (
    -- the count first: when the insert took every span (the usual batch), nothing is looked up
    SELECT x.* FROM x WHERE (SELECT count(*) FROM ins) < $2::int AND NOT EXISTS (
      SELECT 1 FROM ins WHERE ins.project = x.project AND ins.run_id = x.run_id AND ins.span_id = x.span_id)
  ),
  up AS (
    UPDATE spans s SET payload = x.payload, start_ms = x.start_ms, start_exact = x.start_exact, is_error = x.is_error,
                       total_tokens = x.total_tokens, received_at = x.received_at, call_tool = x.call_tool, call_parent = x.call_parent
    FROM skipped x JOIN spans o ON o.project = x.project AND o.run_id = x.run_id AND o.span_id = x.span_id
    WHERE s.project = x.project AND s.run_id = x.run_id AND s.span_id = x.span_id
      AND (o.payload::text <> x.payload::text OR o.received_at <> x.received_at)
    RETURNING s.project, s.run_id, x.is_error::int - o.is_error::int AS de, x.total_tokens - o.total_tokens AS dt,
      -- a tool span replaced with another status, parent or tool: its run's layers are counted again (RECOUNT_LAYERS)
      (o.call_tool IS NOT NULL OR x.call_tool IS NOT NULL)
        AND (o.is_error <> x.is_error OR o.call_parent IS DISTINCT FROM x.call_parent OR o.call_tool IS DISTINCT FROM x.call_tool) AS rc
  ),
  tins AS (SELECT * FROM ins WHERE tool IS NOT NULL),
  -- The links the new tool spans make with another layer of their call (a tool span of the same
  -- tool as their parent or child): each link counted once, when the second of its two spans is
  -- stored, whichever it is: to a parent stored before or new in this batch, to a child stored
  -- before (the statement's snapshot holds no span of this batch). A call is its spans less its
  -- links (a tree), whatever order its layers arrive in.
  lnk AS (
    SELECT t.project, t.run_id, t.is_error AND p.is_error AS e FROM tins t
      JOIN spans p ON p.project = t.project AND p.run_id = t.run_id AND p.span_id = t.parent_id
      WHERE t.parent_id IS NOT NULL AND p.span_id <> t.span_id AND p.call_tool = t.tool
    UNION ALL
    SELECT t.project, t.run_id, t.is_error AND p.is_error FROM tins t
      JOIN tins p ON p.project = t.project AND p.run_id = t.run_id AND p.span_id = t.parent_id AND p.tool = t.tool
      WHERE t.parent_id IS NOT NULL AND p.span_id <> t.span_id
    UNION ALL
    SELECT t.project, t.run_id, t.is_error AND c.is_error FROM tins t
      JOIN spans c ON c.project = t.project AND c.run_id = t.run_id AND c.call_parent = t.span_id
      WHERE c.call_tool = t.tool AND c.span_id <> t.span_id
  ),
  d AS (
    SELECT project, run_id, sum(n) AS n, sum(e) AS e, sum(t) AS t, sum(l) AS l, sum(le) AS le, bool_or(rc) AS rc, max(a) AS a FROM (
      SELECT project, run_id, 1 AS n, is_error::int AS e, total_tokens AS t, 0 AS l, 0 AS le, false AS rc, arrival AS a FROM ins
      UNION ALL
      SELECT project, run_id, 0, de, dt, 0, 0, rc, NULL FROM up
      UNION ALL
      SELECT project, run_id, 0, 0, 0, 1, e::int, false, NULL FROM lnk
    ) c GROUP BY project, run_id
  ),
  counted AS (
  UPDATE runs r SET span_count = r.span_count + d.n, error_count = r.error_count + d.e, total_tokens = r.total_tokens + d.t,
    layer_count = r.layer_count + d.l, layer_error_count = r.layer_error_count + d.le, layers_recount = r.layers_recount OR d.rc,
    -- the run's newest arrival (migration 0037): a look for what is new reads no span when nothing is
    last_arrival = GREATEST(r.last_arrival, d.a),
    -- spans stored into a run whose spans went: retention takes it again (last_seen_at after the
    -- mark) once they are as old, even when they were received before the pass that went
    spans_expired_at = CASE WHEN r.spans_expired_at IS NOT NULL AND d.n > 0 AND r.last_seen_at <= r.spans_expired_at
                            THEN r.last_seen_at - interval '1 millisecond' ELSE r.spans_expired_at END
  FROM d WHERE r.project = d.project AND r.run_id = d.run_id
  RETURNING d.rc
  )
  SELECT true AS recount FROM counted WHERE rc LIMIT 1`;

/**
 * The runs of a batch (parameter $1: [{ p, r }]) whose tool spans were replaced with another
 * status, parent or tool (WRITE_SPANS marks them): their layer links counted again from the
 * spans they hold now. Rare (a re-exported tool span that changed), and only the batch's runs,
 * whose rows the batch's transaction holds already. Sent only when WRITE_SPANS, just before it,
 * answered a row (it marked one); run anyway it finds no run marked and changes nothing.
 */
const RECOUNT_LAYERS = `UPDATE runs r SET layers_recount = false,
  layer_count = (SELECT count(*) FROM spans c
    JOIN spans pa ON pa.project = c.project AND pa.run_id = c.run_id AND pa.span_id = c.call_parent
    WHERE c.project = r.project AND c.run_id = r.run_id AND c.call_parent IS NOT NULL
      AND pa.call_tool = c.call_tool AND pa.span_id <> c.span_id),
  layer_error_count = (SELECT count(*) FROM spans c
    JOIN spans pa ON pa.project = c.project AND pa.run_id = c.run_id AND pa.span_id = c.call_parent
    WHERE c.project = r.project AND c.run_id = r.run_id AND c.call_parent IS NOT NULL
      AND pa.call_tool = c.call_tool AND pa.span_id <> c.span_id AND c.is_error AND pa.is_error)
  WHERE r.layers_recount AND (r.project, r.run_id) IN (SELECT p, r FROM json_to_recordset($1::json) AS (p text, r text))`;

/** A retention step's bounds (RunsRepo.expireSpans), and its time. */
export interface ExpireLimits {
  /** Runs a step takes at most (their rows are locked until it commits). Default 200. */
  runs?: number;
  /** Spans a statement deletes at most, and question results. Default 20,000. */
  spans?: number;
  /** The pass's time (ms), default now: a run that started after it, by its agent's clock, is taken by its last receipt alone. */
  now?: number;
}

const EXPIRE_RUNS = 200;
const EXPIRE_SPANS = 20_000;

/**
 * A run retention takes ($1 the cutoff), its columns read through `x`: its spans are there, and
 * it started and was last seen before the cutoff.
 */
const expireFresh = (x = '') =>
  `${x}spans_expired_at IS NULL AND ${x}started_at < $1::timestamptz AND ${x}last_seen_at < $1::timestamptz`;

/**
 * A run retention takes ($1 the cutoff, $3 the pass's time) whose start, by its agent's clock,
 * is later than the pass (a clock ahead, microseconds sent as milliseconds): its spans are
 * there and it was last seen before the cutoff. Its start says nothing of its age: without
 * this its spans would stay until that start is past the cutoff, years for some.
 */
const expireAhead = (x = '') =>
  `${x}spans_expired_at IS NULL AND ${x}started_at > $3::timestamptz AND ${x}last_seen_at < $1::timestamptz`;

/** A run retention takes again ($1 the cutoff): spans were stored after its spans went, and they too are past the cutoff. */
const expireLate = (x = '') =>
  `${x}spans_expired_at IS NOT NULL AND ${x}last_seen_at > ${x}spans_expired_at AND ${x}last_seen_at < $1::timestamptz`;

type Row = Record<string, unknown>;

function toRun(row: Row): RunRecord {
  return {
    project: String(row.project),
    run_id: String(row.run_id),
    workflow: (row.workflow as string | null) ?? null,
    session_id: (row.session_id as string | null) ?? null,
    started_at: isoNonNull(row.started_at),
    ended_at: iso(row.ended_at),
    end_status: (row.end_status as RunEndStatus | null) ?? null,
    // a tool call traced at several layers counts once (migration 0033)
    span_count: Math.max(0, num(row.span_count) - num(row.layer_count)),
    error_count: Math.max(0, num(row.error_count) - num(row.layer_error_count)),
    stored_span_count: num(row.span_count),
    total_tokens: num(row.total_tokens),
    last_seen_at: isoNonNull(row.last_seen_at),
    spans_expired_at: iso(row.spans_expired_at),
    open_findings: num(row.open_findings),
    finding_count: num(row.finding_count),
  };
}

function spanTokens(s: Span): number {
  const u = s.usage;
  if (!u) return 0;
  if (typeof u.total_tokens === 'number') return u.total_tokens;
  return (u.input_tokens ?? 0) + (u.output_tokens ?? 0);
}

/**
 * The statements that store a batch of bus envelopes, to run in order in one transaction (the
 * StoreWriter sends them with the batch's findings as one): the runs touched, created or
 * updated (run_start, run_end, what its spans say), then the spans with the counters they move
 * (WRITE_SPANS). A whole bus batch (up to 2,000 items) a statement.
 *
 * Concurrent writers of one run (two replicas during a rebalance) are serialised by the row
 * lock the runs upsert takes first, in key order on every writer; the span statement that
 * follows in the same transaction then sees, under read committed, what the other committed.
 */
export function envelopeStatements(envelopes: readonly Envelope[]): Statement[] {
  if (!envelopes.length) return [];
  // By project, then run: no key string made per item (a batch is mostly one project's few runs).
  const byProject = new Map<string, Map<string, RunPatch>>();
  const patches: RunPatch[] = [];
  const spans: SpanRow[] = [];
  for (const env of envelopes) {
    const item = env.item;
    const runId = item.kind === 'span' ? item.span.run_id : item.run.run_id;
    let runs = byProject.get(env.project);
    if (!runs) byProject.set(env.project, (runs = new Map()));
    let p = runs.get(runId);
    if (!p) {
      p = {
        project: env.project, run_id: runId, key: `${env.project}\u001f${runId}`, workflow: null, session_id: null,
        started_ms: Infinity, ended_ms: null, end_status: null, final_output: undefined,
        run_start: null, last_seen_ms: env.received_ms, spans: undefined, p: null, r: null,
      };
      runs.set(runId, p);
      patches.push(p);
    }
    p.last_seen_ms = Math.max(p.last_seen_ms, env.received_ms);
    if (item.kind === 'span') {
      const s = item.span;
      // the item's own time when it has one (the agent's clock), else when it was received
      p.started_ms = Math.min(p.started_ms, s.start_ms ?? env.received_ms);
      // run_start's workflow and session win over what spans say
      if (!p.run_start) {
        p.workflow ??= s.workflow ?? null;
        p.session_id ??= s.session_id ?? null;
      }
      // later copy wins within the batch too (one row per key: ON CONFLICT cannot touch a row
      // twice), in the first copy's place
      const row: SpanRow = { run: p, span: s, received_ms: env.received_ms };
      const at = (p.spans ??= new Map()).get(s.span_id);
      if (at === undefined) {
        p.spans.set(s.span_id, spans.length);
        spans.push(row);
      } else spans[at] = row;
    } else if (item.kind === 'run_start') {
      const r = item.run;
      p.run_start = r;
      if (r.workflow) p.workflow = r.workflow;
      if (r.session_id) p.session_id = r.session_id;
      p.started_ms = Math.min(p.started_ms, r.ts_ms ?? env.received_ms);
    } else {
      const r = item.run;
      p.ended_ms = r.ts_ms ?? env.received_ms;
      p.started_ms = Math.min(p.started_ms, p.ended_ms);
      p.end_status = r.status;
      p.final_output = r.final_output;
    }
  }
  for (const p of patches) {
    p.p = text(p.project);
    p.r = text(p.run_id);
  }
  // in one order on every writer, so two transactions taking the same runs' locks cannot deadlock
  const runs = patches.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const out = chunks(runs, ROWS_PER_STATEMENT).map(upsertRunsStatement);
  for (const part of chunks(spans, ROWS_PER_STATEMENT)) out.push(writeSpansStatement(part), recountLayersStatement(part));
  return out;
}

/** Creates or updates these runs (one row each) with what the batch says about them. */
function upsertRunsStatement(part: RunPatch[]): Statement {
  const params: unknown[] = [];
  for (const p of part) {
    params.push(
      p.p, p.r, text(p.workflow), text(p.session_id), tsParam(p.started_ms), tsParam(p.ended_ms),
      p.end_status, json(p.final_output), json(p.run_start ?? undefined), tsParam(p.last_seen_ms),
    );
  }
  const values = valuesList(part.length, ['text', 'text', 'text', 'text', 'timestamptz', 'timestamptz', 'text', 'jsonb', 'jsonb', 'timestamptz']);
  return {
    sql: `INSERT INTO runs AS r (project, run_id, workflow, session_id, started_at, ended_at, end_status, final_output, run_start, last_seen_at)
         VALUES ${values}
         ON CONFLICT (project, run_id) DO UPDATE SET
           -- once run_start was stored, spans no longer change the run's workflow or session
           workflow = CASE WHEN r.run_start IS NOT NULL AND EXCLUDED.run_start IS NULL
                           THEN COALESCE(r.workflow, EXCLUDED.workflow) ELSE COALESCE(EXCLUDED.workflow, r.workflow) END,
           session_id = CASE WHEN r.run_start IS NOT NULL AND EXCLUDED.run_start IS NULL
                           THEN COALESCE(r.session_id, EXCLUDED.session_id) ELSE COALESCE(EXCLUDED.session_id, r.session_id) END,
           started_at = LEAST(r.started_at, EXCLUDED.started_at),
           ended_at = COALESCE(EXCLUDED.ended_at, r.ended_at),
           end_status = COALESCE(EXCLUDED.end_status, r.end_status),
           final_output = CASE WHEN EXCLUDED.end_status IS NOT NULL THEN EXCLUDED.final_output ELSE r.final_output END,
           run_start = COALESCE(EXCLUDED.run_start, r.run_start),
           last_seen_at = GREATEST(r.last_seen_at, EXCLUDED.last_seen_at)`,
    params,
  };
}

/**
 * The spans and the counters they move, one JSON parameter a statement (the batch as an array
 * unpacked by json_to_recordset: serialising once and parsing inside the database costs far
 * less than thousands of bound parameters on this, the pipeline's hot write).
 */
function writeSpansStatement(part: SpanRow[]): Statement {
  return { sql: WRITE_SPANS, params: [json(part.map(spanRecord)), part.length, spanPayloads(part)] };
}

/** Counts again the layers of the chunk's runs that WRITE_SPANS marked (a tool span replaced). */
function recountLayersStatement(part: SpanRow[]): Statement {
  const runs = new Set<RunPatch>();
  for (const row of part) runs.add(row.run);
  const keys: { p: string; r: string }[] = [];
  for (const run of runs) keys.push({ p: run.p!, r: run.r! });
  return { sql: RECOUNT_LAYERS, params: [json(keys)], when: 'rows' };
}

/** Runs and their spans. Plain class over a Queryable: pass a transaction to write atomically. */
export class RunsRepo {
  constructor(private readonly db: Queryable) {}

  /**
   * Stores a batch of bus envelopes: each run touched is created or updated (run_start,
   * run_end, what its spans say), then spans are upserted (a re-exported span replaces the
   * earlier copy) and the runs' counters moved by what the batch changed, so a replaced span
   * or a redelivered batch never counts twice. Idempotent. Pass a transaction: the statements
   * (envelopeStatements) belong together.
   */
  async writeEnvelopes(envelopes: readonly Envelope[]): Promise<void> {
    await runStatements(this.db, envelopeStatements(envelopes));
  }

  /**
   * Newest first (by started_at, then run_id). The cursor keeps the start to the microsecond
   * the database holds: `started_at` in the answer is to the millisecond, and a cursor made from
   * it would skip runs that started later within that millisecond.
   */
  async list(project: string, q: ListRunsQuery = {}): Promise<Page<RunRecord>> {
    const limit = pageLimit(q.limit);
    const params: unknown[] = [project];
    const where = ['r.project = $1'];
    if (q.workflow !== undefined) {
      params.push(filterText('workflow', q.workflow));
      where.push(`r.workflow = $${params.length}`);
    }
    if (q.session_id !== undefined) {
      params.push(filterText('session_id', q.session_id));
      where.push(`r.session_id = $${params.length}`);
    }
    if (q.end_status === 'running') where.push('r.end_status IS NULL');
    else if (q.end_status !== undefined) {
      if (!(RUN_END_FILTERS as readonly string[]).includes(q.end_status)) {
        throw new StoreInputError('invalid_argument', `end_status must be one of ${RUN_END_FILTERS.join(', ')}`);
      }
      params.push(q.end_status);
      where.push(`r.end_status = $${params.length}`);
    }
    if (q.has_open_findings !== undefined) where.push(q.has_open_findings ? HAS_OPEN : `NOT ${HAS_OPEN}`);
    if (q.from !== undefined) {
      params.push(timeFilter('from', q.from));
      where.push(`r.started_at >= $${params.length}::timestamptz`);
    }
    if (q.to !== undefined) {
      params.push(timeFilter('to', q.to));
      where.push(`r.started_at < $${params.length}::timestamptz`);
    }
    if (q.cursor !== undefined) {
      const c = decodeCursor('runs', q.cursor);
      params.push(c.at, c.id);
      where.push(`(r.started_at, r.run_id) < ($${params.length - 1}::timestamptz, $${params.length}::text)`);
    }
    params.push(limit + 1);
    const res = await this.db.query(
      `SELECT ${RUN_COLUMNS}, ${OPEN_PROBLEMS} AS open_findings, ${ALL_PROBLEMS} AS finding_count, ${EXACT_START} AS cursor_at FROM runs r
       WHERE ${where.join(' AND ')}
       ORDER BY r.started_at DESC, r.run_id DESC
       LIMIT $${params.length}`,
      params,
    );
    const items = res.rows.slice(0, limit).map(toRun);
    const last = res.rows[limit - 1];
    return { items, next_cursor: res.rows.length > limit && last ? encodeCursor('runs', String(last.cursor_at), String(last.run_id)) : null };
  }

  async get(project: string, runId: string): Promise<RunRecord | null> {
    const res = await this.db.query(
      `SELECT ${RUN_COLUMNS}, r.final_output, r.run_start, ${OPEN_PROBLEMS} AS open_findings, ${ALL_PROBLEMS} AS finding_count
       FROM runs r WHERE r.project = $1 AND r.run_id = $2`,
      [project, filterText('run_id', runId)],
    );
    const row = res.rows[0];
    if (!row) return null;
    return { ...toRun(row), final_output: row.final_output ?? null, run_start: (row.run_start as RunStart | null) ?? null };
  }

  /**
   * A page of the run's spans: by start, to the fraction of a millisecond given (spans
   * without one last), then in the order they arrived. Null for an unknown run.
   *
   * At most `limit` spans, and at most `maxBytes` bytes of their JSON (SPAN_PAGE_BYTES): a
   * page that stops short of its limit for its size says so (`cut_at_bytes`), its cursor going
   * on from there; its first span is always in it. The sizes (the stored JSON's bytes) are
   * summed in the query: a span past the cut never leaves the database.
   *
   * `bodies: 'preview'` cuts each span's input and output longer than SPAN_PREVIEW_CHARS to
   * their first characters in the query (the sizes summed are of the spans so cut), with
   * `truncated` naming each field cut and its full length: the page of a run of large outputs
   * is a few kilobytes a span, not the outputs (getSpan gives one span whole).
   */
  async spans(project: string, runId: string, q: SpanPageQuery = {}, maxBytes = SPAN_PAGE_BYTES): Promise<SpanPage | null> {
    const limit = pageLimit(q.limit, DEFAULT_SPAN_PAGE, MAX_SPAN_PAGE);
    if (q.bodies !== undefined && !SPAN_BODIES.includes(q.bodies)) throw new StoreInputError('invalid_argument', `bodies must be one of ${SPAN_BODIES.join(', ')}`);
    const body = q.bodies === 'preview' ? PREVIEW_PAYLOAD : 'payload';
    const params: unknown[] = [project, filterText('run_id', runId)];
    let after = '';
    const c = q.cursor === undefined ? undefined : decodeSpanCursor(runId, q.cursor);
    // A since cursor: the spans stored after it, as they were stored (the arrival sequence).
    const order = c?.stored ? 'arrival ASC' : `${SPAN_START} ASC, arrival ASC`;
    if (c?.stored) {
      params.push(c.arrival);
      // Nothing stored since (the run's newest arrival, kept by the span write): the scan of the
      // run's spans is not run at all (a one-time filter), as a followed run's looks mostly find.
      after = `AND arrival > $3::bigint AND EXISTS (SELECT 1 FROM runs lr WHERE lr.project = $1 AND lr.run_id = $2
        AND (lr.last_arrival IS NULL OR lr.last_arrival > $3::bigint))`;
    } else if (c) {
      params.push(c.start ?? 'Infinity', c.arrival);
      after = `AND (${SPAN_START}, arrival) > ($3::double precision, $4::bigint)`;
    }
    params.push(limit, maxBytes);
    const [limitParam, bytesParam] = [`$${params.length - 1}::int`, `$${params.length}::bigint`];
    // The page's spans and the one after (is there more?), each with the bytes of those up to
    // it; the payload only of those kept (the first, then while within the bytes and the limit).
    const res = await this.db.query<{ payload: Span | null; start_exact: number | null; arrival: unknown; kept: boolean }>(
      `WITH page AS (
         SELECT start_exact, arrival, payload, octet_length(payload::text) AS bytes FROM (
           SELECT start_exact, arrival, ${body} AS payload FROM spans
           WHERE project = $1 AND run_id = $2 ${after}
           ORDER BY ${order}
           LIMIT ${limitParam} + 1
         ) s
       ),
       sized AS (
         SELECT start_exact, arrival, payload, row_number() OVER o AS n, sum(bytes) OVER o AS upto
         FROM page WINDOW o AS (ORDER BY ${order} ROWS UNBOUNDED PRECEDING)
       ),
       marked AS (
         SELECT start_exact, arrival, payload, n, (n <= ${limitParam} AND (n = 1 OR upto <= ${bytesParam})) AS kept FROM sized
       )
       SELECT CASE WHEN kept THEN payload END AS payload, start_exact, arrival, kept FROM marked ORDER BY n`,
      params,
    );
    if (!res.rows.length && !(await this.exists(project, runId))) return null;
    const rows = res.rows.filter((r) => r.kept);
    const last = rows[rows.length - 1];
    const more = res.rows.length > rows.length;
    const page: SpanPage = {
      items: rows.map((r) => r.payload!),
      next_cursor:
        more && last
          ? encodeSpanCursor(runId, c?.stored ? { start: null, arrival: String(last.arrival), stored: true } : { start: last.start_exact === null ? null : Number(last.start_exact), arrival: String(last.arrival) })
          : null,
      // Read from a since cursor: where the next look for spans stored later starts.
      ...(c?.stored ? { since: encodeSpanCursor(runId, { start: null, arrival: last ? String(last.arrival) : c.arrival, stored: true }) } : {}),
    };
    // Short of the limit with spans left: the bytes cut it.
    return more && rows.length < limit ? { ...page, cut_at_bytes: maxBytes } : page;
  }

  /**
   * Retention, one bounded step: deletes spans of runs that started and were last seen before
   * `before` (ms), oldest first, and their question results and handed-over question tasks
   * (one a question asked: as many as the spans where a span question runs), and marks the runs whose spans are all gone
   * (`spans_expired_at`). The run rows, their counters and findings stay. A run whose start
   * (its agent's clock) is after `limits.now` is taken when last seen before `before`.
   *
   * A step is bounded by spans, not by runs: it takes runs, oldest first, until their span
   * counts reach `limits.spans` (at least one run, at most `limits.runs`), and its one delete
   * statement removes at most `limits.spans` spans and as many question results, so a run of a
   * million spans is deleted over many steps (by its primary key's prefix), each a short
   * transaction the writer waits little behind. A run is marked only in the statement that
   * finds its spans and question results all gone: a pass cut between steps leaves it unmarked,
   * and the next takes it again. The answer says `more: true` when the step left runs past
   * the cutoff (call again), and has no `more` when none is left.
   *
   * A run whose spans went and that received spans since (a late export: its `last_seen_at`,
   * their receipt, is after `spans_expired_at`) is taken again once they too are older than
   * `before`. The mark is never before the run's last receipt, so a receipt clock ahead of the
   * database's does not take the run again and again.
   */
  async expireSpans(before: number, limits: ExpireLimits = {}): Promise<{ runs: number; spans: number; more?: true }> {
    const maxRuns = Math.max(1, Math.floor(limits.runs ?? EXPIRE_RUNS));
    const maxSpans = Math.max(1, Math.floor(limits.spans ?? EXPIRE_SPANS));
    const cutoff = new Date(before).toISOString();
    const at = new Date(limits.now ?? Date.now()).toISOString();
    // The candidates, oldest first, each with the spans it and those before it hold at most
    // (span_count counts every span stored, so it is never below what is left). One more than
    // a step takes: whether some is left for the next.
    const picked = await this.db.query<{ project: string; run_id: string; n: unknown; upto: unknown }>(
      `WITH c AS (
         (SELECT project, run_id, span_count, started_at AS k FROM runs
          WHERE ${expireFresh()}
          ORDER BY started_at, project, run_id LIMIT $2)
         UNION ALL
         (SELECT project, run_id, span_count, last_seen_at AS k FROM runs
          WHERE ${expireAhead()}
          ORDER BY last_seen_at, project, run_id LIMIT $2)
         UNION ALL
         (SELECT project, run_id, span_count, last_seen_at AS k FROM runs
          WHERE ${expireLate()}
          ORDER BY last_seen_at, project, run_id LIMIT $2)
       )
       SELECT project, run_id, row_number() OVER o AS n, sum(span_count) OVER o AS upto
       FROM c WINDOW o AS (ORDER BY k, project, run_id ROWS UNBOUNDED PRECEDING)
       ORDER BY n LIMIT $2`,
      [cutoff, maxRuns + 1, at],
    );
    const take = picked.rows.filter((r) => num(r.n) === 1 || (num(r.n) <= maxRuns && num(r.upto) <= maxSpans));
    if (!take.length) return { runs: 0, spans: 0 };
    // The runs are read again, as they are now: one that received spans since the pick is left.
    const res = await this.db.query<{ runs: unknown; spans: unknown; results: unknown; pending: unknown }>(
      `WITH r AS (
         SELECT x.project, x.run_id FROM runs x
         JOIN unnest($2::text[], $5::text[]) AS p(project, run_id) ON x.project = p.project AND x.run_id = p.run_id
         WHERE (${expireFresh('x.')}) OR (${expireAhead('x.')}) OR (${expireLate('x.')})
       ),
       d AS (
         DELETE FROM spans s USING (
           SELECT t.project, t.run_id, t.span_id FROM spans t JOIN r ON t.project = r.project AND t.run_id = r.run_id LIMIT $4
         ) k WHERE s.project = k.project AND s.run_id = k.run_id AND s.span_id = k.span_id
         RETURNING 1
       ),
       q AS (
         DELETE FROM question_results x WHERE x.task_id IN (
           SELECT t.task_id FROM question_results t JOIN r ON t.project = r.project AND t.run_id = r.run_id LIMIT $4
         ) RETURNING 1
       ),
       w AS (
         DELETE FROM question_pending x WHERE x.task_id IN (
           SELECT t.task_id FROM question_pending t JOIN r ON t.project = r.project AND t.run_id = r.run_id LIMIT $4
         ) RETURNING 1
       ),
       gone AS (SELECT (SELECT count(*) FROM d) AS spans, (SELECT count(*) FROM q) AS results, (SELECT count(*) FROM w) AS pending),
       u AS (
         UPDATE runs x SET spans_expired_at = GREATEST(now(), x.last_seen_at) FROM r, gone
         WHERE gone.spans < $4 AND gone.results < $4 AND gone.pending < $4 AND x.project = r.project AND x.run_id = r.run_id
         RETURNING 1
       )
       SELECT (SELECT count(*) FROM u)::int AS runs, spans::int AS spans, results::int AS results, pending::int AS pending FROM gone`,
      [cutoff, take.map((r) => r.project), at, maxSpans, take.map((r) => r.run_id)],
    );
    const row = res.rows[0];
    const out = { runs: num(row?.runs), spans: num(row?.spans) };
    // Some left: runs past the cutoff not taken, or a run taken and not marked (spans or
    // question results left over the bound). A run left as the pick saw it changed is not.
    const more = picked.rows.length > take.length || num(row?.spans) >= maxSpans || num(row?.results) >= maxSpans || num(row?.pending) >= maxSpans;
    return more ? { ...out, more: true } : out;
  }

  /** One span of the run as stored, whole; null for an unknown run or span. */
  async span(project: string, runId: string, spanId: string): Promise<Span | null> {
    const res = await this.db.query<{ payload: Span }>('SELECT payload FROM spans WHERE project = $1 AND run_id = $2 AND span_id = $3', [
      project,
      filterText('run_id', runId),
      filterText('span_id', spanId),
    ]);
    return res.rows[0]?.payload ?? null;
  }

  /**
   * The arrival number of the run's last span stored (null: none yet): kept on the run by the
   * span write; a run whose spans were all stored before migration 0037 reads its spans once.
   */
  private async lastArrival(project: string, runId: string): Promise<string | null> {
    const res = await this.db.query<{ a: unknown }>(
      `SELECT COALESCE(r.last_arrival, (SELECT max(s.arrival) FROM spans s WHERE s.project = r.project AND s.run_id = r.run_id)) AS a
       FROM runs r WHERE r.project = $1 AND r.run_id = $2`,
      [project, runId],
    );
    const a = res.rows[0]?.a;
    return a === null || a === undefined ? null : String(a);
  }

  private async exists(project: string, runId: string): Promise<boolean> {
    const res = await this.db.query('SELECT 1 FROM runs WHERE project = $1 AND run_id = $2', [project, runId]);
    return res.rows.length > 0;
  }

  /**
   * The run page: the run, the first page of its spans (`spans_limit` of them, 500 unless
   * asked; cut at SPAN_PAGE_BYTES as any page), its findings and its problems.
   */
  async detail(project: string, runId: string, q: RunDetailQuery = {}): Promise<RunDetail | null> {
    if (q.since !== undefined && !decodeSpanCursor(runId, q.since).stored) {
      throw new StoreInputError('invalid_cursor', "since is not a run page's spans_since");
    }
    const run = await this.get(project, runId);
    if (!run) return null;
    const findingsRepo = new FindingsRepo(this.db);
    // Read before the findings, so a finding written meanwhile is in what follows (perhaps twice), never in neither.
    const watermark = await findingsRepo.watermark();
    // Read before the page, so a span stored meanwhile is in what follows it (perhaps twice), never in neither.
    const stored = q.since === undefined ? await this.lastArrival(project, runId) : null;
    const pageQuery = { ...(q.spans_limit === undefined ? {} : { limit: q.spans_limit }), ...(q.bodies ? { bodies: q.bodies } : {}), ...(q.since === undefined ? {} : { cursor: q.since }) };
    const page: SpanPage = (await this.spans(project, runId, pageQuery)) ?? { items: [], next_cursor: null };
    const spansSince = page.since ? decodeSpanCursor(runId, page.since).arrival : (stored ?? '0');
    const since = encodeSpanCursor(runId, { start: null, arrival: spansSince, stored: true, findings: watermark });
    // The questions waiting are counted before the findings are read: a question's task stops
    // counting once its finding is stored (QuestionsRepo.pending), so at 0 the findings read next
    // have it (read after them, a finding stored in between was counted and not listed).
    const pending = await new QuestionsRepo(this.db).pending(project, runId);
    // Only the findings written since the last look, when it said from where: a run of 15,000
    // findings followed live was 22.7 MB a look with nothing new. Else (or more than a page of
    // them changed) the newest, as a first answer.
    const from = q.since === undefined ? undefined : decodeSpanCursor(runId, q.since).findings;
    const changed = from === undefined ? null : await findingsRepo.changedForRun(project, runId, from, RUN_PAGE_FINDINGS);
    const newest = changed ? null : await findingsRepo.newestForRun(project, runId, RUN_PAGE_FINDINGS);
    const findings = changed ?? newest!.items;
    const total = newest ? newest.total : await findingsRepo.countForRun(project, runId);
    const notChecked = await this.notChecked(project, runId);
    return {
      run,
      spans: page.items,
      spans_next_cursor: page.next_cursor,
      ...(page.cut_at_bytes !== undefined ? { spans_cut_at_bytes: page.cut_at_bytes } : {}),
      spans_since: since,
      findings,
      findings_scope: changed ? 'changed' : 'newest',
      findings_total: total,
      problems: groupProblems(findings.filter((f) => !f.quiet)),
      not_checked: notChecked,
      questions_pending: pending,
    };
  }

  /**
   * The run's questions left not checked, less those answered later (the same check about the
   * same span, or the run, asked again). An answer now takes its not-checked rows back when it is
   * recorded (QuestionsRepo.record); the NOT EXISTS reads the answered rows stored before that.
   */
  private async notChecked(project: string, runId: string): Promise<NotChecked[]> {
    const res = await this.db.query<{ check_id: string; anchor: string; span_ids: string[] | null; reason: string | null; at: unknown }>(
      `SELECT r.check_id, r.anchor, r.span_ids, r.reason, r.at FROM question_results r
        WHERE r.project = $1 AND r.run_id = $2 AND r.status = 'not_checked'
          AND NOT EXISTS (SELECT 1 FROM question_results a WHERE a.project = r.project AND a.run_id = r.run_id
                            AND a.check_id = r.check_id AND a.anchor = r.anchor AND a.status = 'answered' AND a.at >= r.at)
        ORDER BY r.at, r.task_id`,
      [project, runId],
    );
    return res.rows.map((r) => ({ check_id: r.check_id, anchor: r.anchor, span_ids: r.span_ids ?? [], reason: r.reason, at: iso(r.at)! }));
  }
}
