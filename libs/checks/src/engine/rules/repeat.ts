import { existing, pushCapped, state, type RuleKind } from './kind';
import { endStreak, newStreak, streakFires, takeBack, type StreakState } from './streak';

/**
 * `repeat`: the same call (by the `same` fields) at_least times in a row; a differing call ends
 * it. A call lacking one of the `same` fields (its arguments not recorded) is not known to be
 * the same as any other: it ends the streak and starts none.
 */
export const repeat: RuleKind<'repeat'> = {
  type: 'repeat',
  priority: 80,
  onSpan(x, w, r, span, view, received) {
    const rule = r.rule;
    // Short values are kept as they are; long ones (large arguments) as a fingerprint.
    const key = view.sameKey(rule.same);
    const st = state<StreakState>(w, r, 'streak', newStreak);
    if (key === undefined) {
      endStreak(x, w, r, st, received, span);
      delete st.key;
    } else if (st.key === key) {
      st.n++;
      pushCapped(st.spans, span.span_id, x.maxSpanIds);
    } else {
      // A differing call ends the streak, and resolves its finding.
      endStreak(x, w, r, st, received, span);
      st.key = key;
      st.n = 1;
      st.spans.push(span.span_id);
    }
    streakFires(x, w, r, st, rule.at_least, received, span);
  },
  onTakenBack(_x, w, r, spanId) {
    takeBack(existing<StreakState>(w, r, 'streak'), spanId);
  },
};
