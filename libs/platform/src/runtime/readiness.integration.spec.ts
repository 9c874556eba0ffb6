import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Logger, Platform, ServiceModule } from '@neatroots/ports';
import { loadConfig, type Config } from '../config';
import { createMetrics } from '../ops';
import { freePort, requireService, uniqueName } from '../testing/services';
import { distributedPlatform } from './platforms';
import { startServices, type Services } from './start';

/**
 * The distributed deployment's /readyz asks each driver a service opened (Kafka, the Redis of
 * its windows and of its jobs, Postgres), each within a bound, and names the one that does not
 * answer: Kubernetes takes the pod out of its Service meanwhile. /healthz never asks them, so an
 * outage does not restart every pod.
 */
const SUITE = 'distributed readiness';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redis && pg ? describe : describe.skip;

const quiet: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {}, child: () => quiet };

type Driver = 'bus' | 'windows' | 'jobs' | 'db';

/** A service using `drivers` as the real ones do (ingest: the bus; review: db, jobs and bus; the rule engine: bus and windows). */
function service(drivers: Driver[], readyOn?: Driver[]): ServiceModule<Config> {
  return {
    name: 'probe',
    needs: [],
    ...(readyOn ? { readyOn } : {}),
    async start(ctx) {
      for (const d of drivers) {
        if (d === 'bus') ctx.platform.bus();
        if (d === 'windows') await ctx.platform.windows('probe');
        if (d === 'jobs') await ctx.platform.jobs();
        if (d === 'db') await ctx.platform.db();
      }
      return { stop: async () => undefined };
    },
  };
}

/** A TCP relay to `target` that cut() breaks (the server behind it going away). */
async function relay(target: string): Promise<{ port: number; cut(): Promise<void> }> {
  const [host, port] = [new URL(target).hostname, Number(new URL(target).port)];
  const sockets = new Set<Socket>();
  const server: Server = createServer((c) => {
    const u = connect(port, host);
    for (const s of [c, u]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        sockets.delete(s);
        c.destroy();
        u.destroy();
      });
    }
    c.pipe(u);
    u.pipe(c);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const relayPort = (server.address() as { port: number }).port;
  return {
    port: relayPort,
    cut: async () => {
      const closed = new Promise<void>((r) => server.close(() => r()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

maybe(SUITE, () => {
  const opened: { platform: Platform; services?: Services }[] = [];
  afterEach(async () => {
    for (const o of opened.splice(0)) await (o.services ? o.services.close() : o.platform.close());
  });

  async function start(drivers: Driver[], env: Record<string, string>, readyOn?: Driver[]) {
    const config = loadConfig({
      NEATROOTS_KAFKA_BROKERS: kafka!.join(','),
      NEATROOTS_REDIS_URL: redis!,
      NEATROOTS_PG_URL: pg!,
      NEATROOTS_TOPIC_PREFIX: uniqueName('ready'),
      NEATROOTS_ADMIN_PORT: '0',
      ...env,
    });
    const platform = distributedPlatform({ config, log: quiet, metrics: createMetrics('t'), name: 'probe' });
    const o: { platform: Platform; services?: Services } = { platform };
    opened.push(o);
    o.services = await startServices({ platform, modules: [service(drivers, readyOn)], config, log: quiet, metrics: createMetrics('t'), admin: { host: '127.0.0.1', port: 0 } });
    const admin = async (path: string) => {
      const t0 = Date.now();
      const res = await fetch(`http://127.0.0.1:${o.services!.adminPort}${path}`);
      return { status: res.status, body: (await res.json()) as { status: string; error?: string }, ms: Date.now() - t0 };
    };
    return { admin };
  }

  it('answers 200 while the real Kafka, Redis and Postgres answer', async () => {
    const { admin } = await start(['bus', 'windows', 'jobs', 'db'], {});
    const ready = await admin('/readyz');
    expect([ready.status, ready.body]).toEqual([200, { status: 'ready' }]);
  }, 60_000);

  it('ingest (the bus only) with no broker listening: /readyz 503 naming Kafka within the probe timeout, /healthz 200', async () => {
    const { admin } = await start(['bus'], { NEATROOTS_KAFKA_BROKERS: `127.0.0.1:${await freePort()}` });
    const ready = await admin('/readyz');
    expect([ready.status, ready.body]).toEqual([503, { status: 'not ready', error: 'Error: kafka (NEATROOTS_KAFKA_BROKERS) did not answer within 1.5 s' }]);
    expect(ready.ms).toBeLessThan(3_000);
    expect((await admin('/healthz')).status).toBe(200);
  }, 60_000);

  it('a service counting its jobs with no Redis listening: /readyz 503 naming Redis; /healthz 200', async () => {
    const { admin } = await start(['bus', 'jobs'], { NEATROOTS_REDIS_URL: `redis://127.0.0.1:${await freePort()}` });
    const ready = await admin('/readyz');
    expect([ready.status, ready.body]).toEqual([503, { status: 'not ready', error: 'Error: redis (NEATROOTS_REDIS_URL) did not answer within 1.5 s' }]);
    expect(ready.ms).toBeLessThan(3_000);
    expect((await admin('/healthz')).status).toBe(200);
  }, 60_000);

  it("the rule engine's windows: 200, then 503 naming Redis once Redis goes away; /healthz stays 200", async () => {
    const r = await relay(redis!);
    const { admin } = await start(['bus', 'windows'], { NEATROOTS_REDIS_URL: `redis://127.0.0.1:${r.port}` });
    expect((await admin('/readyz')).status).toBe(200);
    await r.cut();
    const ready = await admin('/readyz');
    expect([ready.status, ready.body]).toEqual([503, { status: 'not ready', error: 'Error: redis (NEATROOTS_REDIS_URL) did not answer within 1.5 s' }]);
    expect(ready.ms).toBeLessThan(3_000);
    expect((await admin('/healthz')).status).toBe(200);
  }, 60_000);

  it("review (readyOn: db) stays ready while Kafka and Redis are away: they stop its consumers and jobs, not the reads it serves", async () => {
    const { admin } = await start(['bus', 'jobs', 'db'], { NEATROOTS_KAFKA_BROKERS: `127.0.0.1:${await freePort()}`, NEATROOTS_REDIS_URL: `redis://127.0.0.1:${await freePort()}` }, ['db']);
    const ready = await admin('/readyz');
    expect([ready.status, ready.body]).toEqual([200, { status: 'ready' }]);
  }, 60_000);

  it("review's database: 200, then 503 naming Postgres once it goes away", async () => {
    const r = await relay(pg!);
    const url = new URL(pg!);
    url.host = `127.0.0.1:${r.port}`;
    const { admin } = await start(['bus', 'jobs', 'db'], { NEATROOTS_PG_URL: url.toString() }, ['db']);
    expect((await admin('/readyz')).status).toBe(200);
    await r.cut();
    const ready = await admin('/readyz');
    expect([ready.status, ready.body]).toEqual([503, { status: 'not ready', error: 'Error: postgres (NEATROOTS_PG_URL) did not answer within 1.5 s' }]);
    expect(ready.ms).toBeLessThan(3_000);
  }, 60_000);
});
