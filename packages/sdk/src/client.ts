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
}

export interface RetryOptions {
  /** Attempts per export, the first included. Default 6. */
  maxAttempts?: number;
  /** First delay; doubled each attempt, with jitter. Default 200 ms. */
  initialDelayMs?: number;
  maxDelayMs?: number;
}

export interface NeatrootsClientOptions {
  /** host:port of ingest's neatroots.v1 API, e.g. `localhost:50051`. */
  address: string;
  apiKey: string;
  /** Default: plaintext (use grpc.credentials.createSsl() behind TLS). */
  credentials?: ChannelCredentials;
  channelOptions?: Partial<ClientOptions>;
  /** Events per export; reaching it flushes at once. Default 100. */
  maxBatch?: number;
  /** Queued events are exported at least this often. Default 1000 ms. */
  flushIntervalMs?: number;
  /** Deadline of one export call. Default 10 s. */
  exportTimeoutMs?: number;
  retry?: RetryOptions;
  /** Open a Subscribe stream per run for notes and halts. Default true. */
  subscribe?: boolean;
  /** Exports that failed for good, items ingest rejected, broken subscriptions. Default: console.warn. */
  onError?: (err: Error) => void;
  /**
   * How long the project's pre-call policy (which tools a halting rule names, fail-open or
   * closed) is used before it is asked again. Default 30 s: a rule switched to halt reaches
   * running agents within it. A policy gone stale is still used while it is asked again.
   */
  precheckPolicyTtlMs?: number;
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

/** Items ingest refused (the rest of the batch was accepted). */
export class ExportRejectedError extends Error {
  constructor(readonly rejected: v1.Rejected[]) {
    super(`neatroots rejected ${rejected.length} item(s): ${rejected.map((r) => `${r.field}: ${r.reason}`).join('; ')}`);
    this.name = 'ExportRejectedError';
  }
}

/** Retried: nothing of the batch was acknowledged. */
const RETRYABLE = new Set<number>([Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED, Status.ABORTED]);

/**
 * RESOURCE_EXHAUSTED is retried when it says when to try again (google.rpc.RetryInfo in
 * grpc-status-details-bin: ingest's back-pressure), not otherwise: a message over the size
 * bound (ingest's or this client's own) would be refused again every time.
 */
function retryable(err: ServiceError): boolean {
  if (RETRYABLE.has(err.code)) return true;
  return err.code === Status.RESOURCE_EXHAUSTED && (err.metadata?.get('grpc-status-details-bin').length ?? 0) > 0;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function newSpanId(): string {
  return randomBytes(8).toString('hex');
}

export class NeatrootsClient {
  private readonly grpc: v1.IngestClient;
  private readonly metadata: Metadata;
  private readonly maxBatch: number;
  private readonly exportTimeoutMs: number;
  private readonly retry: Required<RetryOptions>;
  private readonly timer: NodeJS.Timeout;
  private queue: v1.Event[] = [];
  private chain: Promise<void> = Promise.resolve();
  private readonly runs = new Map<string, Run>();
  private readonly policies = new Map<string, PolicyEntry>();
  private readonly policyTtlMs: number;
  private closed = false;
  /** @internal */
  readonly subscribeEnabled: boolean;
  /** @internal */
  readonly onError: (err: Error) => void;

  constructor(opts: NeatrootsClientOptions) {
    this.grpc = new v1.IngestClient(opts.address, opts.credentials ?? grpcCredentials.createInsecure(), opts.channelOptions);
    this.metadata = new Metadata();
    this.metadata.set('x-api-key', opts.apiKey);
    this.maxBatch = opts.maxBatch ?? 100;
    this.exportTimeoutMs = opts.exportTimeoutMs ?? 10_000;
    this.policyTtlMs = opts.precheckPolicyTtlMs ?? 30_000;
    this.retry = { maxAttempts: 6, initialDelayMs: 200, maxDelayMs: 5000, ...opts.retry };
    this.subscribeEnabled = opts.subscribe ?? true;
    this.onError = opts.onError ?? ((err) => console.warn(`[neatroots] ${err.message}`));
    this.timer = setInterval(() => {
      if (this.queue.length) void this.flush();
    }, opts.flushIntervalMs ?? 1000);
    this.timer.unref();
  }

  startRun(opts: StartRunOptions = {}): Run {
    if (this.closed) throw new Error('NeatrootsClient is closed');
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
    // Asked now, so the run's first tool call seldom waits for it.
    if (run.precheckMode !== 'off') void this.precheckPolicy(opts.workflow);
    return run;
  }

  /** Exports everything queued so far; resolves when it is acknowledged (or given up on). */
  flush(): Promise<void> {
    this.chain = this.chain.then(() => this.drain());
    return this.chain;
  }

  /** Flushes, ends every Subscribe stream and closes the channel. Runs not ended stay without run_end. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    await this.flush();
    for (const run of this.runs.values()) run.unsubscribe();
    this.runs.clear();
    this.grpc.close();
  }

  /** @internal */
  enqueue(ev: v1.Event): void {
    this.queue.push(ev);
    if (this.queue.length >= this.maxBatch) void this.flush();
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
    if (!entry.asking && Date.now() - entry.at >= this.policyTtlMs) this.askPolicy(entry, key);
    return entry.known ? Promise.resolve(entry.known) : entry.policy;
  }

  /** Asks the server for a workflow's policy; a failure (an older server, none reachable) keeps the last one known. */
  private askPolicy(entry: PolicyEntry, workflow: string): void {
    entry.asking = true;
    entry.policy = new Promise<PrecheckPolicy | undefined>((resolve) =>
      this.grpc.preCheckPolicy({ workflow }, this.metadata, { deadline: Date.now() + this.exportTimeoutMs }, (err, res) => {
        entry.asking = false;
        entry.at = Date.now();
        if (!err && res) entry.known = { tools: res.tools, failClosed: res.fail_closed, timeoutMs: res.timeout_ms || 50 };
        else entry.known ??= null;
        resolve(entry.known ?? undefined);
      }),
    );
  }

  /** @internal The policy when it is already known (null: known to be none), else undefined. */
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
    return entry.asking || Date.now() - entry.at >= this.policyTtlMs ? undefined : entry.known;
  }

  /** @internal One pre-call check: the answer, or the gRPC error (a timeout, an unavailable engine). */
  precheck(span: v1.Span, knownSpans: number, timeoutMs: number): Promise<v1.PreCheckResponse> {
    return new Promise((resolve, reject) => {
      this.grpc.preCheck({ span, known_spans: knownSpans, timeout_ms: timeoutMs }, this.metadata, { deadline: Date.now() + timeoutMs }, (err, res) =>
        err ? reject(err) : resolve(res),
      );
    });
  }

  /** @internal */
  openSubscribe(runId: string) {
    return this.grpc.subscribe({ run_id: runId }, this.metadata);
  }

  private async drain(): Promise<void> {
    while (this.queue.length) {
      const batch = this.queue.splice(0, this.maxBatch);
      await this.exportWithRetry(batch);
    }
  }

  private call(events: v1.Event[]): Promise<v1.ExportResponse> {
    return new Promise((resolve, reject) => {
      this.grpc.export(
        { events, note_runs: [] },
        this.metadata,
        { deadline: Date.now() + this.exportTimeoutMs },
        (err: ServiceError | null, res: v1.ExportResponse) => (err ? reject(err) : resolve(res)),
      );
    });
  }

  private async exportWithRetry(events: v1.Event[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        const res = await this.call(events);
        if (res.rejected.length) this.onError(new ExportRejectedError(res.rejected));
        for (const note of res.notes) this.dispatch(note);
        return;
      } catch (e) {
        const err = e as ServiceError;
        if (!retryable(err) || attempt >= this.retry.maxAttempts) {
          this.onError(new Error(`export of ${events.length} event(s) failed: ${err.message}`));
          return;
        }
        const base = Math.min(this.retry.maxDelayMs, this.retry.initialDelayMs * 2 ** (attempt - 1));
        await sleep(base / 2 + (Math.random() * base) / 2);
      }
    }
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
  private readonly subscribedPromise: Promise<void>;
  private ended: Promise<void> | undefined;
  private retryDelay = 0;
  /** No more notes stream (ended, or the client closed). */
  private stopped = false;
  private haltedBy: Note | undefined;
  private isHalted = false;
  /** Spans recorded so far: a pre-call check waits until the engine saw them. */
  private recorded = 0;

  /** @internal */
  constructor(
    private readonly client: NeatrootsClient,
    readonly id: string,
    private readonly workflow?: string,
    /** @internal */
    readonly precheckMode: PrecheckMode = 'auto',
  ) {
    this.subscribedPromise = new Promise((r) => (this.subscribedResolve = r));
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
   * Resolves once the notes stream is open and the pre-call policy is known: halts reach the
   * run from then on, and a tool call no halting rule names starts at once.
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
    if (known === null) return false;
    return this.precheckMode === 'on' || known.tools.includes('*') || known.tools.includes(tool);
  }

  /** The pre-call check of a tool call: returns to run it, throws not to. */
  private async checkBefore(init: SpanInit): Promise<void> {
    const policy = await this.client.precheckPolicy(this.workflow);
    if (!policy) return;
    const tool = init.tool!;
    if (this.precheckMode === 'auto' && !policy.tools.includes('*') && !policy.tools.includes(tool)) return;
    // What ran before must reach the engine first: a lookup still in the queue would be missed.
    await this.client.flush();
    const now = Date.now();
    const span = spanToProto({ ...init, run_id: this.id, span_id: init.span_id!, start_ms: now, end_ms: now, ...(this.workflow ? { workflow: this.workflow } : {}) });
    let answer: v1.PreCheckResponse;
    try {
      answer = await this.client.precheck(span, this.recorded, policy.timeoutMs);
    } catch (e) {
      const reason = (e as ServiceError).details || (e as Error).message;
      if (policy.failClosed) throw new PrecheckUnansweredError(tool, reason);
      return;
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

  /** Sends run_end, flushes, and closes the run's notes stream. Idempotent. */
  end(opts: EndRunOptions = {}): Promise<void> {
    this.ended ??= (async () => {
      const status = opts.status ?? (this.isHalted ? 'interrupted' : 'ok');
      const runEnd = runEndToProto({ run_id: this.id, status, final_output: opts.final_output, ts_ms: Date.now() });
      this.client.enqueue({ kind: { $case: 'run_end', value: runEnd } });
      await this.client.flush();
      this.unsubscribe();
      this.client.forget(this.id);
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
    this.recorded++;
    return span_id;
  }

  /** @internal */
  receive(note: Note): void {
    if (this.seen.has(note.id)) return;
    this.seen.add(note.id);
    if (note.kind === 'halt' && !this.isHalted) {
      this.isHalted = true;
      this.haltedBy = note;
      this.controller.abort(new RunHaltedError(note));
    }
    for (const cb of this.listeners) {
      try {
        cb(note);
      } catch (e) {
        this.client.onError(e instanceof Error ? e : new Error(String(e)));
      }
    }
  }

  /** @internal */
  subscribe(): void {
    if (this.stopped || this.stream) return;
    const stream = this.client.openSubscribe(this.id);
    this.stream = stream;
    stream.on('metadata', () => {
      this.retryDelay = 0;
      this.subscribedResolve?.();
    });
    stream.on('data', (note: Note) => this.receive(note));
    const reconnect = (err?: ServiceError) => {
      if (this.stream !== stream) return; // already handled, or unsubscribed
      this.stream = undefined;
      if (this.stopped) return;
      if (err?.code === Status.UNAUTHENTICATED || err?.code === Status.PERMISSION_DENIED || err?.code === Status.INVALID_ARGUMENT) {
        this.client.onError(new Error(`notes for run ${this.id} unavailable: ${err.message}`));
        return;
      }
      this.retryDelay = Math.min(10_000, this.retryDelay ? this.retryDelay * 2 : 250);
      setTimeout(() => this.subscribe(), this.retryDelay).unref();
    };
    stream.on('error', (err: ServiceError) => reconnect(err));
    stream.on('end', () => reconnect());
  }

  /** @internal */
  unsubscribe(): void {
    this.stopped = true;
    const stream = this.stream;
    this.stream = undefined;
    if (stream) {
      stream.on('error', () => undefined); // the CANCELLED that cancel() causes
      stream.cancel();
    }
  }
}
