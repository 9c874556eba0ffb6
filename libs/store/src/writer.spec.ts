import type { Db, Queryable, Statement } from '@neatroots/ports';
import { finding, spanEnv } from './fixtures.test';
import { DeadLettersRepo } from './dead-letters.repo';
import { FindingsRepo } from './findings.repo';
import { RunsRepo } from './runs.repo';
import { openTestDb, resetDb } from './test-db.test';
import { StoreWriter, StoreWriterClosedError } from './writer';

let real: Db;

beforeAll(async () => {
  real = await openTestDb();
}, 60_000);
afterAll(() => real.close());
beforeEach(() => resetDb(real));

/**
 * The real Db, counting transactions (a batch is one), down for the next `failures` calls
 * (transactions, batches and queries alike: a database that is down answers nothing).
 */
function spy(failures = 0): Db & { transactions: number; failures: number } {
  const s = {
    transactions: 0,
    failures,
    kind: real.kind,
    query: ((sql: string, params?: readonly unknown[]) => {
      if (s.failures > 0) {
        s.failures--;
        return Promise.reject(new Error('connection refused'));
      }
      return real.query(sql, params);
    }) as Db['query'],
    exec: real.exec.bind(real),
    close: async () => undefined,
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      s.transactions++;
      if (s.failures > 0) {
        s.failures--;
        throw new Error('connection refused');
      }
      return real.transaction(fn);
    },
    async batch(statements: readonly Statement[]) {
      s.transactions++;
      if (s.failures > 0) {
        s.failures--;
        throw new Error('connection refused');
      }
      return real.batch!(statements);
    },
  };
  return s;
}

const spans = (n: number, run = 'r1') => Array.from({ length: n }, (_, i) => spanEnv('p1', { run_id: run, span_id: `s${i}` }));

async function spanCount(run = 'r1'): Promise<number> {
  return (await new RunsRepo(real).get('p1', run))?.span_count ?? 0;
}

describe('StoreWriter', () => {
  it('flushes when maxBatch items wait, without waiting for the timer', async () => {
    const db = spy();
    const w = new StoreWriter(db, { maxBatch: 3, flushMs: 60_000 });
    const t = Date.now();
    await Promise.all([w.writeEvents(spans(2)), w.writeFindings([finding({ id: 'f1' })])]);
    expect(Date.now() - t).toBeLessThan(5_000);
    expect(db.transactions).toBe(1);
    expect(await spanCount()).toBe(2);
    expect(await new FindingsRepo(real).get('p1', 'f1')).not.toBeNull();
    await w.close();
  });

  it('flushes after flushMs, one transaction for the writes that came meanwhile', async () => {
    const db = spy();
    const w = new StoreWriter(db, { maxBatch: 500, flushMs: 40 });
    const t = Date.now();
    const a = w.writeEvents(spans(1, 'ra'));
    const b = w.writeEvents(spans(1, 'rb'));
    const c = w.writeDeliveries([{ finding_id: 'f1', project: 'p1', at_ms: 1 }]);
    expect(w.pending).toBe(3);
    await Promise.all([a, b, c]);
    expect(Date.now() - t).toBeGreaterThanOrEqual(35);
    expect(db.transactions).toBe(1);
    expect(w.pending).toBe(0);
    expect(await spanCount('ra')).toBe(1);
    expect(await spanCount('rb')).toBe(1);
    await w.close();
  });

  it('takes the writes waiting behind a flush together, whole, up to maxFlush items', async () => {
    const db = spy();
    const flushed: number[] = [];
    const w = new StoreWriter(db, { maxBatch: 2, maxFlush: 5, flushMs: 60_000, onFlush: (f) => flushed.push(f.items) });
    await Promise.all([
      w.writeEvents(spans(2, 'ra')), w.writeEvents(spans(2, 'rb')), w.writeEvents(spans(2, 'rc')), w.writeEvents(spans(3, 'rd')),
      w.writeFindings([finding({ id: 'f1' }), finding({ id: 'f2' }), finding({ id: 'f3' }), finding({ id: 'f4' }), finding({ id: 'f5' }), finding({ id: 'f6' })]),
    ]);
    // 2+2 (a third write of 2 would pass 5), 2+3, then the write of 6 alone: larger than a flush, not split
    expect(flushed).toEqual([4, 5, 6]);
    expect(db.transactions).toBe(3);
    expect(await spanCount('rd')).toBe(3);
    await w.close();
  });

  it('writes through transaction() a Db that takes no batch (a wrapper), all or nothing the same', async () => {
    const { batch: _batch, ...rest } = spy();
    let transactions = 0;
    const db: Db = { ...rest, transaction: (fn) => (transactions++, real.transaction(fn)) };
    const w = new StoreWriter(db, { flushMs: 1 });
    await w.writeEvents(spans(3));
    await w.writeFindings([finding({ id: 'f1' })]);
    expect(transactions).toBe(2);
    expect(await spanCount()).toBe(3);
    expect(await new FindingsRepo(real).get('p1', 'f1')).not.toBeNull();
    await w.close();
  });

  it('does not resolve a write before it is stored, and retries a failing flush without dropping it', async () => {
    const db = spy(2);
    const errors: number[] = [];
    const w = new StoreWriter(db, { flushMs: 1, retryBaseMs: 5, onError: (_e, info) => errors.push(info.attempt) });
    let done = false;
    const p = w.writeEvents(spans(3)).then(() => (done = true));
    await new Promise((r) => setTimeout(r, 3));
    expect(done).toBe(false);
    await p;
    expect(errors).toEqual([1, 2]);
    expect(db.transactions).toBe(3);
    expect(await spanCount()).toBe(3);
    await w.close();
  });

  it('flushes what is left on close, and refuses writes after', async () => {
    const db = spy();
    const w = new StoreWriter(db, { flushMs: 60_000 });
    const p = w.writeEvents(spans(4));
    await w.close();
    await p;
    expect(await spanCount()).toBe(4);
    await expect(w.writeEvents(spans(1))).rejects.toBeInstanceOf(StoreWriterClosedError);
  });

  it('keeps writes in order across flushes', async () => {
    const w = new StoreWriter(spy(), { maxBatch: 2, flushMs: 1 });
    const writes = [1, 2, 3, 4, 5].map((c) => w.writeFindings([finding({ id: 'f1', status: c === 1 ? 'raised' : 'updated', count: c })]));
    const resolved = w.writeFindings([finding({ id: 'f1', status: 'resolved', count: 5 })]);
    await Promise.all([...writes, resolved]);
    expect(await new FindingsRepo(real).get('p1', 'f1')).toMatchObject({ count: 5, status: 'resolved' });
    await w.close();
  });

  it('rejects what it could not store once closing, so the bus delivers it again', async () => {
    const db = spy(1_000);
    const w = new StoreWriter(db, { flushMs: 1, retryBaseMs: 1, retryMaxMs: 2, closeAttempts: 2, onError: () => undefined });
    const p = w.writeEvents(spans(2));
    const outcome = p.then(() => 'stored', (e: Error) => e.message);
    await new Promise((r) => setTimeout(r, 20));
    await expect(w.close()).rejects.toThrow(/2 items not stored/);
    expect(await outcome).toBe('connection refused');
    expect(await spanCount()).toBe(0);
  });

  describe('an item the database refuses', () => {
    const deadLetters = () => new DeadLettersRepo(real).list('p1');

    it('is set aside with the reason, and every other item of the batch is stored', async () => {
      const setAside: string[] = [];
      const w = new StoreWriter(spy(), { flushMs: 60_000, retryBaseMs: 1, onError: () => undefined, onSetAside: (l) => setAside.push(...l.map((x) => x.item_id ?? '')) });
      // Each span alone fits a bigint; the run's total of both does not (the second is refused).
      const huge = (id: string) => spanEnv('p1', { run_id: 'rx', span_id: id, usage: { total_tokens: 5e18 } });
      const before = spans(3, 'ra');
      const after = spans(3, 'rb');
      const writes = [
        w.writeEvents(before),
        w.writeEvents([huge('x1'), huge('x2')]),
        // the findings column `count` is an integer: 3e9 does not fit
        w.writeFindings([finding({ id: 'f-ok' }), finding({ id: 'f-bad', count: 3e9 })]),
        w.writeEvents(after),
      ];
      await w.flush();
      await Promise.all(writes);
      expect(await spanCount('ra')).toBe(3);
      expect(await spanCount('rb')).toBe(3);
      expect(await spanCount('rx')).toBe(1);
      expect(await new FindingsRepo(real).get('p1', 'f-ok')).not.toBeNull();
      expect(await new FindingsRepo(real).get('p1', 'f-bad')).toBeNull();
      const page = await deadLetters();
      expect(page.items.map((d) => [d.source, d.kind, d.item_id]).sort()).toEqual([
        ['store.events', 'span', 'x2'],
        ['store.findings', 'finding', 'f-bad'],
      ]);
      for (const d of page.items) expect(d.reason).toMatch(/out of range/);
      expect(JSON.parse(page.items.find((d) => d.item_id === 'x2')!.payload)).toMatchObject({ project: 'p1', item: { span: { span_id: 'x2' } } });
      expect(setAside.sort()).toEqual(['f-bad', 'x2']);
      expect(w.setAsideCount).toBe(2);
      await w.close();
    });

    it('sets aside without sending what would break the database (JSON nested thousands deep, a year past 9999)', async () => {
      const db = spy();
      const w = new StoreWriter(db, { flushMs: 60_000, onError: () => undefined });
      const deep = JSON.parse('['.repeat(5_000) + ']'.repeat(5_000));
      await Promise.all([
        w.writeEvents([spanEnv('p1', { run_id: 'r1', span_id: 'deep', input: deep }), spanEnv('p1', { run_id: 'r1', span_id: 'late', start_ms: 1e300 })]),
        w.writeEvents(spans(2)),
        w.flush(),
      ]);
      expect(db.transactions).toBe(2); // the dead letters, then the rest: no failed attempt
      expect(await spanCount()).toBe(2);
      const reasons = Object.fromEntries((await deadLetters()).items.map((d) => [d.item_id, d.reason]));
      expect(reasons).toEqual({ deep: expect.stringMatching(/input is JSON nested more than 512 levels/), late: expect.stringMatching(/start_ms 1e\+300 is outside/) });
      await w.close();
    });

    it('is set aside once: a redelivered poison is counted on its row', async () => {
      const w = new StoreWriter(spy(), { flushMs: 1, retryBaseMs: 1, onError: () => undefined });
      await w.writeFindings([finding({ id: 'f-bad', count: 3e9 })]);
      await w.writeFindings([finding({ id: 'f-bad', count: 3e9 })]);
      const page = await deadLetters();
      expect(page.items).toHaveLength(1);
      expect(page.items[0].times).toBe(2);
      await w.close();
    });

    it('is not set aside while the database answers but cannot write (read-only during a failover): the flush waits', async () => {
      let readOnly = 4;
      const db: Db = {
        kind: real.kind,
        query: real.query.bind(real),
        exec: real.exec.bind(real),
        close: async () => undefined,
        transaction: (fn) => {
          if (readOnly-- > 0) return Promise.reject(Object.assign(new Error('cannot execute INSERT in a read-only transaction'), { code: '25006' }));
          return real.transaction(fn);
        },
        batch: (statements) => {
          if (readOnly-- > 0) return Promise.reject(Object.assign(new Error('cannot execute INSERT in a read-only transaction'), { code: '25006' }));
          return real.batch!(statements);
        },
      };
      const w = new StoreWriter(db, { flushMs: 1, retryBaseMs: 1, itemAttempts: 1, onError: () => undefined });
      await w.writeEvents(spans(2));
      expect(await spanCount()).toBe(2);
      expect((await deadLetters()).items).toEqual([]);
      await w.close();
    });

    it('is not set aside while the database is down: the flush waits for it', async () => {
      const db = spy(6);
      const w = new StoreWriter(db, { flushMs: 1, retryBaseMs: 1, itemAttempts: 1, onError: () => undefined });
      await w.writeEvents(spans(2));
      expect(await spanCount()).toBe(2);
      expect((await deadLetters()).items).toEqual([]);
      await w.close();
    });
  });
});


describe('dead letters cut to travel on the bus', () => {
  it('are stored as cut, and say so (truncated)', async () => {
    const repo = new DeadLettersRepo(real);
    const cut = '{"partition":0,"offset":"7","base64":"' + 'A'.repeat(1000);
    await repo.setAside([{ project: 'p1', source: 'bus:t/g', kind: 'undecodable', run_id: 'r1', reason: 'cannot decode', payload: null, payload_cut: cut }]);
    const page = await repo.list('p1');
    expect(page.items).toHaveLength(1);
    expect(page.items[0]).toMatchObject({ payload: cut, truncated: true, run_id: 'r1' });
  });
});
