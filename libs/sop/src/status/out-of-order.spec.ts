import { outOfOrder } from './out-of-order';

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
});
