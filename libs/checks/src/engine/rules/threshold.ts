import type { Metric } from '../../types';
import type { RunWindow } from '../window';
import { newCount, state, type CountState, type RuleKind } from './kind';

/**
 * `threshold`: a run metric (kept by the engine in `w.metrics`) reaches at_least; fires once
 * per run. Checked on every span, and at the run's end for duration_ms (the end moves it).
 */
export const threshold: RuleKind<'threshold'> = {
  type: 'threshold',
  priority: 20,
  everySpan: true,
  // The metrics count a layer as a span (and its tokens), not as a tool call or an error.
  seesLayers: true,
  onSpan(x, w, r, span, _view, received) {
    // The metric first: it is below the line on almost every span, and then no state is needed.
    const value = metricValue(w, r.rule.metric);
    if (value < r.rule.at_least) return;
    const st = state<CountState>(w, r, 'count', newCount);
    if (st.fired) return;
    st.fired = 1;
    x.raise(w, r, 'run', [span.span_id], 1, received, received, { metric: r.rule.metric, value: round(value) });
  },
  onRunEnd(x, w, r, _run, _view, received) {
    if (r.rule.metric !== 'duration_ms') return;
    const st = state<CountState>(w, r, 'count', newCount);
    const value = metricValue(w, r.rule.metric);
    if (st.fired || value < r.rule.at_least) return;
    st.fired = 1;
    x.raise(w, r, 'run', [], 1, received, received, { metric: r.rule.metric, value: round(value) });
  },
};

function metricValue(w: RunWindow, metric: Metric): number {
  const m = w.metrics;
  if (metric === 'duration_ms') {
    if (m.first_ms === undefined || m.last_ms === undefined) return 0;
    return m.last_ms - m.first_ms;
  }
  return m[metric] ?? 0;
}

function round(v: number): number {
  return Math.round(v * 1000) / 1000;
}
