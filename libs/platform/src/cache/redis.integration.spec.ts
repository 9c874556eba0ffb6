import { PrivateRedis, RedisScratch, redisServerBinary } from '../testing/private-redis';
import { serviceOrSkip, servicesRequired } from '../testing/services';
import { until } from '../testing/until';
import { RedisSharedCache } from './redis';

const redis = serviceOrSkip('redis', 'RedisSharedCache');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

(redis ? describe : describe.skip)('RedisSharedCache (the question service\'s answers shared across replicas and restarts)', () => {
  const url = redis?.url ?? '';
  const scratch = new RedisScratch(url, 'it_cache');
  const raw = scratch.raw;
  afterAll(() => scratch.cleanup());
  const open = async (prefix = scratch.next()) => {
    const c = new RedisSharedCache({ url, prefix });
    await c.connect();
    return c;
  };

  it('hands one process what another stored, under its name, until the ttl runs out', async () => {
    const prefix = scratch.next();
    const [a, b] = [await open(prefix), await open(prefix)];
    try {
      await a.named('answers').set('model\u0000q1', '{"p":0.9}', 60_000);
      await a.named('answers').set('model\u0000q2', '{"p":0.1}', 2_000);
      expect(await b.named('answers').get('model\u0000q1')).toBe('{"p":0.9}');
      expect(await b.named('answers').get('model\u0000q2')).toBe('{"p":0.1}');
      // another name, and another deployment's prefix, do not see it
      expect(await b.named('other').get('model\u0000q1')).toBeUndefined();
      const c = await open();
      expect(await c.named('answers').get('model\u0000q1')).toBeUndefined();
      await c.close();
      // Redis expires it itself: nothing grows without bound
      const [key] = await raw.keys(`${prefix}:cache:answers:*`);
      expect(key).toMatch(/:cache:answers:[0-9a-f]{40}$/);
      const ttls = await Promise.all((await raw.keys(`${prefix}:cache:answers:*`)).map((k) => raw.pttl(k)));
      expect(Math.min(...ttls)).toBeGreaterThan(0);
      expect(Math.max(...ttls)).toBeLessThanOrEqual(60_000);
      // q2's key goes once its 2 s are up (Redis expires it), q1's stays
      await until('q2 to expire', async () => (await raw.keys(`${prefix}:cache:answers:*`)).length === 1, 10_000, 50);
      expect(await b.named('answers').get('model\u0000q2')).toBeUndefined();
      expect(await b.named('answers').get('model\u0000q1')).toBe('{"p":0.9}');
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('reads as a miss and drops writes at once when Redis is unreachable, and says so once', async () => {
    const errors: unknown[] = [];
    const c = new RedisSharedCache({ url: 'redis://127.0.0.1:1', prefix: 'x', onError: (e) => errors.push(e) });
    const t0 = Date.now();
    await c.connect();
    try {
      const cache = c.named('answers');
      for (let i = 0; i < 5; i++) {
        expect(await cache.get('k')).toBeUndefined();
        await cache.set('k', 'v', 60_000);
      }
      expect(Date.now() - t0).toBeLessThan(2_000);
      expect(errors).toHaveLength(1);
      expect(c.stats.errors).toBe(10);
    } finally {
      await c.close();
    }
  });

  describe('board (what each process tells the others, as the rule engines their disabled checks)', () => {
    it('lists every member\'s entry, replaced at each put, until it is taken off or its time is up', async () => {
      const prefix = scratch.next();
      const [a, b] = [await open(prefix), await open(prefix)];
      try {
        const [ra, rb] = [a.board('disabled-checks'), b.board('disabled-checks')];
        expect(await rb.entries()).toEqual([]);
        await ra.put('engine-1', 'one', 60_000);
        await rb.put('engine-2', 'two', 1_500);
        await ra.put('engine-1', 'one again', 60_000);
        expect((await rb.entries())!.sort()).toEqual(['one again', 'two']);
        // another name, and another deployment's prefix, do not see them
        expect(await a.board('other').entries()).toEqual([]);
        const c = await open();
        expect(await c.board('disabled-checks').entries()).toEqual([]);
        await c.close();
        // engine-2 stopped without taking its entry off (a crash): Redis expires it by its own clock
        await until('engine-2 to expire', async () => (await ra.entries())!.length === 1, 10_000, 50);
        expect(await ra.entries()).toEqual(['one again']);
        // and the read dropped it from the members, so nothing grows with every restart
        expect(await raw.smembers(`${prefix}:board:disabled-checks`)).toEqual(['engine-1']);
        await ra.remove('engine-1');
        expect(await rb.entries()).toEqual([]);
        expect(await raw.keys(`${prefix}:board:*`)).toEqual([]);
      } finally {
        await a.close();
        await b.close();
      }
    });

    it('keeps listing a member whose entry was written again while a read took the expired ones off', async () => {
      const prefix = scratch.next();
      const a = await open(prefix);
      try {
        const board = a.board('disabled-checks');
        // engine-1 listed, its entry gone (expired); it writes again between the read's two steps
        await raw.sadd(`${prefix}:board:disabled-checks`, 'engine-1');
        const client = (a as unknown as { client: { redis: { mget: (...k: string[]) => Promise<(string | null)[]> } } }).client.redis;
        const mget = client.mget.bind(client);
        client.mget = async (...keys: string[]) => {
          const values = await mget(...keys);
          await raw.set(`${prefix}:board:disabled-checks:engine-1`, 'back', 'PX', 60_000);
          return values;
        };
        expect(await board.entries()).toEqual([]);
        client.mget = mget;
        expect(await board.entries()).toEqual(['back']);
      } finally {
        await a.close();
      }
    });

    it('reads as undefined (not an empty list) and gives writes up at once when Redis is unreachable', async () => {
      const errors: unknown[] = [];
      const c = new RedisSharedCache({ url: 'redis://127.0.0.1:1', prefix: 'x', onError: (e) => errors.push(e) });
      const t0 = Date.now();
      await c.connect();
      try {
        const board = c.board('disabled-checks');
        await board.put('engine-1', 'one', 60_000);
        await board.remove('engine-1');
        expect(await board.entries()).toBeUndefined();
        expect(Date.now() - t0).toBeLessThan(2_000);
        expect(errors).toHaveLength(1);
      } finally {
        await c.close();
      }
    });
  });

  describe('with a Redis of its own that is stopped and started again', () => {
    const binary = redisServerBinary();
    if (!binary) {
      if (servicesRequired()) throw new Error('redis-server is needed for the restart test (deploy/local/services installs it)');
      process.stderr.write('skipping RedisSharedCache restart test: no redis-server binary\n');
    }
    const own = new PrivateRedis(binary ?? '');
    afterAll(() => own.stop());

    (binary ? it : it.skip)('misses while Redis is down and shares again once it is back, without being reopened', async () => {
      await own.start();
      const errors: unknown[] = [];
      const c = new RedisSharedCache({ url: own.url, prefix: 'p', onError: (e) => errors.push(e) });
      await c.connect();
      const cache = c.named('answers');
      try {
        await cache.set('k', 'v1', 60_000);
        expect(await cache.get('k')).toBe('v1');
        await own.stop();
        await sleep(100);
        const t0 = Date.now();
        expect(await cache.get('k')).toBeUndefined();
        await cache.set('k', 'v2', 60_000);
        expect(Date.now() - t0).toBeLessThan(1_000);
        expect(errors).toHaveLength(1);
        await own.start(); // empty: no persistence
        const end = Date.now() + 10_000;
        while (Date.now() < end) {
          await cache.set('k', 'v3', 60_000);
          if ((await cache.get('k')) === 'v3') break;
          await sleep(100);
        }
        expect(await cache.get('k')).toBe('v3');
      } finally {
        await c.close();
      }
    }, 30_000);
  });
});
