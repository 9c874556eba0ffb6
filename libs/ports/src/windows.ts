/**
 * The window-store port: each run's rule-engine state (counters, streaks, last calls,
 * pending requires_before waits), kept outside the process so any replica can continue
 * a run where another stopped. Redis in the distributed deployment, memory embedded.
 * Values are plain JSON-serialisable objects owned by the rule engine.
 */
export interface WindowStore<W> {
  /** The windows of these runs (missing ones absent from the map). */
  load(keys: readonly string[]): Promise<Map<string, W>>;
  /** Writes each window atomically; `ttlMs` makes it expire that long after this write. */
  save(entries: readonly { key: string; window: W; ttlMs?: number }[]): Promise<void>;
  delete(keys: readonly string[]): Promise<void>;
  /** Asks to be woken for `key` at `atMs` (a requires_before wait). Later calls for the same key keep the earliest time. */
  wakeAt(entries: readonly { key: string; atMs: number }[]): Promise<void>;
  /** Keys whose wake time is at or before `nowMs`, removed from the schedule as they are returned. */
  takeDue(nowMs: number, limit: number): Promise<string[]>;
  close(): Promise<void>;
}
