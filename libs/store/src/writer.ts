import { runStatements, type Db, type DeadLetter, type Queryable, type Statement } from '@neatroots/ports';
import type { FindingMessage } from '@neatroots/messages';
import type { Envelope } from '@neatroots/spans';
import { DeadLettersRepo } from './dead-letters.repo';
import { deliveryStatements, findingStatements, type DeliveryInput } from './findings.repo';
import { ensureProjectsStatements } from './projects.repo';
import { envelopeStatements } from './runs.repo';
import { unstorable, type StoreItem } from './storable';

export interface StoreWriterOptions {
  /** Flush once this many items wait (spans, run events, finding events, deliveries). */
  maxBatch?: number;
  /**
   * At most this many items a flush takes (whole writes; a single larger write goes alone).
   * A flush takes everything waiting up to this bound, so when the database falls behind, the
   * queue deepens and flushes grow: the fixed cost of each (the wait for PGlite's one
   * connection, a message to its thread and back, the transaction) is paid less often.
   * Default 8,000 (four bus batches).
   */
  maxFlush?: number;
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
  /**
   * Attempts of one item the database refuses (while it answers otherwise) before the item is
   * set aside in dead_letters with the error. Default 3.
   */
  itemAttempts?: number;
  /** Told of items set aside (metrics). */
  onSetAside?: (letters: readonly DeadLetter[]) => void;
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
 * are idempotent, so a redelivered batch changes nothing). Flushes run one at a time, in
 * arrival order. close() stops accepting, flushes what is left, and returns.
 *
 * A failing flush is never dropped, and one bad item never holds up the others:
 * - when the database refuses the data (refusesData: a number out of range, JSON it will not
 *   parse) and still answers a `SELECT 1`, the batch is split in halves, each stored on its
 *   own, down to the single items it refuses; such an item is tried `itemAttempts` times,
 *   then set aside in dead_letters with the error, and everything else is stored;
 * - on any other error (the database down, read-only, failing over) the flush waits and is
 *   retried with backoff, as it is: nothing is set aside because the database was unwell.
 * Items that would break the database itself (JSON nested past what it parses; times it
 * cannot represent) are set aside before they are sent.
 */
export class StoreWriter {
  private readonly maxBatch: number;
  private readonly maxFlush: number;
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
  private readonly itemAttempts: number;
  private readonly onSetAside: StoreWriterOptions['onSetAside'];
  /** Items set aside in dead_letters since the writer started. */
  setAsideCount = 0;

  constructor(
    private readonly db: Db,
    opts: StoreWriterOptions = {},
  ) {
    this.maxBatch = opts.maxBatch ?? 500;
    this.maxFlush = Math.max(this.maxBatch, opts.maxFlush ?? 8_000);
    this.flushMs = opts.flushMs ?? 50;
    this.retryBaseMs = opts.retryBaseMs ?? 100;
    this.retryMaxMs = opts.retryMaxMs ?? 5_000;
    this.closeAttempts = opts.closeAttempts ?? 3;
    this.onError = opts.onError ?? ((err, info) => console.error(`store writer: flush of ${info.items} items failed (attempt ${info.attempt}), retrying:`, err));
    this.onFlush = opts.onFlush;
    this.itemAttempts = opts.itemAttempts ?? 3;
    this.onSetAside = opts.onSetAside;
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
        // whole writes only, so each write is committed in one transaction; all that waits, up to maxFlush
        while (this.queue.length && (batch.length === 0 || size + this.queue[0].size <= this.maxFlush)) {
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
    const items: StoreItem[] = [];
    for (const w of batch) {
      for (const value of w.events) items.push({ kind: 'event', value });
      for (const value of w.findings) items.push({ kind: 'finding', value });
      for (const value of w.deliveries) items.push({ kind: 'delivery', value });
    }
    const started = Date.now();
    const closeTries = { n: 0 };
    try {
      const good: StoreItem[] = [];
      const bad: DeadLetter[] = [];
      for (const it of items) {
        const reason = unstorable(it);
        if (reason) bad.push(letterOf(it, reason));
        else good.push(it);
      }
      if (bad.length) await this.setAside(bad, closeTries);
      if (good.length) await this.store(good, closeTries);
    } catch (err) {
      // Only once closing, with the database down: not acknowledged, delivered again.
      this.notStored += size;
      for (const w of batch) w.reject(err);
      return;
    }
    this.onFlush?.({ items: size, ms: Date.now() - started });
    for (const w of batch) w.resolve();
  }

  /**
   * One transaction for these items, in order (events, then findings, then deliveries), sent
   * as one batch of statements: on PGlite's thread that is one message each way for the whole
   * flush, where a statement at a time waited for this (busy) thread between statements.
   */
  private async write(items: readonly StoreItem[]): Promise<void> {
    const events: Envelope[] = [];
    const findings: FindingMessage[] = [];
    const deliveries: DeliveryInput[] = [];
    for (const it of items) {
      if (it.kind === 'event') events.push(it.value);
      else if (it.kind === 'finding') findings.push(it.value);
      else deliveries.push(it.value);
    }
    const projects = new Set<string>();
    for (const e of events) projects.add(e.project);
    for (const f of findings) projects.add(f.project);
    await inOneTransaction(this.db, [
      ...ensureProjectsStatements([...projects]),
      ...envelopeStatements(events),
      ...findingStatements(findings),
      ...deliveryStatements(deliveries),
    ]);
  }

  /** Does the database answer at all? Tells a refused item from a database that is down. */
  private async answers(): Promise<boolean> {
    try {
      await this.db.query('SELECT 1');
      return true;
    } catch {
      return false;
    }
  }

  /** A failed attempt while the database is down: wait, or give up once closing. */
  private async waitForDb(err: unknown, attempt: number, closeTries: { n: number }): Promise<void> {
    if (this.closing && ++closeTries.n >= this.closeAttempts) throw err;
    await this.backoff(attempt);
  }

  /** Stores these items; what the database refuses is narrowed down by halves and set aside. */
  private async store(items: readonly StoreItem[], closeTries: { n: number }): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.write(items);
        return;
      } catch (err) {
        this.onError(err, { attempt, items: items.length });
        // Only a refusal of the data narrows the batch down; anything else (a database that
        // does not answer, is read-only, is failing over, ran out of connections) is waited out.
        if (!refusesData(err) || !(await this.answers())) {
          await this.waitForDb(err, attempt, closeTries);
          continue;
        }
        if (items.length > 1) {
          const mid = Math.ceil(items.length / 2);
          await this.store(items.slice(0, mid), closeTries);
          await this.store(items.slice(mid), closeTries);
          return;
        }
        if (attempt >= this.itemAttempts) {
          await this.setAside([letterOf(items[0], errorText(err))], closeTries);
          return;
        }
        await this.backoff(attempt);
      }
    }
  }

  private async setAside(letters: DeadLetter[], closeTries: { n: number }): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.db.transaction((tx: Queryable) => new DeadLettersRepo(tx).setAside(letters));
        break;
      } catch (err) {
        this.onError(err, { attempt, items: letters.length });
        if (await this.answers()) {
          // Text columns only, so this should not happen; if it does, keep the reasons at least.
          if (attempt >= this.itemAttempts) letters = letters.map((l) => ({ ...l, payload: '(the payload could not be stored)' }));
          if (attempt >= 2 * this.itemAttempts) throw err;
        } else await this.waitForDb(err, attempt, closeTries);
      }
    }
    this.setAsideCount += letters.length;
    this.onSetAside?.(letters);
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

/** The statements in one transaction: as one batch where the Db takes one, else one at a time. */
async function inOneTransaction(db: Db, statements: readonly Statement[]): Promise<void> {
  if (!statements.length) return;
  if (db.batch) {
    await db.batch(statements);
    return;
  }
  await db.transaction((tx) => runStatements(tx, statements));
}

/**
 * Is this the database (or the driver) refusing the data itself? Postgres's data exceptions
 * (class 22: a number out of range, invalid JSON text, a date out of range), integrity
 * violations (23) and program limits (54: nesting past the stack), and the errors JavaScript
 * throws on a value (a RangeError from a date that does not exist). The same item fails the
 * same way every time; any other error may pass once the database is back.
 */
export function refusesData(err: unknown): boolean {
  const e = err as { code?: unknown; name?: unknown } | undefined;
  if (typeof e?.code === 'string' && /^(22|23|54)[0-9A-Z]{3}$/.test(e.code)) return true;
  return err instanceof RangeError || err instanceof TypeError || err instanceof SyntaxError;
}

function errorText(err: unknown): string {
  const e = err as { message?: unknown; code?: unknown };
  const msg = typeof e?.message === 'string' ? e.message : String(err);
  return typeof e?.code === 'string' ? `${msg} (SQLSTATE ${e.code})` : msg;
}

/** The dead letter of an item the store could not take. */
function letterOf(it: StoreItem, reason: string): DeadLetter {
  if (it.kind === 'event') {
    const item = it.value.item;
    return {
      project: it.value.project,
      source: 'store.events',
      kind: item.kind,
      run_id: item.kind === 'span' ? item.span.run_id : item.run.run_id,
      item_id: item.kind === 'span' ? item.span.span_id : undefined,
      reason,
      payload: it.value,
    };
  }
  if (it.kind === 'finding') {
    const f = it.value;
    return { project: f.project, source: 'store.findings', kind: 'finding', run_id: f.run_id, item_id: f.id, reason, payload: f };
  }
  const d = it.value;
  return { project: d.project, source: 'store.deliveries', kind: 'delivery', item_id: d.finding_id, reason, payload: d };
}
