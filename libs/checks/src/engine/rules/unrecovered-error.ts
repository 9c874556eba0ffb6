import type { CompiledRule } from '../compile';
import { ownValue, setOwnValue, type RunWindow } from '../window';
import { existing, state, type RuleKind, type RuleStep } from './kind';

/** Words that mean the final answer admits something failed (unrecovered_error's hint). */
export const DEFAULT_FAILURE_WORDS = [
  'error', 'fail', 'unable', "couldn't", 'could not', "can't", 'cannot', 'sorry', 'problem', 'issue',
  'unfortunately', 'not able', "didn't work", 'went wrong', 'unavailable', 'not possible', 'timed out', 'timeout',
];

/** Each tool's latest call in the run: the one that says whether the tool recovered. */
interface ToolsState {
  t: 'tools';
  last: Record<string, { start: number; ok: boolean; span: string }>;
  /**
   * Set at the run's end: whether its final answer, non-empty, says nothing of a failure. A
   * call that arrives after the end (exported after the root span) is weighed against it.
   */
  quietEnd?: boolean;
}

// `last` without a prototype (a hash table, as RunWindow.checks): a run calls its tools in its own order.
const newTools = (): ToolsState => ({ t: 'tools', last: Object.create(null) as ToolsState['last'] });

/**
 * `unrecovered_error`: at the run's end, a tool whose latest call failed while the final
 * answer says nothing of a failure (none of `words`). A hint, not proof.
 */
export const unrecoveredError: RuleKind<'unrecovered_error', string[]> = {
  type: 'unrecovered_error',
  priority: 60,
  compile: (rule) => (rule.words?.length ? rule.words : DEFAULT_FAILURE_WORDS).map((w) => w.toLowerCase()),
  onSpan(x, w, r, span, _view, received) {
    if (!span.tool) return;
    const st = state<ToolsState>(w, r, 'tools', newTools);
    const start = span.start_ms ?? span.end_ms ?? received;
    // A tool's name is the agent's: `constructor` is a tool, not Object's property.
    const cur = ownValue(st.last, span.tool);
    if (!cur) setOwnValue(st.last, span.tool, { start, ok: span.status === 'ok', span: span.span_id });
    else if (start >= cur.start) {
      // Updated in place: a tool's entry is written on every call of it.
      cur.start = start;
      cur.ok = span.status === 'ok';
      cur.span = span.span_id;
    }
    // After the run's end: a late failed call is weighed against the answer the end gave (one
    // finding per run, as at the end; a late success resolves nothing).
    if (st.quietEnd && span.status !== 'ok') raiseFailed(x, w, r, st, received);
  },
  onRunEnd(x, w, r, _run, view, received) {
    const finalText = view.finalText();
    // It only counts when the run still gave an answer that says nothing failed.
    const quiet = !!finalText.trim() && !r.data.some((word) => finalText.includes(word));
    const st = quiet ? state<ToolsState>(w, r, 'tools', newTools) : existing<ToolsState>(w, r, 'tools');
    if (!st) return;
    st.quietEnd = quiet;
    if (quiet) raiseFailed(x, w, r, st, received);
  },
};

/** The finding: every tool whose latest call failed, if any. */
function raiseFailed(x: RuleStep, w: RunWindow, r: CompiledRule<'unrecovered_error', string[]>, st: ToolsState, received: number): void {
  const failed = Object.entries(st.last).filter(([, v]) => !v.ok);
  if (!failed.length) return;
  x.raise(w, r, 'run', failed.map(([, v]) => v.span), failed.length, received, received, {
    tool: failed.map(([t]) => t).join(', '),
  });
}
