/**
 * What a bounded cache of the question service lets go: its least recently used entries, of
 * those it may let go (the classifier's models and the agreement records only once they are
 * in the database). Entries carry the tick of their last use, set in place: moving an entry to
 * the end of a Map on every use rebuilds its table every few hundred uses, on the path that
 * answers questions; sorting happens only when a cache is over its bound.
 */
export function leastRecentlyUsed<K>(entries: Iterable<readonly [K, number]>, count: number, evictable: (key: K) => boolean): K[] {
  if (count <= 0) return [];
  const candidates: (readonly [K, number])[] = [];
  for (const e of entries) if (evictable(e[0])) candidates.push(e);
  candidates.sort((a, b) => a[1] - b[1]);
  return candidates.slice(0, count).map((e) => e[0]);
}

/**
 * How far under its bound a cache trims once it is over: a tenth below, so that trimming (a
 * sort of what it holds) happens once per many new entries, not for each.
 */
export function trimTarget(max: number): number {
  return max - Math.floor(max / 10);
}
