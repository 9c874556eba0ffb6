import type { Evidence, SpanFilter } from '@neatroots/checks';
import { valueText, type Span } from '@neatroots/spans';
import type { ContextDoc, EvidenceDoc, RunSummary, SpanSummary } from './types';

/**
 * Evidence: what a question can see of a run, kept small enough to travel on the bus and to
 * fit a local model's context. Long fields keep their head and their tail (an error or a
 * result's last lines are often what matters) with a marker saying how much was cut.
 */
export const DEFAULT_FIELD_CHARS = 2_000;
/** The rendered evidence of one question is cut to about this many characters. */
export const DEFAULT_EVIDENCE_CHARS = 16_000;
/** Earlier calls a span-scope question sees, and the spans a trace question sees by default. */
export const DEFAULT_SPAN_CONTEXT = 10;
export const DEFAULT_TRACE_LAST = 30;

export function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const marker = ` …[${text.length - max} characters cut]… `;
  const keep = Math.max(0, max - marker.length);
  const head = Math.ceil((keep * 2) / 3);
  return text.slice(0, head) + marker + text.slice(text.length - (keep - head));
}

/**
 * A span as questions keep it. An LLM span's input is the whole prompt, which the evidence
 * never needs (the system prompt and user message come from run_start), so only its output is kept.
 */
export function summarizeSpan(span: Span, maxChars: number = DEFAULT_FIELD_CHARS): SpanSummary {
  const s: SpanSummary = { id: span.span_id, type: span.type, name: span.name, status: span.status };
  if (span.tool) s.tool = span.tool;
  if (span.type !== 'llm') {
    const input = valueText(span.input);
    if (input) s.input = cut(input, maxChars);
  }
  const output = valueText(span.output);
  if (output) s.output = cut(output, span.type === 'llm' ? Math.ceil(maxChars / 2) : maxChars);
  if (span.error) s.error = cut(span.error, maxChars);
  if (span.start_ms !== undefined) s.start = span.start_ms;
  else if (span.end_ms !== undefined) s.start = span.end_ms;
  return s;
}

export function matchesFilter(s: SpanSummary, f: SpanFilter | undefined): boolean {
  if (!f) return true;
  if (f.type?.length && !(f.type as string[]).includes(s.type)) return false;
  if (f.name?.length && !f.name.includes(s.name)) return false;
  if (f.tool?.length && (s.tool === undefined || !f.tool.includes(s.tool))) return false;
  if (f.status?.length && !f.status.includes(s.status)) return false;
  return true;
}

const TOOL_TYPES = ['tool', 'mcp_tool'] as const;

/** The spans a question judges or reads: its evidence filter, or tool calls for span scope. */
export function evidenceFilter(scope: string, evidence: Evidence | undefined): SpanFilter | undefined {
  if (evidence?.spans) return evidence.spans;
  return scope === 'span' ? { type: [...TOOL_TYPES] } : undefined;
}

export function isToolSpan(s: { type: string }): boolean {
  return s.type === 'tool' || s.type === 'mcp_tool';
}

/** Keeps only the fields a question asked for (name, type and status always identify the span). */
export function pickFields(s: SpanSummary, fields: Evidence['fields']): SpanSummary {
  if (!fields?.length) return s;
  // Nothing to leave out: the summary itself (the tasks of a step share it, written once a record).
  if ((s.input === undefined || fields.includes('input')) && (s.output === undefined || fields.includes('output')) && (s.error === undefined || fields.includes('error'))) return s;
  const out: SpanSummary = { id: s.id, type: s.type, name: s.name, status: s.status };
  if (s.tool) out.tool = s.tool;
  if (s.start !== undefined) out.start = s.start;
  if (fields.includes('input') && s.input !== undefined) out.input = s.input;
  if (fields.includes('output') && s.output !== undefined) out.output = s.output;
  if (fields.includes('error') && s.error !== undefined) out.error = s.error;
  return out;
}

/**
 * A summary cut to a length, kept while the summary lives: the run's later questions show it
 * again as context, and the same object is written once (libs/messages).
 */
const shortened = new WeakMap<SpanSummary, { max: number; out: SpanSummary }>();

function shorten(s: SpanSummary, max: number): SpanSummary {
  // Nothing to cut: the summary itself (shared with the other tasks of its record).
  if ((s.input?.length ?? 0) <= max && (s.output?.length ?? 0) <= max && (s.error?.length ?? 0) <= max) return s;
  const kept = shortened.get(s);
  if (kept?.max === max) return kept.out;
  const out = { ...s };
  if (out.input) out.input = cut(out.input, max);
  if (out.output) out.output = cut(out.output, max);
  if (out.error) out.error = cut(out.error, max);
  shortened.set(s, { max, out });
  return out;
}

/** A context doc: the run's earlier spans, shorter, newest kept when there are too many. */
export function contextOf(spans: readonly SpanSummary[], opts: { max?: number; chars?: number; user_message?: string } = {}): ContextDoc {
  const max = opts.max ?? 30;
  const kept = spans.slice(-max).map((s) => shorten(s, opts.chars ?? 400));
  const doc: ContextDoc = { spans: kept };
  if (spans.length > kept.length) doc.omitted = spans.length - kept.length;
  if (opts.user_message) doc.user_message = opts.user_message;
  return doc;
}

// ---- rendering ------------------------------------------------------------------------------

function spanHeader(s: SpanSummary, focus: boolean): string {
  const what = s.tool ? `${s.type} call ${s.tool}` : `${s.type} ${s.name}`;
  return `${focus ? '>>> the call being judged: ' : ''}[${s.id}] ${what} (${s.status})`;
}

function renderSpan(s: SpanSummary, focus = false): string {
  const lines = [spanHeader(s, focus)];
  if (s.input !== undefined) lines.push(`  input: ${s.input}`);
  if (s.output !== undefined) lines.push(`  output: ${s.output}`);
  if (s.error !== undefined) lines.push(`  error: ${s.error}`);
  return lines.join('\n');
}

function renderRun(r: RunSummary): string {
  const lines = [`Run ${r.run_id}${r.status ? ` (ended ${r.status})` : ''}`];
  if (r.user_message) lines.push(`  user: ${r.user_message}`);
  for (const s of r.spans) lines.push(renderSpan(s).replace(/^/gm, '  '));
  if (r.final_output) lines.push(`  final answer: ${r.final_output}`);
  return lines.join('\n');
}

/**
 * The evidence as the model reads it. Spans are added newest first until the budget is
 * spent, so a long run loses its oldest calls, never the one being judged or the answer.
 */
export function renderEvidence(doc: EvidenceDoc, budget: number = DEFAULT_EVIDENCE_CHARS): string {
  const head: string[] = [];
  if (doc.system_prompt) head.push(`The agent's system prompt:\n${doc.system_prompt}`);
  if (doc.tools?.length) head.push(`Tools available:\n${doc.tools.map((t) => `- ${t.name}${t.description ? `: ${t.description}` : ''}`).join('\n')}`);
  if (doc.user_message) head.push(`The user's request:\n${doc.user_message}`);
  if (doc.text) head.push(doc.text);
  const tail: string[] = [];
  if (doc.final_output !== undefined) tail.push(`The agent's final answer${doc.run_status ? ` (run ended ${doc.run_status})` : ''}:\n${doc.final_output || '(empty)'}`);
  else if (doc.run_status) tail.push(`The run ended ${doc.run_status}.`);
  let used = head.join('\n\n').length + tail.join('\n\n').length;
  const runs: string[] = [];
  for (const r of doc.runs ?? []) {
    const t = renderRun(r);
    runs.push(t);
    used += t.length;
  }
  const body: string[] = [];
  let omitted = doc.omitted ?? 0;
  for (let i = doc.spans.length - 1; i >= 0; i--) {
    const s = doc.spans[i];
    const t = renderSpan(s, s.id === doc.focus);
    if (used + t.length > budget && body.length > 0) {
      omitted += i + 1;
      break;
    }
    body.push(t);
    used += t.length;
  }
  body.reverse();
  const parts = [...head];
  if (runs.length) parts.push(`Earlier runs of this session:\n${runs.join('\n')}`);
  if (body.length || omitted) {
    parts.push(`${omitted ? `(${omitted} earlier calls not shown)\n` : ''}Calls, in order:\n${body.join('\n')}`);
  }
  parts.push(...tail);
  return parts.join('\n\n');
}

export function renderContext(doc: ContextDoc | undefined): string {
  if (!doc || (!doc.spans.length && !doc.user_message && !doc.text)) return '(nothing before this)';
  const parts: string[] = [];
  if (doc.user_message) parts.push(`The user's request:\n${doc.user_message}`);
  if (doc.text) parts.push(doc.text);
  if (doc.spans.length) parts.push(`${doc.omitted ? `(${doc.omitted} earlier calls not shown)\n` : ''}${doc.spans.map((s) => renderSpan(s)).join('\n')}`);
  return parts.join('\n\n');
}

/**
 * The words of the run (never the labels neatroots adds around them): what a quote must be
 * taken from.
 */
export function runText(doc: EvidenceDoc, context?: ContextDoc): string {
  const parts: string[] = [];
  const addSpan = (s: SpanSummary) => {
    parts.push(s.name);
    if (s.tool) parts.push(s.tool);
    if (s.input) parts.push(s.input);
    if (s.output) parts.push(s.output);
    if (s.error) parts.push(s.error);
  };
  for (const s of doc.spans) addSpan(s);
  for (const r of doc.runs ?? []) {
    if (r.user_message) parts.push(r.user_message);
    if (r.final_output) parts.push(r.final_output);
    r.spans.forEach(addSpan);
  }
  for (const t of [doc.final_output, doc.user_message, doc.system_prompt, doc.text]) if (t) parts.push(t);
  for (const t of doc.tools ?? []) parts.push(t.name, t.description ?? '');
  if (context) {
    context.spans.forEach(addSpan);
    if (context.user_message) parts.push(context.user_message);
    if (context.text) parts.push(context.text);
  }
  return parts.join('\n');
}
