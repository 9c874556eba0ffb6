import type { RuleKind } from './kind';

/** `slow`: a filtered span that took at least at_least_ms; a finding per slow span, no state. */
export const slow: RuleKind<'slow'> = {
  type: 'slow',
  priority: 50,
  onSpan(x, w, r, span, _view, received) {
    if (span.start_ms === undefined || span.end_ms === undefined) return;
    const ms = span.end_ms - span.start_ms;
    if (ms < r.rule.at_least_ms) return;
    x.raise(w, r, `span:${span.span_id}`, [span.span_id], 1, received, received, { tool: span.tool, name: span.name, ms });
  },
};
