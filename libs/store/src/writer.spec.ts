import type { Db, Queryable } from '@neatroots/ports';
import { finding, spanEnv } from './fixtures.test';
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

/** The real Db, counting transactions, failing the next `failures` of them. */
function spy(failures = 0): Db & { transactions: number; failures: number } {
  const s = {
    transactions: 0,
    failures,
    kind: real.kind,
    query: real.query.bind(real),
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
});
