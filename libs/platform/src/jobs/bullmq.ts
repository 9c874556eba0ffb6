import { randomUUID } from 'node:crypto';
import * as os from 'node:os';
import { DelayedError, Queue, QueueEvents, WaitingError, Worker, type ConnectionOptions, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { JobFailedError, JobTimeoutError, RetryLaterError, type AddJobOptions, type FailedJob, type JobHandler, type Jobs, type RetriedJob, type WorkOptions } from '@neatroots/ports';
import { checkAddOptions, JOB_DEFAULTS, nextCronTime, retryDelayMs } from './common';

export interface BullJobsOptions {
  url: string;
  /** Key prefix of every queue (tests and several installations on one Redis). Default "neatroots". */
  prefix?: string;
  onFailed?: (job: FailedJob) => void;
  /** A try that failed with tries left (logged by the caller). */
  onRetry?: (job: RetriedJob) => void;
  /**
   * How long close() waits for running jobs (default 10 s). A job still running then is cut
   * short: its handler's signal (JobInfo.signal) is aborted, and once the handler has ended
   * (up to abortGraceMs) the job is put back to waiting, its serialize key released, without
   * spending a try or counting as a stall: another replica runs it from the start.
   */
  closeGraceMs?: number;
  /**
   * How long close() waits, after aborting the handlers it cuts short, for them to end (default
   * 2 s). A handler still running then (one that does not heed its signal) has its job put back
   * all the same; it runs on in this process, unable to complete or fail the job.
   */
  abortGraceMs?: number;
  /**
   * How long a serialize key stays held if its holder dies without releasing it (default 10 min).
   * A living holder renews it while its job runs, however long that is.
   */
  serializeLockMs?: number;
  /** How often a running job renews its serialize key's expiry (default a third of serializeLockMs). */
  serializeRenewMs?: number;
  /**
   * How long add() and schedule() wait for Redis before they fail (default 10 s): with Redis
   * away a job is not queued, and the caller (a bus consumer) is told so, as an error that says
   * a dependency is down, and tries its batch again later instead of waiting for good.
   */
  addTimeoutMs?: number;
  /**
   * BullMQ's watch on running jobs, whose defaults are kept unless set: a job's lock lasts
   * lockDurationMs (30 s) and is renewed while its process lives; every stalledIntervalMs (30 s)
   * a worker moves jobs whose lock ran out back to waiting, and fails one that stalled more than
   * maxStalledCount times (1). Such a job fails without its handler's last try: it is reported
   * like any job that failed for good (onFailed, WorkOptions.onFailed).
   */
  stalls?: { lockDurationMs?: number; stalledIntervalMs?: number; maxStalledCount?: number };
}

/** BullMQ's reason for a job it failed for stalling too often (its worker died or blocked mid-job). */
const STALLED_OUT = 'job stalled more than allowable limit';

/** How long a stop tries to put back the jobs it cut short (Redis away). */
const PUT_BACK_MS = 5_000;

/**
 * A job this process is running: its BullMQ lock token, with a serialize key the lock it holds,
 * the signal its handler is given (aborted when a stop cuts it short) and when the handler ended.
 */
interface Running {
  queue: string;
  id: string;
  token?: string;
  serialized?: { key: string; holder: string; stopRenewing: () => void };
  cut: AbortController;
  ended: Promise<void>;
  /** The handler's own hand-back (moveToWait) once it ended cut short: putBack waits for it rather than moving the job again. */
  handingBack?: Promise<unknown>;
}

/** Why a job's signal is aborted: the process stops and cut it short. */
export class JobCutShortError extends Error {
  constructor(queue: string, id: string) {
    super(`job ${queue}/${id} was cut short: this process is stopping (it is handed back to run again from the start)`);
    this.name = 'AbortError';
  }
}

/** Compare-and-delete: only the holder releases a serialize lock. */
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;
/** Compare-and-extend: only the holder renews a serialize lock, to ARGV[2] ms from now. */
const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;

/**
 * The jobs port on BullMQ (the distributed deployment; the seed's Hatchet workflows). One
 * Queue per queue name, one Worker per work() call, QueueEvents only for run(). Repeatable
 * jobs are BullMQ job schedulers keyed by name, so every replica may register the daily job
 * and Redis keeps one. Jobs with the same serialize key are held apart by a lock in Redis,
 * renewed while its job runs and released when it ends: a job that finds its key held goes
 * back to the delayed set for a moment, without spending an attempt. A stop puts the jobs it
 * cuts short back to waiting and releases their keys (close()).
 */
export class BullJobs implements Jobs {
  /** Workers and QueueEvents: blocking reads, which BullMQ wants retried for as long as it takes. */
  private readonly connection: ConnectionOptions;
  /**
   * Queues (add, schedule): a command fails while Redis is away (no offline queue) or after one
   * retry when the connection drops under it, rather than waiting for Redis to come back.
   */
  private readonly producing: ConnectionOptions;
  private readonly addTimeoutMs: number;
  private readonly prefix: string;
  private readonly queues = new Map<string, Queue>();
  private readonly events = new Map<string, QueueEvents>();
  private readonly workers: Worker[] = [];
  /** The jobs whose handler runs in this process now (close() puts back those it cuts short). */
  private readonly running = new Set<Running>();
  private redis?: Redis;

  private readonly lockMs: number;
  private readonly renewMs: number;

  constructor(private readonly opts: BullJobsOptions) {
    this.connection = { url: opts.url, maxRetriesPerRequest: null } as ConnectionOptions;
    this.producing = { url: opts.url, maxRetriesPerRequest: 1, enableOfflineQueue: false } as ConnectionOptions;
    this.addTimeoutMs = opts.addTimeoutMs ?? 10_000;
    this.prefix = opts.prefix ?? 'neatroots';
    this.lockMs = opts.serializeLockMs ?? 600_000;
    this.renewMs = opts.serializeRenewMs ?? Math.floor(this.lockMs / 3);
    if (!(this.lockMs > 0)) throw new RangeError(`serializeLockMs must be positive, not ${this.lockMs}`);
    if (!(this.renewMs > 0 && this.renewMs < this.lockMs)) {
      throw new RangeError(`serializeRenewMs must be positive and below serializeLockMs (${this.lockMs}), not ${this.renewMs}`);
    }
  }

  async work<T, R>(queue: string, handler: JobHandler<T, R>, opts: WorkOptions<T> = {}): Promise<void> {
    // A worker started after the stop began would never be closed (stopWorking runs once).
    if (this.stoppingWork) throw new Error(`jobs: not taking work on queue ${queue}: this process is stopping`);
    const lockMs = opts.serializeLockMs ?? this.lockMs;
    const renewMs = opts.serializeLockMs === undefined ? this.renewMs : Math.floor(lockMs / 3);
    if (!(lockMs > 0 && renewMs > 0)) throw new RangeError(`serializeLockMs of queue ${queue} must be at least 3 ms, not ${lockMs}`);
    const worker = new Worker(
      queue,
      async (job: Job, token?: string) => {
        let end!: () => void;
        const running: Running = { queue, id: job.id!, token, cut: new AbortController(), ended: new Promise<void>((r) => (end = r)) };
        const info = { id: job.id!, attempt: job.attemptsMade + 1, signal: running.cut.signal };
        this.running.add(running);
        try {
          return await this.handled(job, token, running, async () => {
            const key = opts.serializeBy?.(job.data as T);
            if (key === undefined) {
              await this.beginning(job);
              return await handler(job.data as T, info);
            }
            const lockKey = `${this.prefix}:${queue}:serialize:${key}`;
            const holder = randomUUID();
            const got = await this.lockClient().set(lockKey, holder, 'PX', lockMs, 'NX');
            if (!got) {
              // Someone runs this key now: come back shortly, without using up an attempt.
              await job.moveToDelayed(Date.now() + 200 + Math.floor(Math.random() * 200), token);
              throw new DelayedError();
            }
            // Held for as long as the job runs (as the inline driver does): the expiry is pushed out
            // while this holder still owns the key, so it only runs out if this process dies.
            const stopRenewing = this.renewWhileRunning(lockKey, holder, lockMs, renewMs);
            running.serialized = { key: lockKey, holder, stopRenewing };
            try {
              await this.beginning(job);
              return await handler(job.data as T, info);
            } finally {
              stopRenewing();
              await this.lockClient().eval(RELEASE, 1, lockKey, holder);
            }
          });
        } finally {
          this.running.delete(running);
          end();
        }
      },
      // name: each job's processedBy says which process ran it (host:pid), for whoever looks into Redis.
      {
        connection: this.connection,
        prefix: this.prefix,
        concurrency: Math.max(1, opts.concurrency ?? 1),
        autorun: true,
        name: `${os.hostname()}:${process.pid}`,
        ...(this.opts.stalls?.lockDurationMs !== undefined && { lockDuration: this.opts.stalls.lockDurationMs }),
        ...(this.opts.stalls?.stalledIntervalMs !== undefined && { stalledInterval: this.opts.stalls.stalledIntervalMs }),
        ...(this.opts.stalls?.maxStalledCount !== undefined && { maxStalledCount: this.opts.stalls.maxStalledCount }),
      },
    );
    // Every way a job ends failed reaches this, once, on the replica that moved it to failed: a
    // handler's error with no tries left, and a job BullMQ fails without running its handler
    // (one that stalled too often: the worker running it died; BullMQ fails it, as an
    // UnrecoverableError, when a worker next takes it), whatever tries it had left.
    worker.on('failed', (job, err) => {
      if (!job || err instanceof DelayedError || err?.name === 'DelayedError') return;
      const attempts = job.opts.attempts ?? 1;
      const forGood = typeof job.finishedOn === 'number' || job.attemptsMade >= attempts || err?.name === 'UnrecoverableError';
      if (forGood) void this.failedForGood(queue, job, err, opts.onFailed);
      else {
        const backoff = job.opts.backoff;
        const delay = typeof backoff === 'number' ? backoff : (backoff?.delay ?? 0);
        this.opts.onRetry?.({ queue, id: job.id!, attempt: job.attemptsMade, attempts, reason: err.message, retry_in_ms: retryDelayMs(delay, job.attemptsMade) });
      }
    });
    // A worker's connection errors are retried by ioredis; keep them from becoming unhandled.
    worker.on('error', () => undefined);
    this.workers.push(worker);
    await worker.waitUntilReady();
  }

  /**
   * Runs a job's work; when it fails after a stop cut it short (its signal aborted), the job is
   * handed back to waiting with its own lock token, no try spent (BullMQ leaves a job whose
   * handler throws WaitingError as it is), rather than failed: the handler ended because the
   * process stops, not because of the job. A job that ends well after the cut is completed.
   */
  private async handled<R>(job: Job, token: string | undefined, running: Running, work: () => Promise<R>): Promise<R> {
    try {
      return await work();
    } catch (err) {
      if (!running.cut.signal.aborted || err instanceof DelayedError || token === undefined) throw err;
      // The serialize key was released by the work's own finally, before this.
      await (running.handingBack = job.moveToWait(token));
      throw new WaitingError();
    }
  }

  /**
   * Its handler begins: a job added with a coalesce key stops taking later adds (its
   * deduplication key is deleted while it still names this job), so what is saved from here on
   * gets a job of its own. After the serialize key is taken: a job put back to delayed because
   * the key was busy has not begun, and still takes them. A failure here fails the try (the
   * handler not run): running with the key kept would leave what is added meanwhile to no job.
   */
  private async beginning(job: Job): Promise<void> {
    if (job.deduplicationId !== undefined) await job.removeDeduplicationKey();
  }

  /** A job that failed for good: the work's own hook first (a session marked failed), then the driver's (logged, counted). */
  private async failedForGood<T>(queue: string, job: Job, err: Error | undefined, hook: WorkOptions<T>['onFailed']): Promise<void> {
    const message = err?.message ?? job.failedReason ?? 'failed';
    let reason = message === STALLED_OUT ? `${STALLED_OUT} (the process running it stopped or stalled mid-job)` : message;
    const failed: FailedJob = { queue, id: job.id!, attempts: job.attemptsMade, reason };
    if (hook) {
      try {
        await hook(job.data as T, failed);
      } catch (hookErr) {
        reason = `${reason} (and marking it failed failed: ${(hookErr as Error)?.message ?? String(hookErr)})`;
      }
    }
    this.opts.onFailed?.({ ...failed, reason });
  }

  async add<T>(queue: string, data: T, opts: AddJobOptions = {}): Promise<string> {
    checkAddOptions(opts);
    const job = await this.bounded(`adding job ${queue}/${opts.jobId ?? '(new)'}`, this.queue(queue).add(queue, data, {
      jobId: opts.jobId,
      // A coalesce key is BullMQ's deduplication id, kept until the handler begins (beginning()),
      // and by BullMQ until the job ends: an add meanwhile returns the waiting job's id.
      ...(opts.coalesce !== undefined && { deduplication: { id: opts.coalesce } }),
      attempts: opts.attempts ?? JOB_DEFAULTS.attempts,
      backoff: { type: 'exponential', delay: opts.backoffMs ?? JOB_DEFAULTS.backoffMs },
      delay: opts.delayMs,
      removeOnComplete: { count: JOB_DEFAULTS.keepFinished },
      removeOnFail: { count: JOB_DEFAULTS.keepFinished },
    }));
    return job.id!;
  }

  /**
   * `p`, or a RetryLaterError (a dependency down: the bus retries the batch) once addTimeoutMs
   * passed. Redis refusing the command while away fails it sooner, with ioredis's own error
   * (also one that says a dependency is down). A command that timed out may still reach Redis
   * once it is back (one that waited for the first connection): the callers' job ids make that
   * a job kept once, or one whose handler finds nothing left to do.
   */
  private async bounded<T>(what: string, p: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new RetryLaterError(`jobs: Redis did not answer ${what} within ${this.addTimeoutMs} ms`)), this.addTimeoutMs);
    });
    try {
      return await Promise.race([p, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  async run<T, R>(queue: string, data: T, opts: AddJobOptions & { timeoutMs?: number } = {}): Promise<R> {
    const events = await this.queueEvents(queue);
    const id = await this.add(queue, data, opts);
    const job = await this.queue(queue).getJob(id);
    if (!job) throw new JobFailedError(queue, id, `job ${queue}/${id} is no longer kept`);
    try {
      return (await job.waitUntilFinished(events, opts.timeoutMs)) as R;
    } catch (err) {
      const message = (err as Error).message ?? String(err);
      if (/timed out/i.test(message)) throw new JobTimeoutError(queue, id, opts.timeoutMs ?? 0);
      throw new JobFailedError(queue, id, message);
    }
  }

  async schedule<T>(queue: string, name: string, cron: string, data: T): Promise<void> {
    nextCronTime(cron, Date.now()); // the same validation and message as inline
    await this.bounded(`scheduling ${queue}/${name}`, this.queue(queue).upsertJobScheduler(name, { pattern: cron, tz: 'UTC' }, {
      name: queue,
      data,
      opts: {
        attempts: JOB_DEFAULTS.attempts,
        backoff: { type: 'exponential', delay: JOB_DEFAULTS.backoffMs },
        removeOnComplete: { count: JOB_DEFAULTS.keepFinished },
        removeOnFail: { count: JOB_DEFAULTS.keepFinished },
      },
    }));
  }

  /** The workers' stop (stopWorking), once. */
  private stoppingWork?: Promise<void>;

  /**
   * Stops taking jobs and ends the running ones as close() does (waited for up to the grace
   * time, then cut short and put back), leaving the queues open for adds and waits. The platform
   * calls it while the process's links to other services are still open, so a handler ending in
   * the grace time can still call them. close() does it first if it was not done.
   */
  stopWorking(): Promise<void> {
    return (this.stoppingWork ??= this.endWork());
  }

  async close(): Promise<void> {
    await this.stopWorking();
    await Promise.allSettled([...this.events.values()].map((e) => e.close()));
    await Promise.allSettled([...this.queues.values()].map((q) => q.close()));
    this.redis?.disconnect();
  }

  private async endWork(): Promise<void> {
    const grace = this.opts.closeGraceMs ?? 10_000;
    // Stop taking jobs and wait for the running ones, up to the grace time. Those still running
    // are cut short: their signals aborted, and up to abortGraceMs given to end, each handing its
    // job back as it ends (handled()). Then close for good. (Not close() then close(true): a
    // worker's second close returns its first, which waits for a job that never ends, and the
    // process would never stop.) Then the jobs whose handler did not end are put back (putBack).
    await within(Promise.allSettled(this.workers.map((w) => w.pause())), grace);
    if (this.running.size) {
      const cut = [...this.running];
      for (const r of cut) r.cut.abort(new JobCutShortError(r.queue, r.id));
      await within(Promise.all(cut.map((r) => r.ended)), this.opts.abortGraceMs ?? 2_000);
    }
    await Promise.allSettled(this.workers.map((w) => w.close(true)));
    await this.putBack();
  }

  /**
   * Stops as a process that dies would (a kill, a node lost): the workers closed at once, the
   * jobs in hand left active under their BullMQ locks for the stall watch to find, their
   * serialize keys no longer renewed (they expire), nothing put back. What the tests of a crash
   * use; a stop is close().
   */
  async crash(): Promise<void> {
    for (const r of this.running) r.serialized?.stopRenewing();
    this.running.clear();
    await Promise.allSettled(this.workers.map((w) => w.close(true)));
    await Promise.allSettled([...this.events.values()].map((e) => e.close()));
    await Promise.allSettled([...this.queues.values()].map((q) => q.close()));
    this.redis?.disconnect();
  }

  /**
   * The jobs whose handler still runs once the workers are closed (it did not end when its
   * signal was aborted) were cut short by the stop: each is moved from active back to waiting (at the head of the queue) with its own lock
   * token, so it neither waits for its BullMQ lock to run out nor counts as a stall (two stops
   * in a row, a rolling update, would fail it for good) nor spends a try; and its serialize key
   * is released if this process still holds it, so another replica runs it now rather than
   * when the key expires (serializeLockMs). The move deletes the job's lock: its handler, still
   * running here until the process exits, can neither complete nor fail the job any more (its
   * token no longer matches; the worker's connection is closed too). A job whose lock is no
   * longer this process's (it ran out, and another replica took the job) is left as it is.
   * Bounded by PUT_BACK_MS (Redis away): a job not put back is taken again once its lock runs
   * out, as before.
   */
  private async putBack(): Promise<void> {
    if (!this.running.size) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.running].map(async (r) => {
        if (r.serialized) {
          r.serialized.stopRenewing();
          await this.lockClient().eval(RELEASE, 1, r.serialized.key, r.serialized.holder).catch(() => undefined);
        }
        if (r.token === undefined) return;
        // The handler is handing it back itself (its abort grace ran out meanwhile): once is enough,
        // unless that move failed (its worker's connection closed under it).
        if (r.handingBack && (await r.handingBack.then(() => true, () => false))) return;
        const job = await this.queue(r.queue).getJob(r.id);
        await job?.moveToWait(r.token);
      })),
      new Promise((r) => (timer = setTimeout(r, PUT_BACK_MS)).unref()),
    ]);
    clearTimeout(timer);
  }

  private queue(name: string): Queue {
    let q = this.queues.get(name);
    if (!q) {
      q = new Queue(name, { connection: this.producing, prefix: this.prefix });
      q.on('error', () => undefined);
      this.queues.set(name, q);
    }
    return q;
  }

  private async queueEvents(name: string): Promise<QueueEvents> {
    let e = this.events.get(name);
    if (!e) {
      e = new QueueEvents(name, { connection: this.connection, prefix: this.prefix });
      e.on('error', () => undefined);
      this.events.set(name, e);
      await e.waitUntilReady();
    }
    return e;
  }

  /**
   * Extends `lockKey` to `lockMs` from now every `renewMs`, as long as `holder`
   * owns it; the returned function stops it. A renewal that fails (Redis away) is tried again
   * at the next tick, still within the expiry; one that finds the key no longer ours stops.
   */
  private renewWhileRunning(lockKey: string, holder: string, lockMs: number, renewMs: number): () => void {
    let stopped = false;
    let inFlight = false;
    const timer = setInterval(() => {
      if (stopped || inFlight) return;
      inFlight = true;
      this.lockClient()
        .eval(RENEW, 1, lockKey, holder, String(lockMs))
        .then((renewed) => {
          if (Number(renewed) !== 1) stop();
        })
        .catch(() => undefined)
        .finally(() => {
          inFlight = false;
        });
    }, renewMs);
    timer.unref();
    const stop = () => {
      stopped = true;
      clearInterval(timer);
    };
    return stop;
  }

  private lockClient(): Redis {
    return (this.redis ??= new Redis(this.opts.url, { maxRetriesPerRequest: 3 }));
  }
}

/** Waits for `p`, or `ms` at most. */
async function within(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise((r) => (timer = setTimeout(r, ms)).unref())]);
  clearTimeout(timer);
}
