import { JobFailedError, JobTimeoutError, type AddJobOptions, type FailedJob, type JobHandler, type Jobs, type RetriedJob, type WorkOptions } from '@neatroots/ports';
import { checkAddOptions, nextCronTime, retryDelayMs, JOB_DEFAULTS } from './common';

/** The longest a Node.js timer waits (2^31 - 1 ms); a longer delay fires after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

interface Pending {
  id: string;
  data: unknown;
  attempt: number;
  attempts: number;
  backoffMs: number;
  /** The coalesce key it was added under, until its handler begins. */
  coalesce?: string;
}

interface Queue {
  handler?: JobHandler<unknown>;
  opts: WorkOptions<unknown>;
  waiting: Pending[];
  running: number;
  /** serializeBy keys of the jobs running now. */
  busyKeys: Set<string>;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: Error };

/** A job the process's stop cut short with tries left. */
export type StoppedJob = Omit<RetriedJob, 'retry_in_ms'>;

export interface InlineJobsOptions {
  /** A job whose attempts are used up (logged and counted by the caller). */
  onFailed?: (job: FailedJob) => void;
  /** A try that failed with tries left (logged by the caller: a job that keeps failing is seen before its last try). */
  onRetry?: (job: RetriedJob) => void;
  /**
   * A try that failed with tries left while the process was stopping, so it is not tried again
   * here (often because the handler queued a follow-on job after close: `jobs: closed`). Not a
   * failure of the job: its own failure hook is not called.
   */
  onStopped?: (job: StoppedJob) => void;
  /** How many finished job ids are remembered for deduplication (default 1000 per queue, as BullMQ keeps). */
  keepFinished?: number;
}

/**
 * The jobs port in this process, for the embedded default (the seed's "inline"). Same
 * semantics as the BullMQ driver, minus surviving a restart: a job queued and not yet run when
 * the process stops is gone, which is why the embedded default's callers re-derive their
 * work at start (a session still "queued" in the database is queued again, and so is a run that
 * ended without becoming its session: RunSessions.rebuild in services/review).
 */
export class InlineJobs implements Jobs {
  private readonly queues = new Map<string, Queue>();
  /** Every id waiting, running or recently finished, with the outcome once finished. */
  private readonly known = new Map<string, { outcome?: Outcome; waiters: ((o: Outcome) => void)[] }>();
  private readonly finishedOrder = new Map<string, string[]>();
  /** Per queue and coalesce key, the job added under it whose handler has not begun. */
  private readonly coalescing = new Map<string, string>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** The armed timer of each schedule, so scheduling a name again replaces it. */
  private readonly schedules = new Map<string, NodeJS.Timeout>();
  private readonly running = new Set<Promise<void>>();
  private closed = false;
  private seq = 0;

  constructor(private readonly opts: InlineJobsOptions = {}) {}

  async work<T, R>(queue: string, handler: JobHandler<T, R>, opts: WorkOptions<T> = {}): Promise<void> {
    const q = this.queue(queue);
    if (q.handler) throw new Error(`jobs: queue ${queue} already has a handler in this process`);
    q.handler = handler as JobHandler<unknown>;
    q.opts = opts as WorkOptions<unknown>;
    this.pump(queue);
  }

  async add<T>(queue: string, data: T, opts: AddJobOptions = {}): Promise<string> {
    if (this.closed) throw new Error('jobs: closed');
    checkAddOptions(opts);
    const shared = opts.coalesce !== undefined ? this.coalescing.get(`${queue}\0${opts.coalesce}`) : undefined;
    if (shared !== undefined) return shared;
    const id = opts.jobId ?? `${queue}-${++this.seq}`;
    const key = `${queue}\0${id}`;
    if (this.known.has(key)) return id;
    this.known.set(key, { waiters: [] });
    const job: Pending = {
      id,
      data,
      attempt: 1,
      attempts: opts.attempts ?? JOB_DEFAULTS.attempts,
      backoffMs: opts.backoffMs ?? JOB_DEFAULTS.backoffMs,
      coalesce: opts.coalesce,
    };
    if (job.coalesce !== undefined) this.coalescing.set(`${queue}\0${job.coalesce}`, id);
    if (opts.delayMs && opts.delayMs > 0) this.later(opts.delayMs, () => this.enqueue(queue, job));
    else this.enqueue(queue, job);
    return id;
  }

  async run<T, R>(queue: string, data: T, opts: AddJobOptions & { timeoutMs?: number } = {}): Promise<R> {
    const id = await this.add(queue, data, opts);
    const entry = this.known.get(`${queue}\0${id}`)!;
    const outcome = entry.outcome ?? (await this.waitFor(entry, queue, id, opts.timeoutMs));
    if (!outcome.ok) throw outcome.error;
    return outcome.value as R;
  }

  async schedule<T>(queue: string, name: string, cron: string, data: T): Promise<void> {
    const first = nextCronTime(cron, Date.now()); // throws on a bad pattern, before anything is kept
    const timerKey = `cron\0${queue}\0${name}`;
    this.cancelSchedule(timerKey);
    const arm = (at: number) => {
      // A timer holds at most 2^31 - 1 ms (about 24.8 days): a later firing (a monthly or
      // yearly pattern) waits in steps, or the timer would fire at once, again and again.
      const wait = Math.max(0, at - Date.now());
      const t = setTimeout(() => {
        this.timers.delete(t);
        if (this.closed) return;
        if (wait > MAX_TIMER_MS) return arm(at);
        void this.add(queue, data, { jobId: `${name}.${at}` });
        arm(nextCronTime(cron, at));
      }, Math.min(wait, MAX_TIMER_MS));
      t.unref();
      this.timers.add(t);
      this.schedules.set(timerKey, t);
    };
    arm(first);
  }

  /** The names scheduled on `queue` (operations and tests). */
  schedulesOf(queue: string): string[] {
    const prefix = `cron\0${queue}\0`;
    return [...this.schedules.keys()].filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length));
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await Promise.allSettled([...this.running]);
  }

  private cancelSchedule(key: string): void {
    const t = this.schedules.get(key);
    if (t) {
      clearTimeout(t);
      this.timers.delete(t);
      this.schedules.delete(key);
    }
  }

  private queue(name: string): Queue {
    let q = this.queues.get(name);
    if (!q) this.queues.set(name, (q = { opts: {}, waiting: [], running: 0, busyKeys: new Set() }));
    return q;
  }

  private enqueue(queue: string, job: Pending): void {
    if (this.closed) return;
    this.queue(queue).waiting.push(job);
    this.pump(queue);
  }

  private later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }

  /** Starts what may run now: up to `concurrency`, skipping jobs whose serialize key is busy. */
  private pump(queue: string): void {
    const q = this.queue(queue);
    if (!q.handler || this.closed) return;
    const concurrency = Math.max(1, q.opts.concurrency ?? 1);
    for (let i = 0; i < q.waiting.length && q.running < concurrency; ) {
      const job = q.waiting[i];
      const key = q.opts.serializeBy?.(job.data);
      if (key !== undefined && q.busyKeys.has(key)) {
        i++;
        continue;
      }
      q.waiting.splice(i, 1);
      if (job.coalesce !== undefined) {
        // Its handler begins now: what is added from here on needs a job of its own.
        const ck = `${queue}\0${job.coalesce}`;
        if (this.coalescing.get(ck) === job.id) this.coalescing.delete(ck);
        job.coalesce = undefined;
      }
      q.running++;
      if (key !== undefined) q.busyKeys.add(key);
      const p = this.attempt(queue, q, job).finally(() => {
        q.running--;
        if (key !== undefined) q.busyKeys.delete(key);
        this.running.delete(p);
        this.pump(queue);
      });
      this.running.add(p);
    }
  }

  private async attempt(queue: string, q: Queue, job: Pending): Promise<void> {
    try {
      const value = await q.handler!(job.data, { id: job.id, attempt: job.attempt });
      this.finish(queue, job.id, { ok: true, value });
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      if (job.attempt < job.attempts) {
        if (this.closed) {
          // The stop cut it short: not its failure, so neither failure hook hears of it.
          this.opts.onStopped?.({ queue, id: job.id, attempt: job.attempt, attempts: job.attempts, reason: error.message });
          this.finish(queue, job.id, { ok: false, error: new JobFailedError(queue, job.id, `stopped with the process: ${error.message}`) });
          return;
        }
        const next = { ...job, attempt: job.attempt + 1 };
        const delay = retryDelayMs(job.backoffMs, job.attempt);
        this.opts.onRetry?.({ queue, id: job.id, attempt: job.attempt, attempts: job.attempts, reason: error.message, retry_in_ms: delay });
        this.later(delay, () => this.enqueue(queue, next));
        return;
      }
      let reason = error.message;
      // Its tries used up: the work's own failure hook.
      if (q.opts.onFailed) {
        try {
          await q.opts.onFailed(job.data, { queue, id: job.id, attempts: job.attempt, reason });
        } catch (hookErr) {
          reason = `${reason} (and marking it failed failed: ${(hookErr as Error)?.message ?? String(hookErr)})`;
        }
      }
      this.opts.onFailed?.({ queue, id: job.id, attempts: job.attempt, reason });
      this.finish(queue, job.id, { ok: false, error: new JobFailedError(queue, job.id, error.message) });
    }
  }

  private finish(queue: string, id: string, outcome: Outcome): void {
    const key = `${queue}\0${id}`;
    const entry = this.known.get(key);
    if (!entry) return;
    entry.outcome = outcome;
    for (const w of entry.waiters.splice(0)) w(outcome);
    // Remember a bounded number of finished ids, as BullMQ's removeOnComplete/removeOnFail keep.
    const order = this.finishedOrder.get(queue) ?? [];
    order.push(key);
    this.finishedOrder.set(queue, order);
    const keep = this.opts.keepFinished ?? JOB_DEFAULTS.keepFinished;
    while (order.length > keep) this.known.delete(order.shift()!);
  }

  private waitFor(entry: { waiters: ((o: Outcome) => void)[] }, queue: string, id: string, timeoutMs?: number): Promise<Outcome> {
    return new Promise<Outcome>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      entry.waiters.push((o) => {
        if (timer) clearTimeout(timer);
        resolve(o);
      });
      if (timeoutMs) timer = setTimeout(() => reject(new JobTimeoutError(queue, id, timeoutMs)), timeoutMs);
    });
  }
}
