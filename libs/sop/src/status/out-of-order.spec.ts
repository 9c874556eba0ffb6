import fc from 'fast-check';
import { outOfOrder, type Placed } from './out-of-order';

/** [index, turn] pairs of done steps -> the indexes marked out of order. */
const marked = (pairs: [number, number][]) => [...outOfOrder(pairs.map(([index, turn]) => ({ index, turn })))].sort((a, b) => a - b);

describe('outOfOrder: the fewest steps that explain the order of first evidence turns', () => {
  it.each<[string, [number, number][], number[]]>([
    ['all in order', [[1, 0], [2, 2], [3, 5]], []],
    ['same turn counts as in order', [[1, 3], [2, 3], [3, 4]], []],
    ['nothing done', [], []],
    ['one step done early', [[1, 1], [2, 6], [3, 3], [4, 4]], [2]],
    ['one step done late: the late one, not the two around it', [[1, 5], [2, 1], [3, 2]], [1]],
    ['two swapped: the one done latest', [[1, 2], [2, 1]], [1]],
    ['swapped with a tie in length: the latest-done of the candidates', [[1, 1], [2, 4], [3, 3]], [2]],
    ['reverse order keeps one: the earliest done', [[1, 9], [2, 7], [3, 5], [4, 3]], [1, 2, 3]],
    ['two independent swaps', [[1, 2], [2, 1], [3, 6], [4, 5]], [1, 3]],
    ['gaps in indexes (steps not done in between)', [[1, 1], [3, 8], [5, 4], [6, 9]], [3]],
  ])('%s', (_what, pairs, expected) => {
    expect(marked(pairs)).toEqual(expected);
  });

  it('marks as few as a longest in-order run leaves (brute force over small cases)', () => {
    for (let trial = 0; trial < 300; trial++) {
      const n = 1 + (trial % 7);
      const pairs: [number, number][] = Array.from({ length: n }, (_, i) => [i + 1, (trial * 7 + i * 13) % 5]);
      const got = marked(pairs);
      // brute force: the smallest removal leaving a non-decreasing sequence
      let best = n;
      for (let mask = 0; mask < 1 << n; mask++) {
        const kept = pairs.filter((_, i) => !(mask & (1 << i))).map(([, t]) => t);
        if (kept.every((t, i) => i === 0 || kept[i - 1] <= t)) best = Math.min(best, n - kept.length);
      }
      expect(got.length).toBe(best);
      const kept = pairs.filter(([i]) => !got.includes(i)).map(([, t]) => t);
      expect(kept.every((t, i) => i === 0 || kept[i - 1] <= t)).toBe(true);
    }
  });

  it('marks exactly what the greedy written out marks (random inputs: ties, gaps, any order given)', () => {
    const placed = fc
      .uniqueArray(fc.record({ index: fc.integer({ min: 1, max: 60 }), turn: fc.integer({ min: 0, max: 12 }) }), { selector: (p) => p.index, maxLength: 40 })
      .chain((ps) => fc.shuffledSubarray(ps, { minLength: ps.length, maxLength: ps.length }));
    fc.assert(
      fc.property(placed, (ps) => {
        expect([...outOfOrder(ps)].sort((a, b) => a - b)).toEqual([...greedyOutOfOrder(ps)].sort((a, b) => a - b));
      }),
      { numRuns: 3000 },
    );
  });

  it('reads each step a number of times that grows as n log n, not n^3 (the review process waits on it)', () => {
    // counted, not timed: every read of a step's index or turn
    const n = 400;
    let reads = 0;
    const ps = Array.from({ length: n }, (_, i) => {
      const index = i + 1;
      const turn = (i * 7919) % n;
      return {
        get index() {
          reads++;
          return index;
        },
        get turn() {
          reads++;
          return turn;
        },
      };
    });
    const marked = outOfOrder(ps);
    expect(marked.size).toBe(n - longestRun(Array.from({ length: n }, (_, i) => (i * 7919) % n)));
    expect(reads).toBeLessThan(20 * n * Math.log2(n));
  });

  it('handles thousands of steps (a procedure may have that many tool steps)', () => {
    // step i done at turn (i * 7919) % n: scrambled; the run kept is non-decreasing and as long as any
    const n = 3000;
    const ps = Array.from({ length: n }, (_, i) => ({ index: i + 1, turn: (i * 7919) % n }));
    const got = outOfOrder(ps);
    const kept = ps.filter((p) => !got.has(p.index)).map((p) => p.turn);
    expect(kept.every((t, i) => i === 0 || kept[i - 1] <= t)).toBe(true);
    expect(kept.length).toBe(longestRun(ps.map((p) => p.turn)));
  });
});

/** The greedy as first written (O(n^3)): the reference the fast one must match. */
function greedyOutOfOrder(done: readonly Placed[]): Set<number> {
  const steps = [...done].sort((a, b) => a.index - b.index);
  const best = longest(steps, new Set(), new Set());
  const marked = new Set<number>();
  const kept = new Set<number>();
  const byLatest = [...steps].sort((a, b) => b.turn - a.turn || b.index - a.index);
  for (const s of byLatest) {
    marked.add(s.index);
    if (longest(steps, marked, kept) < best) {
      marked.delete(s.index);
      kept.add(s.index);
    }
  }
  return marked;
}

function longest(steps: readonly Placed[], out: Set<number>, must: Set<number>): number {
  const n = steps.length;
  const len: number[] = new Array(n).fill(-Infinity);
  for (let i = 0; i < n; i++) {
    if (out.has(steps[i].index)) continue;
    if (!steps.slice(0, i).some((s) => must.has(s.index))) len[i] = 1;
    for (let j = i - 1; j >= 0; j--) {
      if (!out.has(steps[j].index) && steps[j].turn <= steps[i].turn && len[j] + 1 > len[i]) len[i] = len[j] + 1;
      if (must.has(steps[j].index)) break;
    }
  }
  let result = must.size ? -Infinity : 0;
  for (let i = n - 1; i >= 0; i--) {
    if (len[i] > result) result = len[i];
    if (must.has(steps[i].index)) break;
  }
  return result;
}

/** The length of a longest non-decreasing run, O(n^2). */
function longestRun(turns: number[]): number {
  const len = turns.map(() => 1);
  for (let i = 0; i < turns.length; i++) for (let j = 0; j < i; j++) if (turns[j] <= turns[i]) len[i] = Math.max(len[i], len[j] + 1);
  return Math.max(0, ...len);
}
