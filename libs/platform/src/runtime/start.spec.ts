import { credentials, status as Status, type ClientOptions } from '@grpc/grpc-js';
import type { Bus, Db, Platform, ServiceModule, WindowStore } from '@neatroots/ports';
import { health as grpcHealth, v1 } from '@neatroots/proto';
import { loadConfig } from '../config';
import { createMetrics } from '../ops';
import { createLogger } from './log';
import { internalClientOptions, TokenlessCalls } from './internal-token';
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

describe("the services' own gRPC port and NEATROOTS_INTERNAL_TOKEN", () => {
  const engineModule: ServiceModule = {
    name: 'engine',
    needs: [],
    start: async (ctx) => {
      const implementation: v1.RuleEngineServer = {
        preCheck: (_call, cb) => cb(null, { decision: 'allow', check_id: '', finding_id: '', title: '', text: '' } as never),
        haltingTools: (call, cb) => cb(null, { tools: [`for ${call.request.project}`] }),
      };
      ctx.serveGrpc('neatroots.v1.RuleEngine', { service: v1.RuleEngineService, implementation });
      return { stop: async () => undefined };
    },
  };
  const start = (env: NodeJS.ProcessEnv) =>
    startServices({ platform: recordingPlatform([]), modules: [engineModule], config: loadConfig({ NEATROOTS_HOME: '/nonexistent', ...env }), log, metrics: createMetrics('t'), grpc: { host: '127.0.0.1', port: 0 } });
  const ask = (port: number, options: ClientOptions) => {
    const client = new v1.RuleEngineClient(`127.0.0.1:${port}`, credentials.createInsecure(), options);
    return new Promise<string>((resolve) =>
      client.haltingTools({ project: 'shop', workflow: '' }, (err, res) => {
        client.close();
        resolve(err ? `${Status[err.code]}: ${err.details}` : res.tools.join(','));
      }),
    );
  };
  const health = (port: number) => {
    const client = new grpcHealth.HealthClient(`127.0.0.1:${port}`, credentials.createInsecure());
    return new Promise<string>((resolve) =>
      client.check({ service: '' }, (err, res) => {
        client.close();
        resolve(err ? Status[err.code] : String(res.status));
      }),
    );
  };
  const TOKEN = 'a-random-secret-for-the-deployment';

  it('with a token, answers only calls that carry it; gRPC health stays open for probes', async () => {
    const s = await start({ NEATROOTS_INTERNAL_TOKEN: TOKEN });
    try {
      expect(await ask(s.servicePort!, internalClientOptions(TOKEN))).toBe('for shop');
      // Either refusal says which it is (none carried, or another), never what was carried.
      expect(await ask(s.servicePort!, {})).toBe(
        "UNAUTHENTICATED: this port answers neatroots's own services only: the call carried no internal token (x-neatroots-internal-token); set NEATROOTS_INTERNAL_TOKEN on the calling service to this one's",
      );
      expect(await ask(s.servicePort!, internalClientOptions('another-secret-of-sixteen'))).toBe(
        "UNAUTHENTICATED: this port answers neatroots's own services only: the call carried an internal token (x-neatroots-internal-token) that does not match this service's NEATROOTS_INTERNAL_TOKEN; give every service the same one",
      );
      expect(await health(s.servicePort!)).not.toBe('UNAUTHENTICATED');
    } finally {
      await s.close();
    }
  });

  it("takes requests up to grpc-js's default, 4 MiB, unless given a larger bound (review's port): over it refused before the token is checked", async () => {
    const MIB = 1024 * 1024;
    const sized = (port: number, bytes: number, options: ClientOptions) => {
      // The answer echoes the request: the client takes it whole.
      const client = new v1.RuleEngineClient(`127.0.0.1:${port}`, credentials.createInsecure(), { ...options, 'grpc.max_receive_message_length': -1 });
      return new Promise<string>((resolve) =>
        client.haltingTools({ project: 'x'.repeat(bytes), workflow: '' }, (err, res) => {
          client.close();
          resolve(err ? `${Status[err.code]}: ${err.details}` : `${res.tools[0].length} bytes`);
        }),
      );
    };
    // No bound given (the question service's, the rule engine's port): over 4 MiB refused, even with the token.
    const plain = await start({ NEATROOTS_INTERNAL_TOKEN: TOKEN });
    try {
      expect(await sized(plain.servicePort!, 4 * MIB - 1024, internalClientOptions(TOKEN))).toBe(`${4 * MIB - 1024 + 4} bytes`);
      expect(await sized(plain.servicePort!, 4 * MIB + 1024, internalClientOptions(TOKEN))).toMatch(/^RESOURCE_EXHAUSTED: .*larger than max/i);
      expect(await sized(plain.servicePort!, 4 * MIB + 1024, {})).toMatch(/^RESOURCE_EXHAUSTED: .*larger than max/i);
    } finally {
      await plain.close();
    }
    // A bound of 20 MiB (review's): a request over it without the token refused as too large, one just under it with the token answered.
    const bound = 20 * MIB;
    const large = await startServices({ platform: recordingPlatform([]), modules: [engineModule], config: loadConfig({ NEATROOTS_HOME: '/nonexistent', NEATROOTS_INTERNAL_TOKEN: TOKEN }), log, metrics: createMetrics('t'), grpc: { host: '127.0.0.1', port: 0, requestBytes: bound } });
    try {
      expect(await sized(large.servicePort!, bound + 1024, {})).toMatch(/^RESOURCE_EXHAUSTED: .*larger than max/i);
      expect(await sized(large.servicePort!, bound - 1024, internalClientOptions(TOKEN))).toBe(`${bound - 1024 + 4} bytes`);
      expect(await sized(large.servicePort!, bound - 1024, {})).toMatch(/^UNAUTHENTICATED: .*no internal token/);
    } finally {
      await large.close();
    }
  }, 60_000);

  it('NEATROOTS_INTERNAL_TOKEN_REQUIRED=false (an upgrade from a build before the token): takes calls without it, logged at warn at most once a minute naming the method; another token is still refused', async () => {
    const lines: string[] = [];
    const s = await startServices({
      platform: recordingPlatform([]),
      modules: [engineModule],
      config: loadConfig({ NEATROOTS_HOME: '/nonexistent', NEATROOTS_INTERNAL_TOKEN: TOKEN, NEATROOTS_INTERNAL_TOKEN_REQUIRED: 'false' }),
      log: createLogger({ level: 'warn', format: 'json', write: (l) => void lines.push(l) }),
      metrics: createMetrics('t'),
      grpc: { host: '127.0.0.1', port: 0 },
    });
    const tokenless = () => lines.map((l) => JSON.parse(l) as { level: string; msg: string; tokenlessCalls?: string }).filter((l) => l.tokenlessCalls);
    try {
      // An old build's call, carrying no token: taken, and the log names the method.
      expect(await ask(s.servicePort!, {})).toBe('for shop');
      expect(tokenless()).toEqual([expect.objectContaining({ level: 'warn', tokenlessCalls: 'neatroots.v1.RuleEngine/haltingTools (1)' })]);
      expect(tokenless()[0].msg).toMatch(/took calls without the internal token \(x-neatroots-internal-token\), as NEATROOTS_INTERNAL_TOKEN_REQUIRED=false allows/);
      // Within the minute, no second line.
      expect(await ask(s.servicePort!, {})).toBe('for shop');
      expect(tokenless()).toHaveLength(1);
      // The new build's calls, with the token, are taken; another token is a misconfiguration, refused.
      expect(await ask(s.servicePort!, internalClientOptions(TOKEN))).toBe('for shop');
      expect(await ask(s.servicePort!, internalClientOptions('another-secret-of-sixteen'))).toMatch(/^UNAUTHENTICATED: .*does not match/);
      expect(lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toContainEqual(expect.stringMatching(/^NEATROOTS_INTERNAL_TOKEN_REQUIRED=false: this process's gRPC ports take calls without the internal token/));
    } finally {
      await s.close();
    }
    // true, or unset or blank (a chart value left empty): refused, as before.
    for (const required of ['true', '', undefined]) {
      const on = await start({ NEATROOTS_INTERNAL_TOKEN: TOKEN, NEATROOTS_INTERNAL_TOKEN_REQUIRED: required });
      try {
        expect({ required, answer: await ask(on.servicePort!, {}) }).toEqual({ required, answer: expect.stringMatching(/^UNAUTHENTICATED: .*the call carried no internal token/) });
      } finally {
        await on.close();
      }
    }
    expect(() => loadConfig({ NEATROOTS_INTERNAL_TOKEN_REQUIRED: 'maybe' })).toThrow(/NEATROOTS_INTERNAL_TOKEN_REQUIRED/);
  });

  it('TokenlessCalls: one line a minute at most, naming every method so called since the last one and how often', () => {
    const warned: string[] = [];
    let now = 0;
    const calls = new TokenlessCalls({ warn: (_msg, fields) => void warned.push(String(fields?.tokenlessCalls)) }, 60_000, () => now);
    calls.heard('neatroots.v1.Review/getPlan');
    now = 1_000;
    calls.heard('neatroots.v1.Review/getPlan');
    calls.heard('neatroots.v1.Review/quietChecks');
    now = 59_999;
    calls.heard('neatroots.v1.Review/getPlan');
    expect(warned).toEqual(['neatroots.v1.Review/getPlan (1)']);
    now = 61_000;
    calls.heard('neatroots.v1.Review/recordAnswer');
    expect(warned).toEqual(['neatroots.v1.Review/getPlan (1)', 'neatroots.v1.Review/getPlan (2), neatroots.v1.Review/quietChecks (1), neatroots.v1.Review/recordAnswer (1)']);
  });

  it('without one, answers every call (as before); a token shorter than 16 characters stops the start', async () => {
    const s = await start({});
    try {
      expect(await ask(s.servicePort!, {})).toBe('for shop');
    } finally {
      await s.close();
    }
    expect(() => loadConfig({ NEATROOTS_INTERNAL_TOKEN: 'short' })).toThrow(/NEATROOTS_INTERNAL_TOKEN: must be at least 16 characters/);
  });
});
