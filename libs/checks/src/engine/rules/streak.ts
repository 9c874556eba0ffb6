import type { Span } from '@neatroots/spans';
import { findingId } from '../ids';
import type { OpenFinding, RunWindow } from '../window';
import type { RuleRef, RuleStep } from './kind';

/** Consecutive spans that count towards one finding (repeat, errors). */
export interface StreakState {
  t: 'streak';
  /** What the streak's spans share (repeat), short or fingerprinted. */
  key?: string;
  n: number;
  spans: string[];
  open?: OpenFinding;
}

export const newStreak = (): StreakState => ({ t: 'streak', n: 0, spans: [] });

/** What a streak's guidance can name of the call: built only for a finding, not for every span. */
export function callVars(span: Span): Record<string, unknown> {
  return { tool: span.tool, name: span.name, args: span.input };
}

/**
 * Takes a span the streak counted as a call back (a layer of an earlier call, ../layers.ts): out
 * of its count and spans. A finding it raised keeps what it said.
 */
export function takeBack(st: StreakState | undefined, spanId: string): void {
  if (!st) return;
  const i = st.spans.indexOf(spanId);
  if (i < 0) return;
  st.spans.splice(i, 1);
  st.n = Math.max(0, st.n - 1);
  if (st.open) st.open = { ...st.open, count: st.n, spans: [...st.spans] };
}

/** Ends the streak, resolving its finding if it had one. */
export function endStreak(x: RuleStep, w: RunWindow, r: RuleRef, st: StreakState, received: number, span: Span): void {
  if (st.open) x.emit(w, r, 'resolved', st.open, received, received, callVars(span));
  st.n = 0;
  // Emptied in place (findings keep copies). Most calls find it empty already (a success ends
  // no streak), and setting an array's length is a call into the runtime: about 4% of the
  // engine's time over the bench fleet, where popping a few items is inlined.
  const spans = st.spans;
  while (spans.length) spans.pop();
  st.open = undefined;
}

/** Raises the streak's finding once it is `atLeast` long, and updates it as it grows. */
export function streakFires(
  x: RuleStep,
  w: RunWindow,
  r: RuleRef,
  st: StreakState,
  atLeast: number,
  received: number,
  span: Span,
): void {
  if (st.n < atLeast) return;
  if (!st.open) {
    // Anchored at the streak's first span: the same streak redelivered gets the same id.
    st.open = { id: findingId(w.project, w.run_id, r.check.id, `streak:${st.spans[0]}`), count: st.n, spans: [...st.spans] };
    x.emit(w, r, 'raised', st.open, received, received, callVars(span));
  } else {
    st.open.count = st.n;
    st.open.spans = [...st.spans];
    x.emit(w, r, 'updated', st.open, received, received, callVars(span));
  }
}
