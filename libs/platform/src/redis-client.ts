import { Redis } from 'ioredis';

export interface FailFastRedisOptions {
  url: string;
  connectTimeoutMs?: number;
  commandTimeoutMs?: number;
  /** Once per outage: ioredis emits an error on every failed reconnection attempt. */
  onOutage: (err: unknown) => void;
}

/**
 * An ioredis connection that fails fast while Redis is away and reconnects on its own: what the
 * window store and the shared cache talk through. A command sent while disconnected is refused
 * at once (its caller's batch fails and the bus retries it, or a cache lookup misses) instead of
 * piling up behind an outage or hanging; the outage is reported once, not on every attempt.
 */
export class FailFastRedis {
  readonly redis: Redis;
  private down = true;
  private closed = false;

  constructor(opts: FailFastRedisOptions) {
    this.redis = new Redis(opts.url, {
      lazyConnect: true,
      connectTimeout: opts.connectTimeoutMs ?? 5000,
      commandTimeout: opts.commandTimeoutMs ?? 5000,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      // close() after a failed connection: ioredis waits this long for a socket that is
      // already gone (2 s by default), keeping the process alive for nothing.
      disconnectTimeout: 200,
      // Keep reconnecting in the background, backing off to 2 s; not once closed (a
      // reconnection already scheduled when close() runs would otherwise keep the process up).
      retryStrategy: (times) => (this.closed ? null : Math.min(times * 100, 2000)),
    });
    const outage = (err: unknown) => {
      if (this.down || this.closed) return;
      this.down = true;
      opts.onOutage(err);
    };
    this.redis.on('error', outage);
    this.redis.on('close', () => outage(new Error('connection to Redis lost; reconnecting')));
    this.redis.on('ready', () => (this.down = false));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.redis.status === 'ready') await this.redis.quit().catch(() => this.redis.disconnect());
    else this.redis.disconnect();
  }
}
