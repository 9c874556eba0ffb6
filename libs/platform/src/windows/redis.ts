import { Redis } from 'ioredis';
import { WindowConflictError, type WindowStore } from '@neatroots/ports';

/**
 * Run windows in Redis (ioredis), for the distributed deployment: a rule engine that restarts,
 * or another replica that takes the partition over, loads each run's window where the last
 * committed batch left it.
 *
 * Layout (standalone Redis or Sentinel; not Redis Cluster: MGET and MULTI span many keys):
 *   <prefix>:w:<key>   the window as a JSON string, with PEXPIRE when saved with a ttl
 *   <prefix>:wake      sorted set, member <key>, score = wake time (epoch ms)
 *
 * - load: one MGET per 1000 keys, all in one pipeline (one round trip).
 * - save: SET ... PX per window (value and expiry in one command, so atomic per key), all of
 *   a save's windows in one MULTI: a batch's windows move together or not at all.
 * - wakeAt: ZADD LT, which keeps the earliest time (Redis >= 6.2, checked on connect).
 * - takeDue: a Lua script that ranges and removes in one step, so two replicas never both
 *   take the same key.
 *
 * Failure: when Redis is unreachable, commands fail fast instead of queueing (no offline
 * queue, no resend of commands cut off by a dropped connection, a command timeout). The rule
 * engine's batch then fails and the bus reads it again later; meanwhile ioredis reconnects
 * in the background. Nothing acknowledged is lost: the bus offset moves only after save.
 * (A takeDue whose reply is lost with its connection has removed keys nobody received; those
 * waits fire at the run's next batch or not at all. Resending would not bring them back.)
 */
export interface RedisWindowStoreOptions {
  /** redis://[:password@]host:port[/db] */
  url: string;
  /** Key prefix; one per deployment (or per test). Default 'neatroots'. */
  prefix?: string;
  /** Expiry of a window saved without ttlMs. Default: none (kept until deleted), as the port says. */
  defaultTtlMs?: number;
  /** Initial connection and reconnection attempts give up after this long. Default 5000. */
  connectTimeoutMs?: number;
  /** A command without an answer after this long fails (a hung server). Default 5000. */
  commandTimeoutMs?: number;
  /** Connection errors, once per outage. Default: console.error. */
  onError?: (err: unknown) => void;
}

// Due members are removed, or with a lease (ARGV[3] > 0) moved to now + lease, in one step:
// two replicas never both take a key in the same round.
const TAKE_DUE = `
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local lease = tonumber(ARGV[3])
if lease > 0 then
  local at = tonumber(ARGV[1]) + lease
  for i = 1, #due do redis.call('ZADD', KEYS[1], at, due[i]) end
else
  for i = 1, #due, 1000 do
    redis.call('ZREM', KEYS[1], unpack(due, i, math.min(i + 999, #due)))
  end
end
return due
`;

// Compare-and-set of a step's windows: KEYS are (window, revision) pairs; ARGV[1] is the
// entry count, then per entry: expected revision ('-' for none), JSON, TTL ms ('-' for none).
// Nothing is written unless every expectation holds; returns the 1-based conflicting entries.
const SAVE = `
local n = tonumber(ARGV[1])
local conflicts = {}
local revs = {}
for i = 1, n do
  local expect = ARGV[2 + (i - 1) * 3]
  local cur = tonumber(redis.call('GET', KEYS[i * 2]) or '0')
  if redis.call('EXISTS', KEYS[i * 2 - 1]) == 0 then cur = 0 end
  if expect ~= '-' and tonumber(expect) ~= cur then conflicts[#conflicts + 1] = i end
  if expect ~= '-' then revs[i] = tonumber(expect) + 1 else revs[i] = cur + 1 end
end
if #conflicts > 0 then return conflicts end
for i = 1, n do
  local json = ARGV[3 + (i - 1) * 3]
  local ttl = ARGV[4 + (i - 1) * 3]
  if ttl == '-' then
    redis.call('SET', KEYS[i * 2 - 1], json)
    redis.call('SET', KEYS[i * 2], revs[i])
  else
    redis.call('SET', KEYS[i * 2 - 1], json, 'PX', ttl)
    redis.call('SET', KEYS[i * 2], revs[i], 'PX', ttl)
  end
end
return conflicts
`;

interface ScriptedRedis extends Redis {
  neatrootsTakeDue(key: string, nowMs: string, limit: string, leaseMs: string): Promise<string[]>;
  neatrootsSave(numKeys: number, ...args: string[]): Promise<number[]>;
}

const CHUNK = 1000;

function chunks<T>(items: readonly T[], size = CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Throws the first error of a pipeline or MULTI result. */
function check(results: [Error | null, unknown][] | null): unknown[] {
  if (!results) throw new Error('redis: transaction aborted');
  return results.map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}

export class RedisWindowStore<W> implements WindowStore<W> {
  readonly redis: Redis;
  private readonly scripted: ScriptedRedis;
  private readonly windowPrefix: string;
  private readonly wakeKey: string;
  private readonly defaultTtlMs: number | undefined;
  /** Not reported before the first connection: open() throws that failure itself. */
  private down = true;
  private closed = false;

  constructor(opts: RedisWindowStoreOptions) {
    const prefix = opts.prefix ?? 'neatroots';
    this.windowPrefix = `${prefix}:w:`;
    this.wakeKey = `${prefix}:wake`;
    this.defaultTtlMs = opts.defaultTtlMs;
    const onError = opts.onError ?? ((err) => console.error('windows: redis:', (err as Error)?.message ?? err));
    this.redis = new Redis(opts.url, {
      lazyConnect: true,
      connectTimeout: opts.connectTimeoutMs ?? 5000,
      commandTimeout: opts.commandTimeoutMs ?? 5000,
      // Fail fast while disconnected: the caller's batch fails and is retried by the bus,
      // instead of piling up behind an outage or hanging.
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
    this.redis.defineCommand('neatrootsTakeDue', { numberOfKeys: 1, lua: TAKE_DUE });
    this.redis.defineCommand('neatrootsSave', { lua: SAVE });
    this.scripted = this.redis as ScriptedRedis;
    // Once per outage: ioredis emits an error on every failed reconnection attempt.
    const outage = (err: unknown) => {
      if (this.down || this.closed) return;
      this.down = true;
      onError(err);
    };
    this.redis.on('error', outage);
    this.redis.on('close', () => outage(new Error('connection to Redis lost; reconnecting')));
    this.redis.on('ready', () => (this.down = false));
  }

  /** Connects, and refuses a Redis too old for ZADD LT. */
  async connect(): Promise<void> {
    await this.redis.connect();
    const info = await this.redis.info('server');
    const version = /redis_version:(\d+)\.(\d+)/.exec(info);
    if (version && (Number(version[1]) < 6 || (Number(version[1]) === 6 && Number(version[2]) < 2))) {
      await this.close();
      throw new Error(`windows: Redis ${version[1]}.${version[2]} is too old (6.2 or later is needed for ZADD LT)`);
    }
  }

  private wkey(key: string): string {
    return this.windowPrefix + key;
  }

  /** The revision of a window, beside it (same TTL), for compare-and-set saves. */
  private rkey(key: string): string {
    return `${this.windowPrefix}${key}:rev`;
  }

  async load(keys: readonly string[]): Promise<Map<string, W>> {
    const out = new Map<string, W>();
    if (!keys.length) return out;
    const unique = [...new Set(keys)];
    const parts = chunks(unique);
    const pipe = this.redis.pipeline();
    for (const part of parts) pipe.mget(part.map((k) => this.wkey(k)));
    const results = check(await pipe.exec()) as (string | null)[][];
    results.forEach((values, i) => {
      const part = parts[i];
      values.forEach((v, j) => {
        if (v !== null) out.set(part[j], JSON.parse(v) as W);
      });
    });
    return out;
  }

  async save(entries: readonly { key: string; window: W; ttlMs?: number; expectRev?: number }[]): Promise<void> {
    if (!entries.length) return;
    // One script call per chunk: atomic per chunk, which is all-or-nothing for the rule
    // engine's steps (a batch touches far fewer runs than a chunk holds).
    const conflicts: string[] = [];
    for (const part of chunks(entries, 500)) {
      const keys: string[] = [];
      const args: string[] = [String(part.length)];
      for (const e of part) {
        keys.push(this.wkey(e.key), this.rkey(e.key));
        const ttl = e.ttlMs ?? this.defaultTtlMs;
        args.push(e.expectRev === undefined ? '-' : String(e.expectRev), JSON.stringify(e.window), ttl === undefined ? '-' : String(Math.max(1, Math.ceil(ttl))));
      }
      const bad = await this.scripted.neatrootsSave(keys.length, ...keys, ...args);
      for (const i of bad) conflicts.push(part[i - 1].key);
    }
    if (conflicts.length) throw new WindowConflictError(conflicts);
  }

  async delete(keys: readonly string[]): Promise<void> {
    if (!keys.length) return;
    const tx = this.redis.multi();
    for (const part of chunks(keys)) {
      tx.del(...part.flatMap((k) => [this.wkey(k), this.rkey(k)]));
      tx.zrem(this.wakeKey, ...part);
    }
    check(await tx.exec());
  }

  async wakeAt(entries: readonly { key: string; atMs: number }[]): Promise<void> {
    if (!entries.length) return;
    const pipe = this.redis.pipeline();
    for (const part of chunks(entries)) {
      const args: (string | number)[] = [];
      for (const e of part) args.push(e.atMs, e.key);
      // LT: an existing member is only moved earlier; a new one is added.
      pipe.zadd(this.wakeKey, 'LT', ...args);
    }
    check(await pipe.exec());
  }

  async setWakes(entries: readonly { key: string; atMs: number | null }[]): Promise<void> {
    if (!entries.length) return;
    const pipe = this.redis.pipeline();
    const set = entries.filter((e) => e.atMs !== null);
    const clear = entries.filter((e) => e.atMs === null).map((e) => e.key);
    for (const part of chunks(set)) pipe.zadd(this.wakeKey, ...part.flatMap((e) => [e.atMs as number, e.key]));
    for (const part of chunks(clear)) pipe.zrem(this.wakeKey, ...part);
    check(await pipe.exec());
  }

  async takeDue(nowMs: number, limit: number, leaseMs?: number): Promise<string[]> {
    if (limit <= 0) return [];
    return this.scripted.neatrootsTakeDue(this.wakeKey, String(nowMs), String(Math.floor(limit)), String(Math.max(0, Math.floor(leaseMs ?? 0))));
  }

  /** Is Redis answering? For readiness checks. */
  async healthy(): Promise<boolean> {
    try {
      return (await this.redis.ping()) === 'PONG';
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.redis.status === 'ready') {
      await this.redis.quit().catch(() => this.redis.disconnect());
    } else {
      this.redis.disconnect();
    }
  }
}

/** A connected RedisWindowStore; fails when Redis is unreachable (start-up, not first request). */
export async function openRedisWindowStore<W>(opts: RedisWindowStoreOptions): Promise<RedisWindowStore<W>> {
  const store = new RedisWindowStore<W>(opts);
  try {
    await store.connect();
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}
