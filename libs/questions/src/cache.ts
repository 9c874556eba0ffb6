import type { SharedCache } from '@neatroots/ports';

/** How long an answer is used for an identical question (NEATROOTS_QUESTION_CACHE_TTL_MS). */
export const DEFAULT_CACHE_TTL_MS = 15 * 60_000;

/**
 * Answers to identical questions (the seed's cost control: "identical questions are answered
 * from a cache"): the same question about the same evidence, asked of the same model. Bounded
 * by entries and by age, least recently used out first.
 */
export class AnswerCache<V> {
  private readonly map = new Map<string, { value: V; expires: number }>();
  hits = 0;
  misses = 0;

  constructor(
    private readonly max = 10_000,
    private readonly ttlMs = DEFAULT_CACHE_TTL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  get(key: string): V | undefined {
    const e = this.map.get(key);
    if (!e || this.now() > e.expires) {
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

  /** Kept for the time to live, or until `expires` (ms) when that comes first (a copy of an entry already kept elsewhere). */
  set(key: string, value: V, expires?: number): void {
    if (this.max <= 0) return;
    this.map.delete(key);
    const end = this.now() + this.ttlMs;
    this.map.set(key, { value, expires: expires === undefined ? end : Math.min(end, expires) });
    while (this.map.size > this.max) this.map.delete(this.map.keys().next().value as string);
  }

  get size(): number {
    return this.map.size;
  }
}

/**
 * An entry as the shared cache holds it: the value with its expiry (ms since the epoch), so
 * that a process copying it to its memory keeps it only until then.
 */
interface SharedEntry {
  neatroots_cached: 1;
  expires_ms: number;
  value: unknown;
}

function sharedEntry(v: unknown): SharedEntry | undefined {
  const e = v as SharedEntry;
  return e && typeof e === 'object' && e.neatroots_cached === 1 && typeof e.expires_ms === 'number' && 'value' in e ? e : undefined;
}

/** Where a cached answer came from: this process's memory, the deployment's shared cache, or nowhere (the model is asked). */
export type CacheResult = 'memory' | 'shared' | 'miss';

/**
 * An AnswerCache in this process in front of the deployment's shared cache (Redis distributed,
 * the database embedded): a miss here is looked up there, and what a model answers is kept in
 * both. So a replica, or this service started again after a crash (the batch it had in hand,
 * never marked done, delivered again), is answered without asking the model a second time.
 * What comes back from the shared cache is read with `read` (another version may have written
 * it): anything it refuses is a miss. A shared entry carries its expiry, and its copy in this
 * process's memory expires with it: an answer is never used past its time to live from the
 * moment the model gave it.
 */
export class TieredCache<V> {
  constructor(
    private readonly local: AnswerCache<V>,
    private readonly shared: SharedCache | undefined,
    private readonly ttlMs: number,
    private readonly read: (v: unknown) => V | undefined,
    private readonly onLookup?: (result: CacheResult) => void,
    /** The clock of the expiry written with a shared entry (the local cache's). */
    private readonly now: () => number = Date.now,
  ) {}

  async get(key: string): Promise<V | undefined> {
    const hit = this.local.get(key);
    if (hit !== undefined) return this.found('memory', hit);
    const text = this.shared ? await this.shared.get(key) : undefined;
    if (text !== undefined) {
      let v: V | undefined;
      let expires = -Infinity;
      try {
        const entry = sharedEntry(JSON.parse(text));
        if (entry) {
          expires = entry.expires_ms;
          v = this.read(entry.value);
        }
      } catch {
        v = undefined;
      }
      if (v !== undefined && expires >= this.now()) {
        // Copied here until the shared entry expires, not for a time to live of its own.
        this.local.set(key, v, expires);
        return this.found('shared', v);
      }
    }
    this.onLookup?.('miss');
    return undefined;
  }

  private found(result: CacheResult, v: V): V {
    this.onLookup?.(result);
    return v;
  }

  /** Kept here at once; resolves once the shared cache has it too (or gave the write up). */
  async set(key: string, v: V): Promise<void> {
    const expires = this.now() + this.ttlMs;
    this.local.set(key, v, expires);
    if (this.shared) await this.shared.set(key, JSON.stringify({ neatroots_cached: 1, expires_ms: expires, value: v } satisfies SharedEntry), this.ttlMs);
  }
}
