import { existing, pushCapped, state, type RuleKind } from './kind';
import { endStreak, newStreak, streakFires, takeBack, type StreakState } from './streak';

/** `errors`: at_least failures in a row among the filtered spans; the next success resolves it. */
export const errors: RuleKind<'errors'> = {
  type: 'errors',
  priority: 70,
  onSpan(x, w, r, span, _view, received) {
    const st = state<StreakState>(w, r, 'streak', newStreak);
    if (span.status === 'ok') {
      endStreak(x, w, r, st, received, span);
      return;
    }
    st.n++;
    pushCapped(st.spans, span.span_id, x.maxSpanIds);
    streakFires(x, w, r, st, r.rule.at_least, received, span);
  },
  onTakenBack(_x, w, r, spanId) {
    takeBack(existing<StreakState>(w, r, 'streak'), spanId);
  },
};
