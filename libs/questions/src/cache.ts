/**
 * Answers to identical questions (the seed's cost control: "identical questions are answered
 * from a cache"): the same question about the same evidence, asked of the same model. Bounded
 * by entries and by age, least recently used out first.
 */
export class AnswerCache<V> {
  private readonly map = new Map<string, { value: V; at: number }>();
  hits = 0;
  misses = 0;

  constructor(
    private readonly max = 10_000,
    private readonly ttlMs = 15 * 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  get(key: string): V | undefined {
    const e = this.map.get(key);
    if (!e || this.now() - e.at > this.ttlMs) {
      if (e) this.map.delete(key);
      this.misses++;
      return undefined;
    }
    // Re-insert: a Map iterates in insertion order, so the first key is the least recently used.
    this.map.delete(key);
    this.map.set(key, e);
    this.hits++;
    return e.value;
  }

  set(key: string, value: V): void {
    if (this.max <= 0) return;
    this.map.delete(key);
    this.map.set(key, { value, at: this.now() });
    while (this.map.size > this.max) this.map.delete(this.map.keys().next().value as string);
  }

  get size(): number {
    return this.map.size;
  }
}
