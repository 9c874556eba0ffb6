import { leastRecentlyUsed, trimTarget } from './lru';

/**
 * Loads each key from a store once, also when many callers ask at the same time. Without it,
 * every caller that asked while the first load was still waiting for the database sent its
 * own: the question scheduler asks before every batch it answers, and with the database busy
 * storing spans (the embedded default's one connection) one key was loaded up to 100 times over
 * 20,000 spans, each load holding the connection the span write waits for.
 *
 * Bounded: it remembers at most `max` keys as loaded, and lets the least recently asked go
 * first; its owner also makes it forget a key whose entry it let go (`forget`). A key forgotten
 * is loaded again when next asked for: one more load, never a wrong answer (the owners keep
 * what they hold over what a load brings).
 */
export const DEFAULT_LOADED_KEYS = 10_000;

export class LoadOnce {
  /** The keys loaded, with the tick of their last ask. */
  private readonly loaded = new Map<string, number>();
  private readonly loading = new Map<string, Promise<void>>();
  private tick = 0;

  constructor(private readonly max = DEFAULT_LOADED_KEYS) {}

  /**
   * Resolves once every key in `keys` was loaded: by `load`, called with the keys neither
   * loaded nor being loaded, or by a load already under way. A failed load is tried again by
   * the next call.
   */
  async ready(keys: readonly string[], load: (todo: string[]) => Promise<void>): Promise<void> {
    const wanted = [...new Set(keys)].filter((k) => !this.touch(k));
    if (!wanted.length) return;
    const todo = wanted.filter((k) => !this.loading.has(k));
    if (todo.length) {
      const p = load(todo).then(
        () => {
          for (const k of todo) this.loaded.set(k, ++this.tick);
          this.trim();
        },
      ).finally(() => {
        for (const k of todo) this.loading.delete(k);
      });
      for (const k of todo) this.loading.set(k, p);
    }
    await Promise.all(new Set(wanted.map((k) => this.loading.get(k)).filter((p) => p !== undefined)));
  }

  /** Whether the key was loaded (and is still remembered as loaded). */
  has(key: string): boolean {
    return this.loaded.has(key);
  }

  /**
   * ready([key]) of a key loaded already, at once: marks it used and says true; false (and
   * nothing done) when it is not loaded (ready loads it, or waits for its load).
   */
  touchLoaded(key: string): boolean {
    return this.touch(key);
  }

  /** The key is to be loaded again when next asked for (its owner let its entry go). */
  forget(key: string): void {
    this.loaded.delete(key);
  }

  /** How many keys it remembers as loaded. */
  get size(): number {
    return this.loaded.size;
  }

  /** Whether the key is loaded; if so it becomes the most recently asked. */
  private touch(key: string): boolean {
    if (!this.loaded.has(key)) return false;
    this.loaded.set(key, ++this.tick);
    return true;
  }

  private trim(): void {
    if (this.loaded.size <= this.max) return;
    for (const k of leastRecentlyUsed(this.loaded, this.loaded.size - trimTarget(this.max), () => true)) this.loaded.delete(k);
  }
}
