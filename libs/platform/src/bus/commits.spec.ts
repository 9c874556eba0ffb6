import { CommitQueue } from './commits';

type Offsets = { partition: number; offset: string }[];

/** A commit function the test answers by hand: each call waits until released. */
function manual() {
  const calls: { offsets: Offsets; release: (err?: Error) => void }[] = [];
  const commit = (offsets: Offsets) => new Promise<void>((resolve, reject) => calls.push({ offsets, release: (err) => (err ? reject(err) : resolve()) }));
  return { calls, commit };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('CommitQueue (offset commits beside the fetch loop)', () => {
  it('sends one commit at a time, the next carrying every partition handled meanwhile at its highest offset', async () => {
    const m = manual();
    const q = new CommitQueue(m.commit, () => undefined);
    q.record(0, '10');
    await tick();
    expect(m.calls.map((c) => c.offsets)).toEqual([[{ partition: 0, offset: '10' }]]);
    // While the first commit is out: three batches on two partitions, one older than the other.
    q.record(1, '5');
    q.record(0, '20');
    q.record(0, '15');
    await tick();
    expect(m.calls).toHaveLength(1);
    m.calls[0].release();
    await tick();
    expect(m.calls.map((c) => c.offsets)).toEqual([[{ partition: 0, offset: '10' }], [{ partition: 1, offset: '5' }, { partition: 0, offset: '20' }]]);
    m.calls[1].release();
    await q.flush();
    expect(q.counts).toEqual({ commits: 2, offsets: 3, failed: 0 });
  });

  it('joins the batches of one turn into one commit', async () => {
    const m = manual();
    const q = new CommitQueue(m.commit, () => undefined);
    for (let p = 0; p < 6; p++) q.record(p, String(100 + p));
    await tick();
    expect(m.calls).toHaveLength(1);
    expect(m.calls[0].offsets).toHaveLength(6);
  });

  it('flush waits for every offset recorded before it, including one recorded while a commit was out', async () => {
    const m = manual();
    const q = new CommitQueue(m.commit, () => undefined);
    q.record(2, '7');
    await tick();
    q.record(2, '9');
    let flushed = false;
    const f = q.flush().then(() => (flushed = true));
    m.calls[0].release();
    await tick();
    expect(flushed).toBe(false); // the second commit (offset 9) is out now
    expect(m.calls[1].offsets).toEqual([{ partition: 2, offset: '9' }]);
    m.calls[1].release();
    await f;
    expect(flushed).toBe(true);
  });

  it('reports a failed commit and goes on: the next batch of the partition commits a newer offset', async () => {
    const m = manual();
    const errors: unknown[] = [];
    const q = new CommitQueue(m.commit, (e) => errors.push(e));
    q.record(0, '3');
    await tick();
    m.calls[0].release(new Error('coordinator moved'));
    await q.flush();
    expect(errors).toEqual([new Error('coordinator moved')]);
    expect(q.counts.failed).toBe(1);
    q.record(0, '4');
    await tick();
    expect(m.calls[1].offsets).toEqual([{ partition: 0, offset: '4' }]);
    m.calls[1].release();
    await q.flush();
    expect(q.counts.commits).toBe(1);
  });

  it('compares offsets as numbers past 2^53', async () => {
    const m = manual();
    const q = new CommitQueue(m.commit, () => undefined);
    q.record(0, '9007199254740993');
    q.record(0, '9007199254740992');
    await tick();
    expect(m.calls[0].offsets).toEqual([{ partition: 0, offset: '9007199254740993' }]);
  });
});
