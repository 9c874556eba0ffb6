import type { Evidence, SpanFilter } from '@neatroots/checks';
import { valueText, type Span } from '@neatroots/spans';
import { normalizeForQuote, spanQuoteText } from './quote';
import type { ContextDoc, EvidenceDoc, RunSummary, SpanSummary } from './types';

/**
 * Evidence: what a question can see of a run, kept small enough to travel on the bus and to
 * fit a local model's context. Long fields keep their head and their tail (an error or a
 * result's last lines are often what matters) with a marker saying how much was cut.
 */
export const DEFAULT_FIELD_CHARS = 2_000;
/** The rendered evidence of one question is at most this many characters (renderEvidence). */
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

/** Span scope's filter without one of its own: one object, read only (asked for every question at every span). */
const TOOL_CALLS: SpanFilter = Object.freeze({ type: Object.freeze([...TOOL_TYPES]) as SpanFilter['type'] });

/** The spans a question judges or reads: its evidence filter, or tool calls for span scope. */
export function evidenceFilter(scope: string, evidence: Evidence | undefined): SpanFilter | undefined {
  if (evidence?.spans) return evidence.spans;
  return scope === 'span' ? TOOL_CALLS : undefined;
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

/** The earlier spans a context doc keeps at most, and the length each of their fields is cut to. */
export const CONTEXT_SPANS = 30;
export const CONTEXT_CHARS = 400;

/** A summary with its fields cut to `max` characters: the summary itself when none is longer. */
export function shorten(s: SpanSummary, max: number): SpanSummary {
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
  const max = opts.max ?? CONTEXT_SPANS;
  const kept = spans.slice(-max).map((s) => shorten(s, opts.chars ?? CONTEXT_CHARS));
  return contextDoc(kept, spans.length, opts.user_message);
}

/** contextOf(ring.slice(0, end)) with the defaults, without the copy of the ring. */
export function contextOfRing(ring: readonly SpanSummary[], end: number, user_message: string | undefined): ContextDoc {
  const n = Math.min(CONTEXT_SPANS, end);
  const kept = new Array<SpanSummary>(n);
  for (let i = 0; i < n; i++) kept[i] = shorten(ring[end - n + i], CONTEXT_CHARS);
  return contextDoc(kept, end, user_message);
}

/** A context doc of the spans kept (already shortened) out of `total` earlier ones. */
export function contextDoc(kept: SpanSummary[], total: number, user_message: string | undefined): ContextDoc {
  const doc: ContextDoc = { spans: kept };
  if (total > kept.length) doc.omitted = total - kept.length;
  if (user_message) doc.user_message = user_message;
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

/** A run of the session; `brief`: its calls by their headers only (when the whole run does not fit). */
function renderRun(r: RunSummary, brief = false): string {
  const lines = [`Run ${r.run_id}${r.status ? ` (ended ${r.status})` : ''}`];
  if (r.user_message) lines.push(`  user: ${r.user_message}`);
  for (const s of r.spans) lines.push(brief ? `  ${spanHeader(s, false)}` : renderSpan(s).replace(/^/gm, '  '));
  if (r.final_output) lines.push(`  final answer: ${r.final_output}`);
  return lines.join('\n');
}

/** Room kept for the three sections' headings, "not shown" markers and separators. */
const SECTIONS_RESERVE = 200;

function renderTool(t: { name: string; description?: string }): string {
  return `- ${t.name}${t.description ? `: ${t.description}` : ''}`;
}

/**
 * The evidence as the model reads it, at most `budget` characters in all (the rendered text
 * is part of the answer cache's key: the same evidence always renders the same). What is
 * always shown: the system prompt, the user's request, text given as evidence, the final
 * answer and the call being judged (the newest call when none is); when these alone do not fit,
 * each of their long fields is cut (head and tail, with a marker) to one common length that
 * fits. The rest takes what is left, in this order: the tools the run's calls used; the
 * session's earlier runs, newest first (at most half of what is left, more after the calls; a
 * run that does not fit whole is shown with its calls' headers only);
 * the calls, newest first; the other tools. Whatever does not fit is counted in a marker
 * ("(3 earlier calls not shown)", "(2 earlier runs of this session not shown)", "(40 more
 * tools not shown)").
 */
export function renderEvidence(doc: EvidenceDoc, budget: number = DEFAULT_EVIDENCE_CHARS): string {
  const focusAt = doc.focus !== undefined ? doc.spans.findIndex((s) => s.id === doc.focus) : -1;
  const mustAt = focusAt >= 0 ? focusAt : doc.spans.length - 1;
  const must = mustAt >= 0 ? doc.spans[mustAt] : undefined;
  const finalLabel = `The agent's final answer${doc.run_status ? ` (run ended ${doc.run_status})` : ''}:\n`;
  // The parts always shown, their long fields cut to `cap`.
  const fixed = (cap: number) => {
    const c = (t: string) => cut(t, cap);
    const system = doc.system_prompt ? `The agent's system prompt:\n${c(doc.system_prompt)}` : undefined;
    const user = doc.user_message ? `The user's request:\n${c(doc.user_message)}` : undefined;
    const text = doc.text ? c(doc.text) : undefined;
    const tail = doc.final_output !== undefined ? `${finalLabel}${doc.final_output ? c(doc.final_output) : '(empty)'}` : doc.run_status ? `The run ended ${doc.run_status}.` : undefined;
    let span: string | undefined;
    if (must) {
      const m: SpanSummary = { ...must };
      if (m.input !== undefined) m.input = c(m.input);
      if (m.output !== undefined) m.output = c(m.output);
      if (m.error !== undefined) m.error = c(m.error);
      span = renderSpan(m, m.id === doc.focus);
    }
    // Each counted with a separator.
    const length = [system, user, text, tail, span].reduce((n, t) => n + (t === undefined ? 0 : t.length + 2), 0);
    return { system, user, text, tail, span, length };
  };
  const room = budget - SECTIONS_RESERVE;
  let f = fixed(Infinity);
  if (f.length > room) {
    // The longest cap that fits (cut is monotonic in its length): found by halving, so the same every time.
    const longest = Math.max(doc.system_prompt?.length ?? 0, doc.user_message?.length ?? 0, doc.text?.length ?? 0, doc.final_output?.length ?? 0, must?.input?.length ?? 0, must?.output?.length ?? 0, must?.error?.length ?? 0);
    let lo = 0;
    let hi = longest;
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (fixed(mid).length <= room) lo = mid;
      else hi = mid - 1;
    }
    f = fixed(lo);
  }
  let left = room - f.length;

  // The tools the run's calls used, then the calls and the earlier runs, then the other tools.
  const tools = doc.tools ?? [];
  const used = new Set<string>();
  for (const s of doc.spans) if (s.tool) used.add(s.tool);
  for (const r of doc.runs ?? []) for (const s of r.spans) if (s.tool) used.add(s.tool);
  const toolShown = new Array<boolean>(tools.length).fill(false);
  const addTools = (which: (name: string) => boolean) => {
    tools.forEach((t, i) => {
      if (toolShown[i] || !which(t.name)) return;
      const n = renderTool(t).length + 1;
      if (n <= left) {
        toolShown[i] = true;
        left -= n;
      }
    });
  };
  addTools((name) => used.has(name));

  const runs = doc.runs ?? [];
  const runTexts: string[] = [];
  let runsFrom = runs.length;
  const addRuns = (limit: number) => {
    for (let i = runsFrom - 1; i >= 0; i--) {
      let t = renderRun(runs[i]);
      if (t.length + 1 > Math.min(limit, left)) t = renderRun(runs[i], true);
      if (t.length + 1 > Math.min(limit, left)) break;
      runTexts.unshift(t);
      left -= t.length + 1;
      limit -= t.length + 1;
      runsFrom = i;
    }
  };
  addRuns(Math.floor(left / 2));

  const shown = new Array<boolean>(doc.spans.length).fill(false);
  if (must) shown[mustAt] = true;
  let omitted = doc.omitted ?? 0;
  for (let i = doc.spans.length - 1; i >= 0; i--) {
    if (i === mustAt) continue;
    const t = renderSpan(doc.spans[i], doc.spans[i].id === doc.focus);
    if (t.length + 1 > left) {
      for (let j = i; j >= 0; j--) if (j !== mustAt) omitted++;
      break;
    }
    shown[i] = true;
    left -= t.length + 1;
  }
  addRuns(left);
  addTools(() => true);

  const parts: string[] = [];
  if (f.system) parts.push(f.system);
  if (tools.length) {
    const lines = tools.filter((_, i) => toolShown[i]).map(renderTool);
    const hidden = tools.length - lines.length;
    if (hidden) lines.push(`(${hidden} ${lines.length ? 'more ' : ''}tools not shown)`);
    parts.push(`Tools available:\n${lines.join('\n')}`);
  }
  if (f.user) parts.push(f.user);
  if (f.text) parts.push(f.text);
  if (runs.length) parts.push(`${runsFrom ? `(${runsFrom} earlier runs of this session not shown)\n` : ''}Earlier runs of this session:\n${runTexts.join('\n')}`.trimEnd());
  const body = doc.spans.flatMap((s, i) => (!shown[i] ? [] : i === mustAt ? [f.span!] : [renderSpan(s, s.id === doc.focus)]));
  if (body.length || omitted) parts.push(`${omitted ? `(${omitted} earlier calls not shown)\n` : ''}Calls, in order:\n${body.join('\n')}`);
  if (f.tail) parts.push(f.tail);
  const out = parts.join('\n\n');
  // Never longer than the budget, even one too small for the headings.
  return out.length <= budget ? out : cut(out, budget);
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

const spanRunTexts = new WeakMap<SpanSummary, string>();

/** A span's part of runText, normalized (normalizeForQuote), once while its summary lives. */
function spanRunText(s: SpanSummary): string {
  let text = spanRunTexts.get(s);
  if (text === undefined) {
    // runText's parts of a span, each normalized: the same as them joined and normalized (spanQuoteText).
    text = normalizeForQuote(s.name == null ? '' : String(s.name)) + (s.tool ? normalizeForQuote(String(s.tool)) : '') + spanQuoteText(s);
    spanRunTexts.set(s, text);
  }
  return text;
}

/**
 * normalizeForQuote(runText(doc, context)), put together from its parts normalized one by one
 * (spanQuoteText says why that is the same), each span's once while its summary lives: a run's
 * flagged answers look for their quotes in mostly the same spans.
 */
export function normalizedRunText(doc: EvidenceDoc, context?: ContextDoc): string {
  let out = '';
  const text = (t: unknown) => normalizeForQuote(t == null ? '' : String(t));
  for (const s of doc.spans) out += spanRunText(s);
  for (const r of doc.runs ?? []) {
    if (r.user_message) out += text(r.user_message);
    if (r.final_output) out += text(r.final_output);
    for (const s of r.spans) out += spanRunText(s);
  }
  for (const t of [doc.final_output, doc.user_message, doc.system_prompt, doc.text]) if (t) out += text(t);
  for (const t of doc.tools ?? []) out += text(t.name) + text(t.description ?? '');
  if (context) {
    for (const s of context.spans) out += spanRunText(s);
    if (context.user_message) out += text(context.user_message);
    if (context.text) out += text(context.text);
  }
  return out;
}
