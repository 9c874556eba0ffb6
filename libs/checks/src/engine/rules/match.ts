import type { Span } from '@neatroots/spans';
import type { OpenFinding, RunWindow } from '../window';
import type { CompiledRule, TextMatcher } from '../compile';
import { findingId } from '../ids';
import { pushCapped, state, type RuleKind, type RuleStep } from './kind';

interface MatchState {
  t: 'match';
  open?: OpenFinding;
}


/**
 * `match`: a regex over the span fields named by `in`. One finding per run; later matching
 * spans join it (as a span-scope question's do). The matcher comes from the app: in
 * production a pattern someone wrote may answer later, from off the event loop under a time
 * limit (../../match/), and then the finding is recorded once the batch's answers are in.
 */
export const match: RuleKind<'match', TextMatcher> = {
  type: 'match',
  priority: 90,
  // A layer of a call may hold text the others lack (the MCP server's arguments and result).
  seesLayers: true,
  compile: (rule, check, deps) => deps.matcher(check, rule.pattern),
  onSpan(x, w, r, span, view, received) {
    const hit = view.match(r, r.data, r.rule.in);
    if (hit === true) found(x, w, r, span, received);
    else if (hit !== false) x.defer(hit, (yes) => yes && found(x, w, r, span, received));
  },
};

function found(x: RuleStep, w: RunWindow, r: CompiledRule<'match', TextMatcher>, span: Span, received: number): void {
  const rule = r.rule;
  const st = state<MatchState>(w, r, 'match', () => ({ t: 'match' }));
  const vars = { tool: span.tool, name: span.name, pattern: rule.pattern };
  if (!st.open) {
    st.open = { id: findingId(w.project, w.run_id, r.check.id, 'run'), count: 1, spans: [span.span_id] };
    x.emit(w, r, 'raised', st.open, received, received, vars);
  } else {
    st.open.count++;
    pushCapped(st.open.spans, span.span_id, x.maxSpanIds);
    x.emit(w, r, 'updated', st.open, received, received, vars);
  }
}
