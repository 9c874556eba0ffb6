import { Job, Queue } from 'bullmq';
import { isInfrastructureError, type FailedJob } from '@neatroots/ports';
import { sleep, until } from '../contract/jobs.contract.test';
import { PrivateRedis, RedisScratch, redisServerBinary } from '../testing/private-redis';
import { freePort, serviceOrSkip } from '../testing/services';
import { until as untilValue } from '../testing/until';
import { BullJobs } from './bullmq';

// What only the BullMQ driver has: a serialize key's lock in Redis, with an expiry for a holder
// that dies. (The behaviour both drivers share is in contract/jobs.contract.test.ts.)
const redis = serviceOrSkip('redis', 'BullJobs serialize lock');

(redis ? describe : describe.skip)('BullJobs serialize lock (the review jobs one at a time per workspace)', () => {
  const url = redis?.url ?? '';
  const scratch = new RedisScratch(url, 'it_bulljobs');
  const clients: BullJobs[] = [];
  const LOCK_MS = 1_500;
  const open = (prefix: string) => {
    // A lock of 1.5 s renewed every 100 ms: a renewal late by over a second (a loaded CI machine)
    // would let it lapse, which these tests do not mean to test.
    const c = new BullJobs({ url, prefix, closeGraceMs: 5_000, serializeLockMs: LOCK_MS, serializeRenewMs: 100 });
    clients.push(c);
    return c;
  };
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await scratch.cleanup();
  });

  it('holds a key for as long as its job runs, well past the lock expiry, while another key runs alongside', async () => {
    const prefix = scratch.next();
    // two replicas, each allowed several jobs at a time: only the lock keeps same-key jobs apart
    const [one, two] = [open(prefix), open(prefix)];
    type Run = { n: number; ws: string; start: number; end?: number };
    const runs: Run[] = [];
    const ttlsWhileRunning: number[] = [];
    const handler = async (d: { n: number; ws: string }) => {
      const run: Run = { n: d.n, ws: d.ws, start: Date.now() };
      runs.push(run);
      // a recluster that outlives the lock's expiry (LOCK_MS) more than three times over
      const ms = d.ws === 'a' ? 3.5 * LOCK_MS : 400;
      for (let t = 0; t < ms; t += 100) {
        await sleep(100);
        if (d.ws === 'a') ttlsWhileRunning.push(await scratch.raw.pttl(`${prefix}:recluster:serialize:a`));
      }
      run.end = Date.now();
    };
    const opts = { concurrency: 3, serializeBy: (d: { ws: string }) => d.ws };
    await one.work('recluster', handler, opts);
    await two.work('recluster', handler, opts);
    await one.add('recluster', { n: 1, ws: 'a' });
    await until(() => runs.length === 1);
    await two.add('recluster', { n: 2, ws: 'a' });
    await one.add('recluster', { n: 3, ws: 'b' });
    await until(() => runs.length === 3 && runs.every((r) => r.end !== undefined), 30_000);

    const [a1, a2] = runs.filter((r) => r.ws === 'a');
    const b = runs.find((r) => r.ws === 'b')!;
    // the second job of "a" started only once the first had ended
    expect(a1.n).toBe(1);
    expect(a2.start).toBeGreaterThanOrEqual(a1.end!);
    // the job of "b" ran while the first of "a" did
    expect(b.start).toBeLessThan(a1.end!);
    expect(b.end!).toBeGreaterThan(a1.start);
    // the lock kept a bounded expiry all along (a holder that dies frees it), and is gone after
    expect(ttlsWhileRunning.length).toBeGreaterThan(0);
    expect(Math.min(...ttlsWhileRunning)).toBeGreaterThan(0);
    expect(Math.max(...ttlsWhileRunning)).toBeLessThanOrEqual(LOCK_MS);
    expect(await scratch.raw.exists(`${prefix}:recluster:serialize:a`)).toBe(0);
  });

  it('runs a job of a key whose holder died once the lock it left expires', async () => {
    const prefix = scratch.next();
    const jobs = open(prefix);
    // a replica that took the key and died: its lock is left with its expiry
    const lockKey = `${prefix}:recluster:serialize:a`;
    // (timed from before the SET: under load the steps after it can take most of the 300 ms)
    const setAt = Date.now();
    await scratch.raw.set(lockKey, 'dead-holder', 'PX', 300);
    const started: number[] = [];
    await jobs.work('recluster', async () => void started.push(Date.now()), { serializeBy: (d: { ws: string }) => d.ws });
    await jobs.add('recluster', { ws: 'a' });
    await until(() => started.length === 1);
    expect(started[0] - setAt).toBeGreaterThanOrEqual(295);
    expect(await scratch.raw.exists(lockKey)).toBe(0);
  });

  it('close() waits for a running job up to closeGraceMs, and stops after it even when a job never ends', async () => {
    const prefix = scratch.next();
    const quick = new BullJobs({ url, prefix, closeGraceMs: 5_000 });
    let done = false;
    let started = false;
    await quick.work('q', async () => {
      started = true;
      await sleep(300);
      done = true;
    });
    await quick.add('q', {}, { jobId: 'short' });
    await until(() => started);
    await quick.close();
    expect(done).toBe(true);

    // (a handler that does not heed its signal either: abortGraceMs later its job is put back)
    const stuck = new BullJobs({ url, prefix: scratch.next(), closeGraceMs: 300, abortGraceMs: 300 });
    let running = false;
    // a job that never ends (a call hanging): SIGTERM must still stop the process
    await stuck.work('q', async () => {
      running = true;
      await new Promise(() => undefined);
    });
    await stuck.add('q', {}, { jobId: 'forever' });
    await until(() => running);
    const t0 = Date.now();
    const closed = await Promise.race([stuck.close().then(() => 'closed'), sleep(8_000).then(() => 'still closing')]);
    expect(closed).toBe('closed');
    expect(Date.now() - t0).toBeLessThan(3_000);
  });

  it('a stop puts a serialized job it cut short back at once and releases its key: another replica runs it now, no try spent', async () => {
    const prefix = scratch.next();
    // the serialize key's default expiry (10 min): a key left held would keep the job from
    // running anywhere for that long (a recluster after a rollout)
    const stopped = new BullJobs({ url, prefix, closeGraceMs: 300 });
    const serializeBy = (d: { ws: string }) => d.ws;
    let cutStarted = false;
    let endCut!: () => void;
    const cutHangs = new Promise<void>((r) => (endCut = r));
    await stopped.work('recluster', async () => {
      cutStarted = true;
      await cutHangs; // a recluster that outlasts the stop's grace
      return 'from the stopped replica';
    }, { serializeBy });
    await stopped.add('recluster', { ws: 'a' }, { jobId: 'a-daily' });
    await until(() => cutStarted);
    const stoppedToken = await scratch.raw.get(`${prefix}:recluster:a-daily:lock`);
    expect(stoppedToken).toBeTruthy();
    await stopped.close();

    const queue = new Queue('recluster', { connection: { url }, prefix });
    try {
      // right after the stop: waiting again, neither a try nor a stall counted, the key free
      let job = (await queue.getJob('a-daily'))!;
      expect(await job.getState()).toBe('waiting');
      expect(job.attemptsMade).toBe(0);
      expect(job.stalledCounter).toBe(0);
      expect(await scratch.raw.exists(`${prefix}:recluster:serialize:a`)).toBe(0);

      // another replica takes it at once
      const other = open(prefix);
      const attempts: number[] = [];
      let endOther!: () => void;
      const otherHolds = new Promise<void>((r) => (endOther = r));
      await other.work('recluster', async (_d: { ws: string }, info) => {
        attempts.push(info.attempt);
        await otherHolds;
        return 'from the other replica';
      }, { serializeBy });
      await until(() => attempts.length === 1, 30_000);
      expect(attempts).toEqual([1]);
      // the stopped replica's handler, still running in its process, cannot finish the job
      // that another replica runs now: its lock token is no longer the job's
      await expect(job.moveToCompleted('from the stopped replica', stoppedToken!, false)).rejects.toThrow(/lock/i);
      endCut();
      endOther();
      await untilValue('the job completed', async () => (await (await queue.getJob('a-daily'))?.getState()) === 'completed', 30_000);
      job = (await queue.getJob('a-daily'))!;
      expect(job.returnvalue).toBe('from the other replica');
    } finally {
      endCut();
      await queue.close();
    }
  });

  it('a stop aborts the signal of a job it cuts short: its handler stops there, writes nothing more, and the job runs once more on another replica, no try spent', async () => {
    const prefix = scratch.next();
    const failed: FailedJob[] = [];
    const writes: string[] = [];
    const aborted: string[] = [];
    let answer!: () => void;
    const answered = new Promise<void>((r) => (answer = r));
    // a session's check: asks (held: a model that has not answered yet), then writes what it got
    const replica = async (name: string) => {
      // An abort grace far above what the handler takes: a stop that waited it out would show.
      const jobs = new BullJobs({ url, prefix, closeGraceMs: 300, abortGraceMs: 30_000, onFailed: (f) => void failed.push(f) });
      await jobs.work('sopops_check', async (_d: { session: string }, info) => {
        await new Promise<void>((resolve, reject) => {
          void answered.then(resolve);
          info.signal?.addEventListener('abort', () => {
            aborted.push(`${name}: ${(info.signal!.reason as Error).message}`);
            reject(info.signal!.reason);
          });
        });
        writes.push(name);
        return name;
      }, { serializeBy: (d) => d.session });
      return jobs;
    };
    const queue = new Queue('sopops_check', { connection: { url }, prefix });
    try {
      const first = await replica('first');
      await first.add('sopops_check', { session: 's1' }, { jobId: 's1' });
      await untilValue('the first replica running the job', async () => (await (await queue.getJob('s1'))?.getState()) === 'active', 30_000);
      const t0 = Date.now();
      await first.close();
      // the handler was told, and ended: the stop did not wait the abort grace (30 s) for it
      expect(Date.now() - t0).toBeLessThan(15_000);
      expect(aborted).toEqual([expect.stringMatching(/^first: job sopops_check\/s1 was cut short: this process is stopping/)]);
      let job = (await queue.getJob('s1'))!;
      expect(await job.getState()).toBe('waiting');
      expect(job.attemptsMade).toBe(0);
      expect(await scratch.raw.exists(`${prefix}:sopops_check:serialize:s1`)).toBe(0);
      // the model answers now: the stopped replica's handler, had it run on, would write now
      answer();
      const second = await replica('second');
      clients.push(second);
      await untilValue('the job completed', async () => (await (await queue.getJob('s1'))?.getState()) === 'completed', 30_000);
      await sleep(300);
      expect(writes).toEqual(['second']);
      job = (await queue.getJob('s1'))!;
      expect(job.returnvalue).toBe('second');
      expect(failed).toEqual([]);
    } finally {
      answer();
      await queue.close();
    }
  }, 60_000);

  it('a handler still handing its job back when the abort grace runs out: the job is moved back once, not again by the stop', async () => {
    const prefix = scratch.next();
    const failed: FailedJob[] = [];
    const retried: string[] = [];
    // Each move back to waiting, by job id; each answered 500 ms late (a slow Redis), past the abort grace.
    const moves: string[] = [];
    const moveToWait = Job.prototype.moveToWait;
    const spy = jest.spyOn(Job.prototype, 'moveToWait').mockImplementation(async function (this: Job, token?: string) {
      moves.push(this.id!);
      const moved = await moveToWait.call(this, token).then(
        (v) => ({ v }),
        (e: unknown) => ({ e }),
      );
      await sleep(500);
      if ('e' in moved) throw moved.e;
      return moved.v;
    });
    const queue = new Queue('sopops_check', { connection: { url }, prefix });
    try {
      const jobs = new BullJobs({ url, prefix, closeGraceMs: 100, abortGraceMs: 50, onFailed: (f) => void failed.push(f), onRetry: (r) => void retried.push(r.reason) });
      await jobs.work('sopops_check', async (_d: unknown, info) => {
        await new Promise<void>((_resolve, reject) => info.signal?.addEventListener('abort', () => reject(info.signal!.reason)));
      });
      await jobs.add('sopops_check', { session: 's1' }, { jobId: 's1' });
      await untilValue('the job running', async () => (await (await queue.getJob('s1'))?.getState()) === 'active', 30_000);
      await jobs.close();
      await sleep(700);
      expect(moves).toEqual(['s1']);
      const job = (await queue.getJob('s1'))!;
      expect(await job.getState()).toBe('waiting');
      expect(job.attemptsMade).toBe(0);
      expect(failed).toEqual([]);
      expect(retried).toEqual([]);
      // Stopped: no worker starts that nothing would close.
      await expect(jobs.work('later', async () => undefined)).rejects.toThrow('jobs: not taking work on queue later: this process is stopping');
    } finally {
      spy.mockRestore();
      await queue.close();
    }
  }, 60_000);

  it('a job cut short by two stops in a row (a rolling update) is not failed, spends no try, and completes on the next replica', async () => {
    const prefix = scratch.next();
    // BullMQ's watch made quick: a job a stop left active would be found stalled within
    // seconds, and failed for good at its second stall (BullMQ's default forgives one)
    const stalls = { lockDurationMs: 3_000, stalledIntervalMs: 1_000, maxStalledCount: 1 };
    const failed: FailedJob[] = [];
    const markedFailed: string[] = [];
    const started: Array<{ replica: string; attempt: number }> = [];
    let endCut!: () => void;
    const cutHangs = new Promise<void>((r) => (endCut = r));
    const replica = async (name: string, handler: () => Promise<string>) => {
      const jobs = new BullJobs({ url, prefix, closeGraceMs: 300, stalls, onFailed: (f) => void failed.push(f) });
      await jobs.work('sopops_check', async (_d: { session: string }, info) => {
        started.push({ replica: name, attempt: info.attempt });
        return handler();
      }, { onFailed: async (_d, f) => void markedFailed.push(f.reason) });
      return jobs;
    };
    const hangs = async () => {
      await cutHangs;
      return 'cut';
    };
    try {
      const first = await replica('first', hangs);
      await first.add('sopops_check', { session: 's1' }, { jobId: 's1' });
      await until(() => started.length === 1);
      await first.close();
      const second = await replica('second', hangs);
      await until(() => started.length === 2, 30_000);
      await second.close();
      const third = await replica('third', async () => 'checked');
      clients.push(third);
      const queue = new Queue('sopops_check', { connection: { url }, prefix });
      try {
        // the job ends one way or the other: completed by the third replica, or failed
        const state = await untilValue('the job ended', async () => {
          if (failed.length || markedFailed.length) return 'failed';
          const s = await (await queue.getJob('s1'))?.getState();
          return s === 'completed' || s === 'failed' ? s : undefined;
        }, 60_000);
        expect({ state, failed, markedFailed }).toEqual({ state: 'completed', failed: [], markedFailed: [] });
        expect(started).toEqual([
          { replica: 'first', attempt: 1 },
          { replica: 'second', attempt: 1 },
          { replica: 'third', attempt: 1 },
        ]);
        expect((await queue.getJob('s1'))!.returnvalue).toBe('checked');
      } finally {
        await queue.close();
      }
    } finally {
      endCut();
    }
  }, 90_000);

  it('rejects a renew interval that is not below the lock expiry', () => {
    expect(() => new BullJobs({ url, serializeLockMs: 300, serializeRenewMs: 300 })).toThrow(/serializeRenewMs must be positive and below serializeLockMs/);
    expect(() => new BullJobs({ url, serializeLockMs: 0 })).toThrow(/serializeLockMs must be positive/);
  });
});

// A Redis of the test's own, stopped and started again: never the shared one.
const redisBinary = redisServerBinary();

(redisBinary ? describe : describe.skip)('BullJobs with Redis away: adding a job fails in bounded time, as a dependency down', () => {
  /** `p`'s outcome, or 'still waiting' after `ms`. */
  const within = <T>(p: Promise<T>, ms: number): Promise<T | Error | 'still waiting'> =>
    Promise.race([p.catch((e: Error) => e), new Promise<'still waiting'>((r) => setTimeout(() => r('still waiting'), ms).unref())]);

  it('Redis never reached: add and schedule fail after addTimeoutMs with an error the bus retries', async () => {
    const jobs = new BullJobs({ url: `redis://127.0.0.1:${await freePort()}`, prefix: 'it_away', addTimeoutMs: 1_000 });
    try {
      let t0 = Date.now();
      const added = await within(jobs.add('sopops_run_session', { x: 1 }, { jobId: 'a1' }), 8_000);
      expect(added).toBeInstanceOf(Error);
      expect((added as Error).message).toBe('jobs: Redis did not answer adding job sopops_run_session/a1 within 1000 ms');
      expect(Date.now() - t0).toBeLessThan(3_000);
      expect(isInfrastructureError(added)).toBe(true);
      t0 = Date.now();
      const scheduled = await within(jobs.schedule('retention', 'hourly', '0 * * * *', {}), 8_000);
      expect(isInfrastructureError(scheduled)).toBe(true);
      expect(Date.now() - t0).toBeLessThan(3_000);
    } finally {
      await within(jobs.close(), 5_000);
    }
  });

  it('Redis gone after it answered: add fails at once (or within addTimeoutMs), and adds again once Redis is back', async () => {
    const server = new PrivateRedis(redisBinary!);
    await server.start();
    const jobs = new BullJobs({ url: server.url, prefix: 'it_away', addTimeoutMs: 5_000 });
    try {
      expect(await jobs.add('sopops_run_session', { n: 1 }, { jobId: 'before' })).toBe('before');
      await server.stop();
      const t0 = Date.now();
      const added = await within(jobs.add('sopops_run_session', { n: 2 }, { jobId: 'while-away' }), 15_000);
      expect(added).toBeInstanceOf(Error);
      expect(Date.now() - t0).toBeLessThan(6_000);
      expect(isInfrastructureError(added)).toBe(true);
      await server.start();
      // the caller tries again (the bus reads the batch again): taken once Redis answers
      const id = await untilValue('Redis back', () => jobs.add('sopops_run_session', { n: 2 }, { jobId: 'after' }).catch(() => undefined), 30_000, 200);
      expect(id).toBe('after');
    } finally {
      await within(jobs.close(), 5_000);
      await server.stop();
    }
  }, 60_000);

  it('a stop with Redis gone while a job runs still ends: putting the job back gives up in bounded time', async () => {
    const server = new PrivateRedis(redisBinary!);
    await server.start();
    // a replica that only works (its queue objects are first made by the stop, with Redis gone)
    const jobs = new BullJobs({ url: server.url, prefix: 'it_away_stop', closeGraceMs: 300 });
    const adder = new BullJobs({ url: server.url, prefix: 'it_away_stop' });
    try {
      let running = false;
      await jobs.work('recluster', async () => {
        running = true;
        await new Promise(() => undefined);
      }, { serializeBy: (d: { ws: string }) => d.ws });
      await adder.add('recluster', { ws: 'a' }, { jobId: 'a-daily' });
      await until(() => running);
      await server.stop();
      const t0 = Date.now();
      expect(await within(jobs.close().then(() => 'closed'), 20_000)).toBe('closed');
      expect(Date.now() - t0).toBeLessThan(15_000);
    } finally {
      await within(adder.close(), 5_000);
      await server.stop();
    }
  }, 60_000);
});
