import { useCallback, useEffect, useRef, useState } from 'react';
import { ApiFailure } from './api';
import { shown } from './format';

/**
 * A failure that will pass: a 503 (the review service of the distributed deployment restarting
 * or away a moment, `unavailable` with Retry-After; or a proxy in front of the api, an ingress
 * while the api's pod restarts, whose 503 has no body of ours): the page reads again by itself
 * after retryDelay(n) for its n-th attempt (2 s, doubling up to 30 s) and says so meanwhile. Not
 * the api's own `not_served` (a part this api is not set up to serve, with no Retry-After):
 * asking again gets the same, so the page says it once.
 */
export function passing(err: unknown): boolean {
  return err instanceof ApiFailure && err.status === 503 && err.code !== 'not_served';
}
export function retryDelay(attempt: number): number {
  return Math.min(30_000, 2_000 * 2 ** Math.min(attempt, 4));
}
/** What a page says of a failure it will read again after: the failure, and that it tries again. */
export function retrying(err: unknown): string {
  return `${failure(err)}; trying again`;
}

/**
 * For a page that reads by itself and reads again after a failure that will pass (passing):
 * `tick`, to put in the reading effect's deps, `later()`, to call on such a failure, which moves
 * `tick` on after retryDelay(n) for the n-th time in a row, `ok()`, to call once a read
 * succeeds (the count starts again), and `cancel()`, which drops a read still waiting. `deps` are what the page reads (the session, the run): when
 * they change the count starts again at 0 and a read still waiting is dropped, with no render of
 * its own, so the page's effect reads once for the new deps. Declare it before that effect.
 */
export function useRetryAfter503(deps: unknown[]): { tick: number; later(): void; ok(): void; cancel(): void } {
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
  const ok = useRef(() => {
    retries.current = 0;
  }).current;
  const cancel = useRef(() => clearTimeout(timer.current)).current;
  return { tick, later, ok, cancel };
}

/**
 * Loads with `fn` whenever `deps` change: the value, the failure in words, and a reload. A
 * failure that will pass (passing) is read again by itself, the error saying so, until it loads.
 */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[]): { data: T | null; error: string | null; loading: boolean; reload(): void } {
  const [state, setState] = useState<{ data: T | null; error: string | null; loading: boolean }>({ data: null, error: null, loading: true });
  const [tick, setTick] = useState(0);
  const retry = useRetryAfter503(deps);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true, error: null }));
    fn().then(
      (data) => {
        if (!live) return;
        retry.ok();
        setState({ data, error: null, loading: false });
      },
      (err: unknown) => {
        if (!live) return;
        if (!passing(err)) return setState({ data: null, error: failure(err), loading: false });
        setState({ data: null, error: retrying(err), loading: false });
        retry.later();
      },
    );
    return () => {
      live = false;
      // a reload, or new deps: a read again still waiting is not needed
      retry.cancel();
    };
    // `fn` is a new closure each render: the caller's deps say when to load again.
  }, [...deps, tick, retry.tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

/** A failure in words, as the pages say it: the API's message names ids as they were sent, bidi controls shown (format.ts). */
export function failure(err: unknown): string {
  return shown(err instanceof ApiFailure ? `${err.message} (${err.status || 'no answer'})` : String((err as Error)?.message ?? err));
}
