import type { Span } from './types';

/** A span in the timeline: where it sits under its parent. */
export interface Row {
  span: Span;
  depth: number;
}

/**
 * The spans as a tree in the order they happened: each span under its parent, children in
 * the API's order (by start). A span whose parent is not in the run is a root; a cycle in
 * parent ids (a bad exporter) cannot loop, as every span is placed once.
 */
export function timelineRows(spans: Span[]): Row[] {
  const ids = new Set(spans.map((s) => s.span_id));
  const children = new Map<string, Span[]>();
  const roots: Span[] = [];
  for (const s of spans) {
    if (!(s.parent_id && s.parent_id !== s.span_id && ids.has(s.parent_id))) {
      roots.push(s);
      continue;
    }
    // Appended in place: a parent with tens of thousands of children is built in linear time.
    const kids = children.get(s.parent_id);
    if (kids) kids.push(s);
    else children.set(s.parent_id, [s]);
  }
  const out: Row[] = [];
  const placed = new Set<string>();
  const stack: Row[] = roots.map((span) => ({ span, depth: 0 })).reverse();
  const visit = () => {
    while (stack.length) {
      const row = stack.pop()!;
      if (placed.has(row.span.span_id)) continue;
      placed.add(row.span.span_id);
      out.push(row);
      const kids = children.get(row.span.span_id) ?? [];
      for (let i = kids.length - 1; i >= 0; i--) stack.push({ span: kids[i], depth: row.depth + 1 });
    }
  };
  visit();
  // Spans only reachable through a cycle: shown at the top level rather than lost.
  for (const s of spans) {
    if (placed.has(s.span_id)) continue;
    stack.push({ span: s, depth: 0 });
    visit();
  }
  return out;
}

/** The run's time range in ms, for the duration bars. */
export function timeRange(spans: Span[]): { start: number; end: number } | null {
  let start = Infinity;
  let end = -Infinity;
  for (const s of spans) {
    if (s.start_ms !== undefined) start = Math.min(start, s.start_ms);
    const e = s.end_ms ?? s.start_ms;
    if (e !== undefined) end = Math.max(end, e);
  }
  return Number.isFinite(start) ? { start, end: Math.max(end, start + 1) } : null;
}

/**
 * The spans listed, with spans read later (a run page following a run still going) put where
 * the API would list them: by start (spans without one last), then in the order they came, so
 * a later span goes after those already listed that started at the same time. A span already
 * listed (read twice, or sent again) is replaced where it is. `listed` is in the API's order
 * and is not changed; the answer is `listed` itself when `later` is empty. Linear in the spans
 * listed, plus sorting those read later.
 */
export function mergeSpans<S extends Span>(listed: S[], later: S[]): S[] {
  if (!later.length) return listed;
  const at = new Map(listed.map((s, i) => [s.span_id, i]));
  const out = listed.slice();
  const fresh: S[] = [];
  const seen = new Set<string>();
  // The last of a span read twice in `later` wins.
  for (let i = later.length - 1; i >= 0; i--) {
    const s = later[i];
    if (seen.has(s.span_id)) continue;
    seen.add(s.span_id);
    const j = at.get(s.span_id);
    if (j !== undefined) out[j] = s;
    else fresh.push(s);
  }
  if (!fresh.length) return out;
  fresh.reverse();
  const start = (s: Span) => s.start_ms ?? Infinity;
  // Stable: spans read later that started together keep the order they came in.
  fresh.sort((a, b) => (start(a) < start(b) ? -1 : start(a) > start(b) ? 1 : 0));
  const merged: S[] = [];
  let i = 0;
  for (const s of fresh) {
    while (i < out.length && start(out[i]) <= start(s)) merged.push(out[i++]);
    merged.push(s);
  }
  while (i < out.length) merged.push(out[i++]);
  return merged;
}
