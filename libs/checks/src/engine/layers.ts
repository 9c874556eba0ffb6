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
 */
export const MAX_TOOL_SPANS = 32;

/**
 * The run's tool spans as its window keeps them: flat, three strings a span (its id, its tool and
 * its parent's id, '' without one), a ring of MAX_TOOL_SPANS overwritten in turn from
 * `tool_spans_next`. Flat and in place because this runs on every tool span: an array a span and
 * a splice to drop the oldest cost the engine alone about a seventh of its spans a second.
 */
export type ToolSpanRing = string[];

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
export function rememberToolSpan(w: RunWindow, span: Span): void {
  if (!isToolSpan(span)) return;
  let ring = w.tool_spans;
  // A window of the first form of this (an array a span) starts again.
  if (!ring || (ring.length && typeof ring[0] !== 'string')) ring = w.tool_spans = [];
  if (ring.length < MAX_TOOL_SPANS * 3) {
    ring.push(span.span_id, span.tool, span.parent_id ?? '');
    return;
  }
  const at = ((w.tool_spans_next ?? 0) % MAX_TOOL_SPANS) * 3;
  ring[at] = span.span_id;
  ring[at + 1] = span.tool;
  ring[at + 2] = span.parent_id ?? '';
  w.tool_spans_next = (at / 3 + 1) % MAX_TOOL_SPANS;
}

/** How many tool spans the run's window keeps (tests). */
export function toolSpansKept(w: RunWindow): number {
  return Math.floor((w.tool_spans?.length ?? 0) / 3);
}
