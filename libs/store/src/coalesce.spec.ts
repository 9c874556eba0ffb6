import { Coalescer } from './coalesce';

/** A statement that takes a while, recording the batches it was given. */
function slowRun(batches: number[][], bad?: number) {
  return async (items: number[]) => {
    batches.push([...items]);
    await new Promise((r) => setTimeout(r, 5));
    if (bad !== undefined && items.includes(bad)) throw new Error(`row ${bad} is malformed`);
    return items.map((i) => i * 10);
  };
}

describe('Coalescer', () => {
  it('sends calls made while a statement runs together as the next one, each answered with its own result', async () => {
    const batches: number[][] = [];
    const c = new Coalescer(slowRun(batches), { maxBatch: 100, maxInFlight: 1 });
    const first = c.call(1);
    await new Promise((r) => setTimeout(r, 1)); // the first statement is running
    const rest = await Promise.all([2, 3, 4, 5].map((i) => c.call(i)));
    expect(await first).toBe(10);
    expect(rest).toEqual([20, 30, 40, 50]);
    expect(batches).toEqual([[1], [2, 3, 4, 5]]);
  });

  it('keeps batches to maxBatch and statements in flight to maxInFlight', async () => {
    const batches: number[][] = [];
    let inFlight = 0;
    let most = 0;
    const run = slowRun(batches);
    const c = new Coalescer(
      async (items: number[]) => {
        most = Math.max(most, ++inFlight);
        try {
          return await run(items);
        } finally {
          inFlight--;
        }
      },
      { maxBatch: 3, maxInFlight: 2 },
    );
    const out = await Promise.all(Array.from({ length: 10 }, (_, i) => c.call(i)));
    expect(out).toEqual(Array.from({ length: 10 }, (_, i) => i * 10));
    expect(Math.max(...batches.map((b) => b.length))).toBe(3);
    expect(most).toBe(2);
  });

  it('runs each item of a failed batch alone, so one bad row fails only its own call', async () => {
    const batches: number[][] = [];
    const c = new Coalescer(slowRun(batches, 3), { maxBatch: 100, maxInFlight: 1 });
    const got = await Promise.allSettled([1, 2, 3, 4].map((i) => c.call(i)));
    expect(got.map((g) => (g.status === 'fulfilled' ? g.value : (g.reason as Error).message))).toEqual([10, 20, 'row 3 is malformed', 40]);
    expect(batches).toEqual([[1, 2, 3, 4], [1], [2], [3], [4]]);
  });
});
