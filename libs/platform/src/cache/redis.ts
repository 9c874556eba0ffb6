import type { SharedBoard, SharedCache } from '@neatroots/ports';
import { FailFastRedis } from '../redis-client';
import { cacheDigest } from './digest';

export interface RedisSharedCacheOptions {
  url: string;
  /** Keys are `<prefix>:cache:<name>:<sha1 of the key>` (the deployment's topic prefix keeps deployments apart). */
  prefix: string;
  /**
   * How long a read or a write may take before it counts as a miss or is given up: a cache must
   * cost less than what it saves. Default 500 ms.
   */
  commandTimeoutMs?: number;
  /** Once per outage (not on every failed command). Default: console.error. */
  onError?: (err: unknown) => void;
}

/** KEYS[1] the board's member set, KEYS[2..] the entries of ARGV's members: each member whose entry does not exist is taken off the set. */
const DROP_GONE = `for i = 1, #ARGV do
  if redis.call('EXISTS', KEYS[i + 1]) == 0 then redis.call('SREM', KEYS[1], ARGV[i]) end
end
return 0`;

/**
 * The deployment's shared cache on Redis (SharedCache): plain strings under `SET key value PX
 * ttl`, so Redis expires them itself and nothing grows without bound. While Redis is down a
 * read is a miss and a write is dropped at once (no queue of commands waits for it), and the
 * client reconnects in the background.
 */
export class RedisSharedCache {
  private readonly client: FailFastRedis;
  private lastReported = 0;
  private readonly onError: (err: unknown) => void;
  readonly stats = { errors: 0 };

  constructor(private readonly opts: RedisSharedCacheOptions) {
    this.onError = opts.onError ?? ((err) => console.error('shared cache: redis:', (err as Error)?.message ?? err));
    this.client = new FailFastRedis({ url: opts.url, commandTimeoutMs: opts.commandTimeoutMs ?? 500, onOutage: this.onError });
  }

  /** Connects; an unreachable Redis is reported and retried in the background, not thrown: the cache only saves work. */
  async connect(): Promise<void> {
    await this.client.redis.connect().catch((err: unknown) => this.onError(err));
  }

  /** A view of the cache whose keys are kept apart under `name`. */
  named(name: string): SharedCache {
    const base = `${this.opts.prefix}:cache:${name}:`;
    const key = (k: string) => base + cacheDigest(k);
    const redis = this.client.redis;
    return {
      get: async (k) => {
        try {
          const v = await redis.get(key(k));
          return v ?? undefined;
        } catch (err) {
          this.failed(err);
          return undefined;
        }
      },
      set: async (k, value, ttlMs) => {
        if (!(ttlMs > 0)) return;
        try {
          await redis.set(key(k), value, 'PX', Math.ceil(ttlMs));
        } catch (err) {
          this.failed(err);
        }
      },
    };
  }

  /**
   * A board (SharedBoard) named `name` on the same connection: each entry its own key,
   * `<prefix>:board:<name>:<member>`, under `SET ... PX ttl` so that Redis expires it by its own
   * clock (the processes' clocks may differ), and the members in the set `<prefix>:board:<name>`;
   * a read takes the set, then the entries, and drops from the set the members whose entry expired.
   */
  board(name: string): SharedBoard {
    const members = `${this.opts.prefix}:board:${name}`;
    const key = (member: string) => `${members}:${member}`;
    const redis = this.client.redis;
    return {
      put: async (member, value, ttlMs) => {
        if (!(ttlMs > 0)) return;
        try {
          await redis.multi().set(key(member), value, 'PX', Math.ceil(ttlMs)).sadd(members, member).exec();
        } catch (err) {
          this.failed(err);
        }
      },
      remove: async (member) => {
        try {
          await redis.multi().del(key(member)).srem(members, member).exec();
        } catch (err) {
          this.failed(err);
        }
      },
      entries: async () => {
        try {
          const names = await redis.smembers(members);
          if (!names.length) return [];
          const values = await redis.mget(names.map(key));
          const gone = names.filter((_, i) => values[i] === null);
          // Those that stopped without taking their entry off (a crash): their time is up. Each
          // taken off the set only if its entry is still gone: one written again since the read
          // above (a process starting again under the same member) stays listed.
          if (gone.length) await redis.eval(DROP_GONE, gone.length + 1, members, ...gone.map(key), ...gone);
          return values.filter((v): v is string => v !== null);
        } catch (err) {
          this.failed(err);
          return undefined;
        }
      },
    };
  }

  /**
   * A command that failed while connected (a timeout, an error reply such as OOM) is reported
   * too, at most once a minute; one refused while disconnected (or closed) is the outage already reported.
   */
  private failed(err: unknown): void {
    this.stats.errors++;
    if (this.client.redis.status !== 'ready' || Date.now() - this.lastReported < 60_000) return;
    this.lastReported = Date.now();
    this.onError(err);
  }

  close(): Promise<void> {
    return this.client.close();
  }
}
