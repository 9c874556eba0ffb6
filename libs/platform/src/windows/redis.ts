import type { ChainableCommander, Redis } from 'ioredis';
import { layerBase, WindowConflictError, type WindowSave, type WindowStore } from '@neatroots/ports';
import { FailFastRedis } from '../redis-client';

/**
 * Run windows in Redis (ioredis), for the distributed deployment: a rule engine that restarts,
 * or another replica that takes the partition over, loads each run's window where the last
 * committed batch left it.
 *
 * Layout (standalone Redis or Sentinel; not Redis Cluster: MGET and MULTI span many keys):
 *   <prefix>:w:<key>       the window as a JSON string, with PEXPIRE when saved with a ttl
 *   <prefix>:w:<key>:rev   its revision (compare-and-set saves), with the same expiry
 *   <prefix>:w:<key>:m     its member fields (memberFields: the rule engine's `seen`) once they
 *                          hold more than INLINE_MEMBERS entries, a hash of "<field> NUL <entry>"
 *                          to the entry's JSON, with the same expiry; the window's JSON then holds
 *                          "#hash" for those fields (before that, they are in the JSON)
 *   <prefix>:wake          sorted set, member <key>, score = wake time (epoch ms)
 *
 * - load: a window this store saved itself (and was not loaded since) is kept by revision
 *   (cacheWindows): its revision is read instead of its JSON, and when it is still the one saved
 *   here (no other replica saved the run since) the saved window is handed out as it is, without
 *   a parse. A window is handed out once: the caller changes it in place, and a step that is not
 *   saved must not leave its changes where the next load finds them. Windows whose members are in
 *   the hash are not kept. Otherwise:
 *   one MGET per 1000 keys, and for each window known to keep its members in the hash one
 *   HMGET of the entries asked about, all in one pipeline (one round trip; a second one for
 *   windows another replica moved to the hash). A long run's window is not read whole on every
 *   batch: its thousands of span ids stay in Redis, and the batch's own ids are looked up.
 * - save: one script per 500 windows, all-or-nothing (compare-and-set on the revisions): each
 *   window's JSON and revision set with their expiry, its wake time (savesWakes: a step's save
 *   and wakes in one round trip, never half done), and, for a window whose members are in the
 *   hash, the entries its fields hold (what was loaded and added: a batch's worth, not the run's)
 *   added to it, with the same expiry. A window saved anew (none stored, or expired) starts its
 *   hash afresh. A window stored before with its members in the JSON (a short run, or stored
 *   before member fields) is read whole and moved to the hash at the save that makes it large.
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
  /** Record fields kept in a hash beside the window (WindowStoreOptions.memberFields). */
  memberFields?: readonly string[];
  /**
   * How many windows this store saved it keeps, by revision, to hand out again instead of
   * reading and parsing them (0: none). Default 4096. See `RedisWindowStore.load`.
   */
  cacheWindows?: number;
  /** ...and at most this many bytes of their JSON (as saved), the oldest saved going first. Default 32 MiB. */
  cacheBytes?: number;
}

/** Windows a store saved, by key, bounded in count and in the bytes of their JSON (oldest saved out first). */
class KeptWindows<W> {
  private readonly map = new Map<string, { rev: string; window: W; untilMs: number; bytes: number }>();
  private bytes = 0;
  constructor(
    private readonly maxWindows: number,
    private readonly maxBytes: number,
  ) {}
  get size(): number {
    return this.map.size;
  }
  /** Takes a window out (it is handed out once); undefined if none is kept or it expired by `now`. */
  take(key: string, now: number): { rev: string; window: W } | undefined {
    const c = this.map.get(key);
    if (c) this.drop(key, c.bytes);
    return c && c.untilMs > now ? c : undefined;
  }
  forget(key: string): void {
    const c = this.map.get(key);
    if (c) this.drop(key, c.bytes);
  }
  keep(key: string, entry: { rev: string; window: W; untilMs: number }, bytes: number): void {
    this.forget(key);
    if (!this.maxWindows || bytes > this.maxBytes) return;
    while (this.map.size && (this.map.size >= this.maxWindows || this.bytes + bytes > this.maxBytes)) this.forget(this.map.keys().next().value as string);
    this.map.set(key, { ...entry, bytes });
    this.bytes += bytes;
  }
  private drop(key: string, bytes: number): void {
    this.map.delete(key);
    this.bytes -= bytes;
  }
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

// Compare-and-set of a step's windows: KEYS are (window, revision, members) triples, then the
// wake schedule; ARGV[1] is the entry count, then per entry: expected revision ('-' for none),
// JSON, TTL ms ('-' for none), wake ('-' unchanged, 'x' none, else its time), the key as the
// schedule's member, the number of member entries m, then m (name, value) pairs for the members
// hash. Nothing is written unless every expectation holds; returns the 1-based conflicting entries.
const SAVE = `
local n = tonumber(ARGV[1])
local conflicts = {}
local revs = {}
local fresh = {}
local at = {}
local a = 2
for i = 1, n do
  local expect = ARGV[a]
  local cur = tonumber(redis.call('GET', KEYS[i * 3 - 1]) or '0')
  if redis.call('EXISTS', KEYS[i * 3 - 2]) == 0 then cur = 0 end
  if expect ~= '-' and tonumber(expect) ~= cur then conflicts[#conflicts + 1] = i end
  if expect ~= '-' then revs[i] = tonumber(expect) + 1 else revs[i] = cur + 1 end
  fresh[i] = cur == 0
  at[i] = a
  a = a + 6 + 2 * tonumber(ARGV[a + 5])
end
if #conflicts > 0 then return conflicts end
for i = 1, n do
  local b = at[i]
  local json = ARGV[b + 1]
  local ttl = ARGV[b + 2]
  local wake = ARGV[b + 3]
  local m = tonumber(ARGV[b + 5])
  if ttl == '-' then
    redis.call('SET', KEYS[i * 3 - 2], json)
    redis.call('SET', KEYS[i * 3 - 1], revs[i])
  else
    redis.call('SET', KEYS[i * 3 - 2], json, 'PX', ttl)
    redis.call('SET', KEYS[i * 3 - 1], revs[i], 'PX', ttl)
  end
  -- a window saved anew (none stored, or expired) holds all its members: none left from before
  if fresh[i] then redis.call('DEL', KEYS[i * 3]) end
  if wake == 'x' then redis.call('ZREM', KEYS[n * 3 + 1], ARGV[b + 4])
  elseif wake ~= '-' then redis.call('ZADD', KEYS[n * 3 + 1], wake, ARGV[b + 4]) end
  local first = b + 6
  local last = b + 5 + 2 * m
  while first <= last do
    local upto = math.min(first + 999, last)
    redis.call('HSET', KEYS[i * 3], unpack(ARGV, first, upto))
    first = upto + 1
  end
  if m > 0 or not fresh[i] then
    if ttl == '-' then redis.call('PERSIST', KEYS[i * 3]) else redis.call('PEXPIRE', KEYS[i * 3], ttl) end
  end
end
return conflicts
`;

interface ScriptedRedis extends Redis {
  neatrootsTakeDue(key: string, nowMs: string, limit: string, leaseMs: string): Promise<string[]>;
  neatrootsSave(numKeys: number, ...args: string[]): Promise<number[]>;
}

const CHUNK = 1000;

/** A window's member fields stay in its JSON up to this many entries (a short run's window: one string). */
export const INLINE_MEMBERS = 256;
/** What a window's JSON holds for a member field kept in its hash. */
const IN_HASH = '#hash';
/**
 * Set (not enumerable) on a loaded window's member field whose entries are in its hash: a copy of
 * the window a caller saves (`{ ...window }`) holds the same field, and so says it too.
 */
const IN_HASH_MARK = Symbol('neatroots.windowMembersInHash');
/** Windows remembered as keeping their members in the hash (to ask for their entries in the load's first round trip). */
const MAX_REMEMBERED = 100_000;

function chunks<T>(items: readonly T[], size = CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** A record's own entries, counted up to `enough`. */
function count(rec: Record<string, unknown>, enough: number): number {
  let n = 0;
  if (enough <= 0) return 0;
  for (const k in rec) if (Object.prototype.hasOwnProperty.call(rec, k) && ++n >= enough) break;
  return n;
}

/** Sets a record's entry; `__proto__` as an own entry, not the record's prototype. */
function setEntry(rec: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(rec, key, { value, writable: true, enumerable: true, configurable: true });
  else rec[key] = value;
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
  private readonly memberFields: readonly string[];
  /** Windows whose member fields were in their hash when last loaded or saved here: where a load asks at once. */
  private readonly hashed = new Set<string>();
  private readonly client: FailFastRedis;
  /** Windows saved here, by key: the revision saved, the window, and when it expires (see load). */
  private readonly cache: KeptWindows<W>;
  /** Loads answered from the cache, and loads of cached windows another writer had saved since (tests, benches). */
  readonly cacheStats = { hits: 0, stale: 0 };

  constructor(opts: RedisWindowStoreOptions) {
    const prefix = opts.prefix ?? 'neatroots';
    this.windowPrefix = `${prefix}:w:`;
    this.wakeKey = `${prefix}:wake`;
    this.defaultTtlMs = opts.defaultTtlMs;
    this.memberFields = opts.memberFields ?? [];
    this.cache = new KeptWindows(Math.max(0, Math.floor(opts.cacheWindows ?? 4096)), Math.max(0, opts.cacheBytes ?? 32 * 1024 * 1024));
    const onError = opts.onError ?? ((err) => console.error('windows: redis:', (err as Error)?.message ?? err));
    // Not reported before the first connection: open() throws that failure itself.
    this.client = new FailFastRedis({ url: opts.url, connectTimeoutMs: opts.connectTimeoutMs, commandTimeoutMs: opts.commandTimeoutMs, onOutage: onError });
    this.redis = this.client.redis;
    this.redis.defineCommand('neatrootsTakeDue', { numberOfKeys: 1, lua: TAKE_DUE });
    this.redis.defineCommand('neatrootsSave', { lua: SAVE });
    this.scripted = this.redis as ScriptedRedis;
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

  /** A window's member fields, beside it (same TTL). */
  private mkey(key: string): string {
    return `${this.windowPrefix}${key}:m`;
  }

  async load(keys: readonly string[], members?: ReadonlyMap<string, Readonly<Record<string, readonly string[]>>>): Promise<Map<string, W>> {
    const out = new Map<string, W>();
    if (!keys.length) return out;
    const { kept, rest: unique } = this.takeKept([...new Set(keys)]);
    const parts = chunks(unique);
    const keptParts = chunks(kept);
    const pipe = this.redis.pipeline();
    for (const part of parts) pipe.mget(part.map((k) => this.wkey(k)));
    // The windows kept here: their revisions in the same round trip (a short string each, no parse).
    for (const part of keptParts) pipe.mget(part.map((k) => this.rkey(k.key)));
    // The entries asked about of the windows known to keep their members in the hash, in the same round trip.
    const asked = members && this.hashed.size ? unique.filter((k) => this.hashed.has(k)).map((key) => this.ask(pipe, key, members)).filter((a) => a !== undefined) : [];
    const results = check(await pipe.exec());
    const inHash: string[] = [];
    parts.forEach((part, i) => {
      (results[i] as (string | null)[]).forEach((v, j) => {
        const key = part[j];
        if (v === null) {
          this.hashed.delete(key);
          return;
        }
        const { window, hashed } = this.parse(v);
        out.set(key, window);
        if (!hashed) this.hashed.delete(key);
        else if (!this.hashed.has(key)) inHash.push(key);
      });
    });
    const stale: string[] = [];
    keptParts.forEach((part, i) => {
      (results[parts.length + i] as (string | null)[]).forEach((rev, j) => {
        const k = part[j];
        if (rev === k.rev) {
          this.cacheStats.hits++;
          out.set(k.key, k.window);
        } else if (rev !== null) {
          // Another writer saved it since: read again (no longer kept).
          this.cacheStats.stale++;
          stale.push(k.key);
        }
        // null: expired, or deleted elsewhere: no window.
      });
    });
    asked.forEach((a, i) => this.fill(out.get(a.key), a.names, results[parts.length + keptParts.length + i] as (string | null)[]));
    // Windows whose members another replica (or an earlier life of this one) moved to the hash: a second round trip.
    if (members && inHash.length) {
      const more = this.redis.pipeline();
      const again = inHash.map((key) => this.ask(more, key, members)).filter((a) => a !== undefined);
      const got = check(await more.exec());
      again.forEach((a, i) => this.fill(out.get(a.key), a.names, got[i] as (string | null)[]));
    }
    for (const key of inHash) this.remember(key);
    if (stale.length) for (const [key, w] of await this.load(stale, members)) out.set(key, w);
    return out;
  }

  /**
   * Takes the windows of `keys` kept here out of the cache: each is handed out once (see the
   * header), and only before its expiry (its key's in Redis comes later). The rest are read.
   */
  private takeKept(keys: string[]): { kept: { key: string; rev: string; window: W }[]; rest: string[] } {
    if (!this.cache.size) return { kept: [], rest: keys };
    const now = Date.now();
    const kept: { key: string; rev: string; window: W }[] = [];
    const rest: string[] = [];
    for (const key of keys) {
      const c = this.cache.take(key, now);
      if (c) kept.push({ key, rev: c.rev, window: c.window });
      else rest.push(key);
    }
    return { kept, rest };
  }

  /** Queues the HMGET of the entries asked about of `key`'s window; undefined when none are asked. */
  private ask(pipe: ChainableCommander, key: string, members: ReadonlyMap<string, Readonly<Record<string, readonly string[]>>>): { key: string; names: string[] } | undefined {
    const m = members.get(key);
    if (!m) return undefined;
    const names: string[] = [];
    for (const f of this.memberFields) for (const e of m[f] ?? []) names.push(`${f}\u0000${e}`);
    if (!names.length) return undefined;
    pipe.hmget(this.mkey(key), ...names);
    return { key, names };
  }

  /** Adds the entries found in the hash to the window's member fields. */
  private fill(window: W | undefined, names: string[], values: (string | null)[]): void {
    if (!window) return;
    const w = window as Record<string, Record<string, unknown>>;
    values.forEach((v, j) => {
      if (v === null) return;
      const cut = names[j].indexOf('\u0000');
      setEntry((w[names[j].slice(0, cut)] ??= {}), names[j].slice(cut + 1), JSON.parse(v));
    });
  }

  /** A window known to keep its members in the hash (a bounded set: forgetting one costs a second round trip, no more). */
  private remember(key: string): void {
    if (this.hashed.size >= MAX_REMEMBERED) this.hashed.clear();
    this.hashed.add(key);
  }

  /**
   * A stored window, and whether its member fields are in its hash (they are then empty here, to
   * be filled). A window without such a field (another kind of window in the same store) is left so.
   */
  private parse(v: string): { window: W; hashed: boolean } {
    const w = JSON.parse(v) as Record<string, unknown>;
    let hashed = false;
    for (const f of this.memberFields) {
      if (w[f] !== IN_HASH) continue;
      hashed = true;
      // On the field itself, so its save keeps the members in the hash whatever this store remembers.
      w[f] = Object.defineProperty({}, IN_HASH_MARK, { value: true });
    }
    return { window: w as W, hashed };
  }

  /** Wake times are set in the save's own script (WindowStore.savesWakes). */
  readonly savesWakes = true;

  async save(entries: readonly WindowSave<W>[]): Promise<void> {
    if (!entries.length) return;
    // One script call per chunk: atomic per chunk, which is all-or-nothing for the rule
    // engine's steps (a batch touches far fewer runs than a chunk holds).
    const conflicts: string[] = [];
    // Before the script runs: the Redis keys' expiry starts later, so a kept window expires first.
    const savedAt = Date.now();
    for (const part of chunks(entries, 500)) {
      const keys: string[] = [];
      const args: string[] = [String(part.length)];
      const moved: string[] = [];
      const sizes: number[] = [];
      for (const e of part) {
        keys.push(this.wkey(e.key), this.rkey(e.key), this.mkey(e.key));
        const ttl = e.ttlMs ?? this.defaultTtlMs;
        const { json, entries: m } = this.split(e.window);
        sizes.push(json.length);
        if (m.length) moved.push(e.key);
        const wake = e.wakeAtMs === undefined ? '-' : e.wakeAtMs === null ? 'x' : String(e.wakeAtMs);
        args.push(e.expectRev === undefined ? '-' : String(e.expectRev), json, ttl === undefined ? '-' : String(Math.max(1, Math.ceil(ttl))), wake, e.key, String(m.length / 2), ...m);
      }
      keys.push(this.wakeKey);
      const bad = await this.scripted.neatrootsSave(keys.length, ...keys, ...args);
      for (const i of bad) conflicts.push(part[i - 1].key);
      if (!bad.length) {
        for (const key of moved) this.remember(key);
        this.keep(part, sizes, savedAt);
      }
    }
    if (conflicts.length) throw new WindowConflictError(conflicts);
  }

  /**
   * Keeps the windows of a save that went through, by the revision it set (see load): not those
   * saved without compare-and-set (their revision is Redis's to choose) nor those whose members
   * are in the hash (a load asks the hash for the batch's entries).
   */
  private keep(part: readonly { key: string; window: W; ttlMs?: number; expectRev?: number }[], sizes: readonly number[], savedAt: number): void {
    part.forEach((e, i) => {
      if (e.expectRev === undefined || this.hashed.has(e.key)) return this.cache.forget(e.key);
      const ttl = e.ttlMs ?? this.defaultTtlMs;
      this.cache.keep(e.key, { rev: String(e.expectRev + 1), window: e.window, untilMs: ttl === undefined ? Infinity : savedAt + ttl }, sizes[i]);
    });
  }


  /**
   * A window's JSON and the entries to add to its hash, as (name, value JSON) pairs. Its member
   * fields stay in the JSON while they are small (up to INLINE_MEMBERS entries: a short run's
   * window is one string, as without member fields); once larger, or once in the hash, the JSON
   * says so and the entries the fields hold (what was loaded of them and what the caller added)
   * go to the hash.
   */
  private split(window: W): { json: string; entries: string[] } {
    if (!this.memberFields.length) return { json: JSON.stringify(window), entries: [] };
    const w = window as Record<string, unknown>;
    const fields: [string, Record<string, unknown>, Record<string, unknown> | undefined][] = [];
    let n = 0;
    for (const f of this.memberFields) {
      const rec = w[f] as Record<string, unknown> | undefined;
      if (!rec || typeof rec !== 'object') continue;
      // own entries and, over a layer (windowLayer), the ones beneath it
      const base = layerBase(rec) as Record<string, unknown> | undefined;
      // counted no further than needed: a short run's window is saved as one string, with nothing listed
      n += count(rec, INLINE_MEMBERS + 1 - n) + (base ? count(base, INLINE_MEMBERS + 1 - n) : 0);
      fields.push([f, rec, base]);
    }
    if (n <= INLINE_MEMBERS && !fields.some(([, rec]) => (rec as { [IN_HASH_MARK]?: true })[IN_HASH_MARK])) return { json: JSON.stringify(window), entries: [] };
    const rest: Record<string, unknown> = { ...w };
    const entries: string[] = [];
    for (const [f, rec, base] of fields) {
      rest[f] = IN_HASH;
      if (base) for (const k of Object.keys(base)) if (!Object.prototype.hasOwnProperty.call(rec, k)) entries.push(`${f}\u0000${k}`, JSON.stringify(base[k]));
      for (const k of Object.keys(rec)) entries.push(`${f}\u0000${k}`, JSON.stringify(rec[k]));
    }
    return { json: JSON.stringify(rest), entries };
  }

  async delete(keys: readonly string[]): Promise<void> {
    if (!keys.length) return;
    const tx = this.redis.multi();
    for (const part of chunks(keys)) {
      tx.del(...part.flatMap((k) => [this.wkey(k), this.rkey(k), this.mkey(k)]));
      for (const k of part) {
        this.hashed.delete(k);
        this.cache.forget(k);
      }
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

  close(): Promise<void> {
    return this.client.close();
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
