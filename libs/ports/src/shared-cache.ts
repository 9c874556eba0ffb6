/**
 * Values the processes of a deployment share for a while: the question service's answers, so
 * that a replica, or the same service after a crash, does not ask a model again what another
 * one has just been answered. Redis in the distributed deployment; the embedded default's own
 * database (one process: what it keeps there outlives a crash or a restart).
 *
 * A cache never fails its caller: an unreachable store reads as a miss and drops a write (the
 * driver reports the outage on its own).
 */
export interface SharedCache {
  /** The value stored under `key` and not expired, else undefined. */
  get(key: string): Promise<string | undefined>;
  /** Stores `value` under `key` for `ttlMs`; resolves once stored, or once the write was given up. */
  set(key: string, value: string, ttlMs: number): Promise<void>;
}
