import type { Db } from '@neatroots/ports';
import type { Envelope, FindingMessage } from '@neatroots/spans';
import { FindingsRepo, type DeliveryInput } from './findings.repo';
import { ProjectsRepo } from './projects.repo';
import { RunsRepo } from './runs.repo';

export interface StoreWriterOptions {
  /** Flush once this many items wait (spans, run events, finding events, deliveries). */
  maxBatch?: number;
  /** Flush this long after the first item of a batch arrived. */
  flushMs?: number;
  /** Backoff between attempts of a failing flush: doubles from retryBaseMs up to retryMaxMs. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /**
   * Attempts of a failing flush once close() was called, before its writes are rejected
   * (their callers do not commit, so the bus delivers the items again). While open, a
   * flush is retried until it succeeds.
   */
  closeAttempts?: number;
  /** Told of every failed attempt. Default: console.error. */
  onError?: (err: unknown, info: { attempt: number; items: number }) => void;
  /** Told of every committed flush (metrics). */
  onFlush?: (info: { items: number; ms: number }) => void;
}

interface Write {
  events: readonly Envelope[];
  findings: readonly FindingMessage[];
  deliveries: readonly DeliveryInput[];
  size: number;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class StoreWriterClosedError extends Error {
  constructor() {
    super('store writer is closed');
    this.name = 'StoreWriterClosedError';
  }
}

/**
 * Batches the review service's writes by size and by time, as one transaction per flush.
 * Each write's promise resolves only once its items are committed, so a bus consumer that
 * awaits it commits its offset after the data is stored (at-least-once; the repositories
 * are idempotent, so a redelivered batch changes nothing). A failing flush is retried with
 * backoff and never dropped: its writers simply wait. Flushes run one at a time, in
 * arrival order. close() stops accepting, flushes what is left, and returns.
 */
export class StoreWriter {
  private readonly maxBatch: number;
  private readonly flushMs: number;
  private readonly retryBaseMs: number;
  private readonly retryMaxMs: number;
  private readonly closeAttempts: number;
  private readonly onError: NonNullable<StoreWriterOptions['onError']>;
  private readonly onFlush: StoreWriterOptions['onFlush'];

  private queue: Write[] = [];
  private queued = 0;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private closing = false;
  private wakeRetry: (() => void) | undefined;
  private notStored = 0;

  constructor(
    private readonly db: Db,
    opts: StoreWriterOptions = {},
  ) {
    this.maxBatch = opts.maxBatch ?? 500;
    this.flushMs = opts.flushMs ?? 50;
    this.retryBaseMs = opts.retryBaseMs ?? 100;
    this.retryMaxMs = opts.retryMaxMs ?? 5_000;
    this.closeAttempts = opts.closeAttempts ?? 3;
    this.onError = opts.onError ?? ((err, info) => console.error(`store writer: flush of ${info.items} items failed (attempt ${info.attempt}), retrying:`, err));
    this.onFlush = opts.onFlush;
  }

  /** Items waiting to be written. */
  get pending(): number {
    return this.queued;
  }

  /** Spans and run events; resolves once they are stored. */
  writeEvents(events: readonly Envelope[]): Promise<void> {
    return this.enqueue({ events, findings: [], deliveries: [] });
  }

  /** Finding events from the rule engine; resolves once they are stored. */
  writeFindings(findings: readonly FindingMessage[]): Promise<void> {
    return this.enqueue({ events: [], findings, deliveries: [] });
  }

  /** Notes that reached an agent (their findings become active); resolves once stored. */
  writeDeliveries(deliveries: readonly DeliveryInput[]): Promise<void> {
    return this.enqueue({ events: [], findings: [], deliveries });
  }

  private enqueue(w: Omit<Write, 'size' | 'resolve' | 'reject'>): Promise<void> {
    if (this.closing) return Promise.reject(new StoreWriterClosedError());
    const size = w.events.length + w.findings.length + w.deliveries.length;
    if (size === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ ...w, size, resolve, reject });
      this.queued += size;
      if (this.queued >= this.maxBatch) this.kick();
      else if (!this.timer && !this.running) this.timer = setTimeout(() => this.kick(), this.flushMs);
    });
  }

  /** Writes everything queued now; resolves when it is stored. */
  async flush(): Promise<void> {
    this.kick();
    while (this.running) await this.running;
  }

  private kick(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (!this.running && this.queue.length) this.running = this.loop();
  }

  /**
   * Flushes batches until the queue is empty. Writes that arrived during a flush go in the
   * next one at once: they have waited at least as long as that flush took.
   */
  private async loop(): Promise<void> {
    // `running` is assigned before the body runs, and cleared in the same synchronous step as
    // the last emptiness check, so a write can never find it set by a loop that has ended.
    await Promise.resolve();
    try {
      while (this.queue.length) {
        const batch: Write[] = [];
        let size = 0;
        // whole writes only, so each write is committed in one transaction
        while (this.queue.length && (batch.length === 0 || size + this.queue[0].size <= this.maxBatch)) {
          const w = this.queue.shift() as Write;
          batch.push(w);
          size += w.size;
        }
        this.queued -= size;
        await this.commit(batch, size);
      }
    } finally {
      this.running = undefined;
    }
  }

  private async commit(batch: Write[], size: number): Promise<void> {
    let triesSinceClose = 0;
    for (let attempt = 1; ; attempt++) {
      const started = Date.now();
      try {
        await this.db.transaction(async (tx) => {
          const events = batch.flatMap((w) => w.events);
          const findings = batch.flatMap((w) => w.findings);
          const deliveries = batch.flatMap((w) => w.deliveries);
          const projects = new Set<string>();
          for (const e of events) projects.add(e.project);
          for (const f of findings) projects.add(f.project);
          await new ProjectsRepo(tx).ensureMany([...projects]);
          await new RunsRepo(tx).writeEnvelopes(events);
          const repo = new FindingsRepo(tx);
          await repo.apply(findings);
          await repo.markActive(deliveries);
        });
      } catch (err) {
        this.onError(err, { attempt, items: size });
        if (this.closing && ++triesSinceClose >= this.closeAttempts) {
          this.notStored += size;
          for (const w of batch) w.reject(err);
          return;
        }
        await this.backoff(attempt);
        continue;
      }
      this.onFlush?.({ items: size, ms: Date.now() - started });
      for (const w of batch) w.resolve();
      return;
    }
  }

  private backoff(attempt: number): Promise<void> {
    const ms = Math.min(this.retryBaseMs * 2 ** (attempt - 1), this.retryMaxMs);
    return new Promise<void>((resolve) => {
      const t = setTimeout(done, ms);
      function done(): void {
        clearTimeout(t);
        resolve();
      }
      // close() cuts a long wait short: the remaining attempts happen right away
      this.wakeRetry = done;
    }).finally(() => (this.wakeRetry = undefined));
  }

  /**
   * Stops accepting writes, flushes the rest (a failing flush gets `closeAttempts` more
   * tries, then its writes are rejected and not committed upstream), and resolves. Rejects
   * when some writes could not be stored.
   */
  async close(): Promise<void> {
    this.closing = true;
    this.wakeRetry?.();
    const before = this.notStored;
    await this.flush();
    const failed = this.notStored - before;
    if (failed) throw new Error(`store writer closed with ${failed} items not stored; they were not acknowledged and will be delivered again`);
  }
}
