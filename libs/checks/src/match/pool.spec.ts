import { MatchWorker } from './pool';

/** A pattern RE2 takes seconds on over a long text (the bounds would refuse it; the thread does not check). */
const FREEZING = '([a-z]{1,1000}x)'.repeat(50);

describe('MatchWorker', () => {
  let worker: MatchWorker;
  const events: string[] = [];
  beforeEach(() => {
    events.length = 0;
    worker = new MatchWorker({ limitMs: 50, onEvent: (e) => events.push(e) });
  });
  afterEach(() => worker.close());

  it('answers every job in order, batch after batch', async () => {
    const t = Buffer.from('order 42 refunded');
    expect(await worker.run([{ pattern: 'refund', text: t }, { pattern: '^order \\d+', text: t }, { pattern: 'chargeback', text: t }])).toEqual([
      { hit: true },
      { hit: true },
      { hit: false },
    ]);
    expect(await worker.run([{ pattern: 'chargeback', text: Buffer.from('a chargeback') }])).toEqual([{ hit: true }]);
    expect(await worker.run([])).toEqual([]);
  });

  it('stops a job over the limit, keeps the answers found before it and goes on after it', async () => {
    const big = Buffer.from('a'.repeat(200_000));
    const small = Buffer.from('a needle');
    const out = await worker.run([
      { pattern: 'needle', text: small },
      { pattern: FREEZING, text: big },
      { pattern: 'needle', text: big },
      { pattern: FREEZING, text: Buffer.from('b'.repeat(200_000)) },
      { pattern: 'needle', text: small },
    ]);
    expect(out[0]).toEqual({ hit: true });
    // Over the limit: slow, not a pause. Confirmed either by still running at twice the limit or,
    // when the machine stalled the first timing, by a second run over the limit.
    expect(out[1]).toEqual({ slow: expect.any(Number) });
    expect((out[1] as { slow: number }).slow).toBeGreaterThanOrEqual(50);
    expect(out[2]).toEqual({ hit: false });
    // The same pattern is not run again in the batch.
    expect(out[3]).toEqual({ skipped: true });
    expect(out[4]).toEqual({ hit: true });
    // One thread stopped, or two when the machine stalled the first timing and the job was tried again.
    expect(events.length).toBeGreaterThanOrEqual(1);
    expect(events.length).toBeLessThanOrEqual(2);
    expect(new Set(events)).toEqual(new Set(['terminated']));
    // The replacement thread takes the next batch.
    expect(await worker.run([{ pattern: 'needle', text: small }])).toEqual([{ hit: true }]);
  }, 30_000);
});
