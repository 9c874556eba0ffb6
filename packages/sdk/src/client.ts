import { randomBytes, randomUUID } from 'node:crypto';
import { credentials as grpcCredentials, Metadata, status as Status, type ChannelCredentials, type ClientOptions, type ServiceError } from '@grpc/grpc-js';
import { v1 } from '@neatroots/proto';
import { runEndToProto, runStartToProto, spanToProto, type RunEndStatus, type SpanType, type Usage } from '@neatroots/spans';

/**
 * The neatroots agent SDK: records a run's spans and run events, exports them in batches to
 * ingest's neatroots.v1 Ingest API, and receives notes and halts for the run (a Subscribe
 * stream, and notes piggybacked on export responses).
 *
 *   const client = new NeatrootsClient({ address: 'localhost:50051', apiKey });
 *   const run = client.startRun({ workflow: 'refund-agent', user_message });
 *   const order = await run.toolCall('lookup_order', { id }, (args, signal) => lookup(args, signal));
 *   await run.end({ final_output: answer });
 */

export type { RunEndStatus, SpanType, Usage };
export type Note = v1.Note;

/** A span as the contract defines it (CONTRACTS.md section 1), minus what the run fills in. */
export interface SpanInit {
  type: SpanType;
  name?: string;
  tool?: string;
  input?: unknown;
  output?: unknown;
  error?: string | null;
  status?: 'ok' | 'error';
  start_ms?: number;
  end_ms?: number;
  usage?: Usage;
  model?: string;
  parent_id?: string;
  /** Default: a random 16-hex-digit id. */
  span_id?: string;
  attributes?: Record<string, unknown>;
}

export interface StartRunOptions {
  /** Default: a random UUID. */
  run_id?: string;
  workflow?: string;
  session_id?: string;
  system_prompt?: string;
  user_message?: string;
  tools?: { name: string; description?: string }[];
  /** Pre-call checks for this run's tool calls (default auto). */
  precheck?: PrecheckMode;
}

/**
 * Pre-call checks (halt before the harm): before a tool call runs, ask whether it would halt
 * the run. auto (the default): for the tools a halting rule of the project names; on: every
 * tool call; off: never.
 */
export type PrecheckMode = 'auto' | 'on' | 'off';

export interface EndRunOptions {
  /** Default: `interrupted` when the run was halted, else `ok`. */
  status?: RunEndStatus;
  final_output?: unknown;
  /**
   * How long end() waits for the run's events to be exported; what is not by then stays queued
   * and is retried. Default: the client's closeTimeoutMs (10 s).
   */
  timeoutMs?: number;
}

export interface RetryOptions {
  /**
   * @deprecated Ignored: a batch refused with a retryable status (UNAVAILABLE, DEADLINE_EXCEEDED,
   * ABORTED, RESOURCE_EXHAUSTED with google.rpc.RetryInfo) is retried until it is accepted or the
   * client is closed; only the queue bounds drop events meanwhile.
   */
  maxAttempts?: number;
  /** First delay; doubled each attempt up to maxDelayMs, full jitter. Default 250 ms. */
  initialDelayMs?: number;
  /** Default 30 s. Never sooner than the RetryInfo delay ingest sent. */
  maxDelayMs?: number;
}

/** What the client's export queue holds and lost (`client.stats()`). */
export interface ClientStats {
  /** Events waiting to be exported (the batch being sent included). */
  queued: number;
  /** Their estimated encoded size, bytes. */
  queuedBytes: number;
  /**
   * Events dropped: the oldest waiting ones past maxQueueEvents or maxQueueBytes, an event larger
   * than maxQueueBytes on its own, the events of an export ingest refused for good (one over its
   * message or item bound included), those ingest rejected one by one in an export it accepted
   * (ExportResponse.rejected), what close() could not send in time (the batch being sent
   * included: its export is cancelled unanswered, so ingest may have taken it), and events
   * recorded after close().
   */
  dropped: number;
}

export interface NeatrootsClientOptions {
  /** host:port of ingest's neatroots.v1 API, e.g. `localhost:50051`. */
  address: string;
  apiKey: string;
  /** Default: plaintext (use grpc.credentials.createSsl() behind TLS). */
  credentials?: ChannelCredentials;
  /**
   * gRPC channel options, over the client's: it takes answers of any size
   * (`grpc.max_receive_message_length` -1), an export's answer carrying its runs' notes.
   */
  channelOptions?: Partial<ClientOptions>;
  /**
   * Events per export; reaching it wakes the flusher at once. Default 100. An export also holds
   * at most 4 MiB of encoded events (an event larger than that alone is sent alone), or ingest's
   * message bound once ingest refused an export as larger than it (that export is sent in halves).
   */
  maxBatch?: number;
  /** Events kept waiting for export at most; past it the oldest are dropped (counted in stats().dropped). Default 10,000. */
  maxQueueEvents?: number;
  /**
   * Encoded bytes kept waiting for export at most; past it the oldest are dropped. An event larger
   * than it on its own is dropped alone (counted, reported with its size), never by evicting the
   * others. Default 32 MiB.
   */
  maxQueueBytes?: number;
  /**
   * How long close() flushes what is queued before it drops the rest, and how long run.end()
   * waits for its run's events (they stay queued after it). Default 10 s.
   */
  closeTimeoutMs?: number;
  /** Queued events are exported at least this often. Default 1000 ms. */
  flushIntervalMs?: number;
  /** Deadline of one export call. Default 10 s. */
  exportTimeoutMs?: number;
  retry?: RetryOptions;
  /** Open a Subscribe stream per run for notes and halts. Default true. */
  subscribe?: boolean;
  /**
   * Exports that failed for good, the first retried failure of an outage (once until an export
   * succeeds), items ingest rejected, dropped events, broken subscriptions. Default:
   * console.warn. What it throws is ignored (the client goes on as if it returned). Called
   * synchronously on the event loop inside the client's own work: keep it quick; a returned
   * promise is not awaited.
   */
  onError?: (err: Error) => void;
  /**
   * How long the project's pre-call policy (which tools a halting rule names, fail-open or
   * closed) is used before it is asked again. Default 30 s: a rule switched to halt reaches
   * running agents within it. A policy gone stale is still used while it is asked again.
   */
  precheckPolicyTtlMs?: number;
  /** Deadline of asking the project's pre-call policy. Default 1000 ms: a tool call waits for the policy at most this long. */
  precheckPolicyTimeoutMs?: number;
  /**
   * Used while the policy is unknown (never received: asking failed or timed out) for runs with
   * precheck 'on': true refuses a call whose check gave no answer in time. Default false.
   */
  precheckFailClosed?: boolean;
  /** Deadline of a check while the policy is unknown (precheck 'on'). Default 50 ms, as NEATROOTS_PRECHECK_TIMEOUT_MS. */
  precheckTimeoutMs?: number;
}

/** Thrown by `toolCall` once the run was halted; `run.signal` aborts with it. */
export class RunHaltedError extends Error {
  constructor(readonly note?: Note) {
    super(note ? `run halted by neatroots: ${note.title || note.check_id}${note.text ? `: ${note.text}` : ''}` : 'run halted by neatroots');
    this.name = 'RunHaltedError';
  }
}

/**
 * Thrown by `toolCall` when its pre-call check gave no answer in time and the project fails
 * closed: the tool was not run.
 */
export class PrecheckUnansweredError extends Error {
  constructor(
    readonly tool: string,
    readonly reason: string,
  ) {
    super(`${tool} was not run: its pre-call check gave no answer (${reason}) and the project fails closed`);
    this.name = 'PrecheckUnansweredError';
  }
}

/** Which tool calls are checked before they run, and what happens without an answer. */
interface PrecheckPolicy {
  tools: string[];
  failClosed: boolean;
  timeoutMs: number;
}

/** A workflow's pre-call policy as last asked: `known` null when the asking failed. */
interface PolicyEntry {
  at: number;
  policy: Promise<PrecheckPolicy | undefined>;
  known?: PrecheckPolicy | null;
  asking?: boolean;
}

/**
 * Items ingest refused one by one (the rest of the batch was accepted): they are not sent again,
 * so they are counted in stats().dropped; `droppedInAll` is that count after them.
 */
export class ExportRejectedError extends Error {
  constructor(
    readonly rejected: v1.Rejected[],
    readonly droppedInAll?: number,
  ) {
    super(
      `neatroots rejected ${rejected.length} item(s): ${rejected.map((r) => `${r.span_id ? `span ${r.span_id} of run ${r.run_id}: ` : ''}${r.field}: ${r.reason}`).join('; ')}` +
        (droppedInAll === undefined ? '' : ` (dropped, not sent again; ${droppedInAll} dropped in all)`),
    );
    this.name = 'ExportRejectedError';
  }
}

/** Retried: nothing of the batch was acknowledged. */
const RETRYABLE = new Set<number>([Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED, Status.ABORTED]);

/**
 * An export message holds at most this many bytes of encoded events (gRPC's default receive
 * bound), or less once ingest refused a message as too large (NeatrootsClient.batchBytes).
 */
const MAX_BATCH_BYTES = 4 * 1024 * 1024;
/** What a user's callback returned: if a promise, its rejection goes to onRejected. */
function whenSettled(result: unknown, onRejected: (e: unknown) => void): void {
  if (result && typeof (result as PromiseLike<unknown>).then === 'function') {
    (result as PromiseLike<unknown>).then(undefined, onRejected);
  }
}

/** Dropped events are reported through onError at most this often. */
const DROP_REPORT_MS = 10_000;

/**
 * The RetryInfo delay (ms) in a status's grpc-status-details-bin (a google.rpc.Status whose
 * details hold a google.rpc.RetryInfo), or undefined when it carries none.
 */
function retryInfoDelayMs(err: ServiceError): number | undefined {
  for (const bin of err.metadata?.get('grpc-status-details-bin') ?? []) {
    if (!Buffer.isBuffer(bin)) continue;
    for (const any of fields(bin).filter((f) => f.no === 3 && f.bytes)) {
      const parts = fields(any.bytes!);
      const type = parts.find((f) => f.no === 1)?.bytes?.toString();
      const value = parts.find((f) => f.no === 2)?.bytes;
      if (type !== 'type.googleapis.com/google.rpc.RetryInfo' || !value) continue;
      const duration = fields(value).find((f) => f.no === 1)?.bytes;
      const d = duration ? fields(duration) : [];
      return (d.find((f) => f.no === 1)?.num ?? 0) * 1000 + Math.floor((d.find((f) => f.no === 2)?.num ?? 0) / 1e6);
    }
  }
  return undefined;
}

/** The top-level fields of a protobuf message (varints and length-delimited; others skipped). */
function fields(buf: Buffer): { no: number; num?: number; bytes?: Buffer }[] {
  const out: { no: number; num?: number; bytes?: Buffer }[] = [];
  let i = 0;
  const varint = (): number => {
    let n = 0;
    let mul = 1;
    while (i < buf.length) {
      const b = buf[i++];
      n += (b & 127) * mul;
      mul *= 128;
      if (b < 128) break;
    }
    return n;
  };
  try {
    while (i < buf.length) {
      const key = varint();
      const no = Math.floor(key / 8);
      const wire = key & 7;
      if (wire === 0) out.push({ no, num: varint() });
      else if (wire === 2) {
        const len = varint();
        out.push({ no, bytes: buf.subarray(i, i + len) });
        i += len;
      } else if (wire === 1) i += 8;
      else if (wire === 5) i += 4;
      else break;
    }
  } catch {
    // a malformed status: what was read so far
  }
  return out;
}

/**
 * A message over the receiver's bound: RESOURCE_EXHAUSTED without RetryInfo saying "larger than
 * max" (grpc's own refusal, "Received message larger than max (X vs. Y)"). Ingest's back-pressure
 * is RESOURCE_EXHAUSTED too, but with RetryInfo, and is retried, never split.
 */
function tooLarge(err: ServiceError): boolean {
  return err.code === Status.RESOURCE_EXHAUSTED && retryInfoDelayMs(err) === undefined && /larger than max/i.test(err.details ?? '');
}

/** Retryable: UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED, and RESOURCE_EXHAUSTED that says when to try again (ingest's back-pressure). */
function retryable(err: ServiceError): boolean {
  if (RETRYABLE.has(err.code)) return true;
  return err.code === Status.RESOURCE_EXHAUSTED && retryInfoDelayMs(err) !== undefined;
}

function newSpanId(): string {
  return randomBytes(8).toString('hex');
}

/** Clients not closed: one 'beforeExit' listener for all of them flushes what they still hold. */
const unclosed = new Set<{ beforeExit(): void }>();
let exitHooked = false;
function watchExit(client: { beforeExit(): void }): void {
  unclosed.add(client);
  if (exitHooked) return;
  exitHooked = true;
  process.on('beforeExit', () => {
    for (const c of unclosed) c.beforeExit();
  });
}

/** A queued event: its encoded size in an ExportRequest, and its place in the order of enqueueing. */
interface Queued {
  ev: v1.Event;
  bytes: number;
  seq: number;
}

/** The bound in grpc's refusal of a message too large ("Received message larger than max (9437210 vs 8388608)"). */
const MESSAGE_LIMIT = /\(\d+ vs\.? (\d+)\)/;

/** A batch's event (span, run_start or run_end, and its run) and its encoded size, or for several events their runs and their size in all. */
function describe(batch: Queued[]): string {
  const runOf = (ev: v1.Event) => ev.kind?.value.run_id ?? '';
  if (batch.length === 1) {
    const { ev, bytes } = batch[0];
    if (ev.kind?.$case === 'span') return `span ${ev.kind.value.span_id} of run ${ev.kind.value.run_id} (${bytes} bytes)`;
    if (ev.kind) return `${ev.kind.$case} of run ${runOf(ev)} (${bytes} bytes)`;
    return `an event of ${bytes} bytes`;
  }
  const runs = new Set(batch.map((q) => runOf(q.ev)));
  const bytes = batch.reduce((n, q) => n + q.bytes, 0);
  return runs.size === 1 ? `${batch.length} events of run ${[...runs][0]} (${bytes} bytes)` : `${batch.length} events of ${runs.size} runs (${bytes} bytes)`;
}

/**
 * The report of a batch ingest refused for good (its events were counted as dropped): one over
 * ingest's message bound (RESOURCE_EXHAUSTED without RetryInfo) names its event (or run) and its
 * size against the bound; any other refusal keeps its status first.
 */
function refused(batch: Queued[], err: ServiceError, droppedInAll: number): Error {
  if (err.code === Status.RESOURCE_EXHAUSTED) {
    const m = MESSAGE_LIMIT.exec(err.details ?? '');
    const limit = m ? `the ${m[1]} bytes ingest takes in one message` : 'what ingest takes in one message';
    return new Error(`dropped ${batch.length} event(s) (${describe(batch)}: over ${limit} (${err.message}); not sent again); ${droppedInAll} dropped in all`, { cause: err });
  }
  return new Error(`export of ${batch.length} event(s) failed: ${err.message} (dropped: ${describe(batch)})`, { cause: err });
}

function varintLength(n: number): number {
  let len = 1;
  while (n > 127) {
    n = Math.floor(n / 128);
    len++;
  }
  return len;
}

export class NeatrootsClient {
  private readonly grpc: v1.IngestClient;
  private readonly metadata: Metadata;
  private readonly maxBatch: number;
  private readonly maxQueueEvents: number;
  private readonly maxQueueBytes: number;
  /** @internal */
  readonly closeTimeoutMs: number;
  private readonly exportTimeoutMs: number;
  private readonly retry: Required<RetryOptions>;
  private readonly timer: NodeJS.Timeout;
  /** Events waiting for export, oldest first (the batch being sent is not among them). */
  private queue: Queued[] = [];
  private queueBytes = 0;
  /** The batch being sent (and retried): never dropped by the queue bounds. */
  private inflight: Queued[] = [];
  private seq = 0;
  private flusher: Promise<void> | undefined;
  /** Wakes the flusher out of a backoff wait (close). */
  private wakeBackoff: (() => void) | undefined;
  private cancelInflight: (() => void) | undefined;
  /** flush() callers: resolved once every event enqueued before them was sent or dropped. */
  private waiters: { seq: number; resolve: () => void }[] = [];
  /** An export is being retried and that was reported: reported again only after one succeeded. */
  private failing = false;
  /** Bytes of encoded events an export holds at most: 4 MiB, lowered to ingest's message bound once it refused one as too large. */
  private batchBytes = MAX_BATCH_BYTES;
  private droppedCount = 0;
  private droppedUnreported = 0;
  private lastDropReport = 0;
  private dropReportTimer: NodeJS.Timeout | undefined;
  private readonly runs = new Map<string, Run>();
  private readonly policies = new Map<string, PolicyEntry>();
  private readonly policyTtlMs: number;
  private readonly policyTimeoutMs: number;
  /** The policy a run with precheck 'on' uses while none was received. */
  private readonly fallbackPolicy: PrecheckPolicy;
  private closing: Promise<void> | undefined;
  private stopped = false;
  /** @internal The process is about to exit: what is still queued is flushed (through close) and said. */
  beforeExit(): void {
    if (this.closing || !(this.queue.length || this.inflight.length)) return;
    this.onError(new Error(`${this.queue.length + this.inflight.length} event(s) still queued at exit and the client was not closed: flushing them (call client.close())`));
    void this.close();
  }
  /** @internal */
  readonly subscribeEnabled: boolean;
  /** The user's onError (or console.warn): called only through onError below. */
  private readonly reportTo: (err: Error) => void;
  /**
   * @internal Every report goes through here: what the user's onError throws is ignored, so a
   * failing logger never stops the flusher, close(), a notes stream or the notes of an answer.
   */
  readonly onError = (err: Error): void => {
    try {
      // An async onError's rejection is ignored as a throw is: left alone it would be an
      // unhandled rejection, which ends a Node process.
      whenSettled(this.reportTo(err) as unknown, () => undefined);
    } catch {
      // ignored, as documented
    }
  };

  constructor(opts: NeatrootsClientOptions) {
    // As the Go client: a key from an unset variable would have every call refused, each run's
    // notes stream included.
    if (!opts?.address) throw new Error('NeatrootsClient: options.address is required (host:port of ingest, e.g. localhost:50051)');
    if (!opts.apiKey) throw new Error('NeatrootsClient: options.apiKey is required (it is empty)');
    // Answers are taken whatever their size: an export's answer carries the notes of its runs (up
    // to 32 a run, each with its check's guidance) and may pass gRPC's default 4 MiB, whose refusal
    // ("Received message larger than max") reads as ingest refusing the request as too large.
    this.grpc = new v1.IngestClient(opts.address, opts.credentials ?? grpcCredentials.createInsecure(), { 'grpc.max_receive_message_length': -1, ...opts.channelOptions });
    this.metadata = new Metadata();
    this.metadata.set('x-api-key', opts.apiKey);
    this.maxBatch = Math.max(1, opts.maxBatch ?? 100);
    this.maxQueueEvents = Math.max(1, opts.maxQueueEvents ?? 10_000);
    this.maxQueueBytes = Math.max(1, opts.maxQueueBytes ?? 32 * 1024 * 1024);
    this.closeTimeoutMs = opts.closeTimeoutMs ?? 10_000;
    this.exportTimeoutMs = opts.exportTimeoutMs ?? 10_000;
    this.policyTtlMs = opts.precheckPolicyTtlMs ?? 30_000;
    this.policyTimeoutMs = opts.precheckPolicyTimeoutMs ?? 1000;
    this.fallbackPolicy = { tools: ['*'], failClosed: opts.precheckFailClosed ?? false, timeoutMs: opts.precheckTimeoutMs ?? 50 };
    this.retry = { initialDelayMs: 250, maxDelayMs: 30_000, ...opts.retry, maxAttempts: Infinity };
    this.subscribeEnabled = opts.subscribe ?? true;
    this.reportTo = opts.onError ?? ((err) => console.warn(`[neatroots] ${err.message}`));
    this.timer = setInterval(() => {
      if (this.queue.length) this.wake();
    }, opts.flushIntervalMs ?? 1000);
    this.timer.unref();
    watchExit(this);
  }

  startRun(opts: StartRunOptions = {}): Run {
    if (this.closing) throw new Error('NeatrootsClient is closed');
    const runId = opts.run_id ?? randomUUID();
    const run = new Run(this, runId, opts.workflow, opts.precheck ?? 'auto');
    this.runs.set(runId, run);
    this.enqueue({
      kind: {
        $case: 'run_start',
        // The one neatroots.v1 mapping (@neatroots/spans), the one ingest reads back.
        value: runStartToProto({ ...opts, run_id: runId, ts_ms: Date.now() }),
      },
    });
    if (this.subscribeEnabled) run.subscribe();
    else run.subscribeSkipped();
    // Asked now, so the run's first tool call seldom waits for it.
    if (run.precheckMode !== 'off') void this.precheckPolicy(opts.workflow);
    return run;
  }

  /** What the export queue holds now and how many events were dropped so far. */
  stats(): ClientStats {
    const all = this.inflight.concat(this.queue);
    return { queued: all.length, queuedBytes: all.reduce((n, q) => n + q.bytes, 0), dropped: this.droppedCount };
  }

  /**
   * Exports everything queued so far; resolves when it is acknowledged, refused for good, or
   * dropped. While ingest refuses with a retryable status this waits (the batch is retried
   * until accepted or the client is closed).
   */
  flush(): Promise<void> {
    const target = this.seq;
    if (this.pendingFrom() > target) return Promise.resolve();
    const done = new Promise<void>((resolve) => this.waiters.push({ seq: target, resolve }));
    this.wake();
    return done;
  }

  /** @internal flush() bounded by a deadline: true when everything queued was settled in time. */
  async flushBy(deadline: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), Math.max(0, deadline - Date.now()))));
    try {
      return await Promise.race([this.flush().then(() => true), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Flushes what is queued for at most `timeoutMs` (default closeTimeoutMs, 10 s), then drops
   * the rest (counted in stats().dropped and reported), ends every Subscribe stream and closes
   * the channel. Runs not ended stay without run_end.
   */
  close(timeoutMs = this.closeTimeoutMs): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.timer);
      unclosed.delete(this);
      await this.flushBy(Date.now() + timeoutMs);
      this.stopped = true;
      const lost = this.inflight.length + this.queue.length;
      this.inflight = [];
      this.queue = [];
      this.queueBytes = 0;
      this.cancelInflight?.();
      this.wakeBackoff?.();
      if (lost) this.drop(lost, 'not exported before close() timed out');
      this.reportDrops(true);
      this.settle();
      for (const run of this.runs.values()) run.unsubscribe();
      this.runs.clear();
      this.grpc.close();
    })();
    return this.closing;
  }

  /** @internal */
  enqueue(ev: v1.Event): void {
    if (this.stopped) {
      this.drop(1, 'recorded after the client was closed');
      this.reportDrops(true);
      return;
    }
    const len = v1.Event.encode(ev).finish().length;
    const bytes = 1 + varintLength(len) + len;
    if (bytes > this.maxQueueBytes) {
      // Alone over the bound: refused on its own, never by evicting the events queued before it.
      this.droppedCount++;
      this.onError(new Error(`dropped 1 event(s) (event of ${bytes} bytes is larger than the queue bound of ${this.maxQueueBytes} bytes (maxQueueBytes)); ${this.droppedCount} dropped in all`));
      return;
    }
    this.queue.push({ ev, bytes, seq: ++this.seq });
    this.queueBytes += bytes;
    // Past a bound the oldest waiting events go (never the batch being sent).
    let over = 0;
    while (this.queue.length > 1 && (this.queue.length > this.maxQueueEvents || this.queueBytes > this.maxQueueBytes)) {
      this.queueBytes -= this.queue.shift()!.bytes;
      over++;
    }
    if (over) {
      this.drop(over, 'the export queue is full');
      this.settle();
    }
    if (this.queue.length >= this.maxBatch || this.queueBytes >= this.batchBytes) this.wake();
  }

  /** @internal */
  forget(runId: string): void {
    this.runs.delete(runId);
  }

  /**
   * @internal The project's pre-call policy for a workflow: undefined when the server has none
   * to give (then nothing is checked). Asked again once it is older than precheckPolicyTtlMs;
   * a known policy is used meanwhile (no tool call waits for the asking), and kept when the
   * asking fails (a fail-closed project stays checked while its server is unreachable).
   */
  precheckPolicy(workflow: string | undefined): Promise<PrecheckPolicy | undefined> {
    const key = workflow ?? '';
    let entry = this.policies.get(key);
    if (!entry) this.policies.set(key, (entry = { at: 0, policy: Promise.resolve(undefined) }));
    // Once closed the channel is gone: the last policy known (or none) stays in force.
    if (!this.stopped && !entry.asking && Date.now() - entry.at >= this.policyTtlMs) this.askPolicy(entry, key);
    return entry.known ? Promise.resolve(entry.known) : entry.policy;
  }

  /**
   * Asks the server for a workflow's policy, with a short deadline (precheckPolicyTimeoutMs); a
   * failure (an older server, none reachable, no answer in time) keeps the last one known.
   */
  private askPolicy(entry: PolicyEntry, workflow: string): void {
    entry.asking = true;
    entry.policy = new Promise<PrecheckPolicy | undefined>((resolve) => {
      const answered = (res?: v1.PreCheckPolicyResponse) => {
        entry.asking = false;
        entry.at = Date.now();
        if (res) entry.known = { tools: res.tools, failClosed: res.fail_closed, timeoutMs: res.timeout_ms || 50 };
        else entry.known ??= null;
        resolve(entry.known ?? undefined);
      };
      try {
        this.grpc.preCheckPolicy({ workflow }, this.metadata, { deadline: Date.now() + this.policyTimeoutMs }, (err, res) => answered(err ? undefined : res));
      } catch {
        answered(); // the channel was closed: a failed asking
      }
    });
  }

  /** @internal The policy when it is already known (null: asking failed, none received), else undefined. */
  knownPolicy(workflow: string | undefined): PrecheckPolicy | null | undefined {
    const entry = this.policies.get(workflow ?? '');
    if (!entry) return undefined;
    // A policy is used until the next one is known (asked now if it is stale: a tool it does
    // not name is never checked, so nothing else would ask); a failure is known until it is
    // asked again.
    if (entry.known) {
      if (Date.now() - entry.at >= this.policyTtlMs) void this.precheckPolicy(workflow);
      return entry.known;
    }
    // Once closed nothing is asked again: a failure stays known.
    return entry.asking || (!this.stopped && Date.now() - entry.at >= this.policyTtlMs) ? undefined : entry.known;
  }

  /** @internal The policy a run with precheck 'on' applies while none was received. */
  get unknownPolicy(): PrecheckPolicy {
    return this.fallbackPolicy;
  }

  /** @internal One pre-call check: the answer, or the gRPC error (a timeout, an unavailable engine). */
  precheck(span: v1.Span, knownSpans: number, timeoutMs: number): Promise<v1.PreCheckResponse> {
    // Once closed there is no channel to ask on: no answer (the project's fail mode decides).
    if (this.stopped) return Promise.reject(new Error('the client is closed'));
    return new Promise((resolve, reject) => {
      try {
        this.grpc.preCheck({ span, known_spans: knownSpans, timeout_ms: timeoutMs }, this.metadata, { deadline: Date.now() + timeoutMs }, (err, res) =>
          err ? reject(err) : resolve(res),
        );
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
      }
    });
  }

  /** @internal */
  openSubscribe(runId: string) {
    return this.grpc.subscribe({ run_id: runId }, this.metadata);
  }

  /** The seq of the oldest event not yet settled (sent, refused or dropped). */
  private pendingFrom(): number {
    return this.inflight[0]?.seq ?? this.queue[0]?.seq ?? Infinity;
  }

  /** Resolves the flush() callers whose events are all settled. */
  private settle(): void {
    const from = this.pendingFrom();
    const done = this.waiters.filter((w) => w.seq < from);
    this.waiters = this.waiters.filter((w) => w.seq >= from);
    for (const w of done) w.resolve();
  }

  private drop(n: number, why: string): void {
    this.droppedCount += n;
    this.droppedUnreported += n;
    this.dropWhy = why;
    this.reportDrops(false);
  }

  private dropWhy = '';

  /** Reports the events dropped since the last report, at most once per 10 s (now when `force`). */
  private reportDrops(force: boolean): void {
    if (!this.droppedUnreported) return;
    const wait = this.lastDropReport + DROP_REPORT_MS - Date.now();
    if (!force && wait > 0) {
      this.dropReportTimer ??= setTimeout(() => {
        this.dropReportTimer = undefined;
        this.reportDrops(false);
      }, wait).unref();
      return;
    }
    if (this.dropReportTimer) clearTimeout(this.dropReportTimer);
    this.dropReportTimer = undefined;
    const n = this.droppedUnreported;
    this.droppedUnreported = 0;
    this.lastDropReport = Date.now();
    this.onError(new Error(`dropped ${n} event(s) (${this.dropWhy}); ${this.droppedCount} dropped in all`));
  }

  /** Starts the one flusher when it is not running. */
  private wake(): void {
    if (this.stopped) return;
    this.flusher ??= this.drain().finally(() => {
      this.flusher = undefined;
      // Events enqueued while the last batch was answered.
      if (this.queue.length) this.wake();
    });
  }

  /** The one flusher: sends batches until the queue is empty. */
  private async drain(): Promise<void> {
    while (this.queue.length && !this.stopped) {
      // At most maxBatch events and batchBytes of them (4 MiB, or ingest's smaller message bound); an event larger alone goes alone.
      let n = 0;
      let bytes = 0;
      while (n < this.queue.length && n < this.maxBatch && (n === 0 || bytes + this.queue[n].bytes <= this.batchBytes)) bytes += this.queue[n++].bytes;
      this.inflight = this.queue.splice(0, n);
      this.queueBytes -= bytes;
      try {
        await this.exportWithRetry(this.inflight);
      } catch (e) {
        // The flusher must not die with the batch in flight (flush() would wait for it for
        // ever): it is lost, counted and said (close() already counted it when stopped).
        if (this.inflight.length) this.drop(this.inflight.length, `their export failed unexpectedly: ${e instanceof Error ? e.message : String(e)}`);
      }
      this.inflight = [];
      this.settle();
    }
  }

  private call(events: v1.Event[]): Promise<v1.ExportResponse> {
    return new Promise((resolve, reject) => {
      const call = this.grpc.export(
        { events, note_runs: [] },
        this.metadata,
        { deadline: Date.now() + this.exportTimeoutMs },
        (err: ServiceError | null, res: v1.ExportResponse) => (err ? reject(err) : resolve(res)),
      );
      this.cancelInflight = () => call.cancel();
    });
  }

  /**
   * Sends `batch` (the inflight batch, or a part of it: `part`) until ingest takes it, refuses it
   * for good, or the client is closed. A batch of several events over ingest's message bound is
   * sent in halves, down to single events, and the bound is kept for the following batches.
   */
  private async exportWithRetry(batch: Queued[], part = false): Promise<void> {
    const events = batch.map((q) => q.ev);
    for (let attempt = 1; !this.stopped; attempt++) {
      try {
        const res = await this.call(events);
        this.failing = false;
        this.settled(batch);
        this.acknowledged(events, res);
        return;
      } catch (e) {
        const err = e as ServiceError;
        if (this.stopped) return; // close() dropped and reported the batch
        if (batch.length > 1 && tooLarge(err)) {
          await this.split(batch, err, part);
          return;
        }
        if (!retryable(err)) {
          // Refused for good (sent again it would be refused alike): lost, so counted, and said once.
          this.settled(batch);
          this.droppedCount += batch.length;
          this.onError(refused(batch, err, this.droppedCount));
          return;
        }
        // Said once per outage (a wrong address, ingest down), not at every retry.
        if (!this.failing) {
          this.failing = true;
          this.onError(new Error(`export of ${events.length} event(s) failed: ${err.message}; retrying until ingest takes it`));
        }
        // Full jitter, never sooner than the delay ingest asked for.
        const base = Math.min(this.retry.maxDelayMs, this.retry.initialDelayMs * 2 ** Math.min(30, attempt - 1));
        const delay = Math.max(Math.random() * base, retryInfoDelayMs(err) ?? 0);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, delay);
          t.unref();
          this.wakeBackoff = () => {
            clearTimeout(t);
            resolve();
          };
        });
        this.wakeBackoff = undefined;
      }
    }
  }

  /** Events of the inflight batch answered (taken or refused): close() no longer counts them as lost. */
  private settled(part: Queued[]): void {
    if (part.length === this.inflight.length) this.inflight = [];
    else {
      const done = new Set(part);
      this.inflight = this.inflight.filter((q) => !done.has(q));
    }
  }

  /**
   * A batch of several events ingest refused as over its message bound: the bound it named (else,
   * or when the batch was not over it, half the batch's size) is kept for the following batches, and the batch is sent in halves
   * (each halved again while refused so; a single event over the bound is dropped as before).
   * Said once per batch of the queue, not for every half.
   */
  private async split(batch: Queued[], err: ServiceError, part: boolean): Promise<void> {
    const bytes = batch.reduce((n, q) => n + q.bytes, 0);
    const m = MESSAGE_LIMIT.exec(err.details ?? '');
    // A bound the refused batch was not over (a hop counting other bytes, a text naming another
    // bound) would let the next batches be refused and split again, every one: half the size then.
    const named = m ? Number(m[1]) : Infinity;
    this.batchBytes = Math.max(1, Math.min(this.batchBytes, named < bytes ? named : Math.floor(bytes / 2)));
    if (!part) {
      this.onError(
        new Error(`export of ${batch.length} event(s) (${bytes} bytes) is over what ingest takes in one message (${err.message}): sent in halves; exports hold at most ${this.batchBytes} bytes from now on`, { cause: err }),
      );
    }
    const half = Math.ceil(batch.length / 2);
    await this.exportWithRetry(batch.slice(0, half), true);
    if (!this.stopped) await this.exportWithRetry(batch.slice(half), true);
  }

  /** An export was answered: what ingest refused is reported, each run learns how many of its spans were taken. */
  private acknowledged(events: v1.Event[], res: v1.ExportResponse): void {
    // Refused one by one, each for good: lost, so counted as dropped (once per event of the batch).
    const refused = new Set(res.rejected.map((r) => r.index).filter((i) => i >= 0 && i < events.length));
    this.droppedCount += refused.size;
    if (res.rejected.length) this.onError(new ExportRejectedError(res.rejected, this.droppedCount));
    const perRun = new Map<string, string[]>();
    events.forEach((ev, i) => {
      if (ev.kind?.$case !== 'span' || refused.has(i)) return;
      const { run_id, span_id } = ev.kind.value;
      let ids = perRun.get(run_id);
      if (!ids) perRun.set(run_id, (ids = []));
      ids.push(span_id);
    });
    for (const [runId, ids] of perRun) this.runs.get(runId)?.acknowledged(ids);
    for (const note of res.notes) this.dispatch(note);
  }

  /** @internal */
  dispatch(note: Note): void {
    if (note.run_id) this.runs.get(note.run_id)?.receive(note);
    else for (const run of this.runs.values()) run.receive(note);
  }
}

export class Run {
  private readonly controller = new AbortController();
  private readonly listeners = new Set<(note: Note) => void>();
  private readonly seen = new Set<string>();
  private stream: ReturnType<NeatrootsClient['openSubscribe']> | undefined;
  private subscribedResolve: (() => void) | undefined;
  private subscribedReject: ((err: Error) => void) | undefined;
  private readonly subscribedPromise: Promise<void>;
  private ended: Promise<void> | undefined;
  /** Subscribe streams opened in a row that did not stay open 10 s: the reconnect backoff. */
  private failedOpens = 0;
  /** No more notes stream (ended, or the client closed). */
  private stopped = false;
  private haltedBy: Note | undefined;
  private isHalted = false;
  /**
   * Ids of this run's spans ingest acknowledged (accepted, not in rejected[]): a pre-call check
   * waits until the engine saw as many. Spans refused or dropped never reach the run's window,
   * and the window counts a span id once: a span acknowledged twice (an export retried after an
   * answer that came too late, or one span id recorded twice) is counted once here too, or every
   * later check of the run would wait for a span that never comes. Dropped when the run ends.
   */
  private readonly acked = new Set<string>();

  /** @internal */
  constructor(
    private readonly client: NeatrootsClient,
    readonly id: string,
    private readonly workflow?: string,
    /** @internal */
    readonly precheckMode: PrecheckMode = 'auto',
  ) {
    this.subscribedPromise = new Promise((resolve, reject) => {
      this.subscribedResolve = resolve;
      this.subscribedReject = reject;
    });
    this.subscribedPromise.catch(() => undefined); // rejected for whenSubscribed's callers only
  }

  /** True once a halt reached the run. */
  get halted(): boolean {
    return this.isHalted;
  }

  /** The halt that stopped the run, if any. */
  get haltNote(): Note | undefined {
    return this.haltedBy;
  }

  /** Aborts (with a RunHaltedError) when the run is halted: pass it to model and tool calls. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /**
   * Resolves once the notes stream is open (at once with `subscribe: false`) and the pre-call
   * policy was asked (answered, failed, or past precheckPolicyTimeoutMs): halts reach the run
   * from then on, and a tool call no halting rule names starts at once. Rejects when the stream
   * will not open: ingest refused it for good (UNAUTHENTICATED, PERMISSION_DENIED,
   * INVALID_ARGUMENT: the error onError got), or the run ended or the client closed first.
   */
  whenSubscribed(): Promise<void> {
    return Promise.all([this.subscribedPromise, this.precheckMode === 'off' ? undefined : this.client.precheckPolicy(this.workflow)]).then(() => undefined);
  }

  /** Called for every note and halt of the run (each once, whichever way it came). Returns an unsubscribe. */
  onNote(cb: (note: Note) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /** Records a finished span; returns its span_id. */
  span(init: SpanInit): string;
  /** Times `fn` and records it as a span (output: its result; error: what it threw). */
  span<T>(init: SpanInit, fn: (signal: AbortSignal) => Promise<T> | T): Promise<T>;
  span<T>(init: SpanInit, fn?: (signal: AbortSignal) => Promise<T> | T): string | Promise<T> {
    if (!fn) return this.record(init);
    return this.timed(init, () => fn(this.signal));
  }

  /**
   * Runs a tool and records it as a `tool` span (input, output or error, timing). Throws
   * RunHaltedError without calling `fn` once the run is halted, or when its pre-call check
   * says the call would halt the run (then `fn` never runs; the call is recorded as refused).
   */
  toolCall<I, T>(
    name: string,
    input: I,
    fn: (input: I, signal: AbortSignal) => Promise<T> | T,
    opts: { type?: 'tool' | 'mcp_tool'; parent_id?: string } = {},
  ): Promise<T> {
    if (this.isHalted) return Promise.reject(new RunHaltedError(this.haltedBy));
    const init: SpanInit = { type: opts.type ?? 'tool', name, tool: name, input, parent_id: opts.parent_id, span_id: newSpanId() };
    // A call no halting rule names starts at once, as it did before pre-call checks.
    if (!this.mayNeedCheck(name)) return this.timed(init, () => fn(input, this.signal));
    return this.checkBefore(init).then(() => {
      // A halt may have come while the check was asked.
      if (this.isHalted) throw new RunHaltedError(this.haltedBy);
      return this.timed(init, () => fn(input, this.signal));
    });
  }

  /** False when it is known that this tool call is not checked. */
  private mayNeedCheck(tool: string): boolean {
    if (this.precheckMode === 'off') return false;
    const known = this.client.knownPolicy(this.workflow);
    if (known === undefined) return true; // not known yet: ask
    // None received (the asking failed): with 'on' every call is checked, with the fail mode of
    // the client's options; with 'auto' no rule is known to name the tool.
    if (known === null) return this.precheckMode === 'on';
    return this.precheckMode === 'on' || known.tools.includes('*') || known.tools.includes(tool);
  }

  /** The pre-call check of a tool call: returns to run it, throws not to. */
  private async checkBefore(init: SpanInit): Promise<void> {
    // The asking has its own short deadline (precheckPolicyTimeoutMs).
    let policy = await this.client.precheckPolicy(this.workflow);
    if (!policy) {
      // Never received: 'on' checks every call with the client's fail mode; 'auto' knows no rule.
      if (this.precheckMode !== 'on') return;
      policy = this.client.unknownPolicy;
    }
    const tool = init.tool!;
    if (this.precheckMode === 'auto' && !policy.tools.includes('*') && !policy.tools.includes(tool)) return;
    // One deadline, the policy's timeout, covers exporting what ran before and the asking.
    const deadline = Date.now() + policy.timeoutMs;
    const unanswered = (reason: string): void => {
      if (policy.failClosed) throw new PrecheckUnansweredError(tool, reason);
    };
    // What ran before must reach the engine first: a lookup still in the queue would be missed.
    if (!(await this.client.flushBy(deadline))) return unanswered(`the spans before it were not exported within ${policy.timeoutMs} ms`);
    const left = deadline - Date.now();
    if (left <= 0) return unanswered(`no time left of ${policy.timeoutMs} ms`);
    const now = Date.now();
    const span = spanToProto({ ...init, run_id: this.id, span_id: init.span_id!, start_ms: now, end_ms: now, ...(this.workflow ? { workflow: this.workflow } : {}) });
    let answer: v1.PreCheckResponse;
    try {
      answer = await this.client.precheck(span, this.acked.size, left);
    } catch (e) {
      return unanswered((e as ServiceError).details || (e as Error).message);
    }
    if (answer.decision !== 'halt') return;
    const note: Note = {
      id: `precheck-${answer.finding_id || init.span_id}`,
      project: '',
      run_id: this.id,
      check_id: answer.check_id,
      finding_id: answer.finding_id,
      kind: 'halt',
      title: answer.title,
      text: answer.text,
      at_ms: now,
    };
    // The refused call is recorded (never run), so the run's findings show the halt.
    this.record({ ...init, status: 'error', error: `not run: halted before it ran by ${answer.check_id}`, start_ms: now, end_ms: now });
    this.receive(note);
    throw new RunHaltedError(note);
  }

  /** Exports this run's spans queued so far (and everything else queued on the client). */
  flush(): Promise<void> {
    return this.client.flush();
  }

  /**
   * Sends run_end, closes the run's notes stream, and waits for the run's events to be exported
   * at most `timeoutMs` (default closeTimeoutMs, 10 s): while ingest is down what is not sent by
   * then stays queued and is retried by the client. Idempotent.
   */
  end(opts: EndRunOptions = {}): Promise<void> {
    this.ended ??= (async () => {
      const status = opts.status ?? (this.isHalted ? 'interrupted' : 'ok');
      const runEnd = runEndToProto({ run_id: this.id, status, final_output: opts.final_output, ts_ms: Date.now() });
      this.client.enqueue({ kind: { $case: 'run_end', value: runEnd } });
      this.unsubscribe();
      await this.client.flushBy(Date.now() + (opts.timeoutMs ?? this.client.closeTimeoutMs));
      this.client.forget(this.id);
      this.acked.clear();
    })();
    return this.ended;
  }

  private async timed<T>(init: SpanInit, fn: () => Promise<T> | T): Promise<T> {
    const start_ms = Date.now();
    try {
      const out = await fn();
      this.record({ ...init, output: out, start_ms, end_ms: Date.now() });
      return out;
    } catch (e) {
      const error = e instanceof Error ? e.message : String(e);
      this.record({ ...init, error, status: 'error', start_ms, end_ms: Date.now() });
      throw e;
    }
  }

  private record(init: SpanInit): string {
    const span_id = init.span_id ?? newSpanId();
    const now = Date.now();
    // The one neatroots.v1 mapping (@neatroots/spans); ingest fills in what is left out (name, status).
    const msg = spanToProto({ ...init, run_id: this.id, span_id, start_ms: init.start_ms ?? now, end_ms: init.end_ms ?? init.start_ms ?? now });
    this.client.enqueue({ kind: { $case: 'span', value: msg } });
    return span_id;
  }

  /** @internal Ingest acknowledged these spans of this run. */
  acknowledged(spanIds: readonly string[]): void {
    for (const id of spanIds) this.acked.add(id);
  }

  /** @internal No Subscribe stream for this run (subscribe: false): whenSubscribed does not wait for one. */
  subscribeSkipped(): void {
    this.subscribedResolve?.();
  }

  /** @internal */
  receive(note: Note): void {
    // Each once, whichever way it came: by note id (the stream, exports, several replicas), and
    // a halt by its finding (a refused call's halt, then the live engine's halt of that finding).
    const finding = note.kind === 'halt' && note.finding_id ? `halt\u0000${note.finding_id}` : undefined;
    if (this.seen.has(note.id) || (finding && this.seen.has(finding))) return;
    this.seen.add(note.id);
    if (finding) this.seen.add(finding);
    if (note.kind === 'halt' && !this.isHalted) {
      this.isHalted = true;
      this.haltedBy = note;
      this.controller.abort(new RunHaltedError(note));
    }
    const report = (e: unknown) => this.client.onError(e instanceof Error ? e : new Error(String(e)));
    for (const cb of this.listeners) {
      try {
        // An async callback's rejection is reported as a throw is, not left unhandled.
        whenSettled(cb(note) as unknown, report);
      } catch (e) {
        report(e);
      }
    }
  }

  /**
   * @internal Opens the run's notes stream, and opens it again after any end this client did
   * not cause, until the run ends or the client closes, or ingest refuses it for good
   * (UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT: reported once). A stream counts as open once non-empty
   * headers or its first note came; the delay before reopening (250 ms doubling to 30 s, with
   * jitter) starts over only after a stream stayed open 10 s.
   */
  subscribe(): void {
    if (this.stopped || this.stream) return;
    const stream = this.client.openSubscribe(this.id);
    this.stream = stream;
    let openedAt = 0;
    const opened = () => {
      if (openedAt) return;
      openedAt = Date.now();
      this.subscribedResolve?.();
    };
    stream.on('metadata', (md: Metadata) => {
      if (Object.keys(md.toJSON()).length) opened();
    });
    stream.on('data', (note: Note) => {
      opened();
      this.receive(note);
    });
    const reconnect = (err?: ServiceError) => {
      if (this.stream !== stream) return; // already handled, or unsubscribed
      this.stream = undefined;
      if (this.stopped) return;
      if (err?.code === Status.UNAUTHENTICATED || err?.code === Status.PERMISSION_DENIED || err?.code === Status.INVALID_ARGUMENT) {
        // For good (a wrong or revoked key): it would be refused the same way, so not reopened.
        const final = new Error(`notes for run ${this.id} unavailable: ${err.message}`);
        this.stopped = true;
        this.subscribedReject?.(final);
        this.client.onError(final);
        return;
      }
      if (openedAt && Date.now() - openedAt >= 10_000) this.failedOpens = 0;
      const base = Math.min(30_000, 250 * 2 ** Math.min(this.failedOpens, 30));
      this.failedOpens++;
      setTimeout(() => this.subscribe(), base / 2 + (Math.random() * base) / 2).unref();
    };
    stream.on('error', (err: ServiceError) => reconnect(err));
    stream.on('end', () => reconnect());
  }

  /** @internal */
  unsubscribe(): void {
    this.stopped = true;
    // A whenSubscribed() still waiting would wait for ever (settled already when it opened).
    this.subscribedReject?.(new Error(`notes for run ${this.id} unavailable: the run ended or the client closed before its notes stream opened`));
    const stream = this.stream;
    this.stream = undefined;
    if (stream) {
      stream.on('error', () => undefined); // the CANCELLED that cancel() causes
      stream.cancel();
    }
  }
}
