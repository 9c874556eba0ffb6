import type { Span } from '@neatroots/spans';
import type { RunWindow } from './window';

/**
 * One tool call traced at several layers: the agent framework's `execute_tool` span, the MCP
 * client's `tools/call` span under it, and the MCP server's under that (exported by another
 * process, parented through the request's `_meta`). Each is a tool span of the same tool, so
 * without this one failed call was three failures in a row (tool-error-streak), a repeat
 * (repeated-tool-call) and three of a run's `tool_calls`.
 *
 * A layer is a tool span whose parent, or whose child, is a tool span of the same tool that
 * the run sent before it (the layers of a call come in any order: a child ends, and is usually
 * exported, before its parent, and the server exports on its own). The first of them to arrive
 * is the call; the others are layers: kept and shown, in the run's `spans`, read by `match`
 * and `threshold`, but not calls: the rules that count calls (repeat, errors, count, slow,
 * requires_before, unrecovered_error) skip them, and they add nothing to `tool_calls` or
 * `errors`. A window keeps its run's last MAX_TOOL_SPANS tool spans for this.
 *
 * The middle layer may come last (the framework's span, then the server's, then the client's
 * between them): the two before it were each taken as a call. It joins them, and the later of
 * the two calls is taken back (callsJoined): a layer from then on, out of `tool_calls` and
 * `errors` and out of the counts and streaks of the rules that counted it (RuleKind.onTakenBack).
 */
export const MAX_TOOL_SPANS = 32;

/**
 * The run's tool spans as its window keeps them: flat, three strings a span (its id, its tool and
 * its parent's id, '' without one), a ring of MAX_TOOL_SPANS overwritten in turn from
 * `tool_spans_next`. Flat and in place because this runs on every tool span: an array a span and
 * a splice to drop the oldest cost the engine alone about a seventh of its spans a second.
 */
export type ToolSpanRing = string[];

/**
 * Beside the ring, slot for slot: what each tool span was taken as, its first character `c` (a
 * call) or `l` (a layer), then its status (`o` ok, `e` error), its type (`t` tool,
 * `m` mcp_tool) and its name: what taking a call back needs (the rules it passed). '' for a slot
 * written before these were kept (a window of an earlier version): never taken back.
 */
export type ToolSpanMarks = string[];

const isToolSpan = (s: Span): s is Span & { tool: string } => (s.type === 'tool' || s.type === 'mcp_tool') && s.tool !== undefined;

/** Whether `span` is another layer of a tool call the run already sent (its parent or child, same tool). */
export function isLayer(w: RunWindow, span: Span): boolean {
  const ring = w.tool_spans;
  if (!ring || !isToolSpan(span)) return false;
  const parent = span.parent_id;
  const id = span.span_id;
  const tool = span.tool;
  for (let i = 0; i + 2 < ring.length; i += 3) {
    if ((ring[i] === parent || ring[i + 2] === id) && ring[i + 1] === tool) return true;
  }
  return false;
}

/** Remembers a tool span of the run (call or layer: a call's third layer may be linked through its second). */
export function rememberToolSpan(w: RunWindow, span: Span, call: boolean): void {
  if (!isToolSpan(span)) return;
  let ring = w.tool_spans;
  // A window of the first form of this (an array a span) starts again.
  if (!ring || (ring.length && typeof ring[0] !== 'string')) {
    ring = w.tool_spans = [];
    w.tool_span_marks = [];
  }
  let marks = w.tool_span_marks;
  // A window of an earlier version: its slots' marks unknown.
  if (!marks) marks = w.tool_span_marks = new Array<string>(ring.length / 3).fill('');
  const mark = `${call ? 'c' : 'l'}${span.status === 'error' ? 'e' : 'o'}${span.type === 'mcp_tool' ? 'm' : 't'}${span.name}`;
  if (ring.length < MAX_TOOL_SPANS * 3) {
    ring.push(span.span_id, span.tool, span.parent_id ?? '');
    marks[ring.length / 3 - 1] = mark;
    return;
  }
  const slot = (w.tool_spans_next ?? 0) % MAX_TOOL_SPANS;
  const at = slot * 3;
  ring[at] = span.span_id;
  ring[at + 1] = span.tool;
  ring[at + 2] = span.parent_id ?? '';
  marks[slot] = mark;
  w.tool_spans_next = (slot + 1) % MAX_TOOL_SPANS;
}

/**
 * The calls `span`, a layer, shows to be layers of an earlier call: when it links two or more
 * tool spans the run already sent (its parent and its child, the middle layer come last), each
 * of them is part of a call the run counted; the earliest of those calls stays, the others are
 * taken back (marked layers in the window) and returned as the spans they were, for the engine
 * to take out of the run's counts. Usually none: a layer links one span the run sent.
 */
export function callsJoined(w: RunWindow, span: Span): Span[] {
  const ring = w.tool_spans;
  const marks = w.tool_span_marks;
  if (!ring || !marks || !isToolSpan(span)) return [];
  const slots = ring.length / 3;
  const tool = span.tool;
  const near: number[] = [];
  for (let s = 0; s < slots; s++) {
    const i = s * 3;
    if (ring[i + 1] === tool && ring[i] !== span.span_id && (ring[i] === span.parent_id || ring[i + 2] === span.span_id)) near.push(s);
  }
  if (near.length < 2) return [];
  // Each span it links is in a call of its own (they were linked through it alone): that call's slot.
  const calls: number[] = [];
  for (const start of near) {
    const seen = new Set([start]);
    const todo = [start];
    let call: number | undefined;
    while (todo.length) {
      const s = todo.pop()!;
      if (marks[s]?.[0] === 'c') call = s;
      for (let o = 0; o < slots; o++) {
        if (seen.has(o) || ring[o * 3 + 1] !== tool) continue;
        if (ring[o * 3] === ring[s * 3 + 2] || ring[o * 3 + 2] === ring[s * 3]) {
          seen.add(o);
          todo.push(o);
        }
      }
    }
    if (call !== undefined && !calls.includes(call)) calls.push(call);
  }
  if (calls.length < 2) return [];
  // The earliest to arrive stays the call: slots fill in turn, then are overwritten from tool_spans_next.
  const next = slots < MAX_TOOL_SPANS ? 0 : (w.tool_spans_next ?? 0) % MAX_TOOL_SPANS;
  const age = (s: number) => (s - next + MAX_TOOL_SPANS) % MAX_TOOL_SPANS;
  calls.sort((a, b) => age(a) - age(b));
  return calls.slice(1).map((s) => {
    const m = marks[s];
    marks[s] = `l${m.slice(1)}`;
    const i = s * 3;
    return {
      run_id: span.run_id, span_id: ring[i], tool: ring[i + 1], ...(ring[i + 2] ? { parent_id: ring[i + 2] } : {}),
      status: m[1] === 'e' ? 'error' : 'ok', type: m[2] === 'm' ? 'mcp_tool' : 'tool', name: m.slice(3),
    } as Span;
  });
}

/** How many tool spans the run's window keeps (tests). */
export function toolSpansKept(w: RunWindow): number {
  return Math.floor((w.tool_spans?.length ?? 0) / 3);
}
