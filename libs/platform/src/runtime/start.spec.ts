import type { Bus, Db, Platform, ServiceModule, WindowStore } from '@neatroots/ports';
import { loadConfig } from '../config';
import { createMetrics } from '../ops';
import { createLogger } from './log';
import { startOrder, startServices } from './start';

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

function mod(name: string, opts: Partial<ServiceModule> & { events: string[]; fail?: boolean }): ServiceModule {
  return {
    name,
    needs: opts.needs ?? [],
    provides: opts.provides,
    edge: opts.edge,
    start: async (ctx) => {
      for (const n of opts.needs ?? []) if (n !== 'bus' && n !== 'db' && n !== 'windows') await ctx.link(n);
      if (opts.fail) throw new Error(`${name} failed`);
      opts.events.push(`start ${name}`);
      return { provides: Object.fromEntries((opts.provides ?? []).map((p) => [p, { from: name }])), stop: async () => void opts.events.push(`stop ${name}`) };
    },
  };
}

const config = loadConfig({ NEATROOTS_ADMIN_PORT: '0', NEATROOTS_HOME: '/nonexistent' });
const log = createLogger({ level: 'silent' });

describe('startServices', () => {
  it('starts providers before what needs them and edges last, and stops edges, drains, stops the rest, then closes', async () => {
    const events: string[] = [];
    const modules = [
      mod('api', { events, needs: ['review'], edge: true }),
      mod('engine', { events, needs: ['bus', 'review'] }),
      mod('review', { events, needs: ['db'], provides: ['review'] }),
    ];
    const s = await startServices({ platform: recordingPlatform(events), modules, config, log, metrics: createMetrics('t'), admin: { host: '127.0.0.1', port: 0 } });
    expect(events).toEqual(['start review', 'start engine', 'start api']);
    expect((await fetch(`http://127.0.0.1:${s.adminPort}/readyz`)).status).toBe(200);
    await s.close();
    expect(events.slice(3)).toEqual(['stop api', 'drain', 'stop engine', 'stop review', 'platform closed']);
    await expect(fetch(`http://127.0.0.1:${s.adminPort}/healthz`)).rejects.toThrow();
  });

  it('gives a module a link no module provides from the root, once, and closes it after the modules', async () => {
    const events: string[] = [];
    let made = 0;
    const s = await startServices({
      platform: recordingPlatform(events),
      modules: [mod('a', { events, needs: ['shared'] }), mod('b', { events, needs: ['shared'] })],
      config,
      log,
      metrics: createMetrics('t'),
      admin: { host: '127.0.0.1', port: 0 },
      links: {
        shared: ({ onClose }) => {
          made++;
          onClose(() => events.push('link closed'));
          return {};
        },
      },
    });
    await s.close();
    expect(made).toBe(1);
    expect(events).toEqual(['start a', 'start b', 'drain', 'stop b', 'stop a', 'link closed', 'platform closed']);
  });

  it('stops what started when a later module fails, and names a link nobody provides', async () => {
    const events: string[] = [];
    const modules = [mod('review', { events, provides: ['review'] }), mod('engine', { events, needs: ['review'], fail: true })];
    await expect(
      startServices({ platform: recordingPlatform(events), modules, config, log, metrics: createMetrics('t'), admin: { host: '127.0.0.1', port: 0 } }),
    ).rejects.toThrow('engine failed');
    expect(events).toEqual(['start review', 'drain', 'stop review', 'platform closed']);
    const lonely = [mod('engine', { events: [], needs: ['question'] })];
    await expect(
      startServices({ platform: recordingPlatform([]), modules: lonely, config, log, metrics: createMetrics('t'), admin: { host: '127.0.0.1', port: 0 } }),
    ).rejects.toThrow(/question: no service of this process provides it/);
  });

  it('refuses modules that need each other in a cycle', () => {
    const a = { name: 'a', needs: ['y'], provides: ['x'] };
    const b = { name: 'b', needs: ['x'], provides: ['y'] };
    expect(() => startOrder([a, b])).toThrow(/cycle: a -> b -> a/);
  });
});
