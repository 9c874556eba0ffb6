import { v1 } from '@neatroots/proto';
import { SpanValidationError } from './errors';
import type { LimitCheck } from './limits';
import { normalizeItem, normalizeSpan } from './normalize';
import type { Envelope, RunEnd, RunStart, Span, StreamItem } from './types';

/**
 * The span shape on the wire (neatroots.v1 protobuf) and the bus topics.
 *
 * Decoding always goes through `normalizeSpan` / `normalizeItem`, so an item read from gRPC or
 * from the bus is validated exactly like a line of a replay file. "Any JSON" fields travel as
 * JSON text (input_json, output_json, attributes_json, final_output_json); in proto3 an empty
 * string means "not set", so empty strings are read as absent.
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

function jsonText(v: unknown): string | undefined {
  if (v === undefined) return undefined;
  // JSON.stringify gives undefined for functions and symbols: such a value was never JSON.
  return JSON.stringify(v);
}

function nonEmpty(raw: Obj, key: string, v: string | undefined): void {
  if (v) raw[key] = v;
}

// ---- Span ------------------------------------------------------------------------------

export function spanToProto(span: Span): v1.Span {
  const msg: v1.Span = {
    run_id: span.run_id,
    span_id: span.span_id,
    parent_id: span.parent_id ?? '',
    type: span.type,
    name: span.name,
    tool: span.tool ?? '',
    status: span.status,
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
  if (span.attributes) msg.attributes_json = JSON.stringify(span.attributes);
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

export function runStartToProto(run: RunStart): v1.RunStart {
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

export function runEndToProto(run: RunEnd): v1.RunEnd {
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
 * Ingest passes `limits`; the bus's decoder does not (ingest checked what it published).
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

// ---- Envelope --------------------------------------------------------------------------

export function envelopeToProto(env: Envelope): v1.Envelope {
  return { project: env.project, received_ms: env.received_ms, event: itemToEvent(env.item) };
}

export function envelopeFromProto(msg: v1.Envelope): Envelope {
  if (!msg.event) throw new SpanValidationError('event', 'is missing from the envelope');
  return { project: msg.project, received_ms: msg.received_ms, item: eventToItem(msg.event) };
}

// ---- Notes, deliveries and findings ----------------------------------------------------

/** `halt` asks the agent to stop; anything else is advice. */
export type NoteKind = 'note' | 'halt';

/** A note or halt on its way to an agent (neatroots.v1.Note). */
export interface Note {
  id: string;
  project: string;
  /** Empty: every run of the project. */
  run_id: string;
  check_id: string;
  finding_id: string;
  kind: NoteKind;
  title: string;
  text: string;
  at_ms: number;
}

/** Published by ingest when a note reached an agent: the finding becomes active. */
export interface NoteDelivered {
  note_id: string;
  finding_id: string;
  project: string;
  at_ms: number;
}

/**
 * A finding event as it travels on the findings topic (neatroots.v1.FindingEvent). It has the
 * fields of `FindingEvent` in libs/checks/src/types.ts, which is assignable to it (spans cannot
 * import checks: checks depends on spans).
 */
export interface FindingMessage {
  id: string;
  check_id: string;
  run_id: string;
  project: string;
  workflow?: string;
  status: 'raised' | 'updated' | 'resolved';
  span_ids: string[];
  count: number;
  action: 'flag' | 'halt';
  halt_suppressed?: boolean;
  title: string;
  guidance: string;
  at_ms: number;
  group?: string;
  priority?: number;
  kind: string;
  source: string;
  received_ms?: number;
  /** Question findings: the words of the run that show the problem. */
  quote?: string;
  /** Question findings: the probability of a problem (an LLM's is capped at 0.9). */
  probability?: number;
  /** Question findings: how it is shown, "Very likely (LLM judgment)" or a percentage. */
  confidence?: string;
  /** Question findings: decision, local or classifier. */
  answered_by?: string;
}

export function noteFromProto(msg: v1.Note): Note {
  // An unknown kind is delivered as advice: stopping an agent takes an explicit halt.
  const kind: NoteKind = msg.kind === 'halt' ? 'halt' : 'note';
  return { ...msg, kind };
}

export function findingToProto(f: FindingMessage): v1.FindingEvent {
  return {
    id: f.id,
    project: f.project,
    run_id: f.run_id,
    check_id: f.check_id,
    status: f.status,
    span_ids: [...f.span_ids],
    count: f.count,
    action: f.action,
    title: f.title,
    guidance: f.guidance,
    at_ms: f.at_ms,
    group: f.group ?? '',
    workflow: f.workflow ?? '',
    kind: f.kind,
    check_source: f.source,
    received_ms: f.received_ms ?? 0,
    halt_suppressed: f.halt_suppressed ?? false,
    priority: f.priority ?? 0,
    quote: f.quote ?? '',
    probability: f.probability,
    confidence: f.confidence ?? '',
    answered_by: f.answered_by ?? '',
  };
}

const FINDING_STATUSES = new Set(['raised', 'updated', 'resolved']);

export function findingFromProto(msg: v1.FindingEvent): FindingMessage {
  if (!FINDING_STATUSES.has(msg.status)) {
    throw new Error(`finding ${msg.id}: status must be raised, updated or resolved, got ${JSON.stringify(msg.status)}`);
  }
  if (msg.action !== 'flag' && msg.action !== 'halt') {
    throw new Error(`finding ${msg.id}: action must be flag or halt, got ${JSON.stringify(msg.action)}`);
  }
  const f: FindingMessage = {
    id: msg.id,
    check_id: msg.check_id,
    run_id: msg.run_id,
    project: msg.project,
    status: msg.status as FindingMessage['status'],
    span_ids: msg.span_ids,
    count: msg.count,
    action: msg.action,
    title: msg.title,
    guidance: msg.guidance,
    at_ms: msg.at_ms,
    kind: msg.kind,
    source: msg.check_source,
  };
  if (msg.workflow) f.workflow = msg.workflow;
  if (msg.group) f.group = msg.group;
  if (msg.halt_suppressed) f.halt_suppressed = true;
  if (msg.received_ms) f.received_ms = msg.received_ms;
  if (msg.priority) f.priority = msg.priority;
  if (msg.quote) f.quote = msg.quote;
  if (msg.probability !== undefined) f.probability = msg.probability;
  if (msg.confidence) f.confidence = msg.confidence;
  if (msg.answered_by) f.answered_by = msg.answered_by;
  return f;
}

// ---- Question tasks --------------------------------------------------------------------

/**
 * A question check that is due, on its way from the rule engine's scheduler to the question
 * service (neatroots.v1.QuestionTask). `check`, `evidence`, `context` and `plan` are JSON
 * values owned by @neatroots/questions (spans cannot import checks or questions), which
 * validates them when it takes the task.
 */
export interface QuestionTaskMessage {
  id: string;
  type: 'question' | 'plan';
  project: string;
  run_id: string;
  workflow?: string;
  session_id?: string;
  check?: unknown;
  scope?: string;
  anchor?: string;
  evidence?: unknown;
  context?: unknown;
  span_ids: string[];
  final: boolean;
  at_ms: number;
  received_ms?: number;
  plan?: unknown;
}

export function questionTaskToProto(t: QuestionTaskMessage): v1.QuestionTask {
  return {
    id: t.id,
    type: t.type,
    project: t.project,
    run_id: t.run_id,
    workflow: t.workflow ?? '',
    session_id: t.session_id ?? '',
    check_json: jsonText(t.check) ?? '',
    scope: t.scope ?? '',
    anchor: t.anchor ?? '',
    evidence_json: jsonText(t.evidence) ?? '',
    context_json: jsonText(t.context) ?? '',
    span_ids: [...t.span_ids],
    final: t.final,
    at_ms: t.at_ms,
    received_ms: t.received_ms ?? 0,
    plan_json: jsonText(t.plan) ?? '',
  };
}

export function questionTaskFromProto(msg: v1.QuestionTask): QuestionTaskMessage {
  if (msg.type !== 'question' && msg.type !== 'plan') {
    throw new Error(`question task ${msg.id}: type must be question or plan, got ${JSON.stringify(msg.type)}`);
  }
  const json = (text: string, field: string): unknown => {
    if (!text) return undefined;
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new Error(`question task ${msg.id}: ${field} is not valid JSON (${(e as Error).message})`);
    }
  };
  const t: QuestionTaskMessage = {
    id: msg.id,
    type: msg.type,
    project: msg.project,
    run_id: msg.run_id,
    span_ids: msg.span_ids,
    final: msg.final,
    at_ms: msg.at_ms,
  };
  if (msg.workflow) t.workflow = msg.workflow;
  if (msg.session_id) t.session_id = msg.session_id;
  if (msg.scope) t.scope = msg.scope;
  if (msg.anchor) t.anchor = msg.anchor;
  if (msg.received_ms) t.received_ms = msg.received_ms;
  const check = json(msg.check_json, 'check_json');
  if (check !== undefined) t.check = check;
  const evidence = json(msg.evidence_json, 'evidence_json');
  if (evidence !== undefined) t.evidence = evidence;
  const context = json(msg.context_json, 'context_json');
  if (context !== undefined) t.context = context;
  const plan = json(msg.plan_json, 'plan_json');
  if (plan !== undefined) t.plan = plan;
  return t;
}

// ---- Topics ----------------------------------------------------------------------------

/**
 * Structurally the `Topic<T>` of @neatroots/ports (a name and a codec), so these topics are
 * passed straight to `Bus.publish` / `Bus.subscribe`. Declared here because ports depends on
 * spans and a project reference back would be a cycle.
 */
export interface BusTopic<T> {
  readonly name: string;
  encode(value: T): Uint8Array;
  decode(bytes: Uint8Array): T;
}

export interface Topics {
  /** Accepted spans and run events (Envelope), key run_id. */
  events: BusTopic<Envelope>;
  /** Finding events from the rule engine, key run_id. */
  findings: BusTopic<FindingMessage>;
  /** Notes and halts for agents, key run_id. */
  notes: BusTopic<Note>;
  /** Notes that reached an agent, key finding_id. */
  deliveries: BusTopic<NoteDelivered>;
  /** Question checks that are due, from the rule engine to the question service, key run_id. */
  questions: BusTopic<QuestionTaskMessage>;
}

export const DEFAULT_TOPIC_PREFIX = 'neatroots';

function topic<T>(name: string, encode: (v: T) => Uint8Array, decode: (b: Uint8Array) => T): BusTopic<T> {
  return { name, encode, decode };
}

/**
 * The bus topics, named `<prefix>.events`, `<prefix>.findings`, `<prefix>.notes`,
 * `<prefix>.deliveries` and `<prefix>.questions` (several deployments can share one Kafka cluster under different
 * prefixes). Decoding validates, so a consumer never sees an item ingest would have refused.
 */
export function makeTopics(prefix: string = DEFAULT_TOPIC_PREFIX): Topics {
  return {
    events: topic<Envelope>(
      `${prefix}.events`,
      (env) => v1.Envelope.encode(envelopeToProto(env)).finish(),
      (bytes) => envelopeFromProto(v1.Envelope.decode(bytes)),
    ),
    findings: topic<FindingMessage>(
      `${prefix}.findings`,
      (f) => v1.FindingEvent.encode(findingToProto(f)).finish(),
      (bytes) => findingFromProto(v1.FindingEvent.decode(bytes)),
    ),
    notes: topic<Note>(
      `${prefix}.notes`,
      // Wrapped in NoteEnvelope so routing fields can be added beside the note later.
      (n) => v1.NoteEnvelope.encode({ note: n }).finish(),
      (bytes) => {
        const env = v1.NoteEnvelope.decode(bytes);
        if (!env.note) throw new Error('note envelope without a note');
        return noteFromProto(env.note);
      },
    ),
    deliveries: topic<NoteDelivered>(
      `${prefix}.deliveries`,
      (d) => v1.NoteDelivered.encode(d).finish(),
      (bytes) => v1.NoteDelivered.decode(bytes),
    ),
    questions: topic<QuestionTaskMessage>(
      `${prefix}.questions`,
      (t) => v1.QuestionTask.encode(questionTaskToProto(t)).finish(),
      (bytes) => questionTaskFromProto(v1.QuestionTask.decode(bytes)),
    ),
  };
}

const DEFAULT_TOPICS = makeTopics();
export const EVENTS_TOPIC: BusTopic<Envelope> = DEFAULT_TOPICS.events;
export const FINDINGS_TOPIC: BusTopic<FindingMessage> = DEFAULT_TOPICS.findings;
export const NOTES_TOPIC: BusTopic<Note> = DEFAULT_TOPICS.notes;
export const DELIVERIES_TOPIC: BusTopic<NoteDelivered> = DEFAULT_TOPICS.deliveries;
export const QUESTIONS_TOPIC: BusTopic<QuestionTaskMessage> = DEFAULT_TOPICS.questions;
