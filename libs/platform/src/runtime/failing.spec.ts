import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Logger } from '@neatroots/ports';
import { loadConfig } from '../config';
import { jsonTopic, waitUntil, type Rec } from '../contract/bus.contract.test';
import { isInfrastructureError } from '../bus/set-aside';
import { fillDisk } from '../full-disk.test';
import { createMetrics } from '../ops';
import { embeddedPlatform } from './platforms';
import { startServices } from './start';

/**
 * A part of the embedded default that stops at a disk error so that what is on disk stays whole
 * (the bus log, a window journal) cannot go on until the process starts again: its liveness
 * check and gRPC health say so, with the reason, so that a supervisor (Kubernetes, systemd)
 * restarts it, and the log says it once.
 */
describe('the embedded default after a disk error', () => {
  const homes: string[] = [];
  afterAll(() => {
    for (const h of homes) fs.rmSync(h, { recursive: true, force: true });
  });

  function setup(env: Record<string, string> = {}) {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-failing-'));
    homes.push(home);
    const config = loadConfig({ NEATROOTS_HOME: home, NEATROOTS_ADMIN_PORT: '0', NEATROOTS_DRAIN_MS: '0', ...env });
    const errors: string[] = [];
    const warnings: string[] = [];
    const log: Logger = { debug: () => {}, info: () => {}, warn: (m) => void warnings.push(m), error: (m) => void errors.push(m), child: () => log };
    const platform = embeddedPlatform({ config, log, inMemoryDb: true, drainTopic: `${config.NEATROOTS_TOPIC_PREFIX}.events` });
    return { config, errors, warnings, log, platform };
  }

  it('the bus log: exports refused with the cause, then /healthz and /readyz answer 503 with it and gRPC health NOT_SERVING, logged once', async () => {
    const { config, errors, log, platform } = setup();
    const s = await startServices({ platform, modules: [], config, log, metrics: createMetrics('t'), admin: { host: '127.0.0.1', port: 0 } });
    const admin = (p: string) => fetch(`http://127.0.0.1:${s.adminPort}${p}`);
    const events = jsonTopic<Rec>(`${config.NEATROOTS_TOPIC_PREFIX}.events`);
    const bus = platform.bus();
    await bus.publish(events, [{ key: 'run-1', value: { k: 'run-1', i: 0 } }]);
    expect((await admin('/healthz')).status).toBe(200);
    expect(platform.failing?.()).toBeUndefined();
    expect(await (await admin('/metrics')).text()).toMatch(/^neatroots_failing{service="t"} 0$/m);

    const segments = (bus as unknown as { segments: { fd: number }[] }).segments;
    const disk = fillDisk(segments[segments.length - 1]);
    await expect(bus.publish(events, [{ key: 'run-1', value: { k: 'run-1', i: 1 } }])).rejects.toThrow(/the bus log cannot be written \(ENOSPC/);
    disk.room(); // room again: the log stays stopped until the next start reads it back
    await expect(bus.publish(events, [{ key: 'run-1', value: { k: 'run-1', i: 2 } }])).rejects.toThrow(/the bus log cannot be written \(ENOSPC/);

    const live = await admin('/healthz');
    expect(live.status).toBe(503);
    expect(await live.json()).toEqual({ status: 'failing', error: expect.stringMatching(/^the bus log cannot be written \(ENOSPC.*\); start the process again$/) });
    const ready = await admin('/readyz');
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { error: string }).error).toMatch(/^the bus log cannot be written \(ENOSPC/);
    await waitUntil(() => s.health.get() === 'NOT_SERVING', 5_000, () => 'gRPC health still SERVING');
    await expect(s.failed).resolves.toMatch(/^the bus log cannot be written \(ENOSPC/); // what NEATROOTS_ON_FAILING=exit waits for
    expect(await (await admin('/metrics')).text()).toMatch(/^neatroots_failing{service="t"} 1$/m); // for an alert
    await new Promise((r) => setTimeout(r, 2_200)); // two more looks: said once
    expect(errors.filter((m) => m.includes('cannot go on until it is started again'))).toEqual([
      expect.stringMatching(/^the bus log cannot be written \(ENOSPC.*\): this process cannot go on until it is started again; its health checks now fail$/),
    ]);
    await s.close();
  }, 30_000);

  it('a window journal: the platform says which one failed and why', async () => {
    const { platform } = setup();
    const windows = await platform.windows<{ n: number }>('questions');
    await windows.save([{ key: 'r1', window: { n: 1 }, expectRev: 0 }]);
    expect(platform.failing?.()).toBeUndefined();
    const disk = fillDisk((windows as unknown as { file: { fd: number } }).file);
    await expect(windows.save([{ key: 'r2', window: { n: 1 }, expectRev: 0 }])).rejects.toMatchObject({ code: 'ENOSPC' });
    disk.room();
    expect(platform.failing?.()).toMatch(/window journal .*questions\.journal cannot be written \(ENOSPC.*until neatroots starts again/);
    await platform.close();
  });
  it('the database: its thread dying stops it for good; the platform says so, and its calls fail as a dependency that is down (retried, never set aside)', async () => {
    const { platform } = setup();
    const db = await platform.db();
    await db.query('SELECT 1');
    expect(platform.failing?.()).toBeUndefined();
    await (db as unknown as { worker: { terminate(): Promise<number> } }).worker.terminate(); // as an abort inside PGlite would
    await waitUntil(() => platform.failing?.() !== undefined, 5_000, () => 'not failing');
    expect(platform.failing?.()).toMatch(/^the embedded database's thread exited \(code 1\); it takes no more calls until the process starts again$/);
    const err = await db.query('SELECT 1').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: '58000' });
    expect(isInfrastructureError(err)).toBe(true);
    await platform.close();
  });

  it('a stop after a disk error under the bus log does not wait out the drain time: what is left stays in the log', async () => {
    const { config, warnings, log, platform } = setup({ NEATROOTS_DRAIN_MS: '30000' });
    const s = await startServices({ platform, modules: [], config, log, metrics: createMetrics('t'), admin: { host: '127.0.0.1', port: 0 } });
    const events = jsonTopic<Rec>(`${config.NEATROOTS_TOPIC_PREFIX}.events`);
    const bus = platform.bus();
    // the pipeline's store cannot write either: its batch is retried until the stop
    await bus.subscribe(events, { group: 'review' }, async () => {
      throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    });
    await bus.publish(events, [{ key: 'run-1', value: { k: 'run-1', i: 0 } }, { key: 'run-2', value: { k: 'run-2', i: 0 } }]);
    const segments = (bus as unknown as { segments: { fd: number }[] }).segments;
    const disk = fillDisk(segments[segments.length - 1]);
    await expect(bus.publish(events, [{ key: 'run-1', value: { k: 'run-1', i: 1 } }])).rejects.toThrow(/ENOSPC/);
    disk.room();
    const t0 = Date.now();
    await s.close();
    expect(Date.now() - t0).toBeLessThan(10_000); // not the 30 s drain
    expect(warnings).toContainEqual(
      expect.stringMatching(/^stop: no drain \(the bus log cannot be written \(ENOSPC.*\)\): the 2 accepted records not processed yet stay durable in .*bus for the next start$/),
    );
  }, 60_000);
});
