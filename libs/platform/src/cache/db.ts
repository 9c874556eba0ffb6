import type { Queryable, SharedCache } from '@neatroots/ports';
import { cacheDigest } from './digest';

export interface DbSharedCacheOptions {
  /** The database the `shared_cache` table is in (migration 0019): PGlite in the embedded default. */
  db: Queryable;
  /** The clock the expiry is written and read with (ms). Default Date.now. */
  now?: () => number;
  /** Rows past their expiry are deleted at most this often, after a write. Default one minute. */
  pruneEveryMs?: number;
  /** A failed statement, at most once a minute. Default: console.error. */
  onError?: (err: unknown) => void;
}

interface Pending<T> {
  keys: Map<string, T[]>;
  scheduled: boolean;
}

/**
 * The deployment's shared cache in its own database (SharedCache): the embedded default's, so
 * that the process started again after a crash, or after a restart within the answers' time to
 * live, is answered from what the model had already said. Rows carry their expiry and are read
 * only before it; the expired are deleted after a write, at most once a `pruneEveryMs`.
 *
 * Lookups and writes made in the same turn of the event loop go to the database as one
 * statement each (a batch of questions looks its answers up together): PGlite runs one
 * statement at a time on its thread, behind the spans being stored. A failed statement reads
 * as misses and drops the writes; it is reported, never thrown.
 */
export class DbSharedCache {
  private readonly now: () => number;
  private readonly onError: (err: unknown) => void;
  private lastReported = 0;
  private lastPruned: number;
  private readonly reads = new Map<string, Pending<(v: string | undefined) => void>>();
  private readonly writes = new Map<string, Pending<{ value: string; expires: number; done: () => void }>>();

  constructor(private readonly opts: DbSharedCacheOptions) {
    this.now = opts.now ?? Date.now;
    this.onError = opts.onError ?? ((err) => console.error('shared cache: database:', (err as Error)?.message ?? err));
    this.lastPruned = this.now();
  }

  /** A view of the cache whose keys are kept apart under `name`. */
  named(name: string): SharedCache {
    return {
      get: (k) =>
        new Promise<string | undefined>((resolve) => {
          this.queue(this.reads, name, cacheDigest(k), resolve, () => this.flushReads(name));
        }),
      set: (k, value, ttlMs) =>
        !(ttlMs > 0)
          ? Promise.resolve()
          : new Promise<void>((done) => {
              this.queue(this.writes, name, cacheDigest(k), { value, expires: this.now() + Math.ceil(ttlMs), done }, () => this.flushWrites(name));
            }),
    };
  }

  private queue<T>(all: Map<string, Pending<T>>, name: string, key: string, item: T, flush: () => Promise<void>): void {
    let p = all.get(name);
    if (!p) all.set(name, (p = { keys: new Map(), scheduled: false }));
    const waiting = p.keys.get(key);
    if (waiting) waiting.push(item);
    else p.keys.set(key, [item]);
    if (!p.scheduled) {
      p.scheduled = true;
      setImmediate(() => void flush());
    }
  }

  private take<T>(all: Map<string, Pending<T>>, name: string): Map<string, T[]> {
    const p = all.get(name)!;
    const keys = p.keys;
    p.keys = new Map();
    p.scheduled = false;
    return keys;
  }

  private async flushReads(name: string): Promise<void> {
    const waiting = this.take(this.reads, name);
    let found = new Map<string, string>();
    try {
      const r = await this.opts.db.query<{ key: string; value: string }>(
        'SELECT key, value FROM shared_cache WHERE name = $1 AND key = ANY($2::text[]) AND expires_at > $3',
        [name, [...waiting.keys()], this.now()],
      );
      found = new Map(r.rows.map((row) => [row.key, row.value]));
    } catch (err) {
      this.failed(err);
    }
    for (const [key, resolves] of waiting) for (const resolve of resolves) resolve(found.get(key));
  }

  private async flushWrites(name: string): Promise<void> {
    const waiting = this.take(this.writes, name);
    const keys: string[] = [];
    const values: string[] = [];
    const expires: number[] = [];
    for (const [key, items] of waiting) {
      const last = items[items.length - 1];
      keys.push(key);
      values.push(last.value);
      expires.push(last.expires);
    }
    try {
      await this.opts.db.query(
        `INSERT INTO shared_cache (name, key, value, expires_at)
         SELECT $1, k, v, e FROM unnest($2::text[], $3::text[], $4::bigint[]) AS t(k, v, e)
         ON CONFLICT (name, key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at`,
        [name, keys, values, expires],
      );
    } catch (err) {
      this.failed(err);
    }
    for (const items of waiting.values()) for (const item of items) item.done();
    const now = this.now();
    if (now - this.lastPruned >= (this.opts.pruneEveryMs ?? 60_000)) {
      this.lastPruned = now;
      await this.opts.db.query('DELETE FROM shared_cache WHERE expires_at <= $1', [now]).catch((err: unknown) => this.failed(err));
    }
  }

  private failed(err: unknown): void {
    if (Date.now() - this.lastReported < 60_000) return;
    this.lastReported = Date.now();
    this.onError(err);
  }
}
