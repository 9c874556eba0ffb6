import { useCallback, useEffect, useRef, useState } from 'react';
import { ApiFailure } from './api';
import { shown } from './format';

/**
 * A failure the API says will pass (503: the review service of the distributed deployment
 * restarting or away a moment, "retry shortly"): the page reads again by itself after
 * retryDelay(n) for its n-th attempt (2 s, doubling up to 30 s) and says so meanwhile.
 */
export function passing(err: unknown): boolean {
  return err instanceof ApiFailure && err.status === 503;
}
export function retryDelay(attempt: number): number {
  return Math.min(30_000, 2_000 * 2 ** Math.min(attempt, 4));
}
/** What a page says of a failure it will read again after: the failure, and that it tries again. */
export function retrying(err: unknown): string {
  return `${failure(err)}; trying again`;
}

/**
 * Loads with `fn` whenever `deps` change: the value, the failure in words, and a reload. A
 * failure that will pass (passing) is read again by itself, the error saying so, until it loads.
 */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[]): { data: T | null; error: string | null; loading: boolean; reload(): void } {
  const [state, setState] = useState<{ data: T | null; error: string | null; loading: boolean }>({ data: null, error: null, loading: true });
  const [tick, setTick] = useState(0);
  /** Reads again after a failure that will pass, in a row (0 once one loads or deps change). */
  const retries = useRef(0);
  const depsKey = useRef<unknown[]>(deps);
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    if (deps.length !== depsKey.current.length || deps.some((d, i) => !Object.is(d, depsKey.current[i]))) retries.current = 0;
    depsKey.current = deps;
    setState((s) => ({ ...s, loading: true, error: null }));
    fn().then(
      (data) => {
        if (!live) return;
        retries.current = 0;
        setState({ data, error: null, loading: false });
      },
      (err: unknown) => {
        if (!live) return;
        if (!passing(err)) return setState({ data: null, error: failure(err), loading: false });
        setState({ data: null, error: retrying(err), loading: false });
        timer = setTimeout(() => setTick((t) => t + 1), retryDelay(retries.current++));
      },
    );
    return () => {
      live = false;
      clearTimeout(timer);
    };
    // `fn` is a new closure each render: the caller's deps say when to load again.
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

/** A failure in words, as the pages say it: the API's message names ids as they were sent, bidi controls shown (format.ts). */
export function failure(err: unknown): string {
  return shown(err instanceof ApiFailure ? `${err.message} (${err.status || 'no answer'})` : String((err as Error)?.message ?? err));
}
