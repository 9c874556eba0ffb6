import { compileRuleSet, RUN_WINDOW_MEMBER_FIELDS, RuleEngine, type FindingEvent, type RuleCheck, type RunWindow } from '@neatroots/checks';
import { normalizeItem, type Envelope } from '@neatroots/spans';
import { markShifted, WindowConflictError, type WindowStore } from '@neatroots/ports';
import { PrivateRedis, RedisScratch, redisServerBinary } from '../testing/private-redis';
import { serviceOrSkip, servicesRequired } from '../testing/services';
import { until } from '../testing/until';
import { MemoryWindowStore } from './memory';
import { INLINE_MEMBERS, openRedisWindowStore, RedisWindowStore } from './redis';

const redis = serviceOrSkip('redis', 'RedisWindowStore');

(redis ? describe : describe.skip)('RedisWindowStore', () => {
  const url = redis?.url ?? '';
  const scratch = new RedisScratch(url, 'it_windows');
  const prefix = () => scratch.next();
  const raw = scratch.raw;
  afterAll(() => scratch.cleanup());

  it('keeps a window as JSON under <prefix>:w:<key> with its ttl, and wake-ups in <prefix>:wake', async () => {
    const p = prefix();
    const store = await openRedisWindowStore<{ n: number }>({ url, prefix: p });
    try {
      await store.save([{ key: 'p\u0000r1', window: { n: 1 }, ttlMs: 60_000 }, { key: 'p\u0000r2', window: { n: 2 } }]);
      await store.wakeAt([{ key: 'p\u0000r1', atMs: 1234 }]);
      expect(await raw.get(`${p}:w:p\u0000r1`)).toBe('{"n":1}');
      const ttl = await raw.pttl(`${p}:w:p\u0000r1`);
      expect(ttl).toBeGreaterThan(50_000);
      expect(ttl).toBeLessThanOrEqual(60_000);
      expect(await raw.pttl(`${p}:w:p\u0000r2`)).toBe(-1); // no ttl: kept
      expect(await raw.zrange(`${p}:wake`, 0, -1, 'WITHSCORES')).toEqual(['p\u0000r1', '1234']);
    } finally {
      await store.close();
    }
  });

  it('sets the wake times given with a save in the same script, and none of a save whose revision is stale', async () => {
    const p = prefix();
    const store = await openRedisWindowStore<{ n: number }>({ url, prefix: p });
    try {
      expect(store.savesWakes).toBe(true);
      await store.wakeAt([{ key: 'b', atMs: 50 }]);
      await store.save([
        { key: 'a', window: { n: 1 }, expectRev: 0, wakeAtMs: 1000 },
        { key: 'b', window: { n: 1 }, expectRev: 0, wakeAtMs: null },
        { key: 'c', window: { n: 1 }, expectRev: 0 },
      ]);
      expect(await raw.zrange(`${p}:wake`, 0, -1, 'WITHSCORES')).toEqual(['a', '1000']);
      await expect(store.save([{ key: 'c', window: { n: 2 }, expectRev: 1, wakeAtMs: 5 }, { key: 'a', window: { n: 2 }, expectRev: 7, wakeAtMs: null }])).rejects.toBeInstanceOf(
        WindowConflictError,
      );
      expect(await raw.zrange(`${p}:wake`, 0, -1, 'WITHSCORES')).toEqual(['a', '1000']);
      // exact, as setWakes: a later time replaces an earlier one
      await store.save([{ key: 'a', window: { n: 3 }, expectRev: 1, wakeAtMs: 2000 }]);
      expect(await store.takeDue(1500, 10)).toEqual([]);
      expect(await store.takeDue(2000, 10)).toEqual(['a']);
    } finally {
      await store.close();
    }
  });

  it('clears the wakes of windows Redis expired or evicted, in the tick that takes them; a window saved since keeps its wake', async () => {
    const p = prefix();
    const store = await openRedisWindowStore<RunWindow>({ url, prefix: p, memberFields: RUN_WINDOW_MEMBER_FIELDS });
    try {
      const set = compileRuleSet(
        [{ id: 'refund', kind: 'rule', title: 'refund', action: 'flag', source: 'user', rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } } }],
        () => ({ test: () => false }),
      );
      const engine = new RuleEngine({ windows: store, rules: () => set, ttlIdleMs: 50 });
      const call = (run: string, at: number): Envelope => ({ project: 'p', received_ms: at, item: normalizeItem({ run_id: run, span_id: 's1', type: 'tool', tool: 'issue_refund', start_ms: at }) });
      await (await engine.process([call('expired', 1_000), call('evicted', 1_000)])).commit();
      expect(await raw.zrange(`${p}:wake`, 0, -1)).toEqual(['p\u0000evicted', 'p\u0000expired']);
      // One window's 50 ms run out in Redis, the other is evicted (maxmemory) before any tick.
      await raw.del(`${p}:w:p\u0000evicted`);
      await new Promise((r) => setTimeout(r, 150));
      expect(await raw.exists(`${p}:w:p\u0000expired`)).toBe(0);
      const tick = await engine.tick(2_000);
      expect(tick.findings).toEqual([]);
      await tick.commit();
      // Not leased to come round every 5 s: gone.
      expect(await raw.zrange(`${p}:wake`, 0, -1)).toEqual([]);

      // The store clears only the wakes of keys without a window at the time it looks.
      await store.save([{ key: 'kept', window: { v: 1, run_id: 'kept', project: 'p', seen: {}, metrics: { spans: 0, llm_calls: 0, tool_calls: 0, errors: 0, total_tokens: 0, input_tokens: 0, output_tokens: 0, cost: 0 }, checks: {} } }]);
      await store.setWakes([{ key: 'kept', atMs: 5 }, { key: 'gone', atMs: 5 }]);
      await store.clearOrphanWakes(['kept', 'gone']);
      expect(await raw.zrange(`${p}:wake`, 0, -1)).toEqual(['kept']);
    } finally {
      await store.close();
    }
  });

  it('applies defaultTtlMs to windows saved without a ttl', async () => {
    const p = prefix();
    const store = await openRedisWindowStore<{ n: number }>({ url, prefix: p, defaultTtlMs: 30_000 });
    try {
      await store.save([{ key: 'k', window: { n: 1 } }]);
      expect(await raw.pttl(`${p}:w:k`)).toBeGreaterThan(20_000);
    } finally {
      await store.close();
    }
  });

  it('refuses to open when Redis is unreachable, quickly', async () => {
    const started = Date.now();
    await expect(openRedisWindowStore({ url: 'redis://127.0.0.1:1', connectTimeoutMs: 1000 })).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(3000);
  });

  describe('with a Redis of its own that is stopped and started again', () => {
    const binary = redisServerBinary();
    if (!binary) {
      if (servicesRequired()) throw new Error('redis-server is needed for the restart test (deploy/local/services installs it)');
      process.stderr.write('skipping RedisWindowStore restart test: no redis-server binary\n');
    }
    const maybe = binary ? it : it.skip;
    const own = new PrivateRedis(binary ?? '');
    const start = () => own.start();
    const stop = () => own.stop();
    afterAll(stop);

    maybe('fails commands fast while Redis is down, then works again without being reopened', async () => {
      await start();
      const errors: unknown[] = [];
      const store = await openRedisWindowStore<{ n: number }>({ url: own.url, prefix: 'w', onError: (e) => errors.push(e) });
      try {
        await store.save([{ key: 'r', window: { n: 1 } }]);
        await stop();
        // give the client a moment to notice the closed connection
        await new Promise((r) => setTimeout(r, 100));
        const t0 = Date.now();
        await expect(store.load(['r'])).rejects.toThrow();
        await expect(store.save([{ key: 'r', window: { n: 2 } }])).rejects.toThrow();
        await expect(store.takeDue(Date.now(), 10)).rejects.toThrow();
        expect(Date.now() - t0).toBeLessThan(1000);
        expect(errors.length).toBeGreaterThan(0); // reported, once per outage
        expect(errors.length).toBeLessThan(3);
        await start(); // empty again: no persistence
        const t1 = Date.now();
        for (;;) {
          try {
            await store.save([{ key: 'r', window: { n: 3 } }]);
            break;
          } catch (err) {
            if (Date.now() - t1 > 10_000) throw err;
            await new Promise((r) => setTimeout(r, 100));
          }
        }
        expect((await store.load(['r'])).get('r')).toEqual({ n: 3 });
      } finally {
        await store.close();
      }
    }, 30_000);
  });

  describe('member fields (memberFields: a run window\'s span ids, kept in a hash beside it once many)', () => {
    type Win = { n: number; seen: Record<string, 1>; rev?: number };
    const open = (p: string) => openRedisWindowStore<Win>({ url, prefix: p, memberFields: ['seen'] });
    const ask = (key: string, ...ids: string[]) => new Map([[key, { seen: ids }]]);
    const ids = (n: number, from = 0) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`s${from + i}`, 1 as const]));
    const json = async (p: string) => JSON.parse((await raw.get(`${p}:w:k`))!);
    /** A store on a prefix of its own, closed after `fn`. */
    const withOpen = async (fn: (store: RedisWindowStore<Win>, p: string) => Promise<void>) => {
      const p = prefix();
      const store = await open(p);
      try {
        await fn(store, p);
      } finally {
        await store.close();
      }
    };

    it('keeps a short run\'s ids in its JSON, one string as before; past INLINE_MEMBERS they move to the hash', async () => {
      await withOpen(async (store, p) => {
        await store.save([{ key: 'k', window: { n: 1, seen: ids(INLINE_MEMBERS) }, expectRev: 0 }]);
        expect(Object.keys((await json(p)).seen)).toHaveLength(INLINE_MEMBERS);
        expect(await raw.exists(`${p}:w:k:m`)).toBe(0);
        // loaded whole, whatever is asked
        const w = (await store.load(['k'], ask('k', 's1')))!.get('k')!;
        expect(Object.keys(w.seen)).toHaveLength(INLINE_MEMBERS);
        w.seen.more = 1;
        await store.save([{ key: 'k', window: w, expectRev: 1 }]);
        expect((await json(p)).seen).toBe('#hash');
        expect(await raw.hlen(`${p}:w:k:m`)).toBe(INLINE_MEMBERS + 1);
      });
    });

    it('loads only the entries asked about, and a save adds what the field holds, never the whole field again', async () => {
      await withOpen(async (store, p) => {
        await store.save([{ key: 'k', window: { n: 1, seen: ids(2000) }, expectRev: 0, ttlMs: 60_000 }]);
        expect(await json(p)).toEqual({ n: 1, seen: '#hash' });
        expect(await raw.hlen(`${p}:w:k:m`)).toBe(2000);
        const w = (await store.load(['k'], ask('k', 's5', 's1999', 'new')))!.get('k')!;
        expect(w).toEqual({ n: 1, seen: { s5: 1, s1999: 1 } });
        expect((await store.load(['k'])).get('k')).toEqual({ n: 1, seen: {} });
        // the batch's new id added to what was loaded: saved as that, the rest kept
        w.seen.new = 1;
        w.n = 2;
        await store.save([{ key: 'k', window: w, expectRev: 1, ttlMs: 60_000 }]);
        expect(await raw.hlen(`${p}:w:k:m`)).toBe(2001);
        expect((await store.load(['k'], ask('k', 's0', 'new', 'other'))).get('k')).toEqual({ n: 2, seen: { s0: 1, new: 1 } });
        // the hash expires with the window
        const ttl = await raw.pttl(`${p}:w:k:m`);
        expect(ttl).toBeGreaterThan(50_000);
        expect(ttl).toBeLessThanOrEqual(60_000);
      });
    });

    it('reads the ids of a window another replica moved to the hash (a second round trip)', async () => {
      const p = prefix();
      const a = await open(p);
      const b = await open(p);
      try {
        await a.save([{ key: 'k', window: { n: 1, seen: ids(10) }, expectRev: 0 }]);
        // a loads it inline, so a does not know when b moves it
        expect(Object.keys((await a.load(['k'], ask('k', 's1'))).get('k')!.seen)).toHaveLength(10);
        const wb = (await b.load(['k'], ask('k'))).get('k')!;
        Object.assign(wb.seen, ids(300, 10));
        await b.save([{ key: 'k', window: wb, expectRev: 1 }]);
        expect((await a.load(['k'], ask('k', 's1', 's300', 'none'))).get('k')!.seen).toEqual({ s1: 1, s300: 1 });
      } finally {
        await a.close();
        await b.close();
      }
    });

    it('saves a window loaded from the hash back to the hash, as a copy and whatever the store remembers', async () => {
      await withOpen(async (store, p) => {
        await store.save([{ key: 'k', window: { n: 1, seen: ids(300) }, expectRev: 0 }]);
        const w = (await store.load(['k'], ask('k', 'new'))).get('k')!;
        // the store's memory of windows in the hash is bounded: here it has forgotten this one
        (store as unknown as { hashed: Set<string> }).hashed.clear();
        // as the rule engine saves it: a copy of the loaded window, its field added to in place
        w.seen.new = 1;
        await store.save([{ key: 'k', window: { ...w, n: 2 }, expectRev: 1 }]);
        expect((await json(p)).seen).toBe('#hash');
        expect((await store.load(['k'], ask('k', 's7', 'new'))).get('k')).toEqual({ n: 2, seen: { s7: 1, new: 1 } });
      });
    });

    it('starts a window saved anew without the ids of the one deleted or expired before it', async () => {
      await withOpen(async (store, p) => {
        await store.save([{ key: 'k', window: { n: 1, seen: ids(300) }, expectRev: 0 }]);
        await store.delete(['k']);
        expect(await raw.exists(`${p}:w:k:m`)).toBe(0);
        await store.save([{ key: 'k', window: { n: 1, seen: ids(300, 1000) }, expectRev: 0, ttlMs: 2_000 }]);
        expect((await store.load(['k'], ask('k', 's1', 's1001'))).get('k')!.seen).toEqual({ s1001: 1 });
        // Redis expires the window, its revision and its ids together
        await until('the window and its ids to expire', async () => (await raw.exists(`${p}:w:k`, `${p}:w:k:rev`, `${p}:w:k:m`)) === 0, 10_000, 50);
        // expired: a new window of the same run, whose store still takes it as one in the hash
        await store.save([{ key: 'k', window: { n: 9, seen: { y: 1 } }, expectRev: 0 }]);
        expect((await store.load(['k'], ask('k', 's1001', 'y'))).get('k')!.seen).toEqual({ y: 1 });
      });
    });

    it('writes nothing of a save whose revision is stale, its ids included', async () => {
      await withOpen(async (store) => {
        await store.save([{ key: 'k', window: { n: 1, seen: ids(300) }, expectRev: 0 }]);
        await store.save([{ key: 'k', window: { n: 2, seen: { b: 1 } }, expectRev: 1 }]);
        await expect(store.save([{ key: 'k', window: { n: 3, seen: { c: 1 } }, expectRev: 1 }])).rejects.toBeInstanceOf(WindowConflictError);
        expect((await store.load(['k'], ask('k', 's0', 'b', 'c'))).get('k')).toEqual({ n: 2, seen: { s0: 1, b: 1 } });
      });
    });

    it('reads a window stored whole before (its ids in the JSON) as it was, and moves a large one to the hash at its next save', async () => {
      const p = prefix();
      const before = await openRedisWindowStore<Win>({ url, prefix: p });
      const store = await open(p);
      try {
        await before.save([{ key: 'k', window: { n: 1, seen: ids(500) }, expectRev: 0 }]);
        const w = (await store.load(['k'], ask('k', 'c'))).get('k')!;
        expect(Object.keys(w.seen)).toHaveLength(500);
        w.seen.c = 1;
        await store.save([{ key: 'k', window: w, expectRev: 1 }]);
        expect((await json(p)).seen).toBe('#hash');
        expect((await store.load(['k'], ask('k', 's1', 'c', 'z'))).get('k')!.seen).toEqual({ s1: 1, c: 1 });
      } finally {
        await before.close();
        await store.close();
      }
    });

    it('saves a window of 200,000 span ids (a long run first moved to the hash), which the call stack could not pass as arguments', async () => {
      await withOpen(async (store, p) => {
        await store.save([{ key: 'k', window: { n: 1, seen: ids(200_000) }, expectRev: 0 }]);
        expect(await raw.hlen(`${p}:w:k:m`)).toBe(200_000);
        const w = (await store.load(['k'], ask('k', 's0', 's199999', 's200000')))!.get('k')!;
        expect(w.seen).toEqual({ s0: 1, s199999: 1 });
      });
    });

    it('keeps an id named __proto__ as an entry of its own', async () => {
      await withOpen(async (store) => {
        const seen = ids(300);
        Object.defineProperty(seen, '__proto__', { value: 1, enumerable: true, writable: true, configurable: true });
        await store.save([{ key: 'k', window: { n: 1, seen }, expectRev: 0 }]);
        const got = (await store.load(['k'], ask('k', '__proto__', 'constructor'))).get('k')!.seen;
        expect(Object.keys(got)).toEqual(['__proto__']);
        expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
      });
    });
  });

  describe('windows kept by revision (cacheWindows: a run\'s next batch takes the window it saved without reading it)', () => {
    type Win = { n: number; rev?: number; seen?: Record<string, 1> };
    /** Two stores on one prefix, as two replicas; closed after `fn`. */
    const withStores = async (opts: { cacheWindows?: number; cacheBytes?: number; memberFields?: string[] }, fn: (a: RedisWindowStore<Win>, b: RedisWindowStore<Win>, p: string) => Promise<void>) => {
      const p = prefix();
      const a = await openRedisWindowStore<Win>({ url, prefix: p, ...opts });
      const b = await openRedisWindowStore<Win>({ url, prefix: p, ...opts });
      try {
        await fn(a, b, p);
      } finally {
        await a.close();
        await b.close();
      }
    };

    it('hands the saved window out once, by its revision; the next load reads Redis again', async () => {
      await withStores({}, async (a) => {
        const saved = { n: 1, rev: 1 };
        await a.save([{ key: 'k', window: saved, expectRev: 0 }]);
        const first = (await a.load(['k', 'none'])).get('k');
        expect(first).toBe(saved);
        expect(a.cacheStats).toEqual({ hits: 1, stale: 0 });
        // A step that changed it and was never saved: the next load does not see its change.
        first!.n = 99;
        const second = (await a.load(['k'])).get('k');
        expect(second).not.toBe(saved);
        expect(second).toEqual({ n: 1, rev: 1 });
        expect(a.cacheStats.hits).toBe(1);
      });
    });

    it('reads the window another replica saved since, not the one it kept', async () => {
      await withStores({}, async (a, b) => {
        await a.save([{ key: 'k', window: { n: 1, rev: 1 }, expectRev: 0 }, { key: 'j', window: { n: 7, rev: 1 }, expectRev: 0 }]);
        const theirs = (await b.load(['k'])).get('k')!;
        await b.save([{ key: 'k', window: { ...theirs, n: 2, rev: 2 }, expectRev: 1 }]);
        const got = await a.load(['k', 'j']);
        expect(got.get('k')).toEqual({ n: 2, rev: 2 });
        expect(got.get('j')).toEqual({ n: 7, rev: 1 });
        expect(a.cacheStats).toEqual({ hits: 1, stale: 1 });
        // and its compare-and-set is against that revision
        await a.save([{ key: 'k', window: { n: 3, rev: 3 }, expectRev: 2 }]);
        await expect(b.save([{ key: 'k', window: { n: 4, rev: 3 }, expectRev: 2 }])).rejects.toBeInstanceOf(WindowConflictError);
        expect((await b.load(['k'])).get('k')).toEqual({ n: 3, rev: 3 });
      });
    });

    it('keeps nothing of a window deleted or expired in Redis, of a save refused, or past its ttl', async () => {
      await withStores({}, async (a, b, p) => {
        await a.save([{ key: 'gone', window: { n: 1, rev: 1 }, expectRev: 0 }]);
        await raw.del(`${p}:w:gone`, `${p}:w:gone:rev`);
        expect((await a.load(['gone'])).has('gone')).toBe(false);

        await b.save([{ key: 'taken', window: { n: 1, rev: 1 }, expectRev: 0 }]);
        await expect(a.save([{ key: 'taken', window: { n: 5, rev: 1 }, expectRev: 0 }])).rejects.toBeInstanceOf(WindowConflictError);
        expect((await a.load(['taken'])).get('taken')).toEqual({ n: 1, rev: 1 });

        await a.save([{ key: 'short', window: { n: 1, rev: 1 }, expectRev: 0, ttlMs: 50 }]);
        await new Promise((r) => setTimeout(r, 120));
        expect((await a.load(['short'])).has('short')).toBe(false);
        expect(a.cacheStats).toEqual({ hits: 0, stale: 0 });
      });
    });

    it('keeps at most cacheWindows windows (the oldest saved go first), none with 0, none saved without compare-and-set', async () => {
      await withStores({ cacheWindows: 2 }, async (a) => {
        const w = (n: number) => ({ n, rev: 1 });
        const saved = [w(1), w(2), w(3)];
        await a.save(saved.map((window, i) => ({ key: `k${i}`, window, expectRev: 0 })));
        const free = { n: 4 };
        await a.save([{ key: 'free', window: free }]);
        const got = await a.load(['k0', 'k1', 'k2', 'free']);
        expect(got.get('k0')).not.toBe(saved[0]);
        expect(got.get('k1')).toBe(saved[1]);
        expect(got.get('k2')).toBe(saved[2]);
        expect(got.get('free')).not.toBe(free);
        expect(got.get('free')).toEqual({ n: 4 });
      });
      await withStores({ cacheWindows: 0 }, async (a) => {
        const saved = { n: 1, rev: 1 };
        await a.save([{ key: 'k', window: saved, expectRev: 0 }]);
        expect((await a.load(['k'])).get('k')).not.toBe(saved);
      });
    });

    it('keeps at most cacheBytes of their JSON (the oldest saved go first), and no window larger than that', async () => {
      // {"n":1,"rev":1} is 15 bytes: two fit in 30.
      await withStores({ cacheBytes: 30 }, async (a) => {
        const saved = [1, 2, 3].map((n) => ({ n, rev: 1 }));
        await a.save(saved.map((window, i) => ({ key: `k${i}`, window, expectRev: 0 })));
        const got = await a.load(['k0', 'k1', 'k2']);
        expect(got.get('k0')).not.toBe(saved[0]);
        expect(got.get('k0')).toEqual({ n: 1, rev: 1 });
        expect(got.get('k1')).toBe(saved[1]);
        expect(got.get('k2')).toBe(saved[2]);
        const big = { n: 1, rev: 1, seen: { 'a-span-id-long-enough': 1 as const } };
        await a.save([{ key: 'big', window: big, expectRev: 0 }]);
        expect((await a.load(['big'])).get('big')).not.toBe(big);
      });
    });

    it('does not keep a window whose span ids are in the hash: a load asks the hash for the batch\'s ids', async () => {
      await withStores({ memberFields: ['seen'] }, async (a) => {
        const seen = Object.fromEntries(Array.from({ length: INLINE_MEMBERS + 1 }, (_, i) => [`s${i}`, 1 as const]));
        const saved = { n: 1, rev: 1, seen };
        await a.save([{ key: 'k', window: saved, expectRev: 0 }]);
        const got = (await a.load(['k'], new Map([['k', { seen: ['s3', 'new'] }]]))).get('k')!;
        expect(got).not.toBe(saved);
        expect(Object.keys(got.seen!)).toEqual(['s3']);
      });
    });
  });

  describe('list fields (listFields: the question scheduler\'s ring, kept in a list beside the window)', () => {
    type Win = { n: number; rev?: number; ring?: number[] };
    const open = (p: string, listFields: string[] = ['ring'], writeLists?: boolean) => openRedisWindowStore<Win>({ url, prefix: p, listFields, writeLists });
    const list = async (p: string, key = 'k') => (await raw.lrange(`${p}:w:${key}:l:ring`, 0, -1)).map((x) => JSON.parse(x) as unknown);
    /** What the scheduler hands to save: a copy of the loaded window at the next revision, saying how its ring moved. */
    const next = (w: Win, change: (ring: number[]) => { dropped: number; appended: number } | undefined): Win => {
      const ring = (w.ring ?? []).slice();
      const shift = change(ring);
      const saved = { ...w, ring, rev: (w.rev ?? 0) + 1 };
      return shift ? markShifted(saved, { ring: shift }) : saved;
    };
    const push = (...items: number[]) => (ring: number[]) => {
      ring.push(...items);
      const dropped = Math.max(0, ring.length - 4);
      ring.splice(0, dropped);
      return { dropped, appended: items.length };
    };

    it('keeps an array written whole in the JSON; once a save says how it moved, in a list that loads back whole', async () => {
      const p = prefix();
      const a = await open(p);
      const b = await open(p);
      try {
        // a new window: the array in the JSON, one string, no list
        await a.save([{ key: 'k', window: { n: 1, ring: [1, 2], rev: 1 }, expectRev: 0, ttlMs: 60_000 }]);
        expect(JSON.parse((await raw.get(`${p}:w:k`))!)).toEqual({ n: 1, ring: [1, 2], rev: 1 });
        expect(await raw.exists(`${p}:w:k:l:ring`)).toBe(0);
        await a.save([{ key: 'k', window: next((await a.load(['k'])).get('k')!, push(3)), expectRev: 1, ttlMs: 60_000 }]);
        expect(JSON.parse((await raw.get(`${p}:w:k`))!)).toEqual({ n: 1, ring: '#list', rev: 2 });
        expect(await list(p)).toEqual([1, 2, 3]);
        // the list expires with the window
        const ttl = await raw.pttl(`${p}:w:k:l:ring`);
        expect(ttl).toBeGreaterThan(50_000);
        expect(ttl).toBeLessThanOrEqual(60_000);
        expect((await b.load(['k'])).get('k')).toEqual({ n: 1, ring: [1, 2, 3], rev: 2 });
      } finally {
        await a.close();
        await b.close();
      }
    });

    it('writes only the items appended and trims the dropped ones when the window says how its array moved', async () => {
      const p = prefix();
      const store = await open(p);
      try {
        let w: Win = { n: 1, ring: [1, 2, 3], rev: 1 };
        await store.save([{ key: 'k', window: w, expectRev: 0 }]);
        w = next((await store.load(['k'])).get('k')!, push(4));
        await store.save([{ key: 'k', window: w, expectRev: 1 }]);
        w = next((await store.load(['k'])).get('k')!, push(5));
        await store.save([{ key: 'k', window: w, expectRev: 2 }]);
        expect(await list(p)).toEqual([2, 3, 4, 5]);
        // An item changed behind the store's back stays: the next save pushed and trimmed, it did not write the list again.
        await raw.lset(`${p}:w:k:l:ring`, 2, '40');
        w = next((await store.load(['k'])).get('k')!, push(6));
        await store.save([{ key: 'k', window: w, expectRev: 3 }]);
        expect(await list(p)).toEqual([3, 40, 5, 6]);
        // A save that does not say how the array moved (an item replaced in place) writes it whole, in the JSON.
        w = next((await store.load(['k'])).get('k')!, (ring) => void (ring[0] = 30));
        await store.save([{ key: 'k', window: w, expectRev: 4 }]);
        expect(JSON.parse((await raw.get(`${p}:w:k`))!).ring).toEqual([30, 4, 5, 6]);
        expect(await raw.exists(`${p}:w:k:l:ring`)).toBe(0);
        // So does one that dropped some of its own appended items (more pushed than the ring holds).
        w = next((await store.load(['k'])).get('k')!, push(7));
        await store.save([{ key: 'k', window: w, expectRev: 5 }]);
        expect(await list(p)).toEqual([4, 5, 6, 7]);
        w = next((await store.load(['k'])).get('k')!, push(8, 9, 10, 11, 12));
        await store.save([{ key: 'k', window: w, expectRev: 6 }]);
        expect(JSON.parse((await raw.get(`${p}:w:k`))!).ring).toEqual([9, 10, 11, 12]);
        expect(await raw.exists(`${p}:w:k:l:ring`)).toBe(0);
        expect((await store.load(['k'])).get('k')!.ring).toEqual([9, 10, 11, 12]);
      } finally {
        await store.close();
      }
    });

    it('writes the list whole when it is not the one this store last read or wrote', async () => {
      const p = prefix();
      const a = await open(p);
      const b = await open(p);
      try {
        await a.save([{ key: 'k', window: { n: 1, ring: [1], rev: 1 }, expectRev: 0 }]);
        await a.save([{ key: 'k', window: next((await a.load(['k'])).get('k')!, push(2)), expectRev: 1 }]);
        // b read it and moved it on: a's kept window is stale, a reads it again (its list too), and its save is a push
        const wb = next((await b.load(['k'])).get('k')!, push(3));
        await b.save([{ key: 'k', window: wb, expectRev: 2 }]);
        await raw.lset(`${p}:w:k:l:ring`, 0, '100');
        const wa = next((await a.load(['k'])).get('k')!, push(4));
        expect(wa.ring).toEqual([100, 2, 3, 4]);
        await raw.lset(`${p}:w:k:l:ring`, 0, '1');
        await a.save([{ key: 'k', window: wa, expectRev: 3 }]);
        expect(await list(p)).toEqual([1, 2, 3, 4]);
        // a store that has forgotten which lists it knows (a bounded memory) writes the whole array
        await raw.lset(`${p}:w:k:l:ring`, 1, '200');
        const again = next((await a.load(['k'])).get('k')!, push(5));
        (a as unknown as { listed: Set<string> }).listed.clear();
        await a.save([{ key: 'k', window: again, expectRev: 4 }]);
        expect(await list(p)).toEqual([2, 3, 4, 5]);
        // a save whose revision is stale writes nothing, the list included
        await expect(b.save([{ key: 'k', window: next(wb, push(99)), expectRev: 3 }])).rejects.toThrow(WindowConflictError);
        expect(await list(p)).toEqual([2, 3, 4, 5]);
      } finally {
        await a.close();
        await b.close();
      }
    });

    it('with writeLists off (a rolling upgrade from a version without lists), reads a list and writes the array back in the JSON', async () => {
      const p = prefix();
      const store = await open(p);
      const rolling = await open(p, ['ring'], false);
      try {
        await store.save([{ key: 'k', window: { n: 1, ring: [1, 2], rev: 1 }, expectRev: 0 }]);
        await store.save([{ key: 'k', window: next((await store.load(['k'])).get('k')!, push(3)), expectRev: 1 }]);
        expect(await list(p)).toEqual([1, 2, 3]);
        const w = next((await rolling.load(['k'])).get('k')!, push(4));
        expect(w.ring).toEqual([1, 2, 3, 4]);
        await rolling.save([{ key: 'k', window: w, expectRev: 2 }]);
        // what a store of the version before reads: the array in the JSON, no list
        expect(JSON.parse((await raw.get(`${p}:w:k`))!).ring).toEqual([1, 2, 3, 4]);
        expect(await raw.exists(`${p}:w:k:l:ring`)).toBe(0);
      } finally {
        await store.close();
        await rolling.close();
      }
    });

    describe('rolling back to a version that cannot read lists (writeLists off: NEATROOTS_REDIS_RING_LISTS=off)', () => {
      /** A window of the run key `key` kept with its ring in a list, at revision 2, as a store writing lists leaves it. */
      const listed = async (store: RedisWindowStore<Win>, key: string, ring: number[]) => {
        await store.save([{ key, window: { n: 1, ring: ring.slice(0, 1), rev: 1 }, expectRev: 0, ttlMs: 60_000 }]);
        await store.save([{ key, window: next((await store.load([key])).get(key)!, push(...ring.slice(1))), expectRev: 1, ttlMs: 60_000 }]);
        expect(JSON.parse((await raw.get(`${p0(store)}:w:${key}`))!).ring).toBe('#list');
      };
      const p0 = (store: RedisWindowStore<Win>) => (store as unknown as { windowPrefix: string }).windowPrefix.replace(/:w:$/, '');
      /** What a rule engine of the version before reads: the window's JSON alone, the ring an array in it. */
      const asBefore = async (p: string, key: string) => JSON.parse((await raw.get(`${p}:w:${key}`))!) as Win;

      it('folds a window loaded with lists back into its JSON at the load, its list removed, its revision and expiry kept; saved, it stays so', async () => {
        const p = prefix();
        const store = await open(p);
        const off = await open(p, ['ring'], false);
        const before = await openRedisWindowStore<Win>({ url, prefix: p });
        try {
          await listed(store, 'k', [1, 2, 3]);
          const ttl = await raw.pttl(`${p}:w:k`);
          // a load alone, no save (a batch that changed nothing, or failed)
          expect((await off.load(['k'])).get('k')).toEqual({ n: 1, ring: [1, 2, 3], rev: 2 });
          expect(await raw.exists(`${p}:w:k:l:ring`)).toBe(0);
          expect(await asBefore(p, 'k')).toEqual({ n: 1, ring: [1, 2, 3], rev: 2 });
          expect(await raw.get(`${p}:w:k:rev`)).toBe('2');
          const kept = await raw.pttl(`${p}:w:k`);
          expect(kept).toBeGreaterThan(0);
          expect(kept).toBeLessThanOrEqual(ttl);
          // the version before (no list fields) reads the ring as an array
          expect((await before.load(['k'])).get('k')!.ring).toEqual([1, 2, 3]);
          // and a save through the store writing no lists keeps it in the JSON
          await off.save([{ key: 'k', window: next((await off.load(['k'])).get('k')!, push(4)), expectRev: 2, ttlMs: 60_000 }]);
          expect(await raw.exists(`${p}:w:k:l:ring`)).toBe(0);
          expect(await asBefore(p, 'k')).toEqual({ n: 1, ring: [1, 2, 3, 4], rev: 3 });
        } finally {
          await Promise.all([store, off, before].map((x) => x.close()));
        }
      });

      it('folds every window with lists, those no batch loads too (runs left open): inlineAllLists, and at the start of a store with inlineListsEveryMs', async () => {
        const p = prefix();
        const store = await open(p);
        try {
          for (const key of ['p\u0000left-open-1', 'p\u0000left-open-2']) await listed(store, key, [1, 2, 3]);
          await store.save([{ key: 'p\u0000no-list', window: { n: 5, ring: [7], rev: 1 }, expectRev: 0 }]);
          const folded: number[] = [];
          const off = await openRedisWindowStore<Win>({ url, prefix: p, listFields: ['ring'], writeLists: false, inlineListsEveryMs: 60_000, onListsInlined: (n) => void folded.push(n) });
          try {
            await until('the sweep at the store\'s start', () => folded.length > 0);
            expect(folded).toEqual([2]);
            expect(await raw.keys(`${p}:*:l:*`)).toEqual([]);
            for (const key of ['p\u0000left-open-1', 'p\u0000left-open-2']) expect(await asBefore(p, key)).toEqual({ n: 1, ring: [1, 2, 3], rev: 2 });
            expect(await asBefore(p, 'p\u0000no-list')).toEqual({ n: 5, ring: [7], rev: 1 });
            // a window a replica still writing lists moved on meanwhile: the next sweep folds it
            await listed(store, 'p\u0000late', [4, 5]);
            expect(await off.inlineAllLists()).toBe(1);
            expect(await raw.keys(`${p}:*:l:*`)).toEqual([]);
            expect(await off.inlineAllLists()).toBe(0);
          } finally {
            await off.close();
          }
        } finally {
          await store.close();
        }
      });

      it('refuses a push onto a list folded meanwhile as a conflict, rather than leave a list of the new items only', async () => {
        const p = prefix();
        const a = await open(p);
        const off = await open(p, ['ring'], false);
        try {
          await listed(a, 'k', [1, 2, 3]);
          const w = next((await a.load(['k'])).get('k')!, push(4));
          await off.load(['k']);
          expect(await raw.exists(`${p}:w:k:l:ring`)).toBe(0);
          // same revision (a fold keeps it), but the list is not the one a read: nothing written
          await expect(a.save([{ key: 'k', window: w, expectRev: 2 }])).rejects.toThrow(WindowConflictError);
          expect(await asBefore(p, 'k')).toEqual({ n: 1, ring: [1, 2, 3], rev: 2 });
          // loaded again, its save writes the ring whole
          await a.save([{ key: 'k', window: next((await a.load(['k'])).get('k')!, push(4)), expectRev: 2 }]);
          expect((await off.load(['k'])).get('k')!.ring).toEqual([1, 2, 3, 4]);
        } finally {
          await a.close();
          await off.close();
        }
      });
    });

    it('holds the same ring as a model over random steps of two replicas (pushes, bursts, items replaced, nothing changed)', async () => {
      const p = prefix();
      const stores = [await open(p), await open(p)];
      const reader = await open(p);
      try {
        // a small generator of its own: the same steps every run
        let seed = 42;
        const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed % n);
        let model: number[] = [];
        let rev = 0;
        let item = 0;
        for (let step = 0; step < 300; step++) {
          const store = stores[rnd(2)];
          const loaded = rev === 0 ? { n: 0, ring: [] as number[] } : (await store.load(['k'])).get('k')!;
          expect(loaded.ring).toEqual(model);
          const op = rnd(10);
          const w = next({ ...loaded, rev }, (ring) => {
            if (op < 6) return push(...Array.from({ length: 1 + rnd(op < 5 ? 2 : 7) }, () => ++item))(ring);
            if (op < 8 && ring.length) return void (ring[rnd(ring.length)] = ++item);
            return { dropped: 0, appended: 0 };
          });
          await store.save([{ key: 'k', window: w, expectRev: rev }]);
          rev++;
          model = w.ring!;
          expect((await reader.load(['k'])).get('k')!.ring).toEqual(model);
        }
      } finally {
        await Promise.all([...stores, reader].map((x) => x.close()));
      }
    });

    it('moves a window\'s array stored in its JSON to a list at its next save that says how it moved; keeps none for a window without it', async () => {
      const p = prefix();
      const before = await open(p, []);
      const store = await open(p);
      try {
        await before.save([{ key: 'k', window: { n: 1, ring: [1, 2, 3, 4], rev: 1 }, expectRev: 0 }, { key: 'j', window: { n: 2, rev: 1 }, expectRev: 0 }]);
        const loaded = await store.load(['k', 'j']);
        expect(loaded.get('j')).toEqual({ n: 2, rev: 1 });
        await store.save([{ key: 'k', window: next(loaded.get('k')!, push(5)), expectRev: 1 }]);
        expect(await list(p)).toEqual([2, 3, 4, 5]);
        expect(JSON.parse((await raw.get(`${p}:w:k`))!).ring).toBe('#list');
        // a window without the field keeps no list
        await store.save([{ key: 'j', window: { ...loaded.get('j')!, n: 3, rev: 2 }, expectRev: 1 }]);
        expect(await raw.exists(`${p}:w:j:l:ring`)).toBe(0);
        // and deleting a window deletes its list
        await store.delete(['k']);
        expect(await raw.exists(`${p}:w:k:l:ring`)).toBe(0);
        expect((await store.load(['k'])).get('k')).toBeUndefined();
      } finally {
        await before.close();
        await store.close();
      }
    });
  });

  describe('a rule engine replica that takes over a run', () => {
    const checks: RuleCheck[] = [
      { id: 'rep', kind: 'rule', title: 'rep', action: 'flag', source: 'user', rule: { type: 'repeat', span: { type: ['tool'] }, same: ['tool', 'input'], at_least: 3 } },
      { id: 'refund', kind: 'rule', title: 'refund', action: 'flag', source: 'user', rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } } },
    ];
    const set = compileRuleSet(checks, (_c, pattern) => ({ test: (s: string) => new RegExp(pattern).test(s) }));
    const T = 1_700_000_000_000;
    const env = (raw: Record<string, unknown>, at: number): Envelope => ({ project: 'p', received_ms: T + at, item: normalizeItem(raw) });
    const tool = (id: string, name: string, input: unknown, start: number) =>
      ({ run_id: 'r1', span_id: id, type: 'tool', tool: name, input, start_ms: T + start, end_ms: T + start + 10 });

    /** Feeds the steps to engines; `engineFor(i)` gives the engine for step i. */
    async function run(engineFor: (step: number) => Promise<RuleEngine>): Promise<FindingEvent[]> {
      const out: FindingEvent[] = [];
      const steps: (() => Promise<{ findings: FindingEvent[]; commit(): Promise<void> }>)[] = [];
      let e: RuleEngine;
      steps.push(async () => e.process([env(tool('s1', 'issue_refund', { id: 7 }, 0), 0), env(tool('s2', 'search', { q: 'a' }, 10), 10)]));
      steps.push(async () => e.process([env(tool('s3', 'search', { q: 'a' }, 20), 20)]));
      // -- the first replica is gone here; the second goes on from Redis --
      // s2 exported again beside s4: counted once, by the second replica that never loaded it whole
      steps.push(async () => e.process([env(tool('s2', 'search', { q: 'a' }, 10), 30), env(tool('s4', 'search', { q: 'a' }, 30), 30)]));
      steps.push(async () => e.tick(T + 1000));
      for (let i = 0; i < steps.length; i++) {
        e = await engineFor(i);
        const o = await steps[i]();
        out.push(...o.findings);
        await o.commit();
      }
      return out;
    }

    it('counts a long run\'s span exported again once, over replicas that load only each batch\'s ids', async () => {
      const p = prefix();
      const stores: RedisWindowStore<RunWindow>[] = [];
      try {
        let engine: RuleEngine | undefined;
        const batches = Array.from({ length: 6 }, (_, b) => Array.from({ length: 100 }, (_, i) => env(tool(`s${b * 100 + i}`, 'search', { q: `${i}` }, b * 100 + i), b * 100 + i)));
        // the last batch: a span of the first exported again, beside a new one
        batches.push([env(tool('s5', 'search', { q: '5' }, 5), 700), env(tool('s600', 'search', { q: 'x' }, 600), 700)]);
        for (let b = 0; b < batches.length; b++) {
          if (b % 3 === 0) {
            const store = await openRedisWindowStore<RunWindow>({ url, prefix: p, memberFields: RUN_WINDOW_MEMBER_FIELDS });
            stores.push(store);
            engine = new RuleEngine({ windows: store, rules: () => set });
          }
          await (await engine!.process(batches[b])).commit();
        }
        const key = 'p\u0000r1';
        expect(JSON.parse((await raw.get(`${p}:w:${key}`))!).seen).toBe('#hash');
        expect(await raw.hlen(`${p}:w:${key}:m`)).toBe(601);
        const w = (await stores[0].load([key])).get(key)!;
        expect(w.metrics.spans).toBe(601);
      } finally {
        await Promise.all(stores.map((s) => s.close()));
      }
    });

    it('continues the streak and fires the pending requires_before wait where the first one stopped', async () => {
      const memory = new MemoryWindowStore<RunWindow>();
      const one = new RuleEngine({ windows: memory, rules: () => set });
      const expected = await run(async () => one);
      expect(expected.map((f) => `${f.check_id}:${f.status}:${f.count}`)).toEqual(['rep:raised:3', 'refund:raised:1']);

      const p = prefix();
      const stores: WindowStore<RunWindow>[] = [];
      let current: RuleEngine | undefined;
      try {
        const got = await run(async (step) => {
          if (step === 0 || step === 2) {
            // a new process: its own connection, an engine with nothing in memory
            if (stores.length) await stores[stores.length - 1].close();
            const store: RedisWindowStore<RunWindow> = await openRedisWindowStore<RunWindow>({ url, prefix: p, memberFields: RUN_WINDOW_MEMBER_FIELDS });
            stores.push(store);
            current = new RuleEngine({ windows: store, rules: () => set });
          }
          return current!;
        });
        expect(got).toEqual(expected);
      } finally {
        await Promise.all(stores.map((s) => s.close()));
      }
    });
  });
});
