/**
 * The jobs port: background work that must happen, maybe later, maybe on another replica
 * (a session's SOP check, pattern assignment, reclustering, suggestions, calibration, pull
 * request polling). BullMQ on Redis in the distributed deployment (the seed's Hatchet
 * workflows); inline, in this process, in the embedded default.
 *
 * Delivery is at least once: a handler may run again after a crash or a failed attempt, so
 * handlers are idempotent (the SOP checker writes nothing for content it already checked).
 * Failed attempts are retried with backoff a bounded number of times, then the job is set
 * aside as failed with its reason (never retried forever in front of other work).
 */
export interface JobInfo {
  /** The job's id: the one given to add() (so adding it again is a no-op while it is kept), or a generated one. */
  id: string;
  /** 1 for the first try. */
  attempt: number;
  /**
   * Aborted when this process stops and cuts the job short (BullMQ: its close() waited its grace
   * time and the handler still runs). The handler stops its work there (a model call is
   * cancelled, nothing more is asked or written) and ends, by throwing: the job is then handed
   * back with no try spent, and another replica runs it from the start. Absent where nothing
   * cuts a job short (the inline driver, a handler called directly).
   */
  signal?: AbortSignal;
}

export type JobHandler<T, R = unknown> = (data: T, job: JobInfo) => Promise<R>;

export interface AddJobOptions {
  /**
   * Deduplicates: while a job with this id is waiting, running or kept as done, adding it
   * again does nothing and returns the same id.
   */
  jobId?: string;
  /**
   * Shares a job that has not started: while a job added with the same coalesce key is
   * waiting (queued, delayed, or put aside because its serialize key is busy) and its handler
   * has not begun, adding another returns that job's id and queues nothing. Once its handler
   * has begun, the next add queues a new job. For work that reads what it has to do when it
   * starts (the sopops_patterns job reads every unassigned finding): whatever was saved before
   * an add is read by the job that add returns. Not with jobId.
   */
  coalesce?: string;
  /** Tries in all (default 3). */
  attempts?: number;
  /** Backoff before the second try, doubled after each (default 1000 ms). */
  backoffMs?: number;
  /** Run no earlier than this many ms from now. */
  delayMs?: number;
}

export interface WorkOptions<T> {
  /** Jobs of this queue run at most this many at a time in this process (default 1). */
  concurrency?: number;
  /**
   * Jobs with the same key never run at the same time, in any process (the seed's "one run
   * at a time per workspace"); jobs with different keys run side by side.
   */
  serializeBy?: (data: T) => string;
  /**
   * With serializeBy, on BullMQ: how long a key of this queue stays held when the process
   * running its job dies without releasing it (default the driver's, 10 min); renewed every
   * third of it while the job runs. The inline driver's keys die with its process.
   */
  serializeLockMs?: number;
  /**
   * Told once when a job of this queue failed for good, on the replica that saw it fail: its
   * tries used up, or (BullMQ) its worker died mid-job more often than the driver allows, when
   * the handler never ran a last try. Not when the process merely stops. What the handler's
   * work stands for is marked failed here (a session's check). An error it throws is added to
   * the failure's reason.
   */
  onFailed?: (data: T, job: FailedJob) => Promise<void>;
}

/** A job that used up its attempts: kept with the reason, reported to the driver's onFailed. */
export interface FailedJob {
  queue: string;
  id: string;
  attempts: number;
  reason: string;
}

/** A try that failed with tries left: the job runs again after `retry_in_ms`, reported to the driver's onRetry. */
export interface RetriedJob {
  queue: string;
  id: string;
  /** The try that failed (1 for the first). */
  attempt: number;
  /** Tries the job has in all. */
  attempts: number;
  reason: string;
  retry_in_ms: number;
}

export interface Jobs {
  /** Registers the one handler of `queue` in this process; jobs already waiting start running. */
  work<T, R = unknown>(queue: string, handler: JobHandler<T, R>, opts?: WorkOptions<T>): Promise<void>;
  /** Queues a job; resolves with its id once it is safely queued. */
  add<T>(queue: string, data: T, opts?: AddJobOptions): Promise<string>;
  /**
   * Queues a job and waits for its result (the API waiting for calibration). Rejects with the
   * job's last error once its attempts are used up, or with JobTimeoutError.
   */
  run<T, R = unknown>(queue: string, data: T, opts?: AddJobOptions & { timeoutMs?: number }): Promise<R>;
  /**
   * A repeatable job on a cron pattern (UTC, five fields). Registered once under `name`
   * however many replicas call it; calling it again with another pattern replaces it.
   */
  schedule<T>(queue: string, name: string, cron: string, data: T): Promise<void>;
  /**
   * Stops taking jobs and ends the running ones (waited for up to the driver's grace time, then
   * cut short and handed back), the queues staying open for adds. Optional: a driver without it
   * does this in close().
   */
  stopWorking?(): Promise<void>;
  /** Stops taking jobs, waits for the running ones (up to the driver's grace time), closes. */
  close(): Promise<void>;
}

export class JobTimeoutError extends Error {
  constructor(queue: string, id: string, ms: number) {
    super(`job ${queue}/${id} did not finish within ${ms} ms`);
    this.name = 'JobTimeoutError';
  }
}

/** A job's attempts are used up; `message` is its last error. */
export class JobFailedError extends Error {
  constructor(readonly queue: string, readonly id: string, reason: string) {
    super(reason);
    this.name = 'JobFailedError';
  }
}
