import { existing, newCount, state, type CountState, type RuleKind } from './kind';

/** `count`: at_least filtered spans in a run; fires once per run. */
export const count: RuleKind<'count'> = {
  type: 'count',
  priority: 30,
  onSpan(x, w, r, span, _view, received) {
    const st = state<CountState>(w, r, 'count', newCount);
    st.n++;
    if (st.n >= r.rule.at_least && !st.fired) {
      st.fired = 1;
      x.raise(w, r, 'run', [span.span_id], st.n, received, received, { tool: span.tool, name: span.name });
    }
  },
  onTakenBack(_x, w, r) {
    const st = existing<CountState>(w, r, 'count');
    if (st && st.n > 0) st.n--;
  },
};
