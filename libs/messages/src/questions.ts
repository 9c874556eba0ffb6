import { QUESTION_KINDS, type QuestionCheck } from '@neatroots/checks';
import { encodeMessage, v1, varintSize, writeVarint } from '@neatroots/proto';
import type { ToolInfo } from '@neatroots/spans';

/**
 * The question tasks: a question check that is due, or a workflow to plan, on its way from
 * the rule engine's scheduler to the question service (neatroots.v1.QuestionTask). The JSON
 * parts travel as JSON text (check_json, evidence_json, context_json, plan_json); the decoder
 * checks their shape once, so the question service takes a task as it comes.
 */

/** One span as questions see it: its fields as text, each cut to a bounded length. */
export interface SpanSummary {
  id: string;
  type: string;
  name: string;
  tool?: string;
  status: 'ok' | 'error';
  input?: string;
  output?: string;
  error?: string;
  start?: number;
}

/** An earlier run of the same session (session scope). */
export interface RunSummary {
  run_id: string;
  status?: string;
  user_message?: string;
  final_output?: string;
  spans: SpanSummary[];
}

/** The evidence of one question: what the model (or the classifier) is shown. */
export interface EvidenceDoc {
  /** Span scope: the id of the span being judged (the last of `spans`). */
  focus?: string;
  /** In run order. For span scope: the earlier tool calls, then the span judged. */
  spans: SpanSummary[];
  /** Matching spans left out by `last` or by the window's bound. */
  omitted?: number;
  final_output?: string;
  run_status?: string;
  user_message?: string;
  system_prompt?: string;
  tools?: ToolInfo[];
  /** Session scope: the session's earlier runs, oldest first. */
  runs?: RunSummary[];
  /** Evidence given as plain text (the gRPC Ask API). */
  text?: string;
}

/** What the run did before the evidence: the second look judges the problem against it. */
export interface ContextDoc {
  spans: SpanSummary[];
  omitted?: number;
  user_message?: string;
  /** Context given as plain text (the gRPC Ask API). */
  text?: string;
}

/** What the planner reads on a workflow's first run. */
export interface PlanRequest {
  project: string;
  workflow: string;
  system_prompt?: string;
  user_message?: string;
  tools: ToolInfo[];
}

/** The fields every task has. */
interface TaskBase {
  id: string;
  project: string;
  run_id: string;
  workflow?: string;
  session_id?: string;
  span_ids: string[];
  final: boolean;
  at_ms: number;
  received_ms?: number;
}

/** A question check that is due, with what it is asked about. */
export interface QuestionTask extends TaskBase {
  type: 'question';
  check: QuestionCheck;
  scope: QuestionCheck['scope'];
  anchor: string;
  evidence: EvidenceDoc;
  context?: ContextDoc;
}

/** A workflow's first run: pick the library questions that fit it. */
export interface PlanTask extends TaskBase {
  type: 'plan';
  workflow: string;
  plan: PlanRequest;
}

export type QuestionTaskMessage = QuestionTask | PlanTask;

function jsonText(v: unknown): string {
  return v === undefined ? '' : JSON.stringify(v);
}

/** A record of the questions topic holds at most this many tasks (one run's, from one step). */
export const MAX_TASKS_A_RECORD = 64;

/** What the tasks of one record share, each written once (QuestionTasks.spans_json, checks_json). */
interface Shared {
  /** The record's number (Written.record): which spans it holds already, and where. */
  record: number;
  /** The spans it holds, in order: their JSON, and its UTF-8 length once worked out. */
  spans: Written[];
  checks: Written[];
  checkAt: Map<QuestionCheck, number>;
}

/**
 * A check's or a span summary's JSON, kept while the object lives. The scheduler hands the same
 * check object for a question as long as its wording is the same, and the same summary to every
 * task that shows the span (it keeps a run's summaries in its window and never changes one: a
 * span exported again gets a new summary). Most records show the same earlier calls as the record
 * before (a tool call's question shows up to 30 of them), so each is written to text once.
 */
interface Written {
  text: string;
  /** The last record that holds it (Shared.record), and its index there. */
  record: number;
  at: number;
  /** Its text's length in UTF-8, the first time a record's bytes hold it (-1 until then). */
  bytes: number;
}

const texts = new WeakMap<QuestionCheck | SpanSummary, Written>();

/** The records written so far: each gets the next number. */
let records = 0;

function written(v: QuestionCheck | SpanSummary): Written {
  let w = texts.get(v);
  if (w === undefined) texts.set(v, (w = { text: JSON.stringify(v), record: 0, at: 0, bytes: -1 }));
  return w;
}

function jsonOnce(v: QuestionCheck | SpanSummary): string {
  return written(v).text;
}

/**
 * A span's index in the record's shared spans, added at its end the first time the record
 * shows it. Where it is is kept with its text (no map of the record's spans: records are
 * written one at a time, and the span remembers the last record that holds it).
 */
function spanRef(shared: Shared, s: SpanSummary): number {
  const w = written(s);
  if (w.record !== shared.record) {
    w.record = shared.record;
    w.at = shared.spans.length;
    shared.spans.push(w);
  }
  return w.at;
}

/** A document whose spans are written as indices into the record's shared spans. */
function docText(doc: EvidenceDoc | ContextDoc | undefined, shared: Shared | undefined): string {
  if (doc === undefined) return '';
  if (!shared) return JSON.stringify(doc);
  const refs = new Array<number>(doc.spans.length);
  for (let i = 0; i < refs.length; i++) refs[i] = spanRef(shared, doc.spans[i]);
  return JSON.stringify({ ...doc, spans: refs });
}

function toProto(t: QuestionTaskMessage, shared: Shared | undefined): v1.QuestionTask {
  const q = t.type === 'question' ? t : undefined;
  let checkRef = 0;
  let checkJson = '';
  if (q && shared) {
    let i = shared.checkAt.get(q.check);
    if (i === undefined) {
      i = shared.checks.length;
      shared.checks.push(written(q.check));
      shared.checkAt.set(q.check, i);
    }
    checkRef = i + 1;
  } else if (q) checkJson = jsonOnce(q.check);
  return {
    id: t.id,
    type: t.type,
    project: t.project,
    run_id: t.run_id,
    workflow: t.workflow ?? '',
    session_id: t.session_id ?? '',
    check_json: checkJson,
    scope: q?.scope ?? '',
    anchor: q?.anchor ?? '',
    evidence_json: docText(q?.evidence, shared),
    context_json: docText(q?.context, shared),
    span_ids: [...t.span_ids],
    final: t.final,
    at_ms: t.at_ms,
    received_ms: t.received_ms ?? 0,
    plan_json: jsonText(t.type === 'plan' ? t.plan : undefined),
    check_ref: checkRef,
  };
}

/** One task as its own message (the gRPC API, and records written before QuestionTasks). */
export function questionTaskToProto(t: QuestionTaskMessage): v1.QuestionTask {
  return toProto(t, undefined);
}

/** A record's tasks, and what they share, as the record writes them (see questionTasksToProto). */
function recordOf(tasks: readonly QuestionTaskMessage[]): { tasks: v1.QuestionTask[]; shared: Shared } {
  const shared: Shared = { record: ++records, spans: [], checks: [], checkAt: new Map() };
  const out = new Array<v1.QuestionTask>(tasks.length);
  for (let i = 0; i < tasks.length; i++) out[i] = toProto(tasks[i], shared);
  return { tasks: out, shared };
}

/** A JSON array of the texts, as spans_json and checks_json hold them ('' for none). */
function arrayText(parts: readonly Written[]): string {
  return parts.length ? `[${parts.map((w) => w.text).join(',')}]` : '';
}

/**
 * One record of the questions topic: tasks of one run, in order (at most MAX_TASKS_A_RECORD).
 * The span summaries their evidence and context share (a run's tasks of one step show mostly
 * the same earlier calls) and their checks are written once, found by identity: the scheduler
 * hands the same summary and check objects to every task that shows them. The topic writes the
 * same record's bytes without this message (questionTasksBytes).
 */
export function questionTasksToProto(tasks: readonly QuestionTaskMessage[]): v1.QuestionTasks {
  const { tasks: out, shared } = recordOf(tasks);
  return { tasks: out, spans_json: arrayText(shared.spans), checks_json: arrayText(shared.checks) };
}

/** The tags of QuestionTasks.spans_json (101) and checks_json (102), length-delimited: (field << 3) | 2. */
const SPANS_JSON_TAG = (101 << 3) | 2;
const CHECKS_JSON_TAG = (102 << 3) | 2;

/** The UTF-8 length of a JSON array of the texts (0 for none), each text's worked out once. */
function arrayBytes(parts: readonly Written[]): number {
  if (!parts.length) return 0;
  let n = 1 + parts.length;
  for (let i = 0; i < parts.length; i++) {
    const w = parts[i];
    if (w.bytes < 0) w.bytes = Buffer.byteLength(w.text, 'utf8');
    n += w.bytes;
  }
  return n;
}

/** The size of a string field of `bytes` UTF-8 bytes (0 for none: proto3 leaves an empty string out). */
function fieldSize(tag: number, bytes: number): number {
  return bytes ? varintSize(tag) + varintSize(bytes) + bytes : 0;
}

/** Writes the texts as a JSON array in a string field at `at` (nothing for none); where it ends. */
function writeArray(out: Buffer, at: number, tag: number, parts: readonly Written[], bytes: number): number {
  if (!bytes) return at;
  at = writeVarint(out, at, tag);
  at = writeVarint(out, at, bytes);
  out[at++] = 0x5b; // [
  for (let i = 0; i < parts.length; i++) {
    if (i) out[at++] = 0x2c; // ,
    const w = parts[i];
    at += out.write(w.text, at, w.bytes, 'utf8');
  }
  out[at++] = 0x5d; // ]
  return at;
}

/**
 * One record of the questions topic as bytes: the same bytes as
 * `encodeMessage(v1.QuestionTasks, questionTasksToProto(tasks))` (the fields in their order: the
 * tasks, spans_json, checks_json). The shared spans and checks are written from their texts
 * straight into the record, each text's UTF-8 length worked out once while its object lives:
 * before, their texts were joined into one (a copy of every summary a record), which the
 * encoder copied again to flatten it and once more as UTF-8 into its own buffer.
 */
export function questionTasksBytes(tasks: readonly QuestionTaskMessage[]): Uint8Array {
  const { tasks: out, shared } = recordOf(tasks);
  const head = encodeMessage(v1.QuestionTasks, { tasks: out, spans_json: '', checks_json: '' });
  const spansBytes = arrayBytes(shared.spans);
  const checksBytes = arrayBytes(shared.checks);
  if (!spansBytes && !checksBytes) return head;
  const bytes = new Uint8Array(head.length + fieldSize(SPANS_JSON_TAG, spansBytes) + fieldSize(CHECKS_JSON_TAG, checksBytes));
  bytes.set(head);
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  let at = writeArray(buf, head.length, SPANS_JSON_TAG, shared.spans, spansBytes);
  at = writeArray(buf, at, CHECKS_JSON_TAG, shared.checks, checksBytes);
  if (at !== bytes.length) throw new Error(`question tasks of run ${tasks[0]?.run_id}: wrote ${at} bytes of ${bytes.length}`);
  return bytes;
}

/**
 * The records a step's tasks travel in: each run's tasks in their order, at most
 * MAX_TASKS_A_RECORD a record, keyed by run_id.
 */
export function questionTaskRecords(tasks: readonly QuestionTaskMessage[]): { key: string; value: QuestionTaskMessage[] }[] {
  // Each run's record being filled.
  const filling = new Map<string, QuestionTaskMessage[]>();
  const records: { key: string; value: QuestionTaskMessage[] }[] = [];
  for (const t of tasks) {
    let last = filling.get(t.run_id);
    if (!last || last.length >= MAX_TASKS_A_RECORD) {
      filling.set(t.run_id, (last = []));
      records.push({ key: t.run_id, value: last });
    }
    last.push(t);
  }
  return records;
}

/** The tasks of a record; a record written as a lone QuestionTask is read as that task. */
export function questionTasksFromBytes(bytes: Uint8Array): QuestionTaskMessage[] {
  const rec = v1.QuestionTasks.decode(bytes);
  if (!rec.tasks.length) return [questionTaskFromProto(v1.QuestionTask.decode(bytes))];
  const array = (text: string, field: string): unknown[] => {
    if (!text) return [];
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch (e) {
      throw new Error(`question tasks of run ${rec.tasks[0].run_id}: ${field} is not valid JSON (${(e as Error).message})`);
    }
    if (!Array.isArray(v) || !v.every(isObject)) throw new Error(`question tasks of run ${rec.tasks[0].run_id}: ${field} must be an array of objects`);
    return v;
  };
  let checks = parsedChecks.get(rec.checks_json);
  if (checks === undefined) {
    checks = array(rec.checks_json, 'checks_json');
    if (parsedChecks.size >= MAX_PARSED_CHECKS || parsedChars + rec.checks_json.length > MAX_PARSED_CHECKS_CHARS) {
      parsedChecks.clear();
      parsedChars = 0;
    }
    parsedChecks.set(rec.checks_json, checks);
    parsedChars += rec.checks_json.length;
  }
  const shared = { spans: array(rec.spans_json, 'spans_json'), checks };
  return rec.tasks.map((t) => questionTaskFromProto(t, shared));
}

/**
 * The checks of the records read lately, by their text: a run's records of a step carry the
 * same few checks (a question's wording changes only with its parameters), so most records'
 * checks are parsed once, and are the same objects from record to record: what the question
 * service works out once per check object (its classifier's key, its wording's fold) is worked
 * out once. Check objects are never changed once made (the scheduler shares them as well).
 */
const parsedChecks = new Map<string, unknown[]>();
let parsedChars = 0;
/** At most this many records' checks, and this much of their text, kept: about 8 MB with what it parsed to. */
const MAX_PARSED_CHECKS = 256;
const MAX_PARSED_CHECKS_CHARS = 2 * 1024 * 1024;

const SCOPES = new Set<string>(['span', 'trace', 'session']);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Reads a task, checking the shape of its JSON parts; throws naming the task and the field. */
export function questionTaskFromProto(msg: v1.QuestionTask, shared?: { spans: readonly unknown[]; checks: readonly unknown[] }): QuestionTaskMessage {
  const bad = (field: string, reason: string): Error => new Error(`question task ${msg.id}: ${field} ${reason}`);
  const json = (text: string, field: string): unknown => {
    if (!text) return undefined;
    try {
      return JSON.parse(text);
    } catch (e) {
      throw bad(field, `is not valid JSON (${(e as Error).message})`);
    }
  };
  // A document's spans given as indices into the record's shared spans.
  const resolved = (doc: unknown, field: string): unknown => {
    if (!isObject(doc) || !Array.isArray(doc.spans)) return doc;
    const spans = doc.spans as unknown[];
    for (let i = 0; i < spans.length; i++) {
      const at = spans[i];
      if (typeof at !== 'number') continue;
      if (!shared || !Number.isInteger(at) || at < 0 || at >= shared.spans.length) throw bad(field, `refers to span ${at}, which its record does not hold`);
      spans[i] = shared.spans[at];
    }
    return doc;
  };
  // The fields every task has, set on the task itself (one object of one shape a task).
  const withBase = <T extends TaskBase>(t: T): T => {
    if (msg.workflow) t.workflow = msg.workflow;
    if (msg.session_id) t.session_id = msg.session_id;
    if (msg.received_ms) t.received_ms = msg.received_ms;
    return t;
  };

  if (msg.type === 'plan') {
    const plan = json(msg.plan_json, 'plan_json');
    if (!isObject(plan) || typeof plan.workflow !== 'string' || !Array.isArray(plan.tools)) {
      throw bad('plan_json', 'must be a plan request with a workflow and its tools');
    }
    const t = withBase<PlanTask>({ id: msg.id, project: msg.project, run_id: msg.run_id, span_ids: msg.span_ids, final: msg.final, at_ms: msg.at_ms, type: 'plan', workflow: plan.workflow, plan: plan as unknown as PlanRequest });
    t.workflow = plan.workflow;
    return t;
  }
  if (msg.type !== 'question') throw bad('type', `must be question or plan, got ${JSON.stringify(msg.type)}`);
  let check: unknown;
  if (msg.check_ref) {
    check = shared?.checks[msg.check_ref - 1];
    if (check === undefined) throw bad('check_ref', `refers to check ${msg.check_ref}, which its record does not hold`);
  } else check = json(msg.check_json, 'check_json');
  if (!isObject(check) || typeof check.id !== 'string' || typeof check.ask !== 'string' || !(QUESTION_KINDS as readonly unknown[]).includes(check.kind)) {
    throw bad('check_json', `must be a question check (an id, a kind of ${QUESTION_KINDS.join(', ')}, and what it asks)`);
  }
  const evidence = resolved(json(msg.evidence_json, 'evidence_json'), 'evidence_json');
  if (!isObject(evidence) || !Array.isArray(evidence.spans)) throw bad('evidence_json', 'must be evidence with its spans');
  const context = resolved(json(msg.context_json, 'context_json'), 'context_json');
  if (context !== undefined && (!isObject(context) || !Array.isArray(context.spans))) throw bad('context_json', 'must be a context with its spans');
  const c = check as unknown as QuestionCheck;
  const scope = msg.scope || c.scope;
  if (!SCOPES.has(scope)) throw bad('scope', `must be span, trace or session, got ${JSON.stringify(scope)}`);
  const t: QuestionTask = {
    id: msg.id,
    project: msg.project,
    run_id: msg.run_id,
    span_ids: msg.span_ids,
    final: msg.final,
    at_ms: msg.at_ms,
    type: 'question',
    check: c,
    scope: scope as QuestionTask['scope'],
    anchor: msg.anchor || 'run',
    evidence: evidence as unknown as EvidenceDoc,
  };
  if (context !== undefined) t.context = context as unknown as ContextDoc;
  return withBase(t);
}
