import { credentials, status as Status } from '@grpc/grpc-js';
import type { Bus, Db, Platform, ServiceModule, WindowStore } from '@neatroots/ports';
import { health as grpcHealth } from '@neatroots/proto';
import { loadConfig } from '../config';
import { createMetrics } from '../ops';
import { createLogger } from './log';
import { startServices } from './start';

/** A platform that records what is asked of it, in order. */
function recordingPlatform(events: string[]): Platform {
  return {
    kind: 'embedded',
    bus: () => ({}) as Bus,
    windows: async <W>() => ({}) as WindowStore<W>,
    db: async () => ({}) as Db,
    jobs: async () => {
      throw new Error('no jobs here');
    },
    ready: async () => true,
    drain: async () => void events.push('drain'),
    close: async () => void events.push('platform closed'),
  };
}

const log = createLogger({ level: 'silent' });

/** grpc.health.v1 Check of the process, on a new connection: the status's name, or the call's error code. */
function healthOf(port: number): Promise<string> {
  const client = new grpcHealth.HealthClient(`127.0.0.1:${port}`, credentials.createInsecure());
  return new Promise<string>((resolve) =>
    client.check({ service: '' }, (err, res) => {
      client.close();
      resolve(err ? Status[err.code] : grpcHealth.HealthCheckResponse_ServingStatus[res.status]);
    }),
  );
}

describe('a stop', () => {
  it('with NEATROOTS_SHUTDOWN_DELAY_MS: not ready at once while its ports still take new connections, then they close', async () => {
    const events: string[] = [];
    const edge: ServiceModule = {
      name: 'api',
      needs: [],
      edge: true,
      start: async () => ({ stop: async () => void events.push('stop api') }),
    };
    const s = await startServices({
      platform: recordingPlatform(events),
      modules: [edge],
      config: loadConfig({ NEATROOTS_HOME: '/nonexistent', NEATROOTS_SHUTDOWN_DELAY_MS: '5000' }),
      log,
      metrics: createMetrics('t'),
      grpc: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
    });
    const readyz = async () => (await fetch(`http://127.0.0.1:${s.adminPort}/readyz`)).status;
    expect([await readyz(), await healthOf(s.servicePort!)]).toEqual([200, 'SERVING']);

    const closed = s.close();
    // Each answer, with whether the ports had begun closing (the edge's stop) when it came.
    const during = await Promise.all([
      readyz().then((status) => ({ readyz: status, closing: events.includes('stop api') })),
      healthOf(s.servicePort!).then((status) => ({ grpc: status, closing: events.includes('stop api') })),
    ]);
    expect(during).toEqual([
      { readyz: 503, closing: false },
      // A new connection to the gRPC port is taken and answered: not serving.
      { grpc: 'NOT_SERVING', closing: false },
    ]);
    await closed;
    expect(events).toEqual(['stop api', 'drain', 'platform closed']);
    expect(await healthOf(s.servicePort!)).toBe('UNAVAILABLE');
    await expect(readyz()).rejects.toThrow();
  });

  it('stops the edges together: one still closing (its grace) does not keep the others accepting', async () => {
    const events: string[] = [];
    let ingestStopping!: () => void;
    const ingestStopped = new Promise<void>((r) => (ingestStopping = r));
    // The api stops last-started-first; its stop lasts until ingest's has begun (an HTTP client
    // that keeps its connection busy until the grace's cut). One after the other, ingest's ports
    // stayed open all that time (or, here, forever: a bound of 10 s says so instead).
    const ingest: ServiceModule = {
      name: 'ingest',
      needs: [],
      edge: true,
      start: async () => ({
        stop: async () => {
          events.push('stop ingest');
          ingestStopping();
        },
      }),
    };
    const api: ServiceModule = {
      name: 'api',
      needs: [],
      edge: true,
      start: async () => ({
        stop: async () => {
          events.push('stopping api');
          let bound!: NodeJS.Timeout;
          await Promise.race([ingestStopped, new Promise((r) => (bound = setTimeout(r, 10_000)))]);
          clearTimeout(bound);
          events.push('api stopped');
        },
      }),
    };
    const s = await startServices({
      platform: recordingPlatform(events),
      modules: [ingest, api],
      config: loadConfig({ NEATROOTS_HOME: '/nonexistent' }),
      log,
      metrics: createMetrics('t'),
    });
    await s.close();
    expect(events).toEqual(['stopping api', 'stop ingest', 'api stopped', 'drain', 'platform closed']);
  });
});
