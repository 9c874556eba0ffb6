import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadConfig } from '../config';
import { jsonTopic, waitUntil, type Rec } from '../contract/bus.contract.test';
import { drainEmbeddedBus, logDir, openEmbeddedBus } from './embedded';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A stop of the embedded default (`neatroots start`): the pipeline gets NEATROOTS_DRAIN_MS to
 * catch up, and what it did not reach stays in the bus log, said at the stop and at the next
 * start. The pipeline here holds its first batch past the drain time, so there is always something left (the
 * end-to-end test in test/embedded cannot be sure of that on a loaded machine).
 */
describe('the embedded bus at a stop', () => {
  const homes: string[] = [];
  afterAll(() => {
    for (const h of homes) fs.rmSync(h, { recursive: true, force: true });
  });

  it('drains for NEATROOTS_DRAIN_MS, says how many accepted records stay durable and where, and the next start hands them over', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-drain-'));
    homes.push(home);
    const config = loadConfig({ NEATROOTS_HOME: home, NEATROOTS_DRAIN_MS: '300', NEATROOTS_BUS_PACK: 'off' });
    const said: string[] = [];
    const log = { info: (m: string) => said.push(m), warn: (m: string) => said.push(m), error: (m: string) => said.push(m) };
    const events = jsonTopic<Rec>(`${config.NEATROOTS_TOPIC_PREFIX}.events`);
    // One run: one partition, so its batches are handled one after another.
    const all = Array.from({ length: 3000 }, (_, i) => ({ key: 'run-1', value: { k: 'run-1', i } }));

    let bus = openEmbeddedBus(config, log);
    const before = new Set<number>();
    // A slow pipeline: the first batch (at most 2,000 records, the log's batch) is in hand until
    // the gate opens, well after the drain time; the next ones wait behind it (one partition).
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    await bus.subscribe(events, { group: 'rule-engine' }, async (b) => {
      await gate;
      for (const r of b.records) before.add(r.value.i);
    });
    for (let i = 0; i < all.length; i += 100) await bus.publish(events, all.slice(i, i + 100));
    const t0 = Date.now();
    const opened = setTimeout(open, 1_000);
    await drainEmbeddedBus(bus, config, events.name, log);
    clearTimeout(opened);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(990);
    const line = said.find((m) => m.includes('stay durable')) ?? said.join('\n');
    const m = /^stop: drained for 300 ms \(NEATROOTS_DRAIN_MS\); (\d+) accepted records not processed yet stay durable in (\S+) and are processed at the next start$/.exec(line);
    expect(m?.[0]).toBe(line);
    expect(m![2]).toBe(logDir(config));
    const left = Number(m![1]);
    expect(left).toBeGreaterThan(0);
    // The batch in hand ended before the line, and none was handed out after it: the services
    // still stopping (review storing, say) do not go on taking what the line said is left.
    const handled = before.size;
    expect(left).toBe(all.length - handled);
    await bus.publish(events, [{ key: 'run-2', value: { k: 'run-2', i: all.length } }]); // a stopping service may still publish
    await sleep(600); // the gate is open: a batch handed out now would be handled at once
    expect(before.size).toBe(handled);
    await bus.close();

    said.length = 0;
    bus = openEmbeddedBus(config, log);
    const pending = /^bus log: (\d+) records accepted before the last stop were not processed yet; processing them now$/.exec(said.join('\n'));
    expect(Number(pending?.[1])).toBe(left + 1);
    const after = new Set<number>();
    await bus.subscribe(events, { group: 'rule-engine' }, async (b) => {
      for (const r of b.records) after.add(r.value.i);
    });
    await waitUntil(() => before.size + after.size >= all.length + 1, 20_000, () => `${before.size} + ${after.size} of ${all.length + 1}`);
    await bus.close();
    // Every record handled once: before the stop, or after the next start.
    expect([...before].filter((i) => after.has(i))).toEqual([]);
    expect(new Set([...before, ...after]).size).toBe(all.length + 1);
  }, 60_000);

  it('does not wait on a batch in hand that keeps retrying (a full disk under its store): past the drain time and 5 s more, it says so and goes on', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-drain-'));
    homes.push(home);
    const config = loadConfig({ NEATROOTS_HOME: home, NEATROOTS_DRAIN_MS: '300' });
    const said: string[] = [];
    const log = { info: (m: string) => said.push(m), warn: (m: string) => said.push(m), error: (m: string) => said.push(m) };
    const events = jsonTopic<Rec>(`${config.NEATROOTS_TOPIC_PREFIX}.events`);
    const bus = openEmbeddedBus(config, log);
    // The handler waits on a store that never answers, until its service stops (the release below).
    let release!: () => void;
    const stopped = new Promise<void>((r) => (release = r));
    let handled = 0;
    await bus.subscribe(events, { group: 'review' }, async (b) => {
      await stopped;
      handled += b.records.length;
    });
    await bus.publish(events, [{ key: 'run-1', value: { k: 'run-1', i: 0 } }]);
    const t0 = Date.now();
    await drainEmbeddedBus(bus, config, events.name, log);
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(5_290);
    expect(took).toBeLessThan(10_000);
    expect(said).toContain(
      `stop: batches in hand not done after 5000 ms more (waiting on a slow model's answers, or retrying a dependency that keeps failing if errors are above): they end as their services stop (what waits on the model fails), and their records stay durable in ${logDir(config)} for the next start`,
    );
    expect(said.some((m) => m.startsWith('stop: drained for 300 ms (NEATROOTS_DRAIN_MS); 1 accepted records not processed yet stay durable'))).toBe(true);
    expect(handled).toBe(0);
    release(); // the service stops: its batch ends, and the bus closes
    await bus.close();
  }, 30_000);
  it('logs a batch that keeps failing alike once, not at every retry (a store down, a full disk)', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-retries-'));
    homes.push(home);
    const config = loadConfig({ NEATROOTS_HOME: home });
    const said: string[] = [];
    const log = { info: () => {}, warn: () => {}, error: (m: string) => said.push(m) };
    const events = jsonTopic<Rec>(`${config.NEATROOTS_TOPIC_PREFIX}.events`);
    const bus = openEmbeddedBus(config, log);
    let tries = 0;
    await bus.subscribe(events, { group: 'review' }, async () => {
      tries++;
      throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    });
    await bus.publish(events, [{ key: 'run-1', value: { k: 'run-1', i: 0 } }]);
    await waitUntil(() => tries >= 5, 10_000, () => `${tries} tries`);
    await bus.close();
    expect(said).toEqual([`bus ${events.name}/review: batch failed, retrying`]);
  }, 30_000);
});
