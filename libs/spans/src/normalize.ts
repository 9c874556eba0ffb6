import { SpanValidationError } from './errors';
import { checkItemLimits, type LimitCheck } from './limits';
import {
  RUN_END_STATUSES,
  SPAN_TYPES,
  type RunEnd,
  type RunEndStatus,
  type RunStart,
  type Span,
  type SpanType,
  type StreamItem,
  type ToolInfo,
  type Usage,
} from './types';

/** Identifiers longer than this are almost certainly a payload put in the wrong field. */
export const MAX_ID_LENGTH = 256;

const SPAN_KEYS = new Set([
  'run_id', 'span_id', 'parent_id', 'type', 'name', 'tool', 'input', 'output', 'error', 'status',
  'start_ms', 'end_ms', 'usage', 'model', 'project', 'workflow', 'session_id', 'attributes',
]);

type Obj = Record<string, unknown>;

/**
 * The ids that name a page of the app and an API path (/runs/{run_id}, ?span=, a session's
 * runs): "." and ".." are path steps to a browser, a proxy and every HTTP client, which go up a
 * level instead of to the run (/p/shop/runs/.. is the project's home), so no link could open it.
 */
const PATH_IDS: ReadonlySet<string> = new Set(['run_id', 'span_id', 'parent_id', 'session_id']);

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function id(raw: Obj, field: string, required: boolean, runId?: string, spanId?: string): string | undefined {
  const v = raw[field];
  if (v === undefined || v === null || v === '') {
    if (required) throw new SpanValidationError(field, 'is required', runId, spanId);
    return undefined;
  }
  if (typeof v !== 'string') throw new SpanValidationError(field, `must be a string, got ${typeName(v)}`, runId, spanId);
  if (v.length > MAX_ID_LENGTH) throw new SpanValidationError(field, `is longer than ${MAX_ID_LENGTH} characters`, runId, spanId);
  if ((v === '.' || v === '..') && PATH_IDS.has(field)) {
    throw new SpanValidationError(field, `must not be "${v}": in a link or an API path it is a step up, not a name`, runId, spanId);
  }
  return v;
}

function optString(raw: Obj, field: string, runId?: string, spanId?: string): string | undefined {
  const v = raw[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new SpanValidationError(field, `must be a string, got ${typeName(v)}`, runId, spanId);
  return v;
}

function optTime(raw: Obj, field: string, runId?: string, spanId?: string): number | undefined {
  const v = raw[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
    throw new SpanValidationError(field, `must be a non-negative number of epoch milliseconds, got ${JSON.stringify(v)}`, runId, spanId);
  }
  return v;
}

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

function usage(raw: unknown, runId: string, spanId: string): Usage | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!isObj(raw)) throw new SpanValidationError('usage', `must be an object, got ${typeName(raw)}`, runId, spanId);
  const out: Usage = {};
  for (const k of ['input_tokens', 'output_tokens', 'total_tokens', 'cost'] as const) {
    const v = raw[k];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
      throw new SpanValidationError(`usage.${k}`, `must be a non-negative number, got ${JSON.stringify(v)}`, runId, spanId);
    }
    out[k] = v;
  }
  if (out.total_tokens === undefined && (out.input_tokens !== undefined || out.output_tokens !== undefined)) {
    out.total_tokens = (out.input_tokens ?? 0) + (out.output_tokens ?? 0);
  }
  return out;
}

/** Validates a span as JSON (CONTRACTS.md section 1) and returns it in its normal form. */
export function normalizeSpan(raw: unknown): Span {
  if (!isObj(raw)) throw new SpanValidationError('span', `must be a JSON object, got ${typeName(raw)}`);
  const run_id = id(raw, 'run_id', true) as string;
  const span_id = id(raw, 'span_id', true, run_id) as string;
  const t = raw.type;
  if (t === undefined || t === null || t === '') throw new SpanValidationError('type', 'is required', run_id, span_id);
  if (typeof t !== 'string' || !(SPAN_TYPES as readonly string[]).includes(t)) {
    throw new SpanValidationError('type', `must be one of ${SPAN_TYPES.join(', ')}, got ${JSON.stringify(t)}`, run_id, span_id);
  }
  const type = t as SpanType;
  const tool = optString(raw, 'tool', run_id, span_id) || undefined;
  const name = optString(raw, 'name', run_id, span_id) || tool || type;
  const errRaw = raw.error;
  let error: string | null | undefined;
  if (errRaw === undefined || errRaw === null) error = errRaw as null | undefined;
  else if (typeof errRaw === 'string') error = errRaw;
  else if (isObj(errRaw) && typeof errRaw.message === 'string') error = errRaw.message;
  else throw new SpanValidationError('error', `must be a string or null, got ${typeName(errRaw)}`, run_id, span_id);
  const st = raw.status;
  let status: 'ok' | 'error';
  if (st === undefined || st === null || st === '') status = error ? 'error' : 'ok';
  else if (st === 'ok' || st === 'error') status = st;
  else throw new SpanValidationError('status', `must be "ok" or "error", got ${JSON.stringify(st)}`, run_id, span_id);
  const start_ms = optTime(raw, 'start_ms', run_id, span_id);
  const end_ms = optTime(raw, 'end_ms', run_id, span_id);
  if (start_ms !== undefined && end_ms !== undefined && end_ms < start_ms) {
    throw new SpanValidationError('end_ms', `is before start_ms (${end_ms} < ${start_ms})`, run_id, span_id);
  }
  const attrs = raw.attributes;
  if (attrs !== undefined && attrs !== null && !isObj(attrs)) {
    throw new SpanValidationError('attributes', `must be an object, got ${typeName(attrs)}`, run_id, span_id);
  }
  const span: Span = { run_id, span_id, type, name, status };
  const parent_id = id(raw, 'parent_id', false, run_id, span_id);
  if (parent_id) span.parent_id = parent_id;
  if (tool) span.tool = tool;
  else if (type === 'tool' || type === 'mcp_tool') span.tool = name;
  if (raw.input !== undefined) span.input = raw.input;
  if (raw.output !== undefined) span.output = raw.output;
  if (error !== undefined) span.error = error;
  if (start_ms !== undefined) span.start_ms = start_ms;
  if (end_ms !== undefined) span.end_ms = end_ms;
  const u = usage(raw.usage, run_id, span_id);
  if (u) span.usage = u;
  const model = optString(raw, 'model', run_id, span_id);
  if (model) span.model = model;
  for (const k of ['project', 'workflow', 'session_id'] as const) {
    const v = id(raw, k, false, run_id, span_id);
    if (v) span[k] = v;
  }
  // Unknown top-level keys are kept, as the contract says of attributes: nothing sent is lost.
  let extra: Obj | undefined;
  for (const k of Object.keys(raw)) {
    // A null prototype: a key named __proto__ is kept as one, not taken for the object's prototype.
    if (!SPAN_KEYS.has(k) && k !== 'event') (extra ??= Object.create(null) as Obj)[k] = raw[k];
  }
  if (attrs || extra) span.attributes = { ...(extra ?? {}), ...((attrs as Obj) ?? {}) };
  return span;
}

function tools(raw: unknown, runId: string): ToolInfo[] | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!Array.isArray(raw)) throw new SpanValidationError('tools', `must be an array, got ${typeName(raw)}`, runId);
  return raw.map((t, i) => {
    if (typeof t === 'string') return { name: t };
    if (!isObj(t) || typeof t.name !== 'string' || !t.name) {
      throw new SpanValidationError(`tools[${i}].name`, 'is required', runId);
    }
    const out: ToolInfo = { name: t.name };
    if (typeof t.description === 'string') out.description = t.description;
    return out;
  });
}

export function normalizeRunStart(raw: Obj): RunStart {
  const run_id = id(raw, 'run_id', true) as string;
  const run: RunStart = { event: 'run_start', run_id };
  for (const k of ['project', 'workflow', 'session_id'] as const) {
    const v = id(raw, k, false, run_id);
    if (v) run[k] = v;
  }
  // An empty prompt or message says nothing, and the bus's protobuf cannot tell it from none
  // (an OTLP agent span whose input is an empty value made one): left out, as on the wire.
  for (const k of ['system_prompt', 'user_message'] as const) {
    const v = optString(raw, k, run_id);
    if (v) run[k] = v;
  }
  const t = tools(raw.tools, run_id);
  if (t) run.tools = t;
  const ts = optTime(raw, 'ts_ms', run_id);
  if (ts !== undefined) run.ts_ms = ts;
  return run;
}

export function normalizeRunEnd(raw: Obj): RunEnd {
  const run_id = id(raw, 'run_id', true) as string;
  const st = raw.status ?? 'ok';
  if (typeof st !== 'string' || !(RUN_END_STATUSES as readonly string[]).includes(st)) {
    throw new SpanValidationError('status', `must be one of ${RUN_END_STATUSES.join(', ')}, got ${JSON.stringify(st)}`, run_id);
  }
  const run: RunEnd = { event: 'run_end', run_id, status: st as RunEndStatus };
  if (raw.final_output !== undefined) run.final_output = raw.final_output;
  const ts = optTime(raw, 'ts_ms', run_id);
  if (ts !== undefined) run.ts_ms = ts;
  return run;
}

/**
 * A span or a run event, told apart by `event`. With `limits` (ingest, replay) the item is
 * also held to the configured limits; what is read back from the bus was checked already.
 */
export function normalizeItem(raw: unknown, limits?: LimitCheck): StreamItem {
  if (!isObj(raw)) throw new SpanValidationError('line', `must be a JSON object, got ${typeName(raw)}`);
  const ev = raw.event;
  let item: StreamItem;
  if (ev === undefined || ev === null || ev === 'span') item = { kind: 'span', span: normalizeSpan(raw) };
  else if (ev === 'run_start') item = { kind: 'run_start', run: normalizeRunStart(raw) };
  else if (ev === 'run_end') item = { kind: 'run_end', run: normalizeRunEnd(raw) };
  else throw new SpanValidationError('event', `must be run_start or run_end (or absent for a span), got ${JSON.stringify(ev)}`);
  if (limits) checkItemLimits(item, limits);
  return item;
}

/** Back to the JSON form of the contract (what files, REST and replay use). */
export function itemToJson(item: StreamItem): Obj {
  if (item.kind === 'span') return { ...item.span };
  return { ...item.run };
}
