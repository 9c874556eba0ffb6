import { mergeSpans, timelineRows } from '../app/spans';
import type { Span } from '../app/types';

/** A span as the API gives it, with only what the timeline reads. */
const span = (span_id: string, parent_id?: string): Span => ({ span_id, parent_id, name: span_id, type: 'tool', status: 'ok' }) as Span;

/** The rows as `id@depth`, to compare whole trees at a glance. */
const shape = (spans: Span[]) => timelineRows(spans).map((r) => `${r.span.span_id}@${r.depth}`);

describe('the run page timeline', () => {
  it('puts each span under its parent in the order they came, children after their parent', () => {
    const spans = [span('root'), span('a', 'root'), span('a1', 'a'), span('b', 'root'), span('a2', 'a'), span('b1', 'b'), span('other')];
    expect(shape(spans)).toEqual(['root@0', 'a@1', 'a1@2', 'a2@2', 'b@1', 'b1@2', 'other@0']);
  });

  it('places a span whose parent is not in the run at the top, and spans in a cycle once each', () => {
    const spans = [span('orphan', 'gone'), span('self', 'self'), span('x', 'y'), span('y', 'x')];
    expect(shape(spans)).toEqual(['orphan@0', 'self@0', 'x@0', 'y@1']);
  });

  it('builds a run of 50,000 spans under one parent, every span once, in order under it', () => {
    // A batch agent's run: one parent, tens of thousands of children (once quadratic: minutes).
    const n = 50_000;
    const spans = [span('root')];
    for (let i = 1; i < n; i++) spans.push(span(`s${i}`, 'root'));
    // And a second parent with its own children, interleaved: each keeps its own, in order.
    spans.push(span('other'));
    for (let i = 0; i < 1000; i++) spans.push(span(`o${i}`, 'other'));
    const rows = timelineRows(spans);
    expect(rows).toHaveLength(n + 1001);
    expect(rows[0]).toEqual({ span: spans[0], depth: 0 });
    for (let i = 1; i < n; i++) {
      if (rows[i].span.span_id !== `s${i}` || rows[i].depth !== 1) throw new Error(`row ${i} is ${rows[i].span.span_id}@${rows[i].depth}, not s${i}@1`);
    }
    expect(rows[n]).toEqual({ span: spans[n], depth: 0 });
    expect(rows.slice(n + 1).map((r) => `${r.span.span_id}@${r.depth}`)).toEqual(Array.from({ length: 1000 }, (_, i) => `o${i}@1`));
  });
});

describe('spans read later on a run page following a run', () => {
  const at = (span_id: string, start_ms?: number, parent_id?: string): Span => ({ ...span(span_id, parent_id), start_ms }) as Span;
  const ids = (spans: Span[]) => spans.map((s) => s.span_id);

  it('puts each where the API lists it: by start, after those listed that started at the same time, those without a start last', () => {
    const listed = [at('a', 10), at('b', 20), at('c', 20), at('x')];
    const later = [at('late-b', 20), at('root', 0), at('d', 30), at('none'), at('first-of-two', 25), at('second-of-two', 25)];
    expect(ids(mergeSpans(listed, later))).toEqual(['root', 'a', 'b', 'c', 'late-b', 'first-of-two', 'second-of-two', 'd', 'x', 'none']);
  });

  it('replaces a span listed already where it is, the last copy winning, and gives the list itself when nothing came', () => {
    const listed = [at('a', 10), at('b', 20)];
    expect(mergeSpans(listed, [])).toBe(listed);
    const merged = mergeSpans(listed, [{ ...at('a', 10), name: 'old' }, { ...at('a', 10), name: 'new' }]);
    expect(merged.map((s) => `${s.span_id}:${s.name}`)).toEqual(['a:new', 'b:b']);
    expect(ids(listed)).toEqual(['a', 'b']);
    expect(listed[0].name).toBe('a');
  });

  it('keeps a tree: a parent read after its children puts them under it', () => {
    const listed = [at('c1', 5, 'root'), at('c2', 6, 'root')];
    expect(shape(mergeSpans(listed, [at('root', 0)]))).toEqual(['root@0', 'c1@1', 'c2@1']);
  });

  it('merges a few spans into 50,000, each in its place', () => {
    const listed = Array.from({ length: 50_000 }, (_, i) => at(`s${i}`, i));
    const merged = mergeSpans(listed, [at('mid', 25_000.5), at('end', 60_000)]);
    expect(merged).toHaveLength(50_002);
    expect([merged[25_001].span_id, merged[50_001].span_id]).toEqual(['mid', 'end']);
  });
});
