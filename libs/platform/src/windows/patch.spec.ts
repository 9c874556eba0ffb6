import fc from 'fast-check';
import { applyEdits, copyJson, diffInto, type Edit, JOURNALED, shiftInto } from './patch';

type Obj = Record<string, unknown>;

/** What the journal would read back: the edits through JSON, applied to the window as last journaled. */
function replayed(before: Obj, edits: Edit[]): Obj {
  const w = JSON.parse(JSON.stringify(before)) as Obj;
  applyEdits(w, JSON.parse(JSON.stringify(edits)) as Edit[]);
  return w;
}

const json = (v: unknown) => JSON.parse(JSON.stringify(v)) as unknown;

describe('window edits', () => {
  it('turn any JSON window into the next one, save after save, through JSON', () => {
    const value = fc.letrec((tie) => ({
      v: fc.oneof({ depthSize: 'small' }, fc.integer(), fc.string(), fc.boolean(), fc.constant(null), tie('arr'), tie('obj')),
      arr: fc.array(tie('v'), { maxLength: 5 }),
      obj: fc.dictionary(fc.oneof(fc.string({ maxLength: 3 }), fc.constantFrom('__proto__', 'constructor', 'toString')), tie('v'), { maxKeys: 5 }),
    }));
    fc.assert(
      fc.property(fc.array(value.obj as fc.Arbitrary<Obj>, { minLength: 2, maxLength: 6 }), (versions) => {
        const journaled = copyJson(versions[0]);
        let onDisk = json(versions[0]) as Obj;
        for (const next of versions.slice(1)) {
          const edits: Edit[] = [];
          diffInto(journaled, next, edits);
          onDisk = replayed(onDisk, edits);
          expect(onDisk).toEqual(json(next));
          expect(json(journaled)).toEqual(json(next));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('write a ring that moved as its new items only, and a set of ids that grew as the new ids', () => {
    const ring = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => ({ id: `s${from + i}`, text: 'x'.repeat(200) }));
    const seen = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`span-${i}`, 1]));
    const journaled = copyJson({ ring: ring(0, 40), seen: seen(500), n: 1 });
    const edits: Edit[] = [];
    diffInto(journaled, { ring: ring(2, 42), seen: seen(501), n: 2 }, edits);
    expect(edits).toEqual([{ p: ['ring'], s: 2, a: ring(40, 42) }, { p: ['seen', 'span-500'], v: 1 }, { p: ['n'], v: 2 }]);
    // an item changed inside the ring: the ring is written whole
    const changed = ring(2, 42);
    changed[5].text = 'changed';
    const again: Edit[] = [];
    diffInto(journaled, { ring: changed, seen: seen(501), n: 2 }, again);
    expect(again).toEqual([{ p: ['ring'], v: changed }]);
  });

  it('write nothing for a list still empty, and the list whole once it empties or fills', () => {
    const journaled = copyJson({ checks: { streak: { n: 0, spans: [] as string[] }, pending: [] as string[] } });
    const none: Edit[] = [];
    // new empty arrays, as a step makes them: not a change
    diffInto(journaled, { checks: { streak: { n: 0, spans: [] }, pending: [] } }, none);
    expect(none).toEqual([]);
    const filled: Edit[] = [];
    diffInto(journaled, { checks: { streak: { n: 1, spans: ['s1'] }, pending: [] } }, filled);
    expect(filled).toEqual([{ p: ['checks', 'streak', 'n'], v: 1 }, { p: ['checks', 'streak', 'spans'], s: 0, a: ['s1'] }]);
    const emptied: Edit[] = [];
    diffInto(journaled, { checks: { streak: { n: 0, spans: [] }, pending: [] } }, emptied);
    expect(emptied).toEqual([{ p: ['checks', 'streak', 'n'], v: 0 }, { p: ['checks', 'streak', 'spans'], v: [] }]);
    expect(replayed({ checks: { streak: { n: 1, spans: ['s1'] }, pending: [] } }, emptied)).toEqual({ checks: { streak: { n: 0, spans: [] }, pending: [] } });
  });

  it('write a ring its caller says was only shifted as that shift, without comparing its items, and keep the copy in step', () => {
    const ring = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => ({ id: `s${from + i}` }));
    const journaled = copyJson({ ring: ring(0, 4), n: 1 });
    const before = json(journaled) as Obj;
    const edits: Edit[] = [];
    expect(shiftInto(journaled, 'ring', ring(1, 6), 1, 2, edits)).toBe(true);
    expect(edits).toEqual([{ p: ['ring'], s: 1, a: ring(4, 6) }]);
    expect(journaled.ring).toEqual(ring(1, 6));
    // the rest compared as before, the ring passed over
    diffInto(journaled, { ring: ring(1, 6), n: 2 }, edits, [], new Map([['ring', JOURNALED]]));
    expect(edits.slice(1)).toEqual([{ p: ['n'], v: 2 }]);
    expect(replayed(before, edits)).toEqual({ ring: ring(1, 6), n: 2 });
    // every item the copy held dropped (more appended in a step than the ring holds): written whole
    const whole: Edit[] = [];
    expect(shiftInto(journaled, 'ring', ring(10, 13), 10, 8, whole)).toBe(true);
    expect(whole).toEqual([{ p: ['ring'], v: ring(10, 13) }]);
    expect(journaled.ring).toEqual(ring(10, 13));
    // counts that do not fit the lengths: nothing written, the caller compares
    const none: Edit[] = [];
    expect(shiftInto(journaled, 'ring', ring(11, 14), 0, 1, none)).toBe(false);
    expect(shiftInto(journaled, 'n', [1], 0, 1, none)).toBe(false);
    expect(none).toEqual([]);
    // appended and dropped again in one step, more than the copy held: an empty ring, no holes
    const emptied: Edit[] = [];
    const empty = copyJson({ ring: [] as unknown[] });
    expect(shiftInto(empty, 'ring', [], 1, 1, emptied)).toBe(true);
    expect(emptied).toEqual([{ p: ['ring'], s: 1, a: [] }]);
    expect(json(emptied)).toEqual([{ p: ['ring'], s: 1, a: [] }]);
    expect(empty.ring).toEqual([]);
    expect(replayed({ ring: [] }, emptied)).toEqual({ ring: [] });
  });

  it('read keys a step layered over the stored object (Object.create), which JSON.stringify would drop', () => {
    const stored = { seen: { a: 1 } as Obj };
    const journaled = copyJson(stored);
    const step = { seen: Object.create(stored.seen) as Obj };
    step.seen.b = 1;
    const edits: Edit[] = [];
    diffInto(journaled, step, edits);
    expect(edits).toEqual([{ p: ['seen', 'b'], v: 1 }]);
    expect(copyJson(step)).toEqual({ seen: { a: 1, b: 1 } });
  });
  it('copy an array as JSON reads it (undefined as null, a hole kept a hole), and a shift\'s new items as copies', () => {
    // eslint-disable-next-line no-sparse-arrays
    const arr = [1, undefined, , { a: [2] }] as unknown[];
    const copy = copyJson(arr);
    expect(copy).toHaveLength(4);
    expect(copy[1]).toBeNull();
    expect(2 in copy).toBe(false);
    expect(copy[3]).toEqual({ a: [2] });
    expect(copy[3]).not.toBe(arr[3]);
    expect(JSON.stringify(copy)).toBe(JSON.stringify(arr));
    // a ring that moved by one: the edit holds a copy of the new item, the path its own array
    const journaled = copyJson({ ring: [{ id: 1 }, { id: 2 }], sub: { ring: [1, 2] } }) as Obj;
    const item = { id: 3, tags: ['x'] };
    const next = { ring: [{ id: 2 }, item], sub: { ring: [2, 3] } };
    const edits: Edit[] = [];
    diffInto(journaled, next, edits);
    expect(json(edits)).toEqual([{ p: ['ring'], s: 1, a: [{ id: 3, tags: ['x'] }] }, { p: ['sub', 'ring'], s: 1, a: [3] }]);
    const shifted = edits[0] as { a: unknown[] };
    expect(shifted.a[0]).not.toBe(item);
    item.tags.push('y');
    expect(journaled.ring).toEqual([{ id: 2 }, { id: 3, tags: ['x'] }]);
    expect(edits[1].p).not.toBe(edits[0].p);
  });
});
