import type { OpenFinding } from '../window';
import type { TextMatcher } from '../compile';
import { findingId } from '../ids';
import { pushCapped, state, type RuleKind } from './kind';

interface MatchState {
  t: 'match';
  open?: OpenFinding;
}

/**
 * `match`: a regex over the span fields named by `in`. One finding per run; later matching
 * spans join it (as a span-scope question's do). The matcher comes from the app (RE2 with a
 * time budget in production, see ../../regex.ts).
 */
export const match: RuleKind<'match', TextMatcher> = {
  type: 'match',
  priority: 90,
  compile: (rule, check, deps) => deps.matcher(check, rule.pattern),
  onSpan(x, w, r, span, view, received) {
    const rule = r.rule;
    if (!r.data.test(view.text(rule.in))) return;
    const st = state<MatchState>(w, r, () => ({ t: 'match' }));
    const vars = { tool: span.tool, name: span.name, pattern: rule.pattern };
    if (!st.open) {
      st.open = { id: findingId(w.project, w.run_id, r.check.id, 'run'), count: 1, spans: [span.span_id] };
      x.emit(w, r, 'raised', st.open, received, received, vars);
    } else {
      st.open.count++;
      pushCapped(st.open.spans, span.span_id, x.maxSpanIds);
      x.emit(w, r, 'updated', st.open, received, received, vars);
    }
  },
};
