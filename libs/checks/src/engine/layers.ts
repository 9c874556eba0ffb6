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

/** A tool span as a run's window keeps it: its id, its tool and its parent's id ('' without one). */
export type ToolSpanEntry = [id: string, tool: string, parent: string];

const isToolSpan = (s: Span): s is Span & { tool: string } => (s.type === 'tool' || s.type === 'mcp_tool') && s.tool !== undefined;

/** Whether `span` is another layer of a tool call the run already sent (its parent or child, same tool). */
export function isLayer(w: RunWindow, span: Span): boolean {
  const list = w.tool_spans;
  if (!list || !isToolSpan(span)) return false;
  const parent = span.parent_id;
  for (const [id, tool, up] of list) {
    if (tool === span.tool && ((parent !== undefined && id === parent) || up === span.span_id)) return true;
  }
  return false;
}

/** Remembers a tool span of the run (call or layer: a call's third layer may be linked through its second). */
export function rememberToolSpan(w: RunWindow, span: Span): void {
  if (!isToolSpan(span)) return;
  const list = (w.tool_spans ??= []);
  list.push([span.span_id, span.tool, span.parent_id ?? '']);
  if (list.length > MAX_TOOL_SPANS) list.splice(0, list.length - MAX_TOOL_SPANS);
}
