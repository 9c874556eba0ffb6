/**
 * Loads each key from a store once, also when many callers ask at the same time. Without it,
 * every caller that asked while the first load was still waiting for the database sent its
 * own: the question scheduler asks before every batch it answers, and with the database busy
 * storing spans (the embedded default's one connection) one key was loaded up to 100 times over
 * 20,000 spans, each load holding the connection the span write waits for.
 */
export class LoadOnce {
  private readonly loaded = new Set<string>();
  private readonly loading = new Map<string, Promise<void>>();

  /**
   * Resolves once every key in `keys` was loaded: by `load`, called with the keys neither
   * loaded nor being loaded, or by a load already under way. A failed load is tried again by
   * the next call.
   */
  async ready(keys: readonly string[], load: (todo: string[]) => Promise<void>): Promise<void> {
    const wanted = [...new Set(keys)].filter((k) => !this.loaded.has(k));
    if (!wanted.length) return;
    const todo = wanted.filter((k) => !this.loading.has(k));
    if (todo.length) {
      const p = load(todo).then(
        () => {
          for (const k of todo) this.loaded.add(k);
        },
      ).finally(() => {
        for (const k of todo) this.loading.delete(k);
      });
      for (const k of todo) this.loading.set(k, p);
    }
    await Promise.all(new Set(wanted.map((k) => this.loading.get(k)).filter((p) => p !== undefined)));
  }
}
