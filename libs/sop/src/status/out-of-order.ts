/**
 * Which done steps are out of order: the fewest that explain the order of their first
 * evidence turns, i.e. the complement of a longest run that is non-decreasing in turn when
 * read by step index (two steps evidenced by the same turn are in order). Among equally few,
 * the steps done latest are marked: if step 2 came at turn 1 and step 1 at turn 4, step 1 was
 * done "after a later step", so it is the one out of order.
 *
 * Greedy from the latest-done step: mark it if a longest run still exists without it (and
 * with every step kept so far); otherwise it must be kept. n is a procedure's steps, so the
 * O(n^3) check is nothing.
 */
export interface Placed {
  index: number;
  turn: number;
}

export function outOfOrder(done: readonly Placed[]): Set<number> {
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

/** The longest non-decreasing run (by turn, in index order) avoiding `out` and containing every `must`. */
function longest(steps: readonly Placed[], out: Set<number>, must: Set<number>): number {
  const n = steps.length;
  const len: number[] = new Array(n).fill(-Infinity);
  for (let i = 0; i < n; i++) {
    if (out.has(steps[i].index)) continue;
    // may start here only if no required step comes before it
    if (!steps.slice(0, i).some((s) => must.has(s.index))) len[i] = 1;
    for (let j = i - 1; j >= 0; j--) {
      if (!out.has(steps[j].index) && steps[j].turn <= steps[i].turn && len[j] + 1 > len[i]) len[i] = len[j] + 1;
      if (must.has(steps[j].index)) break; // a required step cannot be jumped over
    }
  }
  let result = must.size ? -Infinity : 0;
  for (let i = n - 1; i >= 0; i--) {
    if (len[i] > result) result = len[i];
    if (must.has(steps[i].index)) break; // nor left out at the end
  }
  return result;
}
