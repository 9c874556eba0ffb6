import { useCallback, useEffect, useState } from 'react';
import { ApiFailure } from './api';
import { shown } from './format';

/** Loads with `fn` whenever `deps` change: the value, the failure in words, and a reload. */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[]): { data: T | null; error: string | null; loading: boolean; reload(): void } {
  const [state, setState] = useState<{ data: T | null; error: string | null; loading: boolean }>({ data: null, error: null, loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true, error: null }));
    fn().then(
      (data) => live && setState({ data, error: null, loading: false }),
      (err: unknown) => live && setState({ data: null, error: failure(err), loading: false }),
    );
    return () => {
      live = false;
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
