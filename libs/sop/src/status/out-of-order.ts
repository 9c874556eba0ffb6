/**
 * Which done steps are out of order: the fewest that explain the order of their first
 * evidence turns, i.e. the complement of a longest run that is non-decreasing in turn when
 * read by step index (two steps evidenced by the same turn are in order). Among equally few,
 * the steps done latest are marked: if step 2 came at turn 1 and step 1 at turn 4, step 1 was
 * done "after a later step", so it is the one out of order.
 *
 * "Latest first" means: going through the steps from the latest done (ties: the later step
 * first), each is marked if a longest run still exists without it and with every step kept so
 * far. That run is found directly, in O(n log n):
 *
 *   - f(i), the longest run ending at step i, for every step (patience sorting);
 *   - a longest run holds one step of each f from 1 to the longest, in step order; steps of the
 *     same f have turns that go down as their index goes up;
 *   - the greedy keeps, for the last f, the step of it with the highest index (its lowest turn,
 *     the one done earliest: a step done later is marked before it is weighed), and then, for
 *     each f below, the step of that f with the highest index below the one kept after it (it
 *     always fits: its turn is the lowest of those that come before).
 *
 * So the run kept is found by one pass from the last step back. out-of-order.spec checks it
 * against the greedy written out (O(n^3)) on random inputs.
 */
export interface Placed {
  index: number;
  turn: number;
}

export function outOfOrder(done: readonly Placed[]): Set<number> {
  const steps = [...done].sort((a, b) => a.index - b.index);
  const n = steps.length;
  // f[i]: the longest non-decreasing run (by turn) ending at steps[i]
  const f = new Array<number>(n);
  const tails: number[] = []; // tails[k]: the lowest last turn of a run of k + 1 steps
  for (let i = 0; i < n; i++) {
    const t = steps[i].turn;
    let lo = 0;
    let hi = tails.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (tails[mid] <= t) lo = mid + 1;
      else hi = mid;
    }
    tails[lo] = t;
    f[i] = lo + 1;
  }
  const marked = new Set<number>();
  let need = tails.length;
  for (let i = n - 1; i >= 0; i--) {
    if (need > 0 && f[i] === need) need--;
    else marked.add(steps[i].index);
  }
  return marked;
}
