import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { compileRuleSet, RuleEngine, type FindingEvent, type RuleCheck, type RunWindow } from '@neatroots/checks';
import { normalizeItem, type Envelope } from '@neatroots/spans';
import type { WindowStore } from '@neatroots/ports';
import { serviceOrSkip, servicesRequired, uniqueName } from '../testing/services';
import { MemoryWindowStore } from './memory';
import { openRedisWindowStore, RedisWindowStore } from './redis';

const redis = serviceOrSkip('redis', 'RedisWindowStore');

(redis ? describe : describe.skip)('RedisWindowStore', () => {
  const url = redis?.url ?? '';
  const prefixes: string[] = [];
  const prefix = () => {
    const p = uniqueName('it_windows');
    prefixes.push(p);
    return p;
  };
  let raw: Redis;

  beforeAll(() => {
    raw = new Redis(url);
  });
  afterAll(async () => {
    for (const p of prefixes) {
      const keys = await raw.keys(`${p}:*`);
      if (keys.length) await raw.del(...keys);
    }
    raw.disconnect();
  });

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
    const binary = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'].find((b) => existsSync(b));
    if (!binary) {
      if (servicesRequired()) throw new Error('redis-server is needed for the restart test (deploy/local/services installs it)');
      process.stderr.write('skipping RedisWindowStore restart test: no redis-server binary\n');
    }
    const maybe = binary ? it : it.skip;
    let server: ChildProcess | undefined;
    let port = 0;

    const freePort = () =>
      new Promise<number>((resolve, reject) => {
        const s = createServer();
        s.listen(0, '127.0.0.1', () => {
          const a = s.address();
          s.close(() => (a && typeof a === 'object' ? resolve(a.port) : reject(new Error('no port'))));
        });
      });
    const start = async () => {
      server = spawn(binary!, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
      const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => 50, maxRetriesPerRequest: null });
      try {
        for (let i = 0; ; i++) {
          try {
            await probe.connect().catch(() => undefined);
            if ((await probe.ping()) === 'PONG') return;
          } catch {
            if (i > 100) throw new Error('private redis-server did not start');
            await new Promise((r) => setTimeout(r, 50));
          }
        }
      } finally {
        probe.disconnect();
      }
    };
    const stop = async () => {
      const s = server;
      server = undefined;
      if (!s || s.exitCode !== null) return;
      await new Promise<void>((resolve) => {
        s.once('exit', () => resolve());
        s.kill('SIGKILL');
      });
    };
    afterAll(stop);

    maybe('fails commands fast while Redis is down, then works again without being reopened', async () => {
      port = await freePort();
      await start();
      const errors: unknown[] = [];
      const store = await openRedisWindowStore<{ n: number }>({ url: `redis://127.0.0.1:${port}`, prefix: 'w', onError: (e) => errors.push(e) });
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
      steps.push(async () => e.process([env(tool('s4', 'search', { q: 'a' }, 30), 30)]));
      steps.push(async () => e.tick(T + 1000));
      for (let i = 0; i < steps.length; i++) {
        e = await engineFor(i);
        const o = await steps[i]();
        out.push(...o.findings);
        await o.commit();
      }
      return out;
    }

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
            const store: RedisWindowStore<RunWindow> = await openRedisWindowStore<RunWindow>({ url, prefix: p });
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
