import type { SpanFilter } from '../../types';
import { compileFilter, type SpanPredicate } from '../filter';
import { findingId } from '../ids';
import { existing, state, type RuleKind } from './kind';

interface RequiresState {
  t: 'requires';
  /** Earliest start_ms of a successful `requires` span. */
  ok_at?: number;
  /** Calls without an earlier `requires`, waiting for a late one until `deadline`. */
  pending: { span: string; name: string; start: number; deadline: number; received: number }[];
  /**
   * Raised calls a late `requires` span may still resolve: the RAISED_KEPT that started last
   * (see onWake).
   */
  raised: { span: string; start: number; id: string; name?: string }[];
}

/**
 * Raised calls kept per check and run for a late `requires` span to resolve. A late span that
 * started at `t` resolves every kept call that started after `t`, so the calls that started
 * last are the ones any late span resolves first: past this many, the one that started first
 * is let go (its finding stays raised). Without a bound, a run calling without the required
 * call kept every call (20,000 calls: 1.3 MB in the window, read and written with every batch
 * of the run, and scanned for every new call).
 */
export const RAISED_KEPT = 100;

/** The lists' entries are never changed in place (pushed, filtered): the lists are copied. */

interface Compiled {
  call: SpanPredicate;
  requires: SpanPredicate;
  /** Named in guidance as {requires}. */
  describe: string;
}

/**
 * `requires_before`: a `call` span needs a successful `requires` span that started earlier.
 * Spans can arrive out of order, so a call without one waits (250 ms by default) for a late
 * span before it is raised, and a late one that started earlier resolves what was raised (of
 * the run's RAISED_KEPT calls that started last).
 */
export const requiresBefore: RuleKind<'requires_before', Compiled> = {
  type: 'requires_before',
  priority: 85,
  compile: (rule) => ({ call: compileFilter(rule.call), requires: compileFilter(rule.requires), describe: describeFilter(rule.requires) }),
  // It acts on both filters' spans: narrowed only when both name the types (or tools).
  reach: (rule) => ({
    types: rule.call.type?.length && rule.requires.type?.length ? [...rule.call.type, ...rule.requires.type] : undefined,
    tools: rule.call.tool?.length && rule.requires.tool?.length ? [...rule.call.tool, ...rule.requires.tool] : undefined,
  }),
  onSpan(x, w, r, span, _view, received) {
    const isReq = r.data.requires(span) && span.status === 'ok';
    const isCall = r.data.call(span);
    if (!isReq && !isCall) return;
    const st = state<RequiresState>(w, r, 'requires', () => ({ t: 'requires', pending: [], raised: [] }));
    const start = span.start_ms ?? span.end_ms ?? received;
    if (isReq && (st.ok_at === undefined || start < st.ok_at)) {
      st.ok_at = start;
      // A late requires span that started earlier satisfies the waits, and resolves what was raised.
      st.pending = st.pending.filter((p) => !(p.start > start));
      const still: typeof st.raised = [];
      for (const f of st.raised) {
        if (f.start > start) {
          // With the call's name, as when it was raised: the resolution says what its raise said.
          x.emit(w, r, 'resolved', { id: f.id, count: 1, spans: [f.span] }, received, received, { requires: r.data.describe, name: f.name, tool: f.name });
        } else still.push(f);
      }
      st.raised = still;
    }
    if (isCall && !(st.ok_at !== undefined && st.ok_at < start)) {
      if (!st.pending.some((p) => p.span === span.span_id) && !st.raised.some((f) => f.span === span.span_id)) {
        const deadline = received + x.requiresWaitMs;
        st.pending.push({ span: span.span_id, name: span.tool ?? span.name, start, deadline, received });
        if (w.wake_at === undefined || deadline < w.wake_at) w.wake_at = deadline;
      }
    }
  },
  onWake(x, w, r, now) {
    const st = existing<RequiresState>(w, r, 'requires');
    if (!st) return undefined;
    let next: number | undefined;
    const keep: typeof st.pending = [];
    for (const p of st.pending) {
      if (p.deadline <= now) {
        const id = findingId(w.project, w.run_id, r.check.id, `span:${p.span}`);
        st.raised.push({ span: p.span, start: p.start, id, name: p.name });
        if (st.raised.length > RAISED_KEPT) st.raised.splice(firstStarted(st.raised), 1);
        // It happened when the wait ran out, whenever the tick noticed.
        x.emit(w, r, 'raised', { id, count: 1, spans: [p.span] }, p.deadline, p.received, {
          requires: r.data.describe,
          name: p.name,
          tool: p.name,
        });
      } else {
        keep.push(p);
        if (next === undefined || p.deadline < next) next = p.deadline;
      }
    }
    st.pending = keep;
    return next;
  },
};

/** The index of the entry that started first (the earliest kept, of equal starts). */
function firstStarted(list: readonly { start: number }[]): number {
  let at = 0;
  for (let i = 1; i < list.length; i++) if (list[i].start < list[at].start) at = i;
  return at;
}

function describeFilter(f: SpanFilter): string {
  const names = [...(f.tool ?? []), ...(f.name ?? [])];
  return names.length ? names.join(' or ') : (f.type ?? []).join(' or ') || 'the required call';
}
