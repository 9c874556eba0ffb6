import { otlp } from '@neatroots/proto';
import { SpanValidationError } from './errors';
import { checkItemLimits } from './limits';
import { rejectionOf, type MapOptions, type MapResult, type Rejection } from './mapping';
import { normalizeItem, normalizeSpan } from './normalize';
import type { RunEnd, RunStart, Span, SpanType, StreamItem } from './types';

/**
 * OTLP trace export → the one span shape (pure; no I/O).
 *
 * These attribute conventions are read:
 * - OpenTelemetry GenAI (gen_ai.*, with the MCP attributes mcp.*): what the OpenTelemetry
 *   instrumentations of OpenAI, Anthropic, the agent frameworks and MCP SDKs emit.
 * - OpenInference (openinference.span.kind, input.value, llm.token_count.*): Arize Phoenix's
 *   instrumentations (LangChain, LlamaIndex, DSPy, ...).
 * - OpenLLMetry (traceloop.span.kind, traceloop.entity.*, llm.request.type and the numbered
 *   gen_ai.prompt.N.* / gen_ai.completion.N.* messages): Traceloop's SDK and instrumentations;
 *   and the Vercel AI SDK's older ai.toolCall.* tool spans.
 * A span whose attributes carry no input or output can carry its messages as events (the older
 * GenAI gen_ai.content.prompt/completion, gen_ai.*.message and gen_ai.choice): those are read.
 *
 * run_id is the trace id in hex unless a span carries `neatroots.run_id`; project and workflow
 * come from `neatroots.project` / `neatroots.workflow` (on the span, else on the resource), with
 * `gen_ai.workflow.name` and then `gen_ai.agent.name` (each of the span, else of its run's top in
 * the same export) and then the resource's `service.name` as the workflow fallback.
 * Attributes whose value moved into a span field are dropped; every other attribute is kept
 * in `attributes` as given.
 *
 * Run events. OTLP has none, so they are derived from the run's top: its outermost agent-like
 * span (runTops: an `invoke_agent` or `invoke_workflow` span, an OpenInference AGENT or outermost
 * CHAIN, ...), with no agent-like span above it, under no parent or only under its process's
 * outermost spans (an HTTP server span, a remote parent):
 * - a `run_start` just before the run's first item in this export, when the top carries
 *   `gen_ai.system_instructions` or an input (system prompt, last user message, and the tools
 *   of `gen_ai.tool.definitions`). An SDK exports a parent after its children, usually in a
 *   later batch, so this run_start often follows spans already sent: it only informs, it
 *   does not open the run;
 * - a `run_end` after the run's last span in this export: `error` when the top failed,
 *   `no_output` when it recorded an output that is empty, else `ok`. A top with no output
 *   attribute at all ends `ok`: GenAI instrumentations record message content only when content
 *   capture is on, and without it every run would otherwise look unanswered. final_output is
 *   the text of the last assistant message, or the output as given.
 */

type Obj = Record<string, unknown>;
type AnyValue = otlp.AnyValue;
type KeyValue = otlp.KeyValue;

/** A rejected span: the one rejection shape of ingest (see mapping.ts). */
export type OtlpRejection = Rejection;

export interface OtlpMapResult extends MapResult {
  /** Spans in the request (the same as `received`). */
  spans: number;
  /** For each of `items`, the index of the span it came from (a run_start or run_end: its run's top span). */
  itemIndexes: number[];
}

export type OtlpMapOptions = MapOptions;

// ---- Values ----------------------------------------------------------------------------

/** An OTLP AnyValue as JSON: int64 as a number when it fits exactly, else as its decimal string. */
export function anyValueToJson(v: AnyValue | undefined): unknown {
  const x = v?.value;
  if (!x) return null;
  switch (x.$case) {
    case 'string_value':
    case 'bool_value':
    case 'double_value':
      return x.value;
    case 'int_value': {
      const n = Number(x.value);
      return Number.isSafeInteger(n) ? n : x.value;
    }
    case 'array_value':
      return x.value.values.map(anyValueToJson);
    case 'kvlist_value':
      return attributesToJson(x.value.values);
    case 'bytes_value':
      return Buffer.from(x.value).toString('base64');
  }
}

/**
 * Attributes as a JSON object, each under its own key: `__proto__` too (an assignment would set
 * the object's prototype instead, dropping the attribute and lending its keys to every read).
 */
export function attributesToJson(kvs: readonly KeyValue[]): Obj {
  const out: Obj = {};
  for (const kv of kvs) setOwn(out, kv.key, anyValueToJson(kv.value));
  return out;
}

/** `o[key] = v` as an own property, whatever the key (`__proto__` included). */
function setOwn(o: Obj, key: string, v: unknown): void {
  if (key === '__proto__') Object.defineProperty(o, key, { value: v, enumerable: true, writable: true, configurable: true });
  else o[key] = v;
}

/** `o[key]` when it is o's own: never what Object.prototype has (`constructor`, `toString`, ...). */
function ownValue(o: Obj, key: string): unknown {
  return Object.hasOwn(o, key) ? o[key] : undefined;
}

const NANOS_RE = /^\d{1,20}$/;

/**
 * OTLP nanoseconds (a decimal uint64 string: ts-proto forceLong=string) to epoch milliseconds.
 * Today's epoch nanoseconds (~1.7e18) are far beyond Number.MAX_SAFE_INTEGER (~9e15), so
 * Number(ns) / 1e6 would round; the division is done in BigInt down to whole microseconds
 * (~1.7e15, exact in a double) and the result keeps microsecond precision, enough to order
 * two calls made in the same millisecond. Returns undefined for 0 (OTLP's "not set").
 */
export function nanosToMs(ns: string): number | undefined {
  if (!NANOS_RE.test(ns)) throw new Error(`not a decimal nanosecond count: ${JSON.stringify(ns)}`);
  const n = BigInt(ns);
  if (n === 0n) return undefined;
  return Number(n / 1000n) / 1000;
}

/** JSON text is parsed when it looks like an object or array; any other text stays a string. */
function maybeJson(v: unknown): unknown {
  if (typeof v !== 'string') return v;
  const t = v.trimStart();
  if (t.startsWith('{') || t.startsWith('[')) {
    try {
      return JSON.parse(v);
    } catch {
      return v;
    }
  }
  return v;
}

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

function allZero(bytes: Uint8Array): boolean {
  for (const b of bytes) if (b !== 0) return false;
  return true;
}

// ---- Message text (GenAI messages, OpenAI-style messages, OpenInference strings) -------

function partsText(parts: unknown): string | undefined {
  if (!Array.isArray(parts)) return undefined;
  const texts: string[] = [];
  for (const p of parts) {
    if (typeof p === 'string') texts.push(p);
    else if (isObj(p) && (p.type === undefined || p.type === 'text')) {
      const t = typeof p.content === 'string' ? p.content : typeof p.text === 'string' ? p.text : undefined;
      if (t !== undefined) texts.push(t);
    }
  }
  return texts.length ? texts.join('\n') : undefined;
}

/** LangChain's message types (a message's `type`, a `[role, text]` pair's role) as roles. */
const LANGCHAIN_ROLES: Record<string, string> = { human: 'user', ai: 'assistant', system: 'system', tool: 'tool', user: 'user', assistant: 'assistant' };

/** A LangChain `[role, text]` pair (`["user", "Refund order 7"]`, `["ai", "Done"]`). */
function isPair(m: unknown): m is [string, unknown] {
  return Array.isArray(m) && m.length === 2 && typeof m[0] === 'string' && Object.hasOwn(LANGCHAIN_ROLES, m[0]);
}

/** A message as a plain object: a LangChain serialized one (`{lc, kwargs: {...}}`) as its kwargs. */
function unwrapMessage(m: Obj): Obj {
  return m.lc !== undefined && isObj(m.kwargs) ? m.kwargs : m;
}

/**
 * A message's role: `role`, else a LangChain message's `type` (human, ai, system, tool) or a
 * pair's first item; undefined when it has none.
 */
function roleOf(m: unknown): string | undefined {
  if (isPair(m)) return LANGCHAIN_ROLES[m[0]];
  if (!isObj(m)) return undefined;
  const o = unwrapMessage(m);
  if (typeof o.role === 'string') return LANGCHAIN_ROLES[o.role] ?? o.role;
  if (typeof o.type === 'string' && Object.hasOwn(LANGCHAIN_ROLES, o.type)) return LANGCHAIN_ROLES[o.type];
  return undefined;
}

function messageText(m: unknown): string | undefined {
  if (typeof m === 'string') return m;
  if (isPair(m)) return messageText(m[1]);
  if (!isObj(m)) return undefined;
  const o = unwrapMessage(m);
  if (typeof o.content === 'string') return o.content;
  return partsText(o.parts) ?? partsText(o.content);
}

/**
 * A list of messages as given, or inside an object that holds them under `messages` (an
 * OpenInference chain's or agent's input and output: LangGraph's state `{"messages": [...]}`,
 * a chat request's `{"model": ..., "messages": [...]}`).
 */
function messageList(v: unknown): unknown[] | undefined {
  if (Array.isArray(v)) return v;
  if (isObj(v) && Array.isArray(v.messages)) return v.messages;
  return undefined;
}

/** The keyword arguments that name what the user asked, in the order they are looked for. */
const USER_ARGUMENTS = ['user_message', 'message', 'question', 'query', 'prompt', 'input', 'text', 'request'];

/**
 * What the user asked, of a function call as OpenLLMetry's decorators (`@workflow`, `@agent`)
 * record its input: `{"args": [...], "kwargs": {...}}`. A keyword argument of USER_ARGUMENTS that
 * is a text; else the user's last message of an argument that is a list of messages (or holds
 * one under `messages`); else the one argument that is a non-empty text, when only one is.
 * Undefined for any other value, and when the call does not say (two texts, none).
 */
function callUserText(v: unknown): string | undefined {
  if (!isObj(v)) return undefined;
  const keys = Object.keys(v);
  if (!keys.length || keys.some((k) => k !== 'args' && k !== 'kwargs')) return undefined;
  const args = v.args ?? [];
  const kwargs = v.kwargs ?? {};
  if (!Array.isArray(args) || !isObj(kwargs)) return undefined;
  for (const k of USER_ARGUMENTS) {
    const t = Object.prototype.hasOwnProperty.call(kwargs, k) ? kwargs[k] : undefined;
    if (typeof t === 'string' && t.trim() !== '') return t;
  }
  const values = [...args, ...Object.values(kwargs)];
  for (let i = values.length - 1; i >= 0; i--) {
    if (!messageList(values[i])) continue;
    const t = lastText(values[i], 'user');
    if (t !== undefined) return t;
  }
  const texts = values.filter((x): x is string => typeof x === 'string' && x.trim() !== '');
  return texts.length === 1 ? texts[0] : undefined;
}

/**
 * The text of the last message with this role (or of the value itself when it is not a list of
 * messages); a user's of a recorded function call (callUserText).
 */
function lastText(v: unknown, role: string): string | undefined {
  if (typeof v === 'string') return v;
  if (role === 'user') {
    const asked = callUserText(v);
    if (asked !== undefined) return asked;
  }
  const list = messageList(v);
  if (list) {
    for (let i = list.length - 1; i >= 0; i--) {
      const m = list[i];
      const r = roleOf(m);
      if (r !== undefined && r !== role) continue;
      const t = messageText(m);
      if (t !== undefined) return t;
    }
    return undefined;
  }
  return messageText(v);
}

/**
 * The system instructions as one text: every text part (gen_ai.system_instructions is a list of
 * parts) and every system message (a list of messages), a blank line between them.
 */
function systemText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  const list = messageList(v);
  if (!list) return messageText(v);
  const texts: string[] = [];
  for (const m of list) {
    const r = roleOf(m);
    if (r !== undefined && r !== 'system' && r !== 'developer') continue;
    const t = r === undefined && isObj(m) && m.type !== undefined && m.type !== 'text' ? undefined : (messageText(m) ?? (isObj(m) && typeof m.text === 'string' ? m.text : undefined));
    if (t !== undefined && t.trim() !== '') texts.push(t);
  }
  return texts.length ? texts.join('\n\n') : undefined;
}

function toolDefinitions(v: unknown): { name: string; description?: string }[] | undefined {
  if (!Array.isArray(v)) return undefined;
  const out: { name: string; description?: string }[] = [];
  for (const t of v) {
    if (!isObj(t)) continue;
    // {name, description} or OpenAI's {type: "function", function: {name, description}}
    const f = isObj(t.function) ? t.function : t;
    if (typeof f.name !== 'string' || !f.name) continue;
    out.push(typeof f.description === 'string' ? { name: f.name, description: f.description } : { name: f.name });
  }
  return out.length ? out : undefined;
}

function isEmptyOutput(v: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (typeof v === 'string') return v.trim() === '';
  if (Array.isArray(v)) return v.length === 0;
  if (isObj(v)) return Object.keys(v).length === 0;
  return false;
}

// ---- One span --------------------------------------------------------------------------

/** Reads attributes, remembering which ones moved into span fields. */
class Attrs {
  readonly used = new Set<string>();
  /** The attribute the last string(), number() or json() read, to name it in a rejection. */
  lastKey: string | undefined;
  constructor(readonly all: Obj) {}

  has(key: string): boolean {
    const v = ownValue(this.all, key);
    return v !== undefined && v !== null;
  }
  /** A non-empty string attribute (numbers and booleans are read as strings too). */
  peekString(key: string): string | undefined {
    const v = ownValue(this.all, key);
    if (typeof v === 'string') return v || undefined;
    if (typeof v === 'number' || typeof v === 'boolean') return String(v);
    return undefined;
  }
  string(...keys: string[]): string | undefined {
    for (const k of keys) {
      const v = this.peekString(k);
      if (v !== undefined) {
        this.used.add(k);
        this.lastKey = k;
        return v;
      }
    }
    return undefined;
  }
  number(...keys: string[]): number | undefined {
    for (const k of keys) {
      const v = ownValue(this.all, k);
      const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
      if (Number.isFinite(n)) {
        this.used.add(k);
        this.lastKey = k;
        return n;
      }
    }
    return undefined;
  }
  /** The first present value, JSON text parsed. */
  json(...keys: string[]): unknown {
    for (const k of keys) {
      if (!this.has(k)) continue;
      this.used.add(k);
      this.lastKey = k;
      return maybeJson(ownValue(this.all, k));
    }
    return undefined;
  }
  rest(): Obj | undefined {
    let out: Obj | undefined;
    for (const [k, v] of Object.entries(this.all)) {
      if (!this.used.has(k)) setOwn((out ??= {}), k, v);
    }
    return out;
  }
}

const LLM_OPERATIONS = new Set(['chat', 'text_completion', 'generate_content']);
// invoke_workflow: the span around a multi-agent workflow, the run's outermost agent-like span.
const AGENT_OPERATIONS = new Set(['invoke_agent', 'create_agent', 'invoke_workflow']);

function spanType(a: Attrs): SpanType {
  const mcp = a.peekString('mcp.method.name');
  const op = a.peekString('gen_ai.operation.name');
  if (op === 'execute_tool') return mcp ? 'mcp_tool' : 'tool';
  if (op && LLM_OPERATIONS.has(op)) return 'llm';
  if (op && AGENT_OPERATIONS.has(op)) return 'agent';
  if (op === 'retrieval') return 'retrieval';
  if (op === 'embeddings') return 'other';
  switch (a.peekString('openinference.span.kind')?.toUpperCase()) {
    case 'LLM':
      return 'llm';
    case 'TOOL':
      return mcp ? 'mcp_tool' : 'tool';
    case 'AGENT':
      return 'agent';
    case 'RETRIEVER':
    case 'RERANKER':
      return 'retrieval';
    case 'CHAIN':
    case 'EMBEDDING':
    case 'GUARDRAIL':
    case 'EVALUATOR':
      return 'other';
  }
  // OpenLLMetry (Traceloop): its decorators' spans carry traceloop.span.kind; its model-call
  // spans llm.request.type. A workflow is the run's outermost span: an agent span, so a
  // parentless one ends the run as an invoke_agent root does.
  switch (a.peekString('traceloop.span.kind')?.toLowerCase()) {
    case 'tool':
      return mcp ? 'mcp_tool' : 'tool';
    case 'agent':
    case 'workflow':
      return 'agent';
    case 'task':
      return 'other';
  }
  switch (a.peekString('llm.request.type')?.toLowerCase()) {
    case 'chat':
    case 'completion':
      return 'llm';
    case 'rerank':
      return 'retrieval';
  }
  // The Vercel AI SDK's tool-call spans before it wrote the GenAI attributes.
  if (a.has('ai.toolCall.name')) return 'tool';
  // An MCP client span without the GenAI attributes: only tools/call is a tool call.
  if (mcp === 'tools/call') return 'mcp_tool';
  if (mcp) return 'other';
  if (a.has('gen_ai.tool.name')) return 'tool';
  return 'other';
}

interface Resource {
  project?: string;
  workflow?: string;
  serviceName?: string;
}

function readResource(attrs: Obj): Resource {
  const s = (k: string) => {
    const v = ownValue(attrs, k);
    return typeof v === 'string' && v ? v : undefined;
  };
  const service = s('service.name');
  return {
    project: s('neatroots.project'),
    workflow: s('neatroots.workflow'),
    // The SDKs' default when nothing was configured says nothing about the workflow.
    serviceName: service && !service.startsWith('unknown_service') ? service : undefined,
  };
}

interface Mapped {
  /** The span's position in the request. */
  index: number;
  span: Span;
  /** gen_ai.agent.name, when neatroots.workflow was not given. */
  agentWorkflow?: string;
  /** gen_ai.workflow.name, when neatroots.workflow was not given. */
  namedWorkflow?: string;
  /** neatroots.workflow was given. */
  explicitWorkflow: boolean;
  /** The run's outermost agent span in this export (runTops): it makes the run's events. */
  top: boolean;
  runStart?: RunStart;
  runEnd?: RunEnd;
}

function exceptionMessage(s: otlp.Span): string | undefined {
  for (const ev of s.events) {
    if (ev.name !== 'exception') continue;
    const a = attributesToJson(ev.attributes);
    const msg = a['exception.message'] ?? a['exception.type'];
    if (typeof msg === 'string' && msg) return msg;
  }
  return undefined;
}

// ---- Message content sent as span events --------------------------------------------------

const MESSAGE_EVENT_ROLES: Record<string, string> = {
  'gen_ai.system.message': 'system',
  'gen_ai.user.message': 'user',
  'gen_ai.assistant.message': 'assistant',
  'gen_ai.tool.message': 'tool',
};
/** The body fields of the GenAI message events, when an instrumentation writes them as the event's attributes. */
const EVENT_BODY_FIELDS = ['role', 'content', 'tool_calls', 'id', 'index', 'finish_reason', 'message'];

/**
 * A GenAI message event's body: the JSON object of its gen_ai.event.content attribute (Azure AI
 * Inference, Semantic Kernel), else its body fields written as attributes (content, role,
 * tool_calls, ...). A content that is a JSON list of parts is parsed; other text stays text.
 */
function eventBody(attrs: Obj): Obj {
  const body: Obj = {};
  for (const k of EVENT_BODY_FIELDS) {
    const v = ownValue(attrs, k);
    if (v !== undefined && v !== null) body[k] = v;
  }
  const content = maybeJson(ownValue(attrs, 'gen_ai.event.content'));
  if (isObj(content)) for (const [k, v] of Object.entries(content)) setOwn(body, k, v);
  else if (typeof content === 'string' && body.content === undefined) body.content = content;
  if (typeof body.content === 'string' && Array.isArray(maybeJson(body.content))) body.content = maybeJson(body.content);
  for (const k of ['tool_calls', 'message']) if (typeof body[k] === 'string') body[k] = maybeJson(body[k]);
  return body;
}

interface EventContent {
  input?: unknown;
  /** The event the input came from, to name it in a rejection. */
  inputEvent?: string;
  output?: unknown;
  outputEvent?: string;
}

/**
 * Message content recorded as span events rather than attributes, for spans whose attributes
 * carry none: the older GenAI conventions' gen_ai.content.prompt / gen_ai.content.completion
 * events (their gen_ai.prompt / gen_ai.completion attributes, as Semantic Kernel writes them),
 * and the per-message events: gen_ai.system.message, gen_ai.user.message,
 * gen_ai.assistant.message and gen_ai.tool.message, in order, as the input messages (role from
 * the event's name unless its body gives one), and each gen_ai.choice's message as an output
 * message (role assistant unless given, with its finish_reason). An event with neither content
 * nor tool calls (content capture off) is no message.
 */
function eventContent(s: otlp.Span): EventContent {
  const out: EventContent = {};
  const messages: Obj[] = [];
  const choices: Obj[] = [];
  let messageEvent: string | undefined;
  for (const ev of s.events) {
    if (ev.name === 'gen_ai.content.prompt' || ev.name === 'gen_ai.content.completion') {
      const prompt = ev.name === 'gen_ai.content.prompt';
      const v = ownValue(attributesToJson(ev.attributes), prompt ? 'gen_ai.prompt' : 'gen_ai.completion');
      if (v === undefined || v === null) continue;
      if (prompt && out.input === undefined) [out.input, out.inputEvent] = [maybeJson(v), ev.name];
      if (!prompt && out.output === undefined) [out.output, out.outputEvent] = [maybeJson(v), ev.name];
    } else if (Object.hasOwn(MESSAGE_EVENT_ROLES, ev.name)) {
      const { role, ...body } = eventBody(attributesToJson(ev.attributes));
      // Without content capture the events come with no content: nothing was recorded.
      if (body.content === undefined && body.tool_calls === undefined) continue;
      messages.push({ role: typeof role === 'string' && role ? role : MESSAGE_EVENT_ROLES[ev.name], ...body });
      messageEvent ??= ev.name;
    } else if (ev.name === 'gen_ai.choice') {
      const body = eventBody(attributesToJson(ev.attributes));
      const message: Obj = isObj(body.message) ? { ...body.message } : body.content !== undefined ? { content: body.content } : {};
      if (typeof message.content === 'string' && Array.isArray(maybeJson(message.content))) message.content = maybeJson(message.content);
      const { role, ...rest } = message;
      if (rest.content === undefined && rest.tool_calls === undefined) continue;
      const choice: Obj = { role: typeof role === 'string' && role ? role : 'assistant', ...rest };
      if (body.finish_reason !== undefined) choice.finish_reason = body.finish_reason;
      choices.push(choice);
    }
  }
  if (out.input === undefined && messages.length) [out.input, out.inputEvent] = [messages, messageEvent];
  if (out.output === undefined && choices.length) [out.output, out.outputEvent] = [choices, 'gen_ai.choice'];
  return out;
}

// ---- OpenLLMetry (Traceloop) and Vercel AI SDK content ----------------------------------

/**
 * An attribute holding a value as JSON text (traceloop.entity.input/output, ai.toolCall.result):
 * parsed whatever it is, so a returned string is that string, not its quoted JSON; text that is
 * not JSON stays text.
 */
function jsonValue(a: Attrs, key: string): unknown {
  if (!a.has(key)) return undefined;
  a.used.add(key);
  a.lastKey = key;
  const v = ownValue(a.all, key);
  if (typeof v !== 'string') return v;
  try {
    return JSON.parse(v);
  } catch {
    return v;
  }
}

const INDEXED_FIELD_RE = /^(\d{1,9})\.([a-z_]+(?:\.\d{1,9}\.[a-z_]+|\.[a-z_]+)?)$/;
const INDEXED_CALL_RE = /^tool_calls\.(\d{1,9})\.(id|name|arguments)$/;

/**
 * OpenLLMetry's flattened messages (gen_ai.prompt.0.role, gen_ai.prompt.0.content,
 * gen_ai.completion.0.tool_calls.0.name, ...) as a list of messages in index order: role,
 * content (a JSON list of content parts parsed), tool_calls ({id, name, arguments}),
 * function_call, and the other plain fields (finish_reason, tool_call_id, ...). The attributes
 * read are dropped from `attributes`; undefined when the span has none.
 */
function indexedMessages(a: Attrs, prefix: string): Obj[] | undefined {
  const pre = `${prefix}.`;
  const messages = new Map<number, Obj>();
  const calls = new Map<number, Map<number, Obj>>();
  for (const key of Object.keys(a.all)) {
    if (!key.startsWith(pre) || !a.has(key)) continue;
    const m = INDEXED_FIELD_RE.exec(key.slice(pre.length));
    if (!m) continue;
    const i = Number(m[1]);
    const field = m[2];
    const v = ownValue(a.all, key);
    let msg = messages.get(i);
    if (!msg) messages.set(i, (msg = {}));
    const call = INDEXED_CALL_RE.exec(field);
    if (call) {
      let byIndex = calls.get(i);
      if (!byIndex) calls.set(i, (byIndex = new Map()));
      const j = Number(call[1]);
      let c = byIndex.get(j);
      if (!c) byIndex.set(j, (c = {}));
      c[call[2]] = call[2] === 'arguments' ? maybeJson(v) : v;
    } else if (field === 'function_call.name' || field === 'function_call.arguments') {
      const fc = isObj(msg.function_call) ? msg.function_call : (msg.function_call = {});
      if (field === 'function_call.name') fc.name = v;
      else fc.arguments = maybeJson(v);
    } else if (!field.includes('.')) {
      const parsed = field === 'content' ? maybeJson(v) : v;
      setOwn(msg, field, Array.isArray(parsed) ? parsed : v);
    } else {
      continue;
    }
    a.used.add(key);
  }
  if (!messages.size) return undefined;
  for (const [i, byIndex] of calls) {
    (messages.get(i) as Obj).tool_calls = [...byIndex.entries()].sort((x, y) => x[0] - y[0]).map(([, c]) => c);
  }
  a.lastKey = prefix;
  return [...messages.entries()].sort((x, y) => x[0] - y[0]).map(([, m]) => m);
}

function time(ns: string, field: string, runId: string, spanId: string): number | undefined {
  try {
    return nanosToMs(ns);
  } catch (e) {
    throw new SpanValidationError(field, (e as Error).message, runId, spanId);
  }
}

const OTLP_TIME_FIELDS: Record<string, string> = {
  start_ms: 'start_time_unix_nano',
  end_ms: 'end_time_unix_nano',
};

/** The OTLP name of a span field: the attribute it came from, or the OTLP span field. */
function otlpField(field: string, sources: Record<string, string>): string {
  if (sources[field]) return sources[field];
  if (OTLP_TIME_FIELDS[field]) return OTLP_TIME_FIELDS[field];
  if (field === 'user_message' && sources.input) return sources.input;
  if (field === 'final_output' && sources.output) return sources.output;
  return field;
}

function mapSpan(s: otlp.Span, res: Resource, opts: OtlpMapOptions, pre?: Pre): Omit<Mapped, 'index'> {
  const traceOk = s.trace_id.length === 16 && !allZero(s.trace_id);
  const traceHex = s.trace_id.length ? hex(s.trace_id) : undefined;
  const spanHex = s.span_id.length ? hex(s.span_id) : undefined;
  if (!traceOk) {
    throw new SpanValidationError(
      'trace_id',
      s.trace_id.length === 0 ? 'is required' : s.trace_id.length === 16 ? 'is all zeros' : `must be 16 bytes, got ${s.trace_id.length}`,
      traceHex,
      spanHex,
    );
  }
  const a = new Attrs(pre?.attrs ?? attributesToJson(s.attributes));
  const run_id = a.string('neatroots.run_id') ?? (traceHex as string);
  if (s.span_id.length !== 8 || allZero(s.span_id)) {
    throw new SpanValidationError(
      'span_id',
      s.span_id.length === 0 ? 'is required' : s.span_id.length === 8 ? 'is all zeros' : `must be 8 bytes, got ${s.span_id.length}`,
      run_id,
      spanHex,
    );
  }
  const span_id = spanHex as string;
  let parent_id: string | undefined;
  if (s.parent_span_id.length) {
    if (s.parent_span_id.length !== 8) {
      throw new SpanValidationError('parent_span_id', `must be 8 bytes or empty, got ${s.parent_span_id.length}`, run_id, span_id);
    }
    if (!allZero(s.parent_span_id)) parent_id = hex(s.parent_span_id);
  }
  const start_ms = time(s.start_time_unix_nano, 'start_time_unix_nano', run_id, span_id);
  const end_ms = time(s.end_time_unix_nano, 'end_time_unix_nano', run_id, span_id);
  if (start_ms !== undefined && end_ms !== undefined && BigInt(s.end_time_unix_nano) < BigInt(s.start_time_unix_nano)) {
    throw new SpanValidationError(
      'end_time_unix_nano',
      `is before start_time_unix_nano (${s.end_time_unix_nano} < ${s.start_time_unix_nano})`,
      run_id,
      span_id,
    );
  }

  const type = pre?.type ?? spanType(a);
  const isTool = type === 'tool' || type === 'mcp_tool';
  const tool = isTool ? a.string('gen_ai.tool.name', 'tool.name', 'mcp.tool.name', 'traceloop.entity.name', 'ai.toolCall.name') : undefined;
  // OpenInference says what its values are; text/plain stays text even when it looks like JSON.
  const inputPlain = a.peekString('input.mime_type') === 'text/plain';
  const outputPlain = a.peekString('output.mime_type') === 'text/plain';
  // Which attribute each span field came from: a limit's rejection names the attribute sent.
  const sources: Record<string, string> = {};
  if (a.peekString('neatroots.run_id') !== undefined) sources.run_id = 'neatroots.run_id';
  const from = <T>(field: string, v: T): T => {
    if (v !== undefined && a.lastKey) sources[field] = a.lastKey;
    a.lastKey = undefined;
    return v;
  };
  let input = from('input', a.json('gen_ai.tool.call.arguments', 'gen_ai.input.messages'));
  if (input === undefined && a.has('input.value')) {
    input = inputPlain ? ownValue(a.all, 'input.value') : maybeJson(ownValue(a.all, 'input.value'));
    a.used.add('input.value');
    sources.input = 'input.value';
  }
  if (input === undefined) input = from('input', a.json('gen_ai.prompt'));
  if (input === undefined) input = from('input', a.json('ai.toolCall.args'));
  if (input === undefined) input = from('input', indexedMessages(a, 'gen_ai.prompt'));
  if (input === undefined) input = from('input', jsonValue(a, 'traceloop.entity.input'));
  let output = from('output', a.json('gen_ai.tool.call.result', 'gen_ai.output.messages'));
  if (output === undefined && a.has('output.value')) {
    output = outputPlain ? ownValue(a.all, 'output.value') : maybeJson(ownValue(a.all, 'output.value'));
    a.used.add('output.value');
    sources.output = 'output.value';
  }
  if (output === undefined) output = from('output', a.json('gen_ai.completion'));
  if (output === undefined) output = from('output', jsonValue(a, 'ai.toolCall.result'));
  if (output === undefined) output = from('output', indexedMessages(a, 'gen_ai.completion'));
  if (output === undefined) output = from('output', jsonValue(a, 'traceloop.entity.output'));
  if ((input === undefined || output === undefined) && s.events.length) {
    const ev = eventContent(s);
    if (input === undefined && ev.input !== undefined) [input, sources.input] = [ev.input, `${ev.inputEvent} event`];
    if (output === undefined && ev.output !== undefined) [output, sources.output] = [ev.output, `${ev.outputEvent} event`];
  }

  const code = s.status?.code ?? otlp.Status_StatusCode.STATUS_CODE_UNSET;
  let error: string | undefined;
  if (code === otlp.Status_StatusCode.STATUS_CODE_ERROR) {
    error = s.status?.message || a.string('error.type') || exceptionMessage(s) || 'error';
  } else if (code !== otlp.Status_StatusCode.STATUS_CODE_OK && a.peekString('error.type')) {
    // The conventions set error.type only when the operation failed.
    error = a.string('error.type');
  }

  const usage: Obj = {};
  const inTok = from('usage.input_tokens', a.number('gen_ai.usage.input_tokens', 'llm.token_count.prompt', 'gen_ai.usage.prompt_tokens'));
  const outTok = from('usage.output_tokens', a.number('gen_ai.usage.output_tokens', 'llm.token_count.completion', 'gen_ai.usage.completion_tokens'));
  const totTok = from('usage.total_tokens', a.number('llm.token_count.total', 'llm.usage.total_tokens'));
  if (inTok !== undefined) usage.input_tokens = inTok;
  if (outTok !== undefined) usage.output_tokens = outTok;
  if (totTok !== undefined) usage.total_tokens = totTok;

  const model = a.string('gen_ai.response.model', 'gen_ai.request.model', 'llm.model_name');
  const session_id = from('session_id', a.string('gen_ai.conversation.id', 'session.id', 'traceloop.association.properties.session_id'));
  const explicitWorkflow = a.string('neatroots.workflow') ?? res.workflow;
  const agentName = a.peekString('gen_ai.agent.name');
  // gen_ai.workflow.name names the whole run (a multi-agent workflow): before an agent's name.
  const workflowName = a.peekString('gen_ai.workflow.name');
  const workflow = explicitWorkflow ?? workflowName ?? agentName ?? res.serviceName;
  let project = a.string('neatroots.project') ?? res.project;
  if (opts.project !== undefined) {
    if (project !== undefined && project !== opts.project) {
      throw new SpanValidationError('project', `names project "${project}", but the API key is for "${opts.project}"`, run_id, span_id);
    }
    project = opts.project;
  }
  // The run's outermost agent span (runTops) gives the run its events; it opens one with a
  // run_start when it carries system instructions or an input. Only there do the system
  // instructions and tool definitions feed a field, so only there are they read (before
  // rest(), which drops what was read); on every other span (a chat span carries them too)
  // they stay in attributes as given.
  const isRunTop = pre?.top === true;
  const makesRunStart = isRunTop && (a.has('gen_ai.system_instructions') || input !== undefined);
  const systemInstructions = makesRunStart ? from('system_prompt', a.json('gen_ai.system_instructions')) : undefined;
  const toolDefs = makesRunStart ? from('tools', a.json('gen_ai.tool.definitions')) : undefined;

  const raw: Obj = { run_id, span_id, type, name: s.name, status: error !== undefined ? 'error' : 'ok' };
  if (parent_id) raw.parent_id = parent_id;
  if (tool) raw.tool = tool;
  if (input !== undefined) raw.input = input;
  if (output !== undefined) raw.output = output;
  if (error !== undefined) raw.error = error;
  if (start_ms !== undefined) raw.start_ms = start_ms;
  if (end_ms !== undefined) raw.end_ms = end_ms;
  if (Object.keys(usage).length) raw.usage = usage;
  if (model) raw.model = model;
  if (project) raw.project = project;
  if (workflow) raw.workflow = workflow;
  if (session_id) raw.session_id = session_id;
  const rest = a.rest();
  if (rest) raw.attributes = rest;
  // The span as mapped is checked (its ids, then the limits), and a rejection names what the exporter sent.
  const named = <T>(check: () => T): T => {
    try {
      return check();
    } catch (e) {
      if (!(e instanceof SpanValidationError)) throw e;
      throw new SpanValidationError(otlpField(e.field, sources), e.reason, e.run_id, e.span_id);
    }
  };
  const span = named(() => normalizeSpan(raw));
  const limit = (item: StreamItem): void => {
    if (opts.limits) named(() => checkItemLimits(item, opts.limits!));
  };
  limit({ kind: 'span', span });

  const out: Omit<Mapped, 'index'> = {
    span,
    agentWorkflow: explicitWorkflow === undefined ? agentName : undefined,
    namedWorkflow: explicitWorkflow === undefined ? workflowName : undefined,
    explicitWorkflow: explicitWorkflow !== undefined,
    top: isRunTop,
  };
  if (isRunTop) {
    if (makesRunStart) {
      const startRaw: Obj = { event: 'run_start', run_id, project, workflow, session_id };
      const sys = systemInstructions === undefined ? undefined : systemText(systemInstructions);
      if (sys !== undefined) startRaw.system_prompt = sys;
      const user = input === undefined ? undefined : lastText(input, 'user');
      if (user !== undefined) startRaw.user_message = user;
      const tools = toolDefinitions(toolDefs);
      if (tools) startRaw.tools = tools;
      if (start_ms !== undefined) startRaw.ts_ms = start_ms;
      out.runStart = (normalizeItem(startRaw) as { kind: 'run_start'; run: RunStart }).run;
      limit({ kind: 'run_start', run: out.runStart });
    }
    const status = span.status === 'error' ? 'error' : span.output !== undefined && isEmptyOutput(span.output) ? 'no_output' : 'ok';
    const endRaw: Obj = { event: 'run_end', run_id, status };
    if (span.output !== undefined) endRaw.final_output = lastText(span.output, 'assistant') ?? span.output;
    if (end_ms !== undefined) endRaw.ts_ms = end_ms;
    out.runEnd = (normalizeItem(endRaw) as { kind: 'run_end'; run: RunEnd }).run;
    limit({ kind: 'run_end', run: out.runEnd });
  }
  return out;
}

// ---- The run's outermost agent span ---------------------------------------------------

/** What the export's first pass (runTops) gives mapSpan: the attributes read once, the type, and whether it is its run's top. */
interface Pre {
  attrs: Obj;
  type: SpanType;
  /** Its run's outermost agent span in this export: it makes the run's start and end. */
  top: boolean;
}

/** OTLP span flags (proto SpanFlags): the exporter says whether the parent is remote, and if it is. */
const FLAG_HAS_IS_REMOTE = 0x100;
const FLAG_IS_REMOTE = 0x200;

/** A span of the export as runTops sees it. */
interface Node {
  /** Trace id and span id: a parent is looked up in its own trace. */
  key: string;
  parentKey?: string;
  run: string;
  type: SpanType;
  /** openinference.span.kind, upper case. */
  openinference?: string;
  kind: otlp.Span_SpanKind;
  flags: number;
  end: bigint;
  order: number;
}

function nodeOf(s: otlp.Span, attrs: Obj, type: SpanType, order: number): Node | undefined {
  // A span whose ids refuse it (mapSpan) is no span of the export.
  if (s.trace_id.length !== 16 || allZero(s.trace_id) || s.span_id.length !== 8 || allZero(s.span_id)) return undefined;
  if (s.parent_span_id.length !== 0 && s.parent_span_id.length !== 8) return undefined;
  const trace = hex(s.trace_id);
  const a = new Attrs(attrs);
  let end = 0n;
  if (NANOS_RE.test(s.end_time_unix_nano)) end = BigInt(s.end_time_unix_nano);
  return {
    key: trace + hex(s.span_id),
    parentKey: s.parent_span_id.length && !allZero(s.parent_span_id) ? trace + hex(s.parent_span_id) : undefined,
    run: a.peekString('neatroots.run_id') ?? trace,
    type,
    openinference: a.peekString('openinference.span.kind')?.toUpperCase(),
    kind: s.kind,
    flags: s.flags,
    end,
    order,
  };
}

/** Whether the exporter says the span's parent is in another process: undefined when it does not say (older SDKs). */
function parentRemote(n: Node): boolean | undefined {
  return n.flags & FLAG_HAS_IS_REMOTE ? (n.flags & FLAG_IS_REMOTE) !== 0 : undefined;
}

/**
 * Which spans end their run (and open it: run_start), decided from this export alone.
 *
 * A run's events come from its outermost agent-like span: a span of type agent (invoke_agent,
 * invoke_workflow, create_agent, an OpenInference AGENT, ...) or the outermost OpenInference
 * CHAIN (LangChain, LangGraph, CrewAI: no parent, or a parent that is no OpenInference span, or
 * one the exporter marks remote). Such a span is the run's when, going up through its ancestors
 * in this export, no agent-like span is met, and the last ancestor found (or the span itself) is
 * the outermost span of its process: it has no parent, or it is a SERVER or CONSUMER span (an
 * instrumented HTTP server, a queue consumer: the parent is the caller's), or the exporter marks
 * its parent remote (OTLP span flags). When the exporter marks the parent local, that parent
 * comes in a later export (a sub-agent's span is exported before its outer agent's): the span
 * does not end the run; when it does not say (older SDKs), the span does not either, as an
 * inner agent could not be told from the outer. Of several in one run (agents called one after
 * another), the one that ends last.
 */
function runTops(nodes: readonly (Node | undefined)[]): Set<number> {
  const byKey = new Map<string, Node>();
  for (const n of nodes) if (n && !byKey.has(n.key)) byKey.set(n.key, n);
  const agentLike = (n: Node): boolean => {
    if (n.type === 'agent') return true;
    if (n.openinference !== 'CHAIN') return false;
    if (!n.parentKey) return true;
    const p = byKey.get(n.parentKey);
    return p ? p.openinference === undefined : parentRemote(n) === true;
  };
  // For each span walked: null when an agent-like span is above it in the export, else the last of its ancestors the export holds.
  const above = new Map<string, Node | null>();
  const walk = (n: Node): Node | null => {
    const path: Node[] = [];
    const onPath = new Set<string>();
    let cur = n;
    let result: Node | null;
    for (;;) {
      const known = above.get(cur.key);
      if (known !== undefined) {
        result = known;
        break;
      }
      path.push(cur);
      onPath.add(cur.key);
      const p = cur.parentKey ? byKey.get(cur.parentKey) : undefined;
      if (!p || onPath.has(p.key)) {
        result = cur;
        break;
      }
      if (agentLike(p)) {
        result = null;
        break;
      }
      cur = p;
    }
    for (const x of path) above.set(x.key, result);
    return result;
  };
  const outermostInProcess = (r: Node): boolean =>
    !r.parentKey ||
    r.kind === otlp.Span_SpanKind.SPAN_KIND_SERVER ||
    r.kind === otlp.Span_SpanKind.SPAN_KIND_CONSUMER ||
    parentRemote(r) === true;
  const best = new Map<string, Node>();
  for (const n of nodes) {
    if (!n || byKey.get(n.key) !== n || !agentLike(n)) continue;
    const r = walk(n);
    if (!r || !outermostInProcess(r)) continue;
    const b = best.get(n.run);
    if (!b || n.end >= b.end) best.set(n.run, n);
  }
  return new Set([...best.values()].map((n) => n.order));
}

/**
 * A run's top that recorded no output (an invoke_workflow span, a chain around agents) answers
 * with the answer of the agent span of its run that ended last in the export; one that recorded
 * no input asks what the agent span that started first was asked. Kept as they were when the
 * limits refuse the result.
 */
function fromAgents(top: Mapped, run: readonly Mapped[], opts: OtlpMapOptions): void {
  const agents = run.filter((m) => m !== top && m.span.type === 'agent');
  if (!agents.length) return;
  const within = (item: StreamItem): boolean => {
    if (!opts.limits) return true;
    try {
      checkItemLimits(item, opts.limits);
      return true;
    } catch (e) {
      if (e instanceof SpanValidationError) return false;
      throw e;
    }
  };
  const end = top.runEnd;
  if (end && top.span.output === undefined) {
    let answered: Mapped | undefined;
    for (const m of agents) {
      if (m.span.output !== undefined && (!answered || (m.span.end_ms ?? 0) >= (answered.span.end_ms ?? 0))) answered = m;
    }
    if (answered) {
      const out = answered.span.output;
      const filled: RunEnd = { ...end, final_output: lastText(out, 'assistant') ?? out };
      if (filled.status === 'ok' && isEmptyOutput(out)) filled.status = 'no_output';
      if (within({ kind: 'run_end', run: filled })) top.runEnd = filled;
    }
  }
  if (top.span.input === undefined && top.runStart?.user_message === undefined) {
    let asked: Mapped | undefined;
    for (const m of agents) {
      if (m.span.input !== undefined && (!asked || (m.span.start_ms ?? 0) < (asked.span.start_ms ?? 0))) asked = m;
    }
    const user = asked && lastText(asked.span.input, 'user');
    if (user === undefined) return;
    const { project, workflow, session_id, start_ms } = top.span;
    const base: RunStart = top.runStart ?? { event: 'run_start', run_id: top.span.run_id, project, workflow, session_id, ts_ms: start_ms };
    const filled = (normalizeItem({ ...base, user_message: user }) as { kind: 'run_start'; run: RunStart }).run;
    if (within({ kind: 'run_start', run: filled })) top.runStart = filled;
  }
}

// ---- The request -----------------------------------------------------------------------

/** Ranks the spans a run's name is taken from: its top, then a span with no parent, then any. */
function nameRank(m: Mapped): number {
  return m.top ? 2 : m.span.parent_id ? 0 : 1;
}

/** Maps one OTLP export; every span is accepted or rejected on its own. */
export function mapOtlpExport(req: otlp.ExportTraceServiceRequest, opts: OtlpMapOptions = {}): OtlpMapResult {
  const mapped: Mapped[] = [];
  const rejected: OtlpRejection[] = [];
  const itemIndexes: number[] = [];
  // First pass: each span's attributes and type, and which spans are their run's top.
  const all: { s: otlp.Span; res: Resource; attrs: Obj; type: SpanType }[] = [];
  const nodes: (Node | undefined)[] = [];
  for (const rs of req.resource_spans) {
    const res = readResource(attributesToJson(rs.resource?.attributes ?? []));
    for (const ss of rs.scope_spans) {
      for (const s of ss.spans) {
        const attrs = attributesToJson(s.attributes);
        const type = spanType(new Attrs(attrs));
        nodes.push(nodeOf(s, attrs, type, all.length));
        all.push({ s, res, attrs, type });
      }
    }
  }
  const tops = runTops(nodes);
  for (let i = 0; i < all.length; i++) {
    const { s, res, attrs, type } = all[i];
    try {
      mapped.push({ ...mapSpan(s, res, opts, { attrs, type, top: tops.has(i) }), index: i });
    } catch (e) {
      if (!(e instanceof SpanValidationError)) throw e;
      rejected.push(rejectionOf(e, i));
    }
  }
  // A run's workflow names the run: child spans (tool and model calls) rarely carry
  // gen_ai.workflow.name or gen_ai.agent.name, so they take those of their run's top (else of
  // a span with no parent, else of any span of the run) in this export rather than the
  // service.name fallback; a workflow's name comes before an agent's. (Across exports the
  // engine takes the run_start's workflow, which comes from the top.)
  const namedOf = new Map<string, { name: string; rank: number }>();
  const agentOf = new Map<string, { name: string; rank: number }>();
  const take = (of: Map<string, { name: string; rank: number }>, run: string, name: string | undefined, rank: number) => {
    if (name === undefined) return;
    const had = of.get(run);
    if (!had || rank > had.rank) of.set(run, { name, rank });
  };
  for (const m of mapped) {
    take(namedOf, m.span.run_id, m.namedWorkflow, nameRank(m));
    take(agentOf, m.span.run_id, m.agentWorkflow, nameRank(m));
  }
  for (const m of mapped) {
    if (m.explicitWorkflow || m.namedWorkflow) continue;
    const name = namedOf.get(m.span.run_id)?.name ?? m.agentWorkflow ?? agentOf.get(m.span.run_id)?.name;
    if (name === undefined) continue;
    m.span.workflow = name;
    if (m.runStart) m.runStart.workflow = name;
  }
  const mappedTops = mapped.filter((m) => m.top);
  if (mappedTops.length) {
    const byRun = new Map<string, Mapped[]>();
    for (const m of mapped) {
      let ms = byRun.get(m.span.run_id);
      if (!ms) byRun.set(m.span.run_id, (ms = []));
      ms.push(m);
    }
    for (const top of mappedTops) fromAgents(top, byRun.get(top.span.run_id)!, opts);
  }
  const starts = new Map<string, Mapped>();
  const ends = new Map<string, Mapped>();
  const last = new Map<string, Mapped>();
  for (const m of mapped) {
    if (m.runStart && !starts.has(m.span.run_id)) starts.set(m.span.run_id, m);
    if (m.runEnd && !ends.has(m.span.run_id)) ends.set(m.span.run_id, m);
    last.set(m.span.run_id, m);
  }
  const items: StreamItem[] = [];
  const seen = new Set<string>();
  for (const m of mapped) {
    const runId = m.span.run_id;
    if (!seen.has(runId)) {
      seen.add(runId);
      const start = starts.get(runId);
      if (start?.runStart) {
        items.push({ kind: 'run_start', run: start.runStart });
        itemIndexes.push(start.index);
      }
    }
    items.push({ kind: 'span', span: m.span });
    itemIndexes.push(m.index);
    // The run_end after the run's last span in this export (its top may be under an HTTP span).
    const end = ends.get(runId);
    if (end?.runEnd && last.get(runId) === m) {
      items.push({ kind: 'run_end', run: end.runEnd });
      itemIndexes.push(end.index);
    }
  }
  return { items, itemIndexes, received: all.length, spans: all.length, accepted: mapped.length, rejected };
}
