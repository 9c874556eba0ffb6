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

/**
 * What each process of a deployment tells the others about itself for a while, by name (the
 * checks a rule engine disabled for a slow pattern, which the api lists): one entry a process
 * (`member`), replaced at each put and gone once its time is up, so a process that died without
 * removing its entry drops out on its own. Redis in the distributed deployment; absent where
 * there is one process (embedded), which knows its own state.
 *
 * Like a cache it never fails its caller: a write that cannot reach the store is given up (the
 * next put says the same again), and a read that cannot is undefined, not an empty list.
 */
export interface SharedBoard {
  /** This process's entry, `value`, for `ttlMs` from now. */
  put(member: string, value: string, ttlMs: number): Promise<void>;
  /** Takes `member`'s entry off (a process stopping). */
  remove(member: string): Promise<void>;
  /** Every entry whose time is not up, in no set order; undefined when the store cannot be read. */
  entries(): Promise<string[] | undefined>;
}
