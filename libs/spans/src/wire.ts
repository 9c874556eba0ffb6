import { v1 } from '@neatroots/proto';
import { SpanValidationError } from './errors';
import type { LimitCheck } from './limits';
import { normalizeItem, normalizeSpan } from './normalize';
import type { RunEnd, RunStart, Span, StreamItem } from './types';

/**
 * The span shape on the wire (neatroots.v1 protobuf): what the SDK sends, what ingest reads
 * and what the events topic carries.
 *
 * Ingest reads an event with `eventToItem`, which validates through `normalizeItem` exactly
 * like a line of a replay file. The bus's reader uses `readEvent`: what is on the topic was
 * validated by ingest once, so it is only decoded. "Any JSON" fields travel as JSON text
 * (input_json, output_json, attributes_json, final_output_json). In proto3 an empty string
 * means "not set": the plain string fields read an empty string as absent. The `*_json` fields
 * are `optional`, so a sent empty string is present, and refused as not valid JSON (docs/contracts.md,
 * neatroots.v1 over gRPC).
 */

type Obj = Record<string, unknown>;

function parseJsonField(text: string | undefined, field: string, runId?: string, spanId?: string): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new SpanValidationError(field, `is not valid JSON (${(e as Error).message})`, runId, spanId);
  }
}

/**
 * A value as JSON text. A validated item is always JSON; what an agent hands the SDK may not
 * be (a circular object, a BigInt, a function): it is sent as the JSON string of its text
 * rather than lost or thrown at the agent.
 */
export function jsonText(v: unknown): string | undefined {
  if (v === undefined) return undefined;
  try {
    const s = JSON.stringify(v);
    if (s !== undefined) return s;
  } catch {
    // circular or BigInt: sent as its string form below
  }
  return JSON.stringify(String(v));
}

function nonEmpty(raw: Obj, key: string, v: string | undefined): void {
  if (v) raw[key] = v;
}

// ---- Span ------------------------------------------------------------------------------

/**
 * A span as a sender has it: ingest fills in the name (a tool call's tool) and the status
 * (error when there is an error) when they are left out.
 */
export type SpanDraft = Omit<Span, 'name' | 'status'> & { name?: string; status?: Span['status'] };

export function spanToProto(span: SpanDraft): v1.Span {
  const msg: v1.Span = {
    run_id: span.run_id,
    span_id: span.span_id,
    parent_id: span.parent_id ?? '',
    type: span.type,
    name: span.name ?? '',
    tool: span.tool ?? '',
    status: span.status ?? '',
    model: span.model ?? '',
    project: span.project ?? '',
    workflow: span.workflow ?? '',
    session_id: span.session_id ?? '',
  };
  const input = jsonText(span.input);
  if (input !== undefined) msg.input_json = input;
  const output = jsonText(span.output);
  if (output !== undefined) msg.output_json = output;
  // null and absent are the same thing here (no error); protobuf cannot tell them apart.
  if (typeof span.error === 'string') msg.error = span.error;
  if (span.start_ms !== undefined) msg.start_ms = span.start_ms;
  if (span.end_ms !== undefined) msg.end_ms = span.end_ms;
  if (span.usage) msg.usage = { ...span.usage };
  if (span.attributes) msg.attributes_json = jsonText(span.attributes);
  return msg;
}

/** The span as JSON (CONTRACTS.md section 1), not yet validated. */
function spanRaw(msg: v1.Span): Obj {
  const runId = msg.run_id || undefined;
  const spanId = msg.span_id || undefined;
  const raw: Obj = {};
  nonEmpty(raw, 'run_id', msg.run_id);
  nonEmpty(raw, 'span_id', msg.span_id);
  nonEmpty(raw, 'parent_id', msg.parent_id);
  nonEmpty(raw, 'type', msg.type);
  nonEmpty(raw, 'name', msg.name);
  nonEmpty(raw, 'tool', msg.tool);
  const input = parseJsonField(msg.input_json, 'input_json', runId, spanId);
  if (input !== undefined) raw.input = input;
  const output = parseJsonField(msg.output_json, 'output_json', runId, spanId);
  if (output !== undefined) raw.output = output;
  if (msg.error !== undefined) raw.error = msg.error;
  nonEmpty(raw, 'status', msg.status);
  if (msg.start_ms !== undefined) raw.start_ms = msg.start_ms;
  if (msg.end_ms !== undefined) raw.end_ms = msg.end_ms;
  if (msg.usage) {
    const u: Obj = {};
    for (const k of ['input_tokens', 'output_tokens', 'total_tokens', 'cost'] as const) {
      if (msg.usage[k] !== undefined) u[k] = msg.usage[k];
    }
    if (Object.keys(u).length) raw.usage = u;
  }
  nonEmpty(raw, 'model', msg.model);
  nonEmpty(raw, 'project', msg.project);
  nonEmpty(raw, 'workflow', msg.workflow);
  nonEmpty(raw, 'session_id', msg.session_id);
  const attrs = parseJsonField(msg.attributes_json, 'attributes_json', runId, spanId);
  if (attrs !== undefined) raw.attributes = attrs;
  return raw;
}

/** Reads and validates a span message; throws SpanValidationError naming the field. */
export function spanFromProto(msg: v1.Span): Span {
  return normalizeSpan(spanRaw(msg));
}

// ---- Run events and the stream item ----------------------------------------------------

export function runStartToProto(run: Omit<RunStart, 'event'>): v1.RunStart {
  const msg: v1.RunStart = {
    run_id: run.run_id,
    project: run.project ?? '',
    workflow: run.workflow ?? '',
    session_id: run.session_id ?? '',
    system_prompt: run.system_prompt ?? '',
    user_message: run.user_message ?? '',
    tools: (run.tools ?? []).map((t) => ({ name: t.name, description: t.description ?? '' })),
  };
  if (run.ts_ms !== undefined) msg.ts_ms = run.ts_ms;
  return msg;
}

export function runEndToProto(run: Omit<RunEnd, 'event'>): v1.RunEnd {
  const msg: v1.RunEnd = { run_id: run.run_id, status: run.status };
  const out = jsonText(run.final_output);
  if (out !== undefined) msg.final_output_json = out;
  if (run.ts_ms !== undefined) msg.ts_ms = run.ts_ms;
  return msg;
}

function runStartRaw(msg: v1.RunStart): Obj {
  const raw: Obj = { event: 'run_start' };
  for (const k of ['run_id', 'project', 'workflow', 'session_id', 'system_prompt', 'user_message'] as const) {
    nonEmpty(raw, k, msg[k]);
  }
  if (msg.tools.length) {
    raw.tools = msg.tools.map((t) => (t.description ? { name: t.name, description: t.description } : { name: t.name }));
  }
  if (msg.ts_ms !== undefined) raw.ts_ms = msg.ts_ms;
  return raw;
}

function runEndRaw(msg: v1.RunEnd): Obj {
  const raw: Obj = { event: 'run_end' };
  nonEmpty(raw, 'run_id', msg.run_id);
  nonEmpty(raw, 'status', msg.status);
  const out = parseJsonField(msg.final_output_json, 'final_output_json', msg.run_id || undefined);
  if (out !== undefined) raw.final_output = out;
  if (msg.ts_ms !== undefined) raw.ts_ms = msg.ts_ms;
  return raw;
}

export function itemToEvent(item: StreamItem): v1.Event {
  switch (item.kind) {
    case 'span':
      return { kind: { $case: 'span', value: spanToProto(item.span) } };
    case 'run_start':
      return { kind: { $case: 'run_start', value: runStartToProto(item.run) } };
    case 'run_end':
      return { kind: { $case: 'run_end', value: runEndToProto(item.run) } };
  }
}

/**
 * Reads and validates one event of the stream; throws SpanValidationError naming the field.
 * Ingest passes `limits`; replay and the property tests may leave them out.
 */
export function eventToItem(ev: v1.Event, limits?: LimitCheck): StreamItem {
  const k = ev.kind;
  if (!k) throw new SpanValidationError('event', 'is empty: it must hold a span, a run_start or a run_end');
  try {
    switch (k.$case) {
      case 'span':
        return normalizeItem(spanRaw(k.value), limits);
      case 'run_start':
        return normalizeItem(runStartRaw(k.value), limits);
      case 'run_end':
        return normalizeItem(runEndRaw(k.value), limits);
    }
  } catch (e) {
    // A limit names the span's field; the sender wrote the message's (input_json, ...).
    const wire = e instanceof SpanValidationError ? JSON_FIELDS[e.field] : undefined;
    if (wire) throw new SpanValidationError(wire, (e as SpanValidationError).reason, (e as SpanValidationError).run_id, (e as SpanValidationError).span_id);
    throw e;
  }
}

const JSON_FIELDS: Record<string, string | undefined> = {
  input: 'input_json',
  output: 'output_json',
  final_output: 'final_output_json',
};

/**
 * Reads an event that ingest validated before writing it (the events topic): decoded, not
 * normalised again. A JSON field that does not parse is still an error (the bytes are not
 * what ingest wrote).
 */
export function readEvent(ev: v1.Event): StreamItem {
  const k = ev.kind;
  if (!k) throw new SpanValidationError('event', 'is empty: it must hold a span, a run_start or a run_end');
  switch (k.$case) {
    case 'span':
      return { kind: 'span', span: spanRaw(k.value) as unknown as Span };
    case 'run_start':
      return { kind: 'run_start', run: runStartRaw(k.value) as unknown as RunStart };
    case 'run_end':
      return { kind: 'run_end', run: runEndRaw(k.value) as unknown as RunEnd };
  }
}
