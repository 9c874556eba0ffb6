import type { BusBatch } from './bus';
import { mergingBatches } from './merge-batches';

function batchOf(partition: number, values: string[], extra: Partial<BusBatch<string>> = {}): BusBatch<string> & { beats: number } {
  const b = {
    topic: 't',
    partition,
    records: values.map((value, i) => ({ key: `k${partition}`, value, offset: String(i) })),
    beats: 0,
    heartbeat: async () => {
      b.beats++;
    },
    ...extra,
  };
  return b as BusBatch<string> & { beats: number };
}

/** A promise a test opens when it chooses. */
function gated(): { gate: Promise<void>; release: () => void } {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  return { gate, release };
}

describe('mergingBatches: the batches a bus hands over at the same time are one step', () => {
  it('calls the handler once with the records of the batches that came together, each in its order, and resolves each after it', async () => {
    const steps: string[][] = [];
    const { gate, release } = gated();
    const handler = mergingBatches<string>(async (b) => {
      steps.push(b.records.map((r) => r.value));
      await gate;
    });
    let done = 0;
    const all = [batchOf(0, ['a1', 'a2']), batchOf(1, ['b1']), batchOf(2, ['c1', 'c2'])].map((b) => handler(b).then(() => done++));
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(steps).toEqual([['a1', 'a2', 'b1', 'c1', 'c2']]);
    expect(done).toBe(0); // none moves on before the step is done
    release();
    await Promise.all(all);
    expect(done).toBe(3);
  });

  it('takes a batch that comes while a step runs in the next step', async () => {
    const steps: string[][] = [];
    const { gate, release } = gated();
    const handler = mergingBatches<string>(async (b) => {
      steps.push(b.records.map((r) => r.value));
      if (steps.length === 1) await gate;
    });
    const first = handler(batchOf(0, ['a']));
    await new Promise((r) => setImmediate(r));
    const second = handler(batchOf(1, ['b']));
    const third = handler(batchOf(2, ['c']));
    await new Promise((r) => setImmediate(r));
    expect(steps).toEqual([['a'], ['b', 'c']]);
    release();
    await Promise.all([first, second, third]);
  });

  it('when the merged step fails, handles each batch on its own: only the batch with the bad record fails', async () => {
    const calls: string[][] = [];
    const handler = mergingBatches<string>(async (b) => {
      calls.push(b.records.map((r) => r.value));
      if (b.records.some((r) => r.value === 'bad')) throw new Error('bad record');
    });
    const results = await Promise.allSettled([handler(batchOf(0, ['a'])), handler(batchOf(1, ['bad', 'b2'])), handler(batchOf(2, ['c']))]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toEqual(new Error('bad record'));
    expect(calls).toEqual([['a', 'bad', 'b2', 'c'], ['a'], ['bad', 'b2'], ['c']]);
  });

  it('offers defer only when every batch does, and hands what was deferred to each once the step returned', async () => {
    const deferredTo: number[] = [];
    const withDefer = (p: number) => batchOf(p, ['x'], { defer: () => void deferredTo.push(p) });
    const stored = Promise.resolve();
    let offered: boolean[] = [];
    const handler = mergingBatches<string>(async (b) => {
      offered.push(typeof b.defer === 'function');
      b.defer?.(stored);
      expect(deferredTo).toEqual([]); // not before the step returned
    });
    await Promise.all([handler(withDefer(0)), handler(withDefer(1))]);
    expect(offered).toEqual([true]);
    expect(deferredTo).toEqual([0, 1]);

    offered = [];
    deferredTo.length = 0;
    await Promise.all([handler(withDefer(0)), handler(batchOf(1, ['y']))]);
    expect(offered).toEqual([false]);
    expect(deferredTo).toEqual([]);
  });

  it('beats for every batch it holds, and calls a lone batch as it came', async () => {
    const batches = [batchOf(0, ['a']), batchOf(1, ['b'])];
    const handler = mergingBatches<string>(async (b) => {
      await b.heartbeat();
    });
    await Promise.all(batches.map(handler));
    expect(batches.map((b) => b.beats)).toEqual([1, 1]);

    const lone = batchOf(3, ['z']);
    let seen: BusBatch<string> | undefined;
    await mergingBatches<string>(async (b) => {
      seen = b;
    })(lone);
    expect(seen).toBe(lone);
  });
});
