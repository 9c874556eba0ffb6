import type { Bus, Db, Platform, ServiceModule, WindowStore } from '@neatroots/ports';
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

describe('a stop', () => {
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
