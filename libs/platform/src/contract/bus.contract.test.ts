/**
 * The bus port's contract: what the pipeline relies on, passed by MemoryBus and KafkaBus alike
 * (run by contract/bus.integration.spec.ts). Named *.test.ts: a helper the specs import, not a
 * suite jest runs on its own, and not part of the build (it uses jest's globals).
 */
import { deadLetterTopic, type Bus, type BusBatch, type BusRecord, type DeadLetter, type SubscribeOptions, type Subscription, type Topic } from '@neatroots/ports';
import { uniqueName } from '../testing/services';

export interface BusContractTarget {
  /** A bus for this suite; the suite closes it. */
  open(): Promise<Bus>;
  /** Removes what the suite created on a shared server (topics, consumer groups). */
  cleanup?(created: { topics: string[]; groups: string[] }): Promise<void>;
  /** How long to wait for records to arrive. Default 20 s. */
  deliveryTimeoutMs?: number;
}

export interface Rec {
  k: string;
  i: number;
}

/** A JSON topic: what the contract checks is delivery, not a codec. */
export function jsonTopic<T>(name: string): Topic<T> {
  return {
    name,
    encode: (v) => new TextEncoder().encode(JSON.stringify(v)),
    decode: (b) => JSON.parse(new TextDecoder().decode(b)) as T,
  };
}

export interface Seen<T> {
  value: T;
  key: string;
  partition: number;
  consumer: string;
}

/** Collects what a handler sees. */
export class Collector<T> {
  readonly seen: Seen<T>[] = [];
  readonly batches: BusBatch<T>[] = [];

  handler(consumer = 'c', before?: (batch: BusBatch<T>) => Promise<void> | void) {
    return async (batch: BusBatch<T>) => {
      this.batches.push(batch);
      if (before) await before(batch);
      for (const r of batch.records) this.seen.push({ value: r.value, key: r.key, partition: batch.partition, consumer });
    };
  }

  async waitFor(n: number, timeoutMs: number): Promise<void> {
    await waitUntil(() => this.seen.length >= n, timeoutMs, () => `${this.seen.length} of ${n} records arrived`);
  }
}

export async function waitUntil(cond: () => boolean, timeoutMs: number, what: () => string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms: ${what()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function records(keys: number, perKey: number, prefix = 'k'): BusRecord<Rec>[] {
  const out: BusRecord<Rec>[] = [];
  for (let i = 0; i < perKey; i++) for (let k = 0; k < keys; k++) out.push({ key: `${prefix}${k}`, value: { k: `${prefix}${k}`, i } });
  return out;
}

function byKey(seen: Seen<Rec>[]): Map<string, Seen<Rec>[]> {
  const m = new Map<string, Seen<Rec>[]>();
  for (const s of seen) {
    const list = m.get(s.key) ?? [];
    list.push(s);
    m.set(s.key, list);
  }
  return m;
}

const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

export function busContract(name: string, target: BusContractTarget): void {
  describe(`Bus contract: ${name}`, () => {
    const base = uniqueName('contract');
    const topics: string[] = [];
    const groups: string[] = [];
    const subs: Subscription[] = [];
    const timeout = target.deliveryTimeoutMs ?? 20_000;
    let bus: Bus;

    const topic = (n: string) => {
      const t = `${base}.${n}`;
      topics.push(t);
      return jsonTopic<Rec>(t);
    };
    const group = (n: string) => {
      const g = `${base}.${n}`;
      groups.push(g);
      return g;
    };
    const subscribe = async <T>(t: Topic<T>, opts: SubscribeOptions, handler: (batch: BusBatch<T>) => Promise<void>) => {
      const s = await bus.subscribe(t, opts, handler);
      subs.push(s);
      return s;
    };

    beforeAll(async () => {
      bus = await target.open();
    }, 60_000);

    afterAll(async () => {
      await Promise.all(subs.map((s) => s.close()));
      await bus.close();
      await target.cleanup?.({ topics, groups });
    }, 60_000);

    const order = topic('order');
    const orderRecs = records(10, 20);
    const groupB = new Collector<Rec>();

    it('delivers each key on one partition, in the order published, across publish calls', async () => {
      const c = new Collector<Rec>();
      await subscribe(order, { group: group('order-a') }, c.handler('a', (b) => b.heartbeat()));
      await subscribe(order, { group: group('order-b') }, groupB.handler('b'));
      // 20 publish calls of 10 keys each: half awaited one by one, half in flight together
      for (let i = 0; i < 10; i++) await bus.publish(order, orderRecs.slice(i * 10, i * 10 + 10));
      await Promise.all(range(10, 10).map((i) => bus.publish(order, orderRecs.slice(i * 10, i * 10 + 10))));
      await c.waitFor(200, timeout);
      const keys = byKey(c.seen);
      expect(keys.size).toBe(10);
      for (const [, seen] of keys) {
        expect(seen.map((s) => s.value.i)).toEqual(range(20));
        expect(new Set(seen.map((s) => s.partition)).size).toBe(1);
      }
    }, 60_000);

    it('lets every group see every record', async () => {
      await groupB.waitFor(200, timeout);
      expect(byKey(groupB.seen).size).toBe(10);
      for (const [, seen] of byKey(groupB.seen)) expect(seen.map((s) => s.value.i)).toEqual(range(20));
    }, 60_000);

    it('splits the partitions between the consumers of one group, which together see each record once', async () => {
      const t = topic('split');
      const g = group('split');
      const c = new Collector<Rec>();
      await subscribe(t, { group: g }, c.handler('a'));
      await subscribe(t, { group: g }, c.handler('b'));
      const recs = records(60, 5);
      await bus.publish(t, recs);
      await c.waitFor(recs.length, timeout);
      await sleep(300); // anything delivered twice would show up now
      const parts = (who: string) => new Set(c.seen.filter((s) => s.consumer === who).map((s) => s.partition));
      const a = parts('a');
      const b = parts('b');
      expect(a.size).toBeGreaterThan(0);
      expect(b.size).toBeGreaterThan(0);
      expect([...a].filter((p) => b.has(p))).toEqual([]);
      expect(c.seen).toHaveLength(recs.length);
      for (const [, seen] of byKey(c.seen)) {
        expect(seen.map((s) => s.value.i)).toEqual(range(5));
        expect(new Set(seen.map((s) => s.consumer)).size).toBe(1);
      }
    }, 60_000);

    it('gives a batch whose handler threw to the handler again, skipping nothing', async () => {
      const t = topic('retry');
      const calls: Rec[][] = [];
      const done: Rec[] = [];
      await subscribe(t, { group: group('retry') }, async (batch) => {
        calls.push(batch.records.map((r) => r.value));
        if (calls.length === 1) throw new Error('the database is down (test)');
        for (const r of batch.records) done.push(r.value);
      });
      const recs = records(1, 10);
      await bus.publish(t, recs);
      await waitUntil(() => done.length >= 10, timeout, () => `${done.length} of 10 handled`);
      expect(calls.length).toBeGreaterThanOrEqual(2);
      // the failed batch comes back first, from its first record
      expect(calls[1].slice(0, calls[0].length)).toEqual(calls[0]);
      expect(done.map((r) => r.i)).toEqual(range(10));
    }, 60_000);

    it('sets aside a record whose handler keeps throwing, after bounded tries, and handles everything behind it', async () => {
      // dead letters go to <prefix>.dead-letters (default prefix): this test's are told apart by source
      const letters: DeadLetter[] = [];
      await subscribe(deadLetterTopic(), { group: group('dead-letters') }, async (batch) => {
        for (const r of batch.records) letters.push(r.value);
      });
      const t = topic('poison');
      const g = group('poison');
      const done: number[] = [];
      const tries: number[] = [];
      await subscribe(t, { group: g }, async (batch) => {
        for (const r of batch.records) {
          if (r.value.i === 3) {
            tries.push(3);
            throw new TypeError('cannot read the record (test)');
          }
        }
        for (const r of batch.records) done.push(r.value.i);
      });
      await bus.publish(t, records(1, 10));
      await waitUntil(() => done.includes(9), timeout, () => `handled ${done.join(',')}`);
      // one key, one partition: everything but the poison, in order (a record handled before it
      // may be handled again when its batch is split: at least once)
      expect([...new Set(done)]).toEqual([0, 1, 2, 4, 5, 6, 7, 8, 9]);
      await waitUntil(() => letters.some((l) => l.source === `bus:${t.name}/${g}`), timeout, () => 'no dead letter');
      const mine = letters.filter((l) => l.source === `bus:${t.name}/${g}`);
      expect(mine).toHaveLength(1);
      expect(mine[0]).toMatchObject({ kind: 'message', run_id: 'k0', reason: 'cannot read the record (test)', payload: { k: 'k0', i: 3 } });
      // bounded: the batch's tries and the record's own, not forever
      expect(tries.length).toBeLessThanOrEqual(6);
    }, 60_000);

    it('never sets aside because a dependency is down: a connection error is retried as long as it takes', async () => {
      const t = topic('outage');
      let failures = 0;
      const done: number[] = [];
      await subscribe(t, { group: group('outage') }, async (batch) => {
        if (failures < 8) {
          failures++;
          throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432 (test)'), { code: 'ECONNREFUSED' });
        }
        for (const r of batch.records) done.push(r.value.i);
      });
      await bus.publish(t, records(1, 5));
      await waitUntil(() => done.length >= 5, timeout, () => `${done.length} of 5 handled after ${failures} failures`);
      expect(failures).toBe(8);
      expect(done).toEqual(range(5));
    }, 60_000);

    it('continues after close at the last handled record: the batch in hand is committed, nothing read twice or skipped', async () => {
      const t = topic('resume');
      const g = group('resume');
      const first: Rec[] = [];
      let started = false;
      const s1 = await subscribe(t, { group: g }, async (batch) => {
        started = true;
        await sleep(300); // a slow batch, in hand when close() is called
        for (const r of batch.records) first.push(r.value);
      });
      const recs = records(1, 30);
      await bus.publish(t, recs.slice(0, 20));
      await waitUntil(() => started, timeout, () => 'no batch started');
      await s1.close();
      const handledBeforeClose = first.length;
      expect(handledBeforeClose).toBeGreaterThan(0); // close waited for the batch in hand
      await bus.publish(t, recs.slice(20));
      const second: Rec[] = [];
      await subscribe(t, { group: g }, async (batch) => {
        for (const r of batch.records) second.push(r.value);
      });
      await waitUntil(() => handledBeforeClose + second.length >= 30, timeout, () => `${handledBeforeClose} + ${second.length} of 30`);
      await sleep(300);
      expect(first).toHaveLength(handledBeforeClose); // the closed subscription took nothing more
      expect([...first, ...second].map((r) => r.i)).toEqual(range(30));
    }, 60_000);

    it('starts a new group at the earliest record by default, and at new records only with fromBeginning: false', async () => {
      const t = topic('start');
      await bus.publish(t, records(3, 2, 'old'));
      const earliest = new Collector<Rec>();
      const latest = new Collector<Rec>();
      await subscribe(t, { group: group('start-earliest') }, earliest.handler());
      await subscribe(t, { group: group('start-latest'), fromBeginning: false }, latest.handler());
      await earliest.waitFor(6, timeout);
      await bus.publish(t, records(3, 1, 'new'));
      await earliest.waitFor(9, timeout);
      await latest.waitFor(3, timeout);
      await sleep(300);
      expect(latest.seen.map((s) => s.key).sort()).toEqual(['new0', 'new1', 'new2']);
      expect(earliest.seen).toHaveLength(9);
    }, 60_000);

    it('delivers everything from a large publish and from many concurrent small ones', async () => {
      const t = topic('bulk');
      const c = new Collector<Rec>();
      await subscribe(t, { group: group('bulk') }, c.handler());
      const big = records(500, 10, 'big');
      const small = records(200, 1, 'small');
      await Promise.all([bus.publish(t, big), ...small.map((r) => bus.publish(t, [r]))]);
      await c.waitFor(big.length + small.length, timeout);
      for (const [key, seen] of byKey(c.seen)) {
        expect(seen.map((s) => s.value.i)).toEqual(range(key.startsWith('big') ? 10 : 1));
      }
      expect(c.seen).toHaveLength(big.length + small.length);
      // records were handed over in batches, not one by one
      expect(c.batches.length).toBeLessThan(c.seen.length / 10);
    }, 60_000);
  });
}
