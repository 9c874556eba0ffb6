/**
 * The same error again and again (a consumer retrying a batch while a dependency is down or the
 * disk is full: every try fails alike, several times a second) is logged once, then at most once
 * every `everyMs` with how many times it came meanwhile. Keys are the caller's (where and what).
 */
export class RepeatedErrors {
  private readonly seen = new Map<string, { at: number; quiet: number }>();

  constructor(
    private readonly everyMs = 30_000,
    private readonly maxKeys = 1_000,
  ) {}

  /**
   * Whether to log this one now: undefined to keep quiet, else how many alike were kept quiet
   * since the last one logged (0 for the first).
   */
  pass(key: string, now = Date.now()): number | undefined {
    const s = this.seen.get(key);
    if (s && now - s.at < this.everyMs) {
      s.quiet++;
      return undefined;
    }
    // Errors that vary without end (ids in them) must not grow this without bound.
    if (!s && this.seen.size >= this.maxKeys) this.seen.clear();
    const quiet = s?.quiet ?? 0;
    this.seen.set(key, { at: now, quiet: 0 });
    return quiet;
  }

  /**
   * For `err` at `where` (a consumer, a step): undefined to keep quiet, else what to add to the
   * line logged (pass and suffix in one; the error's message is part of the key).
   */
  quieted(where: string, err: unknown, now = Date.now()): string | undefined {
    const quiet = this.pass(`${where}: ${(err as Error)?.message ?? String(err)}`, now);
    return quiet === undefined ? undefined : RepeatedErrors.suffix(quiet);
  }

  /** What to add to the line logged: how many alike were not. */
  static suffix(quiet: number): string {
    return quiet ? ` (${quiet} more alike since the last such line, not logged)` : '';
  }
}
