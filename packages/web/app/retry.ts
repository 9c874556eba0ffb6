import { useEffect, useRef, useState } from 'react';
import { retryDelay } from './load';

/**
 * For a page that reads by itself in its own effect (not useLoad) and reads again after a
 * failure that will pass (load.ts passing): `tick`, to put in that effect's deps, and `later()`,
 * to call on such a failure, which moves `tick` on after retryDelay(n) for the n-th time in a
 * row. `deps` are what the page reads (the session, the run): when they change the count starts
 * again at 0 and a read still waiting is dropped, with no render of its own, so the page's effect
 * reads once for the new deps (as useLoad does).
 */
export function useRetryAfter503(deps: unknown[]): { tick: number; later(): void } {
  const [tick, setTick] = useState(0);
  const retries = useRef(0);
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  // Before the page's effect (declared after this hook): a new session or run starts at 0.
  useEffect(() => {
    retries.current = 0;
  }, deps);
  // A read waiting is dropped when the page reads again or leaves.
  useEffect(() => () => clearTimeout(timer.current), [...deps, tick]);
  const later = useRef(() => {
    clearTimeout(timer.current);
    timer.current = setTimeout(() => setTick((t) => t + 1), retryDelay(retries.current++));
  }).current;
  return { tick, later };
}
