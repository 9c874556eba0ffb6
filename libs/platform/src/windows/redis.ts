import type { ChainableCommander, Redis } from 'ioredis';
import { layerBase, shiftedArrays, WindowConflictError, type WindowSave, type WindowStore } from '@neatroots/ports';
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
 *   <prefix>:w:<key>:l:<f> its list field <f> (listFields: the question scheduler's `ring`), a
 *                          list of the items' JSON, with the same expiry; the window's JSON then
 *                          holds "#list" for that field
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
 * - list fields: an array the caller only appends to and cuts from its start (a ring of a run's
 *   latest spans) goes to a Redis list beside the window once a save can say how it moved since
 *   the window was loaded (markShifted). Then, when the list is the one this store last read or
 *   wrote, the save pushes the new items and trims the dropped ones: a step that adds three
 *   spans to a ring of forty writes three items, not the forty again (at a steady 2,000 spans/s
 *   the rings were about two thirds of the bytes the rule engine sent to Redis); else it writes
 *   the list whole. An array written whole anyway (a new window, an item replaced in place,
 *   more appended than the array keeps: a run's burst) stays in the JSON, one string, which
 *   costs less than its items one by one. A load reads the lists of the windows it reads
 *   (LRANGE, in the same round trip). A push is a compare-and-set on the list too: a save whose
 *   list is not the length the store last saw (folded back into the JSON meanwhile) is refused
 *   as a conflict, and the caller loads again, rather than leave a list of the new items only.
 * - writeLists off (a rolling upgrade from, or a rollback to, a version that cannot read lists):
 *   list fields are written in the JSON. A window found with lists is folded back at once, its
 *   lists into its JSON and its list keys removed (inlineLists: compare-and-set on its revision,
 *   which it keeps, and its expiry kept), when it is loaded; inlineAllLists does it to every
 *   window that has lists (SCAN), for those no batch loads (a run left open), and with
 *   inlineListsEveryMs the store runs it at its start and then on that period.
 * - wakeAt: ZADD LT, which keeps the earliest time (Redis >= 6.2, checked on connect).
 * - takeDue: a Lua script that ranges and removes in one step, so two replicas never both
 *   take the same key.
 * - clearOrphanWakes: a Lua script that removes the wakes of the keys whose window is gone
 *   (expired, or evicted under maxmemory), each checked in the same step.
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
  /** Array fields kept as lists beside the window, saved by their shifts (WindowStoreOptions.listFields). */
  listFields?: readonly string[];
  /**
   * false: list fields are read from their lists but written in the window's JSON (the list
   * removed), as a store without listFields writes them, and a window loaded with lists is
   * folded back into its JSON at once: for a rolling upgrade from, or a rollback to, a version
   * that cannot read the lists. Default true.
   */
  writeLists?: boolean;
  /**
   * With writeLists false: fold every window's lists back into its JSON (inlineAllLists) at the
   * store's start and then every this many ms, so that windows no batch loads (runs left open)
   * are folded too. Default: never (a caller runs inlineAllLists itself).
   */
  inlineListsEveryMs?: number;
  /** After a sweep of inlineListsEveryMs that folded some windows: how many. */
  onListsInlined?: (windows: number) => void;
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

// Compare-and-set of a step's windows: KEYS are, per entry, the window, its revision, its
// members hash and then one list per list field (ARGV[2] of them), then the wake schedule;
// ARGV[1] is the entry count, then per entry: expected revision ('-' for none), JSON, TTL ms
// ('-' for none), wake ('-' unchanged, 'x' none, else its time), the key as the schedule's
// member, the number of member entries m, then m (name, value) pairs for the members hash, then
// per list field: its mode ('-' not a list in this save: the list is removed; '=' the items are
// the whole list; '+' they are appended, then the first `drop` trimmed), drop, the list's length
// expected before ('+': a list of another length, folded into the JSON meanwhile, is a conflict),
// the item count k, then k items. Nothing is written unless every expectation holds; returns the
// 1-based conflicting entries.
const SAVE = `
local n = tonumber(ARGV[1])
local lists = tonumber(ARGV[2])
local stride = 3 + lists
local conflicts = {}
local revs = {}
local fresh = {}
local at = {}
local a = 3
for i = 1, n do
  local k0 = (i - 1) * stride
  local expect = ARGV[a]
  local cur = tonumber(redis.call('GET', KEYS[k0 + 2]) or '0')
  if redis.call('EXISTS', KEYS[k0 + 1]) == 0 then cur = 0 end
  local bad = expect ~= '-' and tonumber(expect) ~= cur
  if expect ~= '-' then revs[i] = tonumber(expect) + 1 else revs[i] = cur + 1 end
  fresh[i] = cur == 0
  at[i] = a
  a = a + 6 + 2 * tonumber(ARGV[a + 5])
  for j = 1, lists do
    if ARGV[a] == '+' and not fresh[i] and redis.call('LLEN', KEYS[k0 + 3 + j]) ~= tonumber(ARGV[a + 2]) then bad = true end
    a = a + 4 + tonumber(ARGV[a + 3])
  end
  if bad then conflicts[#conflicts + 1] = i end
end
if #conflicts > 0 then return conflicts end
local function push(key, first, last)
  while first <= last do
    local upto = math.min(first + 999, last)
    redis.call('RPUSH', key, unpack(ARGV, first, upto))
    first = upto + 1
  end
end
for i = 1, n do
  local k0 = (i - 1) * stride
  local b = at[i]
  local json = ARGV[b + 1]
  local ttl = ARGV[b + 2]
  local wake = ARGV[b + 3]
  local m = tonumber(ARGV[b + 5])
  if ttl == '-' then
    redis.call('SET', KEYS[k0 + 1], json)
    redis.call('SET', KEYS[k0 + 2], revs[i])
  else
    redis.call('SET', KEYS[k0 + 1], json, 'PX', ttl)
    redis.call('SET', KEYS[k0 + 2], revs[i], 'PX', ttl)
  end
  -- a window saved anew (none stored, or expired) holds all its members: none left from before
  if fresh[i] then redis.call('DEL', KEYS[k0 + 3]) end
  if wake == 'x' then redis.call('ZREM', KEYS[n * stride + 1], ARGV[b + 4])
  elseif wake ~= '-' then redis.call('ZADD', KEYS[n * stride + 1], wake, ARGV[b + 4]) end
  local first = b + 6
  local last = b + 5 + 2 * m
  while first <= last do
    local upto = math.min(first + 999, last)
    redis.call('HSET', KEYS[k0 + 3], unpack(ARGV, first, upto))
    first = upto + 1
  end
  if m > 0 or not fresh[i] then
    if ttl == '-' then redis.call('PERSIST', KEYS[k0 + 3]) else redis.call('PEXPIRE', KEYS[k0 + 3], ttl) end
  end
  local c = last + 1
  for j = 1, lists do
    local key = KEYS[k0 + 3 + j]
    local mode = ARGV[c]
    local drop = tonumber(ARGV[c + 1])
    local k = tonumber(ARGV[c + 3])
    if mode ~= '+' or fresh[i] then redis.call('DEL', key) end
    if mode ~= '-' then
      push(key, c + 4, c + 3 + k)
      if mode == '+' and drop > 0 then redis.call('LTRIM', key, drop, -1) end
      if ttl == '-' then redis.call('PERSIST', key) else redis.call('PEXPIRE', key, ttl) end
    end
    c = c + 4 + k
  end
end
return conflicts
`;

// A window's lists folded into its JSON (writeLists off): KEYS are the window, its revision and
// its lists; ARGV[1] the revision read ('' for none), ARGV[2] the window's JSON with the lists in
// it ('' when the window was gone: its lists alone are removed). Only while the revision is still
// the one read (no save since); the window keeps its revision and its expiry. Returns 1, or 0
// when it changed meanwhile (its next save, or a later sweep, folds it).
const INLINE_LISTS = `
if (redis.call('GET', KEYS[2]) or '') ~= ARGV[1] then return 0 end
local there = redis.call('EXISTS', KEYS[1]) == 1
if there ~= (ARGV[2] ~= '') then return 0 end
if there then redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL') end
for i = 3, #KEYS do redis.call('DEL', KEYS[i]) end
return 1
`;

// The wakes of the members of ARGV whose window (KEYS[i + 1]) is not there, removed from the
// schedule (KEYS[1]) in the same step as the look: a window saved meanwhile keeps its wake.
const CLEAR_ORPHAN_WAKES = `
local n = 0
for i = 1, #ARGV do
  if redis.call('EXISTS', KEYS[i + 1]) == 0 then n = n + redis.call('ZREM', KEYS[1], ARGV[i]) end
end
return n
`;

interface ScriptedRedis extends Redis {
  neatrootsTakeDue(key: string, nowMs: string, limit: string, leaseMs: string): Promise<string[]>;
  neatrootsClearOrphanWakes(numKeys: number, ...args: string[]): Promise<number>;
  neatrootsSave(numKeys: number, keys: string[], args: string[]): Promise<number[]>;
  neatrootsInlineLists(numKeys: number, ...args: string[]): Promise<number>;
}

const CHUNK = 1000;

/** A window's member fields stay in its JSON up to this many entries (a short run's window: one string). */
export const INLINE_MEMBERS = 256;
/** What a window's JSON holds for a member field kept in its hash. */
const IN_HASH = '#hash';
/** What a window's JSON holds for a list field kept in its list. */
const IN_LIST = '#list';
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

/** Adds to a set this store remembers things in, emptied once it holds MAX_REMEMBERED (forgetting costs a round trip or a whole write, no more). */
function rememberIn(set: Set<string>, name: string): void {
  if (set.size >= MAX_REMEMBERED) set.clear();
  set.add(name);
}

/** A window's list field, as the store's `listed` names it. */
function listName(key: string, field: string): string {
  return `${key}\u0000${field}`;
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
  private readonly listFields: readonly string[];
  private readonly writeLists: boolean;
  /** Windows whose member fields were in their hash when last loaded or saved here: where a load asks at once. */
  private readonly hashed = new Set<string>();
  /**
   * "<key> NUL <field>" of the list fields whose Redis list this store last read or wrote (a load
   * that parsed the window, or a save that went through): a save may then push and trim it by
   * the array's shift. Bounded as `hashed`: forgetting one costs a whole write, no more.
   */
  private readonly listed = new Set<string>();
  /** The list items' mean JSON length seen so far, to count a kept window's lists against cacheBytes. */
  private itemBytes = { items: 0, bytes: 0 };
  private readonly client: FailFastRedis;
  /** Windows saved here, by key: the revision saved, the window, and when it expires (see load). */
  private readonly cache: KeptWindows<W>;
  /** Loads answered from the cache, and loads of cached windows another writer had saved since (tests, benches). */
  readonly cacheStats = { hits: 0, stale: 0 };
  private readonly inlineEveryMs: number | undefined;
  private readonly onListsInlined: ((windows: number) => void) | undefined;
  private readonly onError: (err: unknown) => void;
  private inlineTimer: NodeJS.Timeout | undefined;
  private sweeping: Promise<unknown> | undefined;

  constructor(opts: RedisWindowStoreOptions) {
    const prefix = opts.prefix ?? 'neatroots';
    this.windowPrefix = `${prefix}:w:`;
    this.wakeKey = `${prefix}:wake`;
    this.defaultTtlMs = opts.defaultTtlMs;
    this.memberFields = opts.memberFields ?? [];
    this.listFields = opts.listFields ?? [];
    this.writeLists = opts.writeLists ?? true;
    this.cache = new KeptWindows(Math.max(0, Math.floor(opts.cacheWindows ?? 4096)), Math.max(0, opts.cacheBytes ?? 32 * 1024 * 1024));
    const onError = opts.onError ?? ((err) => console.error('windows: redis:', (err as Error)?.message ?? err));
    // Not reported before the first connection: open() throws that failure itself.
    this.client = new FailFastRedis({ url: opts.url, connectTimeoutMs: opts.connectTimeoutMs, commandTimeoutMs: opts.commandTimeoutMs, onOutage: onError });
    this.redis = this.client.redis;
    this.redis.defineCommand('neatrootsTakeDue', { numberOfKeys: 1, lua: TAKE_DUE });
    this.redis.defineCommand('neatrootsSave', { lua: SAVE });
    this.redis.defineCommand('neatrootsClearOrphanWakes', { lua: CLEAR_ORPHAN_WAKES });
    this.redis.defineCommand('neatrootsInlineLists', { lua: INLINE_LISTS });
    this.inlineEveryMs = !this.writeLists && this.listFields.length ? opts.inlineListsEveryMs : undefined;
    this.onListsInlined = opts.onListsInlined;
    this.onError = onError;
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
    if (this.inlineEveryMs !== undefined && this.inlineEveryMs > 0) {
      const sweep = () => {
        if (this.sweeping) return;
        this.sweeping = this.inlineAllLists()
          .then((n) => n && this.onListsInlined?.(n), (err) => this.onError(err))
          .finally(() => (this.sweeping = undefined));
      };
      sweep();
      this.inlineTimer = setInterval(sweep, this.inlineEveryMs);
      this.inlineTimer.unref();
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

  /** A window's list field, beside it (same TTL). */
  private lkey(key: string, field: string): string {
    return `${this.windowPrefix}${key}:l:${field}`;
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
    // The list fields of the windows read (empty for a window that keeps none), in the same round trip.
    for (const key of unique) for (const f of this.listFields) pipe.lrange(this.lkey(key, f), 0, -1);
    const results = check(await pipe.exec());
    const listsAt = parts.length + keptParts.length + asked.length;
    const inHash: string[] = [];
    const withLists: string[] = [];
    let u = 0;
    parts.forEach((part, i) => {
      (results[i] as (string | null)[]).forEach((v, j) => {
        const key = part[j];
        const lists = results.slice(listsAt + u * this.listFields.length, listsAt + ++u * this.listFields.length) as string[][];
        if (v === null) {
          this.hashed.delete(key);
          for (const f of this.listFields) this.listed.delete(listName(key, f));
          return;
        }
        const { window, hashed } = this.parse(v);
        if (this.fillLists(key, window, lists) || lists.some((l) => l.length)) withLists.push(key);
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
    // Writing no lists: a window found with lists is folded back into its JSON now, not at its
    // next save, which may never come (a version that cannot read lists may load it next).
    if (!this.writeLists && withLists.length) await this.inlineLists(withLists);
    return out;
  }

  /**
   * Folds the lists of these windows back into their JSON and removes their list keys, each
   * while its revision is still the one read (a window saved meanwhile is left to its save: in
   * the JSON when written without lists). The revision and the expiry stay. Returns how many
   * windows were folded. What writeLists off does at a load, and inlineAllLists to every window.
   */
  async inlineLists(keys: readonly string[]): Promise<number> {
    let folded = 0;
    if (!this.listFields.length) return 0;
    for (const part of chunks([...new Set(keys)], 500)) {
      const read = this.redis.pipeline();
      for (const key of part) {
        read.get(this.wkey(key));
        read.get(this.rkey(key));
        for (const f of this.listFields) read.lrange(this.lkey(key, f), 0, -1);
      }
      const got = check(await read.exec());
      const write = this.redis.pipeline() as ChainableCommander & { neatrootsInlineLists(numKeys: number, ...args: string[]): ChainableCommander };
      const written: string[] = [];
      const stride = 2 + this.listFields.length;
      part.forEach((key, i) => {
        const json = got[i * stride] as string | null;
        const rev = (got[i * stride + 1] as string | null) ?? '';
        const lists = got.slice(i * stride + 2, (i + 1) * stride) as string[][];
        let w: Record<string, unknown> | undefined;
        if (json !== null) {
          w = JSON.parse(json) as Record<string, unknown>;
          let inList = false;
          this.listFields.forEach((f, j) => {
            if (w![f] !== IN_LIST) return;
            inList = true;
            w![f] = lists[j].map((item) => JSON.parse(item) as unknown);
          });
          // Nothing to fold: neither a list in the JSON nor a list key beside it.
          if (!inList && !lists.some((l) => l.length)) return;
        } else if (!lists.some((l) => l.length)) return;
        write.neatrootsInlineLists(2 + this.listFields.length, this.wkey(key), this.rkey(key), ...this.listFields.map((f) => this.lkey(key, f)), rev, w ? JSON.stringify(w) : '');
        written.push(key);
      });
      if (!written.length) continue;
      const done = check(await write.exec());
      written.forEach((key, i) => {
        if (done[i] !== 1) return;
        folded++;
        for (const f of this.listFields) this.listed.delete(listName(key, f));
        this.cache.forget(key);
      });
    }
    return folded;
  }

  /**
   * Folds the lists of every window of this store that has any back into its JSON
   * (inlineLists): the windows SCAN finds list keys of. For a rollback to a version that cannot
   * read lists, where windows no batch loads (runs left open) would keep theirs until they
   * expire. Returns how many windows were folded.
   */
  async inlineAllLists(): Promise<number> {
    if (!this.listFields.length) return 0;
    const glob = (s: string) => s.replace(/[*?[\]\\]/g, '\\$&');
    const pattern = `${glob(this.windowPrefix)}*:l:*`;
    let folded = 0;
    let found = new Set<string>();
    let cursor = '0';
    do {
      const [next, names] = await this.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      for (const name of names) {
        const f = this.listFields.find((x) => name.endsWith(`:l:${x}`));
        if (f) found.add(name.slice(this.windowPrefix.length, name.length - `:l:${f}`.length));
      }
      if (found.size >= 500 || (cursor === '0' && found.size)) {
        folded += await this.inlineLists([...found]);
        found = new Set();
      }
    } while (cursor !== '0');
    return folded;
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

  /** Puts a parsed window's lists (read beside it) in the fields its JSON says are lists; true when there was one. */
  private fillLists(key: string, window: W, lists: readonly string[][]): boolean {
    const w = window as Record<string, unknown>;
    let any = false;
    this.listFields.forEach((f, i) => {
      if (w[f] !== IN_LIST) return void this.listed.delete(listName(key, f));
      w[f] = lists[i].map((item) => JSON.parse(item) as unknown);
      rememberIn(this.listed, listName(key, f));
      any = true;
    });
    return any;
  }

  /** A window known to keep its members in the hash (a bounded set: forgetting one costs a second round trip, no more). */
  private remember(key: string): void {
    rememberIn(this.hashed, key);
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
      const args: string[] = [String(part.length), String(this.listFields.length)];
      const moved: string[] = [];
      const sizes: number[] = [];
      const listsOf: string[][] = [];
      for (const e of part) {
        keys.push(this.wkey(e.key), this.rkey(e.key), this.mkey(e.key));
        for (const f of this.listFields) keys.push(this.lkey(e.key, f));
        const ttl = e.ttlMs ?? this.defaultTtlMs;
        const { json, entries: m, lists, inLists, listBytes } = this.split(e.key, e.window, e.expectRev);
        sizes.push(json.length + listBytes);
        listsOf.push(inLists);
        if (m.length) moved.push(e.key);
        const wake = e.wakeAtMs === undefined ? '-' : e.wakeAtMs === null ? 'x' : String(e.wakeAtMs);
        args.push(e.expectRev === undefined ? '-' : String(e.expectRev), json, ttl === undefined ? '-' : String(Math.max(1, Math.ceil(ttl))), wake, e.key, String(m.length / 2));
        // Pushed one by one, and the lists below passed as arrays (ioredis flattens them): a long
        // run's ids spread as arguments passed the call stack's limit ("Maximum call stack size exceeded").
        for (let i = 0; i < m.length; i++) args.push(m[i]);
        for (let i = 0; i < lists.length; i++) args.push(lists[i]);
      }
      keys.push(this.wakeKey);
      const bad = await this.scripted.neatrootsSave(keys.length, keys, args);
      for (const i of bad) conflicts.push(part[i - 1].key);
      if (!bad.length) {
        for (const key of moved) this.remember(key);
        this.noteLists(part, listsOf);
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
   * A window's JSON, the entries to add to its hash as (name, value JSON) pairs, and its list
   * fields' arguments for the save script. Its member fields stay in the JSON while they are
   * small (up to INLINE_MEMBERS entries: a short run's window is one string, as without member
   * fields); once larger, or once in the hash, the JSON says so and the entries the fields hold
   * (what was loaded of them and what the caller added) go to the hash. A list field goes to its
   * list when the window says how its array moved (markShifted, with all the appended items still
   * in it) at a revision the save expects: only those items and the count dropped when the list is
   * the one this store last read or wrote (the compare-and-set makes sure it is still that), else
   * the whole array. Otherwise the array stays in the JSON.
   */
  private split(key: string, window: W, expectRev: number | undefined): { json: string; entries: string[]; lists: string[]; inLists: string[]; listBytes: number } {
    const w = window as Record<string, unknown>;
    let rest: Record<string, unknown> | undefined;
    const entries: string[] = [];
    if (this.memberFields.length) {
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
      if (n > INLINE_MEMBERS || fields.some(([, rec]) => (rec as { [IN_HASH_MARK]?: true })[IN_HASH_MARK])) {
        rest = { ...w };
        for (const [f, rec, base] of fields) {
          rest[f] = IN_HASH;
          if (base) for (const k of Object.keys(base)) if (!Object.prototype.hasOwnProperty.call(rec, k)) entries.push(`${f}\u0000${k}`, JSON.stringify(base[k]));
          for (const k of Object.keys(rec)) entries.push(`${f}\u0000${k}`, JSON.stringify(rec[k]));
        }
      }
    }
    const lists: string[] = [];
    const inLists: string[] = [];
    let listBytes = 0;
    if (this.listFields.length) {
      const shifted = shiftedArrays(window as object);
      for (const f of this.listFields) {
        const items = w[f];
        const shift = shifted?.[f];
        // Written whole (a new window, an item replaced in place, more appended than the array
        // keeps): in the JSON, one string, as without list fields.
        if (!this.writeLists || !Array.isArray(items) || shift === undefined || expectRev === undefined || expectRev <= 0 || shift.appended > items.length) {
          lists.push('-', '0', '0', '0');
          continue;
        }
        rest ??= { ...w };
        rest[f] = IN_LIST;
        inLists.push(f);
        // The list this store last read or wrote, at this revision (the save's compare-and-set): pushed and trimmed. Else written as a list once.
        const delta = this.listed.has(listName(key, f));
        const from = delta ? items.length - shift.appended : 0;
        // '+': the list holds what it held when this store last read or wrote it, of this length
        lists.push(delta ? '+' : '=', delta ? String(shift.dropped) : '0', String(items.length - shift.appended + shift.dropped), String(items.length - from));
        let bytes = 0;
        for (let i = from; i < items.length; i++) {
          const item = JSON.stringify(items[i]) ?? 'null';
          bytes += item.length;
          lists.push(item);
        }
        if (this.itemBytes.items > 1_000_000) this.itemBytes = { items: this.itemBytes.items / 2, bytes: this.itemBytes.bytes / 2 };
        this.itemBytes.items += items.length - from;
        this.itemBytes.bytes += bytes;
        listBytes += this.itemBytes.items ? (items.length * this.itemBytes.bytes) / this.itemBytes.items : 0;
      }
    }
    return { json: JSON.stringify(rest ?? window), entries, lists, inLists, listBytes: Math.round(listBytes) };
  }

  /** After a save went through: which of its windows' list fields are now lists this store knows (`inLists` per entry). */
  private noteLists(part: readonly { key: string }[], inLists: readonly (readonly string[])[]): void {
    part.forEach((e, i) => {
      for (const f of this.listFields) {
        if (inLists[i].includes(f)) rememberIn(this.listed, listName(e.key, f));
        else this.listed.delete(listName(e.key, f));
      }
    });
  }

  async delete(keys: readonly string[]): Promise<void> {
    if (!keys.length) return;
    const tx = this.redis.multi();
    for (const part of chunks(keys)) {
      tx.del(...part.flatMap((k) => [this.wkey(k), this.rkey(k), this.mkey(k), ...this.listFields.map((f) => this.lkey(k, f))]));
      for (const k of part) {
        this.hashed.delete(k);
        for (const f of this.listFields) this.listed.delete(listName(k, f));
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

  /** A window Redis expired or evicted leaves its wake in the schedule: the tick that takes it clears it here. */
  async clearOrphanWakes(keys: readonly string[]): Promise<void> {
    for (const part of chunks([...new Set(keys)], 500)) {
      await this.scripted.neatrootsClearOrphanWakes(part.length + 1, this.wakeKey, ...part.map((k) => this.wkey(k)), ...part);
    }
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
    clearInterval(this.inlineTimer);
    await this.sweeping;
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
