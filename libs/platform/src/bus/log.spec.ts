import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { RuleEngine, type RunWindow } from '@neatroots/checks';
import { dropTable, droppedTableRules } from '../../../checks/src/engine/dropped-table.test';
import { makeTopics } from '@neatroots/messages';
import { deadLetterTopic, type DeadLetter, type Topic } from '@neatroots/ports';
import { busContract, jsonTopic, waitUntil, type Rec } from '../contract/bus.contract.test';
import { fillDisk } from '../full-disk.test';
import { JournalWindowStore } from '../windows/journal';
import { within } from '../testing/until';
import { LogBus, type LogBusOptions } from './log';
import { readOffsets } from './log/offsets';
import { RetryLaterError } from './set-aside';

/** The contract's own failing handler says "(test)"; anything else is shown. */
const onError = (err: unknown) => {
  if (!String((err as Error)?.message).includes('(test)')) console.error(err);
};

const dirs: string[] = [];
const tmp = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-log-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

busContract('LogBus', { open: async () => new LogBus({ dir: tmp(), retryDelayMs: 50, onError }) });
// The same with every value read back from disk (no cache) and segments of a few records.
// Topics that do not wait for a sync (the pipeline's own): the same guarantees in the process.
busContract('LogBus, no topic waiting for its sync', { open: async () => new LogBus({ dir: tmp(), retryDelayMs: 50, onError, syncTopics: () => false }) });
busContract('LogBus, read from disk', { open: async () => new LogBus({ dir: tmp(), retryDelayMs: 50, onError, cacheBytes: 0, segmentBytes: 2048 }) });
// Every frame deflated where it pays (a small one stays plain), read back from disk.
busContract('LogBus, deflated, read from disk', {
  open: async () => new LogBus({ dir: tmp(), retryDelayMs: 50, onError, cacheBytes: 0, segmentBytes: 2048, compress: () => true, compressBytes: 0 }),
});

/** The bus's segment files (the oldest first), for a test to swap one's descriptor. */
const segmentsOf = (bus: LogBus) => (bus as unknown as { segments: { fd: number }[] }).segments;

const recs = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ key: `k${(from + i) % 7}`, value: { k: `k${(from + i) % 7}`, i: from + i } }));

/** Everything a new group reading from the beginning gets, by i. */
async function readAll(bus: LogBus, topic: string, group: string, want: number): Promise<number[]> {
  const seen: number[] = [];
  const sub = await bus.subscribe(jsonTopic<Rec>(topic), { group }, async (b) => {
    for (const r of b.records) seen.push(r.value.i);
  });
  await waitUntil(() => seen.length >= want, 10_000, () => `${seen.length} of ${want}`);
  await new Promise((r) => setTimeout(r, 100));
  await sub.close();
  return seen.sort((a, b) => a - b);
}

const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

describe('LogBus durability', () => {
  const open = (dir: string, o: Partial<LogBusOptions> = {}) => new LogBus({ dir, retryDelayMs: 50, onError, commitIntervalMs: 20, ...o });

  it('keeps what was published across a restart; a group continues where its processing stopped', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    let bus = open(dir);
    await bus.publish(topic, recs(100));
    const first: number[] = [];
    const sub = await bus.subscribe(topic, { group: 'g' }, async (b) => {
      for (const r of b.records) first.push(r.value.i);
    });
    await waitUntil(() => first.length === 100, 10_000, () => `${first.length} of 100`);
    await sub.close();
    await bus.publish(topic, recs(50, 100));
    await bus.close();

    bus = open(dir);
    expect(bus.recovery.pending).toBe(50);
    const second = await readAll(bus, 't', 'g', 50);
    expect(second).toEqual(range(50, 100)); // the processed 100 are not delivered again
    await bus.close();
  });

  it('keeps records of topics that do not wait for a sync across a restart (positions are saved after a sync)', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('pipeline');
    let bus = open(dir, { syncTopics: (t) => t === 'events' });
    await bus.publish(topic, recs(30));
    const seen: number[] = [];
    const sub = await bus.subscribe(topic, { group: 'g' }, async (b) => {
      for (const r of b.records) seen.push(r.value.i);
    });
    await waitUntil(() => seen.length === 30, 10_000, () => `${seen.length} of 30`);
    await sub.close();
    await bus.publish(topic, recs(10, 30));
    await bus.close();
    bus = open(dir);
    expect(await readAll(bus, 'pipeline', 'g', 10)).toEqual(range(10, 30));
    await bus.close();
  });

  it('cuts off a torn tail (a write the crash interrupted) and keeps every whole record before it', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    let bus = open(dir);
    await bus.publish(topic, recs(20));
    await bus.close();
    const seg = fs.readdirSync(dir).filter((f) => f.endsWith('.seg')).sort().pop()!;
    const file = path.join(dir, seg);
    const whole = fs.statSync(file).size;
    // half a frame, as a crash in the middle of a write leaves it
    fs.appendFileSync(file, Buffer.from([200, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7]));
    bus = open(dir);
    expect(bus.recovery.damage).toEqual([expect.stringContaining('runs past the end')]);
    expect(fs.statSync(file).size).toBe(whole);
    await bus.publish(topic, recs(5, 20));
    expect(await readAll(bus, 't', 'fresh', 25)).toEqual(range(25));
    await bus.close();
  });

  it('a publish that fails part way (its next segment cannot be made: a full disk) leaves none of its records for the next start', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    const quiet = () => undefined;
    let bus = open(dir, { segmentBytes: 2048, pack: false, onError: quiet });
    await bus.publish(topic, recs(5)); // acknowledged
    // The publish below fills the first segment, then cannot create the second.
    const next = path.join(dir, '000000000002.seg');
    fs.mkdirSync(next);
    await expect(bus.publish(topic, recs(60, 5))).rejects.toThrow(/^the bus log cannot be written \(EEXIST/);
    expect(bus.failure()).toMatch(/^the bus log cannot be written \(EEXIST/);
    await expect(bus.publish(topic, recs(1, 65))).rejects.toThrow(/^the bus log cannot be written/);
    await bus.close();
    fs.rmdirSync(next);
    bus = open(dir, { segmentBytes: 2048, pack: false });
    expect(bus.recovery.damage).toEqual([]);
    expect(bus.recovery.pending).toBe(0); // no group saved yet: counted for none
    const seen = await readAll(bus, 't', 'fresh', 5);
    expect(seen).toEqual(range(5)); // the acknowledged five, none of the refused sixty
    await bus.close();
  });

  it('a publish whose write fails and whose next segment cannot be made is refused, and leaves no rejection unhandled (the process would die of it)', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const bus = open(dir, { segmentBytes: 2048, pack: false, onError: () => undefined });
      await bus.publish(topic, recs(5));
      fs.mkdirSync(path.join(dir, '000000000002.seg')); // the next segment cannot be made
      const disk = fillDisk(segmentsOf(bus)[0]); // and the writes to this one fail
      await expect(bus.publish(topic, recs(60, 5))).rejects.toThrow(/^the bus log cannot be written \(EEXIST/);
      await new Promise((r) => setTimeout(r, 100));
      expect(unhandled).toEqual([]);
      disk.room();
      await bus.close();
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('a write that fails on the thread pool (a full disk) fails its publish and every one made after it, written or not; the next start reads only what came before', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    const quiet = () => undefined;
    let bus = open(dir, { pack: false, onError: quiet });
    await bus.publish(topic, recs(5)); // acknowledged
    // The first publish's write goes to /dev/full, whose writes fail with ENOSPC (a full disk);
    // the descriptor is taken by the turn's first append, and closed once the write has failed.
    const seg = segmentsOf(bus)[0];
    const realFd = seg.fd;
    const full = fs.openSync('/dev/full', 'w');
    seg.fd = full;
    const first = bus.publish(topic, recs(10, 5));
    // The next turn: the first's write is under way, and the second's is a write of its own.
    await new Promise((r) => setImmediate(r));
    seg.fd = realFd;
    // The second is written (after the place the first was given) and synced, but it lies after
    // the first's, which failed: it is refused too (an acknowledged record after a hole would
    // be cut off at the next start).
    const second = bus.publish(topic, recs(10, 15));
    await expect(first).rejects.toThrow(/^the bus log cannot be written/);
    await expect(second).rejects.toThrow(/^the bus log cannot be written/);
    await expect(first.catch((e: Error) => Promise.reject(e.cause))).rejects.toMatchObject({ code: 'ENOSPC' });
    await expect(bus.publish(topic, recs(1, 25))).rejects.toThrow(/^the bus log cannot be written/);
    fs.closeSync(full);
    await bus.close();
    bus = open(dir, { pack: false });
    expect(bus.recovery.damage).toEqual([]);
    expect(await readAll(bus, 't', 'fresh', 5)).toEqual(range(5));
    await bus.close();
  });

  it('concurrent publishes are written in the order they were made, across segments, off the publishing thread', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    // Nothing cached: every value a consumer gets was read back from the files.
    let bus = open(dir, { segmentBytes: 4096, pack: false, cacheBytes: 0 });
    const seen: number[] = [];
    const sub = await bus.subscribe(topic, { group: 'g' }, async (b) => {
      for (const r of b.records) seen.push(r.value.i);
    });
    // Fifty publishes in flight at once (none awaited before the next), crossing many segments.
    await Promise.all(Array.from({ length: 50 }, (_, i) => bus.publish(topic, recs(10, i * 10))));
    expect(fs.readdirSync(dir).filter((f) => f.endsWith('.seg')).length).toBeGreaterThan(3);
    await waitUntil(() => seen.length >= 500, 10_000, () => `${seen.length} of 500`);
    await sub.close();
    // All 500, none twice; per key (one partition each) in publish order.
    expect([...seen].sort((a, b) => a - b)).toEqual(range(500));
    for (let k = 0; k < 7; k++) {
      const ofKey = seen.filter((i) => i % 7 === k);
      expect(ofKey).toEqual([...ofKey].sort((a, b) => a - b));
    }
    expect(bus.stats.readFromDisk).toBe(500);
    await bus.close();
    // And the files read whole at the next start.
    bus = open(dir, { segmentBytes: 4096, pack: false });
    expect(bus.recovery.damage).toEqual([]);
    await bus.close();
  });

  it('deletes segments once every group is past them, and not before', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    const bus = open(dir, { segmentBytes: 1024 });
    const segs = () => fs.readdirSync(dir).filter((f) => f.endsWith('.seg')).length;
    const seenA: number[] = [];
    const a = await bus.subscribe(topic, { group: 'a' }, async (b) => {
      for (const r of b.records) seenA.push(r.value.i);
    });
    let releaseB!: () => void;
    const gate = new Promise<void>((r) => (releaseB = r));
    const seenB: number[] = [];
    const b = await bus.subscribe(topic, { group: 'b' }, async (batch) => {
      await gate; // group b is slow: its records must stay
      for (const r of batch.records) seenB.push(r.value.i);
    });
    for (let i = 0; i < 10; i++) await bus.publish(topic, recs(20, i * 20));
    await waitUntil(() => seenA.length === 200, 10_000, () => `${seenA.length} of 200`);
    await new Promise((r) => setTimeout(r, 100));
    const held = segs();
    expect(held).toBeGreaterThan(5);
    releaseB();
    await waitUntil(() => seenB.length === 200, 10_000, () => `${seenB.length} of 200`);
    // (the count goes up once a file's removal has returned, a moment after the file is gone)
    await waitUntil(() => segs() === 1 && bus.stats.segmentsDeleted >= held - 1, 5_000, () => `${segs()} segments left, ${bus.stats.segmentsDeleted} deleted`);
    expect(bus.stats.segmentsDeleted).toBe(held - 1);
    await a.close();
    await b.close();
    await bus.close();
  });

  it('reads values back from disk when they do not fit the cache, unchanged', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    const bus = open(dir, { cacheBytes: 500 });
    await bus.publish(topic, recs(300));
    expect(await readAll(bus, 't', 'g', 300)).toEqual(range(300));
    expect(bus.stats.readFromDisk).toBeGreaterThan(250);
    expect(bus.cachedBytes).toBeLessThanOrEqual(500);
    await bus.close();
  });

  it('counts the backlog of the slowest group, which ingest refuses past its bound', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    const bus = open(dir);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const sub = await bus.subscribe(topic, { group: 'g' }, () => gate);
    await bus.publish(topic, recs(40));
    expect(bus.backlog('t')).toBe(40);
    release();
    await bus.idle();
    expect(bus.backlog('t')).toBe(0);
    await sub.close();
    await bus.close();
  });

  it('forgets a saved group that has had no consumer for staleGroupMs, and counts only groups reading in the backlog', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    const bus = open(dir, { staleGroupMs: 200 });
    const old = await bus.subscribe(topic, { group: 'renamed-away' }, async () => undefined);
    await old.close();
    await bus.publish(topic, recs(20));
    expect(bus.backlog('t')).toBe(0); // nobody reads as 'renamed-away' any more: it does not hold ingest back
    await new Promise((r) => setTimeout(r, 300));
    const seen: number[] = [];
    const sub = await bus.subscribe(topic, { group: 'current' }, async (b) => {
      for (const r of b.records) seen.push(r.value.i);
    });
    await waitUntil(() => seen.length === 20, 10_000, () => `${seen.length} of 20`);
    await waitUntil(() => !fs.readFileSync(path.join(dir, 'offsets.json'), 'utf8').includes('renamed-away'), 5_000, () => 'the stale group is still saved');
    await sub.close();
    await bus.close();
  });

  it('refuses a log folder made with another partition count, saying why', async () => {
    const dir = tmp();
    const bus = open(dir, { partitions: 4 });
    await bus.subscribe(jsonTopic<Rec>('t'), { group: 'g' }, async () => undefined).then((s) => s.close());
    await bus.close();
    expect(() => open(dir, { partitions: 6 })).toThrow(/has 4 partitions, configured 6/);
  });

  it('delivers the next batch while a batch defers its effects, and saves a position only once its effects and all before it resolved', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    const bus = open(dir, { partitions: 1, maxBatch: 5, commitIntervalMs: 5 });
    await bus.publish(topic, recs(15));
    const held: { first: number; resolve(): void; reject(err: Error): void }[] = [];
    const sub = await bus.subscribe(topic, { group: 'g' }, async (b) => {
      b.defer!(new Promise<void>((resolve, reject) => held.push({ first: b.records[0].value.i, resolve, reject })));
    });
    const saved = () => readOffsets(dir, 1).groups.t?.g?.[0] ?? 0;
    const settle = () => new Promise((r) => setTimeout(r, 60));
    // All three batches come while none of their effects is stored.
    await waitUntil(() => held.length === 3, 5_000, () => `${held.length} batches of 3`);
    await settle();
    expect(saved()).toBe(0);
    expect(bus.backlog('t')).toBe(15);
    // The second batch's effects alone do not move it: the first's are not stored.
    held[1].resolve();
    await settle();
    expect(saved()).toBe(0);
    held[0].resolve();
    await waitUntil(() => saved() === 10, 5_000, () => `saved ${saved()}`);
    // The third's fail: the partition goes back to it, and it moves once the new try's are stored.
    held[2].reject(new Error('(test) sync failed'));
    await waitUntil(() => held.length === 4, 5_000, () => `${held.length} deliveries`);
    expect(held[3].first).toBe(held[2].first);
    await settle();
    expect(saved()).toBe(10);
    held[3].resolve();
    await waitUntil(() => saved() === 15, 5_000, () => `saved ${saved()}`);
    expect(bus.stats.handlerErrors).toBe(1);
    await sub.close();
    await bus.close();
  });

  it('closes a subscription only once the deferred effects in hand are stored, and saves their position', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    let bus = open(dir, { partitions: 1, maxBatch: 5 });
    await bus.publish(topic, recs(10));
    let stored = 0;
    let delivered = 0;
    // Each batch's effects are stored when the test says so.
    const store: (() => void)[] = [];
    const sub = await bus.subscribe(topic, { group: 'g' }, async (b) => {
      delivered += b.records.length;
      b.defer!(new Promise<void>((r) => store.push(() => r(void (stored += b.records.length)))));
    });
    await waitUntil(() => delivered === 10, 5_000, () => `${delivered} of 10 delivered`);
    expect(stored).toBe(0);
    let closed = false;
    const closing = sub.close().then(() => void (closed = true));
    // All but the last batch's effects stored: the close still waits for the last's.
    for (const s of store.slice(0, -1)) s();
    await new Promise((r) => setTimeout(r, 50));
    expect(closed).toBe(false);
    store[store.length - 1]();
    await closing;
    expect(stored).toBe(10);
    await bus.close();
    bus = open(dir, { partitions: 1 });
    expect(bus.recovery.pending).toBe(0);
    await bus.close();
  });
});

describe('LogBus at a stop: deferred effects that cannot settle any more', () => {
  const open = (dir: string, o: Partial<LogBusOptions> = {}) => new LogBus({ dir, retryDelayMs: 20, onError, commitIntervalMs: 5, ...o });
  const never = () => new Promise<void>(() => undefined);

  it('a subscription closing lets go of the deferred effects before a batch that failed (they may never settle): the close ends, the position stays before their batches', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    let bus = open(dir, { partitions: 1, maxBatch: 5 });
    let tries = 0;
    const sub = await bus.subscribe(topic, { group: 'g' }, async (b) => {
      // The first batch's effects never settle (the rule engine's window save of a run whose
      // later step could not publish: it waits for a step on the run that does not come).
      if (b.records[0].value.i === 0) return b.defer!(never());
      tries++;
      throw new RetryLaterError('store away (test)');
    });
    await bus.publish(topic, recs(5));
    await bus.publish(topic, recs(5, 5));
    await waitUntil(() => tries > 0, 5_000, () => 'the second batch was not tried');
    await within(sub.close(), 3_000, 'sub.close()');
    await within(bus.close(), 3_000, 'bus.close()');
    bus = open(dir, { partitions: 1 });
    expect(bus.recovery.pending).toBe(10); // neither batch counts as processed: both come again
    await bus.close();
  });

  it('once the log failed (a full disk), a stop ends though a batch\'s deferred effects never settle; the position stays before it', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    let bus = open(dir, { partitions: 1, onError: () => undefined });
    let delivered = 0;
    await bus.subscribe(topic, { group: 'g' }, async (b) => {
      delivered += b.records.length;
      b.defer!(never());
    });
    await bus.publish(topic, recs(5));
    await waitUntil(() => delivered === 5, 5_000, () => `${delivered} of 5 delivered`);
    // The group is saved (as it is in a data folder that ran before): the next start counts for it.
    await waitUntil(() => readOffsets(dir, 1).groups.t?.g !== undefined, 5_000, () => 'the group is not saved');
    const disk = fillDisk(segmentsOf(bus)[0]);
    await expect(bus.publish(jsonTopic<Rec>('other'), recs(1))).rejects.toThrow(/^the bus log cannot be written/);
    disk.room(); // the log stays failed until the next start
    await within(bus.stopDelivering(), 3_000, 'bus.stopDelivering()');
    await within(bus.close(), 3_000, 'bus.close()');
    bus = open(dir, { partitions: 1 });
    expect(bus.recovery.pending).toBe(5);
    await bus.close();
  });

  it('the rule engine over the window journal: after the disk filled while a run\'s step published, the stop ends, and the next start processes the run\'s records again (their window was never saved)', async () => {
    const busDir = tmp();
    const winDir = tmp();
    const topics = makeTopics('t');
    const rules = droppedTableRules();
    const drop = dropTable;
    /** The rule engine's pipelined step (services/rule-engine): publish what it raised, then save, the save deferred. */
    const start = async (bus: LogBus, windows: JournalWindowStore<RunWindow>, everyMs: number, gate: () => Promise<void>) => {
      const engine = new RuleEngine({ windows, rules: () => rules });
      windows.coalesce({ everyMs, busy: (key) => engine.isChanging(key) });
      const found: string[] = [];
      const sub = await bus.subscribe(topics.events, { group: 'rule-engine' }, async (b) => {
        const out = await engine.process(b.records.map((r) => r.value));
        if (out.findings.length) {
          await gate();
          await bus.publish(topics.findings, out.findings.map((f) => ({ key: f.run_id, value: f })));
          found.push(...out.findings.map((f) => f.check_id));
        }
        b.defer!(out.commit());
      });
      return { sub, found };
    };
    let bus = new LogBus({ dir: busDir, partitions: 1, retryDelayMs: 20, commitIntervalMs: 5, onError: () => undefined });
    let windows = JournalWindowStore.open<RunWindow>({ dir: winDir, name: 'runs' });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let raised = false;
    // Checkpoints far apart: the first step's save waits for the next one.
    const first = await start(bus, windows, 60_000, () => ((raised = true), held));
    // The group is saved (as it is in a data folder that ran before): the next start counts for it.
    await waitUntil(() => readOffsets(busDir, 1).groups[topics.events.name]?.['rule-engine'] !== undefined, 5_000, () => 'the group is not saved');
    await bus.publish(topics.events, [drop('r1', 'a1')]); // its step saves r1, the save waiting for a checkpoint
    await bus.publish(topics.events, [drop('r1', 'a2')]); // its step raises a finding...
    await waitUntil(() => raised, 5_000, () => 'no finding raised');
    const disk = fillDisk(segmentsOf(bus)[0]); // ...and the disk fills before it is published
    release();
    await waitUntil(() => bus.failure() !== undefined, 5_000, () => 'the log did not fail');
    // r1 holds what no save has (the unpublished finding's span marked seen): no checkpoint writes it.
    windows.checkpoint();
    await new Promise((r) => setTimeout(r, 50));
    expect(windows.stats.checkpoints.busy).toBe(1);
    disk.room();
    // The stop, in the platform's order: the rule engine, the bus, then the stores.
    await within(first.sub.close(), 3_000, 'the rule engine\'s sub.close()');
    await within(bus.close(), 3_000, 'bus.close()');
    await within(windows.close(), 3_000, 'windows.close()');
    expect(first.found).toEqual([]);

    bus = new LogBus({ dir: busDir, partitions: 1, retryDelayMs: 20, commitIntervalMs: 5, onError: () => undefined });
    expect(bus.recovery.pending).toBe(2); // the first step's save never happened: its batch comes again too
    windows = JournalWindowStore.open<RunWindow>({ dir: winDir, name: 'runs' });
    const next = await start(bus, windows, 20, async () => undefined);
    await waitUntil(() => next.found.length > 0, 5_000, () => 'the finding was not raised after the restart');
    expect(next.found).toEqual(['dropped-table']);
    await next.sub.close();
    await bus.close();
    await windows.close();
  });
});

describe('LogBus consumer groups: a member joining', () => {
  it('hands a partition taken over by a member that joins only once the member that had it handled its batch in hand and its deferred effects settled; the new one starts where it left', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('q');
    const bus = new LogBus({ dir, partitions: 2, retryDelayMs: 20, commitIntervalMs: 5, onError });
    await bus.publish(topic, recs(20));
    // Who handles each record now (its handler, then its deferred effect), and every handing.
    const inHand = new Map<number, string>();
    const overlaps: string[] = [];
    const handled: number[] = [];
    const handler = (who: string) => async (b: { records: { value: Rec }[]; defer?: (p: Promise<void>) => void }) => {
      const ids = b.records.map((r) => r.value.i);
      for (const i of ids) {
        const other = inHand.get(i);
        if (other) overlaps.push(`record ${i} handed to ${who} while ${other} still had it`);
        inHand.set(i, who);
        handled.push(i);
      }
      await new Promise((r) => setTimeout(r, 150));
      b.defer!(new Promise<void>((r) => setTimeout(r, 100)).then(() => ids.forEach((i) => inHand.delete(i))));
    };
    const one = await bus.subscribe(topic, { group: 'question' }, handler('member1'));
    await waitUntil(() => inHand.size > 0, 5_000, () => 'nothing handed out');
    const two = await bus.subscribe(topic, { group: 'question' }, handler('member2'));
    await waitUntil(() => bus.backlog('q') === 0, 5_000, () => `backlog ${bus.backlog('q')}`);
    expect(overlaps).toEqual([]);
    // Each record once: the new member started where the old one left the position.
    expect(handled.slice().sort((a, b) => a - b)).toEqual(range(20));
    // And it goes on with what comes next.
    await bus.publish(topic, recs(20, 20));
    await waitUntil(() => handled.length >= 40 && bus.backlog('q') === 0, 5_000, () => `${handled.length} of 40 handled`);
    expect(overlaps).toEqual([]);
    expect(handled.slice().sort((a, b) => a - b)).toEqual(range(40));
    await one.close();
    await two.close();
    await bus.close();
  });
});

describe('LogBus at start: the records not processed yet', () => {
  it('counts at the start what a stop counts: the slowest group of the acknowledged topics, not each group\'s lag added up', async () => {
    const dir = tmp();
    const events = jsonTopic<Rec>('t.events');
    const findings = jsonTopic<Rec>('t.findings');
    // As the embedded deployment: only the events (acknowledged to exporters) wait for the sync.
    const open = () => new LogBus({ dir, partitions: 2, retryDelayMs: 20, commitIntervalMs: 5, onError, syncTopics: (t) => t === events.name });
    let bus = open();
    // Two groups on the events, both stalled, and one on the findings.
    const stalled = async () => {
      throw new RetryLaterError('store away (test)');
    };
    await bus.subscribe(events, { group: 'rule-engine' }, stalled);
    await bus.subscribe(events, { group: 'review-store' }, stalled);
    await bus.subscribe(findings, { group: 'review-findings' }, stalled);
    await bus.publish(events, recs(10));
    await bus.publish(findings, recs(4));
    const atStop = bus.backlog(events.name); // what the stop line says
    expect(atStop).toBe(10);
    await bus.close();
    bus = open();
    expect(bus.recovery.pending).toBe(atStop); // what the start line says
    await bus.close();
  });
});

describe('LogBus packs (the records of one key in one publish as one frame)', () => {
  const open = (dir: string, o: Partial<LogBusOptions> = {}) => new LogBus({ dir, retryDelayMs: 50, onError, commitIntervalMs: 20, ...o });
  /** Each key's values in the order a group was handed them. */
  async function orderByKey(bus: LogBus, topic: Topic<Rec>, group: string, want: number): Promise<Map<string, number[]>> {
    const byKey = new Map<string, number[]>();
    let n = 0;
    const sub = await bus.subscribe(topic, { group }, async (b) => {
      for (const r of b.records) {
        byKey.set(r.key, [...(byKey.get(r.key) ?? []), r.value.i]);
        n++;
      }
    });
    await waitUntil(() => n >= want, 10_000, () => `${n} of ${want}`);
    await new Promise((r) => setTimeout(r, 100));
    await sub.close();
    return byKey;
  }
  const expected = (total: number, keys = 7) => {
    const m = new Map<string, number[]>();
    for (let i = 0; i < total; i++) m.set(`k${i % keys}`, [...(m.get(`k${i % keys}`) ?? []), i]);
    return m;
  };

  it('writes a frame per key and publish, and keeps each key in order across packs, publishes and a restart', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    // packs of at most ~5 records (each value is about 20 bytes), so a key's records span several
    let bus = open(dir, { packBytes: 1024 });
    await bus.publish(topic, recs(70));
    expect(bus.stats.frames).toBe(7);
    await bus.publish(topic, recs(700, 70));
    expect(bus.stats.published).toBe(770);
    expect(bus.stats.frames).toBeGreaterThan(7 + 7);
    expect(bus.stats.frames).toBeLessThan(100);
    await bus.close();
    // read back from the segments, in another process's place
    bus = open(dir, { cacheBytes: 0 });
    expect(await orderByKey(bus, topic, 'after-restart', 770)).toEqual(expected(770));
    expect(bus.stats.readFromDisk).toBe(770);
    await bus.close();
  });

  it('deflates the frames of the topics asked for, and reads them back after a restart, beside plain ones and with it switched off', async () => {
    const dir = tmp();
    const big = jsonTopic<Rec & { text: string }>('big');
    const plain = jsonTopic<Rec & { text: string }>('plain');
    const text = 'the tool returned the same page of results again; '.repeat(40);
    const many = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ key: `k${(from + i) % 7}`, value: { k: `k${(from + i) % 7}`, i: from + i, text } }));
    let bus = open(dir, { compress: (t) => t === 'big', packBytes: 16 * 1024 });
    await bus.publish(big, many(200));
    const deflatedBytes = bus.stats.bytesWritten;
    expect(bus.stats.bytesDeflated).toBeGreaterThan(0);
    await bus.publish(plain, many(200));
    const plainBytes = bus.stats.bytesWritten - deflatedBytes;
    // the same records: the deflated frames a fraction of the plain ones
    expect(deflatedBytes * 5).toBeLessThan(plainBytes);
    await bus.close();
    // read back from the segments by a bus that deflates nothing: each frame says what it is
    bus = open(dir, { cacheBytes: 0 });
    for (const t of [big, plain]) {
      const got: (Rec & { text: string })[] = [];
      const sub = await bus.subscribe(t, { group: 'g' }, async (b) => void got.push(...b.records.map((r) => r.value)));
      await waitUntil(() => got.length >= 200, 5_000, () => `${got.length} of 200`);
      await sub.close();
      expect(got.map((r) => r.i).sort((a, b) => a - b)).toEqual(range(200));
      expect(got.every((r) => r.text === text)).toBe(true);
    }
    expect(bus.stats.readFromDisk).toBe(400);
    await bus.close();
  });

  it('hands a live group each key in order across packs', async () => {
    const bus = open(tmp(), { packBytes: 1024 });
    const topic = jsonTopic<Rec>('t');
    const got = orderByKey(bus, topic, 'live', 770);
    await bus.publish(topic, recs(70));
    await bus.publish(topic, recs(700, 70));
    expect(await got).toEqual(expected(770));
    await bus.close();
  });

  it('continues inside a pack where the group stopped (a batch may end mid-pack)', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    let bus = open(dir, { maxBatch: 4 });
    const one = Array.from({ length: 10 }, (_, i) => ({ key: 'run', value: { k: 'run', i } }));
    await bus.publish(topic, one);
    expect(bus.stats.frames).toBe(1);
    const first: number[] = [];
    const sub = await bus.subscribe(topic, { group: 'g' }, async (b) => {
      if (b.records[0].value.i >= 4) await new Promise(() => undefined); // stuck in the second batch
      first.push(...b.records.map((r) => r.value.i));
    });
    await waitUntil(() => first.length >= 4, 5_000, () => `${first.length} of 4`);
    // the first batch's position is saved (a timer, then a synced file: give a loaded disk time)
    const positions = () => (readOffsets(dir, 4).groups.t?.g ?? []).reduce((a, b) => a + b, 0); // 4: the log's default partitions
    await waitUntil(() => positions() === 4, 5_000, () => `the positions file says ${positions()}`);
    void sub;
    // a crash: the positions file says 4 (the first batch), the handler of the second never returned
    const saved = JSON.parse(fs.readFileSync(path.join(dir, 'offsets.json'), 'utf8'));
    const copy = tmp();
    for (const f of fs.readdirSync(dir)) if (f !== 'LOCK') fs.copyFileSync(path.join(dir, f), path.join(copy, f));
    bus = open(copy, { cacheBytes: 0 });
    expect(bus.recovery.pending).toBe(10 - saved.groups.t.g.reduce((a: number, b: number) => a + b, 0));
    const rest: number[] = [];
    const again = await bus.subscribe(topic, { group: 'g' }, async (b) => void rest.push(...b.records.map((r) => r.value.i)));
    await waitUntil(() => rest.length >= 6, 5_000, () => `${rest} of 4..9`);
    expect(rest).toEqual([4, 5, 6, 7, 8, 9]);
    await again.close();
    await bus.close();
  });

  it('hands a pack read again (its batch failed) whole and in order, and moves past it once', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    const bus = open(dir);
    const seen: number[][] = [];
    let fail = true;
    const sub = await bus.subscribe(topic, { group: 'g' }, async (b) => {
      seen.push(b.records.map((r) => r.value.i));
      if (fail) {
        fail = false;
        throw new RetryLaterError('store away (test)');
      }
    });
    await bus.publish(topic, Array.from({ length: 12 }, (_, i) => ({ key: 'run', value: { k: 'run', i } })));
    await bus.idle();
    expect(seen).toEqual([range(12), range(12)]);
    expect(bus.backlog('t')).toBe(0);
    await sub.close();
    await bus.close();
    const reopened = open(dir);
    expect(reopened.recovery.pending).toBe(0);
    await reopened.close();
  });

  it('sets aside a value of a pack it cannot decode (its bytes kept) and hands on the rest of the pack', async () => {
    const dir = tmp();
    let bus = open(dir);
    await bus.publish(jsonTopic<Rec>('t'), Array.from({ length: 6 }, (_, i) => ({ key: 'run-7', value: { k: 'run-7', i } })));
    expect(bus.stats.frames).toBe(1);
    await bus.close();
    // a reader that cannot read record 3 (as a newer producer's would be), reading from disk
    bus = open(dir, { cacheBytes: 0, deadLetterPrefix: 'x' });
    const strict: Topic<Rec> = { ...jsonTopic<Rec>('t'), decode: (b) => {
      const v = JSON.parse(new TextDecoder().decode(b)) as Rec;
      if (v.i === 3) throw new Error('cannot read record 3');
      return v;
    } };
    const letters: DeadLetter[] = [];
    const dl = await bus.subscribe(deadLetterTopic('x'), { group: 'dl' }, async (b) => void letters.push(...b.records.map((r) => r.value)));
    const seen: number[] = [];
    const sub = await bus.subscribe(strict, { group: 'g' }, async (b) => void seen.push(...b.records.map((r) => r.value.i)));
    await waitUntil(() => seen.length >= 5 && letters.length >= 1, 5_000, () => `seen ${seen}, ${letters.length} letters`);
    expect(seen).toEqual([0, 1, 2, 4, 5]);
    expect(letters).toEqual([expect.objectContaining({ kind: 'undecodable', run_id: 'run-7', item_id: 'offset 3', reason: 'cannot decode: cannot read record 3' })]);
    expect(JSON.parse(Buffer.from((letters[0].payload as { base64: string }).base64, 'base64').toString('utf8'))).toEqual({ k: 'run-7', i: 3 });
    await sub.close();
    await dl.close();
    await bus.close();
  });

  it('reads a log written before packs beside packed records (an upgrade in place)', async () => {
    const dir = tmp();
    const topic = jsonTopic<Rec>('t');
    let bus = open(dir, { pack: false });
    await bus.publish(topic, recs(35));
    expect(bus.stats.frames).toBe(35);
    await bus.close();
    bus = open(dir);
    expect(bus.recovery.pending).toBe(0); // no group yet: kept for one that joins
    await bus.publish(topic, recs(35, 35));
    expect(bus.stats.frames).toBe(7);
    await bus.close();
    bus = open(dir, { cacheBytes: 0 });
    expect(await orderByKey(bus, topic, 'g', 70)).toEqual(expected(70));
    await bus.close();
  });
});
