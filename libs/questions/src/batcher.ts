import { ModelError, type ChatModel, type ChatRequest, type ChatResponse, type ModelErrorKind } from '@neatroots/ports';
import { MalformedAnswerError } from './judge';
import { decisionChars, decisionMessages, type DecisionItem } from './decisions';
import { batchMessages, parseBatchReply, secondLookMessages, type BatchItem, type LookItem } from './prompt';

/**
 * One model endpoint's queue: the question service's batching. Concurrent questions are
 * coalesced into one chat request by size (questions, characters) and by time (a question
 * waits a few milliseconds for others when a request slot is free); identical questions in
 * flight share one answer; requests in flight are bounded; failures that a retry can fix are
 * retried with exponential backoff and jitter; and a full queue refuses new work (or makes
 * the caller wait) instead of growing without bound. Note-writing and other "note" priority
 * work is taken before anything normal that is waiting.
 */
export interface ModelQueueOptions {
  /** Questions per request. 1 turns batching off. */
  maxBatch?: number;
  /** Prompt characters per request (evidence shared by several questions counts once). */
  maxBatchChars?: number;
  /** How long a question waits for others to share its request while a slot is free. */
  maxWaitMs?: number;
  /** Requests in flight to this endpoint. */
  maxConcurrent?: number;
  /** Questions and chats waiting; beyond it, QueueFullError (RESOURCE_EXHAUSTED over gRPC). */
  maxQueue?: number;
  /** Retries of a rate-limited, failed (5xx) or dropped request. */
  retries?: number;
  backoffMs?: number;
  maxBackoffMs?: number;
  /**
   * The longest wait a server's Retry-After (or retry-after-ms) is honoured for before a retry
   * (default 30 s). A server that asks for longer is not retried: the call fails at once as
   * rate limited, saying how long it asked for.
   */
  maxRetryAfterMs?: number;
  /** Per request; the adapter's own timeout applies when absent. */
  timeoutMs?: number;
  /** Share one request between identical questions in flight (default on). */
  dedup?: boolean;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  /**
   * Each HTTP request's outcome (retries each count), with the model's role (`decision`,
   * `local`, `reasoning`) and, when it failed, the error: the question service's metrics and
   * its warnings about a failing model.
   */
  onRequest?: (endpoint: string, outcome: ModelOutcome, err?: unknown) => void;
}

/**
 * How one request to a model went: `ok`; a ModelError's kind (`timeout`, `rate_limited`,
 * `server`, `connection`, `rejected`, `aborted`: its caller gave up); `malformed`, answered but
 * the reply left some of its questions without a readable answer. A bounded set (a metric label).
 */
export type ModelOutcome = 'ok' | 'malformed' | ModelErrorKind;

/** The outcome of a request that failed with `err` (an error that is not a ModelError counts as the server's, as the adapter reads one). */
export function failedOutcome(err: unknown): ModelOutcome {
  return err instanceof ModelError ? err.kind : 'server';
}

/**
 * `note` is taken before anything else waiting; `background` (the audits of the fast
 * classifier's answers) after everything else, and it gives its place in a full queue up to
 * other work (QueueFullError).
 */
export type Priority = 'normal' | 'note' | 'background';

export interface EnqueueOptions {
  priority?: Priority;
  /** Wait for room instead of failing when the queue is full (the bus consumer's back-pressure). */
  wait?: boolean;
}

export class QueueFullError extends Error {
  constructor(readonly endpoint: string, readonly limit: number) {
    super(`the ${endpoint} model queue is full (${limit} waiting); retry later`);
    this.name = 'QueueFullError';
  }
}

/**
 * The queue was closed (a stop whose drain time is over): what was waiting, and the requests in
 * flight (aborted), fail with it. Not an answer: a bus batch that meets it fails, is not
 * committed, and is delivered again at the next start.
 */
export class ModelQueueClosedError extends Error {
  constructor(readonly endpoint: string) {
    super(`the ${endpoint} model queue is closed (the process is stopping)`);
    this.name = 'ModelQueueClosedError';
  }
}

export interface QueueStats {
  /** HTTP requests made (retries included). */
  requests: number;
  /** Requests that carried questions, and the questions they carried. */
  batches: number;
  questions: number;
  chats: number;
  /** Questions answered by another identical one in flight. */
  deduped: number;
  retries: number;
  /** Refused with QueueFullError. */
  rejected: number;
  failures: number;
  queued: number;
  active: number;
}

interface QuestionJob {
  kind: 'question';
  /** What is asked: a question, a second look at a finding, or a caller's decision. */
  sort: 'judge' | 'look' | 'decide';
  /** A batch holds one group: the sort, and for decisions their instructions too. */
  group: string;
  key: string;
  item: BatchItem | LookItem | DecisionItem;
  chars: number;
  /** Text the request writes once however many of its questions share it (a decision's subject). */
  shared?: string;
  priority: Priority;
  at: number;
  /** Asked again alone after a batch reply left it out: never more than once. */
  alone: boolean;
  resolve(answer: unknown): void;
  reject(err: unknown): void;
}

interface ChatJob {
  kind: 'chat';
  req: ChatRequest;
  priority: Priority;
  at: number;
  resolve(res: ChatResponse): void;
  reject(err: unknown): void;
}

type Job = QuestionJob | ChatJob;

/** The longest Retry-After the queue waits for before a retry (ModelQueueOptions.maxRetryAfterMs). */
export const DEFAULT_MAX_RETRY_AFTER_MS = 30_000;

/** The answer budget of one question or decision whose caller set none (DecisionItem.max_tokens). */
export const DEFAULT_ANSWER_TOKENS = 250;

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

export class ModelQueue {
  private readonly high: Job[] = [];
  private readonly normal: Job[] = [];
  private readonly low: Job[] = [];
  /** Aborts the requests in flight when the queue closes. */
  private readonly stop = new AbortController();
  private readonly inflight = new Map<string, Promise<unknown>>();
  private readonly spaceWaiters: (() => void)[] = [];
  private active = 0;
  /**
   * Places taken by asks admitted and not queued yet (the job is queued a turn later): counted
   * as queued, or asks made at the same moment all found room and the queue went past maxQueue.
   */
  private reserved = 0;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = 0;
  private closed = false;
  private readonly o: Required<Omit<ModelQueueOptions, 'timeoutMs' | 'onRequest'>> & Pick<ModelQueueOptions, 'timeoutMs' | 'onRequest'>;
  readonly stats: QueueStats = { requests: 0, batches: 0, questions: 0, chats: 0, deduped: 0, retries: 0, rejected: 0, failures: 0, queued: 0, active: 0 };

  constructor(
    readonly model: ChatModel,
    opts: ModelQueueOptions = {},
  ) {
    this.o = {
      maxBatch: Math.max(1, opts.maxBatch ?? 8),
      maxBatchChars: opts.maxBatchChars ?? 48_000,
      maxWaitMs: opts.maxWaitMs ?? 10,
      maxConcurrent: Math.max(1, opts.maxConcurrent ?? 4),
      maxQueue: Math.max(1, opts.maxQueue ?? 1000),
      retries: opts.retries ?? 2,
      backoffMs: opts.backoffMs ?? 200,
      maxBackoffMs: opts.maxBackoffMs ?? 5_000,
      maxRetryAfterMs: opts.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS,
      dedup: opts.dedup ?? true,
      sleep: opts.sleep ?? defaultSleep,
      random: opts.random ?? Math.random,
      timeoutMs: opts.timeoutMs,
      onRequest: opts.onRequest,
    };
  }

  get queued(): number {
    return this.high.length + this.normal.length + this.low.length;
  }

  /** How many may wait (ModelQueueOptions.maxQueue). */
  get maxQueue(): number {
    return this.o.maxQueue;
  }

  /** The answer object for one question (its part of the batch reply), as the model wrote it. */
  ask(key: string, item: BatchItem, opts: EnqueueOptions = {}): Promise<unknown> {
    return this.enqueueItem('judge', key, item, item.evidence.length + item.q.ask.length + 200, opts);
  }

  /** The reply object for one second look (its part of the batch reply). */
  look(key: string, item: LookItem, opts: EnqueueOptions = {}): Promise<unknown> {
    return this.enqueueItem('look', key, item, item.evidence.length + item.context.length + item.q.ask.length + 300, opts);
  }

  /** The answer object for one decision written by the caller (sopops' checker). */
  decide(key: string, item: DecisionItem, opts: EnqueueOptions = {}): Promise<unknown> {
    return this.enqueueItem('decide', key, item, decisionChars(item), opts, item.subject);
  }

  private async enqueueItem(sort: QuestionJob['sort'], key: string, item: QuestionJob['item'], chars: number, opts: EnqueueOptions, shared?: string): Promise<unknown> {
    if (this.o.dedup) {
      const same = this.inflight.get(key);
      if (same) {
        this.stats.deduped++;
        return same;
      }
    }
    // Registered before the first await, so an identical question asked meanwhile joins this one.
    const p = this.admit(opts.wait, opts.priority).then(
      () =>
        new Promise<unknown>((resolve, reject) => {
          const group = sort === 'decide' ? `decide\u0000${(item as DecisionItem).instructions}` : sort;
          this.enqueue({ kind: 'question', sort, group, key, item, chars, shared, priority: opts.priority ?? 'normal', at: Date.now(), alone: false, resolve, reject });
        }),
    );
    if (this.o.dedup) {
      this.inflight.set(key, p);
      const clear = () => {
        if (this.inflight.get(key) === p) this.inflight.delete(key);
      };
      p.then(clear, clear);
    }
    return p;
  }

  async chat(req: ChatRequest, opts: EnqueueOptions = {}): Promise<ChatResponse> {
    await this.admit(opts.wait, opts.priority);
    return new Promise<ChatResponse>((resolve, reject) => {
      this.enqueue({ kind: 'chat', req, priority: opts.priority ?? 'normal', at: Date.now(), resolve, reject });
    });
  }

  private async admit(wait: boolean | undefined, priority: Priority = 'normal'): Promise<void> {
    if (this.closed) throw new ModelQueueClosedError(this.model.role);
    while (this.queued + this.reserved >= this.o.maxQueue) {
      // Background work gives its place up: the newest of it waiting is dropped.
      const dropped = priority !== 'background' ? this.low.pop() : undefined;
      if (dropped) {
        this.stats.rejected++;
        dropped.reject(new QueueFullError(this.model.role, this.o.maxQueue));
        this.stats.queued = this.queued;
        break;
      }
      if (!wait || priority === 'background') {
        this.stats.rejected++;
        throw new QueueFullError(this.model.role, this.o.maxQueue);
      }
      await new Promise<void>((r) => this.spaceWaiters.push(r));
      if (this.closed) throw new ModelQueueClosedError(this.model.role);
    }
    this.reserved++;
  }

  private lane(priority: Priority): Job[] {
    return priority === 'note' ? this.high : priority === 'background' ? this.low : this.normal;
  }

  /** Queues a job admit() made room for (its place becomes the job's). */
  private enqueue(job: Job): void {
    if (this.reserved > 0) this.reserved--;
    this.lane(job.priority).push(job);
    this.stats.queued = this.queued;
    this.pump();
  }

  private freed(): void {
    this.stats.queued = this.queued;
    while (this.spaceWaiters.length && this.queued + this.reserved < this.o.maxQueue) this.spaceWaiters.shift()!();
  }

  private pump(): void {
    while (this.active < this.o.maxConcurrent && !this.closed) {
      const queue = this.high.length ? this.high : this.normal.length ? this.normal : this.low;
      const first = queue[0];
      if (!first) return;
      if (first.kind === 'chat') {
        queue.shift();
        this.freed();
        void this.runChat(first);
        continue;
      }
      // Wait a little for more questions to share the request, unless a full batch is there
      // already or the work is urgent.
      if (first.priority !== 'note' && this.o.maxWaitMs > 0 && !first.alone) {
        const due = first.at + this.o.maxWaitMs;
        if (Date.now() < due && this.countQuestions(first.group) < this.o.maxBatch) {
          this.wakeAt(due);
          return;
        }
      }
      const batch = this.takeBatch(first.group);
      this.freed();
      void this.runBatch(batch);
    }
  }

  private countQuestions(group: string): number {
    let n = 0;
    for (const q of [this.high, this.normal, this.low]) for (const j of q) if (j.kind === 'question' && j.group === group && !j.alone) n++;
    return n;
  }

  private wakeAt(at: number): void {
    if (this.timer && this.timerAt <= at) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.pump();
    }, Math.max(0, at - Date.now()));
    this.timer.unref();
  }

  /** The next questions of one group, urgent first, within the size limits. A question asked alone goes alone. */
  private takeBatch(group: string): QuestionJob[] {
    const out: QuestionJob[] = [];
    const written = new Set<string>();
    let chars = 0;
    // A shared text counts once per request: the prompt writes it once.
    const cost = (j: QuestionJob) => (j.shared !== undefined && written.has(j.shared) ? j.chars - j.shared.length : j.chars);
    for (const queue of [this.high, this.normal, this.low]) {
      for (let i = 0; i < queue.length && out.length < this.o.maxBatch; ) {
        const j = queue[i];
        if (j.kind !== 'question' || j.group !== group) {
          i++;
          continue;
        }
        if (j.alone) {
          if (out.length === 0) {
            queue.splice(i, 1);
            return [j];
          }
          i++;
          continue;
        }
        const c = cost(j);
        if (out.length > 0 && chars + c > this.o.maxBatchChars) return out;
        queue.splice(i, 1);
        out.push(j);
        chars += c;
        if (j.shared !== undefined) written.add(j.shared);
      }
    }
    return out;
  }

  private async send(req: ChatRequest): Promise<ChatResponse> {
    for (let attempt = 0; ; attempt++) {
      this.stats.requests++;
      try {
        if (this.closed) throw new ModelQueueClosedError(this.model.role);
        const signal = req.signal ? AbortSignal.any([req.signal, this.stop.signal]) : this.stop.signal;
        return await this.model.complete({ ...req, signal, ...(this.o.timeoutMs !== undefined && req.timeoutMs === undefined ? { timeoutMs: this.o.timeoutMs } : {}) });
      } catch (err) {
        if (this.closed) throw new ModelQueueClosedError(this.model.role);
        this.outcome(failedOutcome(err), err);
        if (!(err instanceof ModelError) || !err.retryable || attempt >= this.o.retries || this.closed) throw err;
        const asked = err.retryAfterMs;
        // A server that asks for a longer wait than the queue allows is not retried early (it
        // would only be refused again): the call fails now, saying what the server asked.
        if (asked !== undefined && asked > this.o.maxRetryAfterMs) {
          throw new ModelError(err.kind, `${err.message} (the server asked to retry after ${Math.ceil(asked / 1000)} s, longer than the ${Math.ceil(this.o.maxRetryAfterMs / 1000)} s the queue waits)`, err.status, { cause: err, retryAfterMs: asked });
        }
        this.stats.retries++;
        const base = Math.min(this.o.maxBackoffMs, this.o.backoffMs * 2 ** attempt);
        // Full jitter keeps a fleet of replicas from retrying in step against a rate limit; the
        // server's Retry-After, when it sent one, is the least wait.
        await this.o.sleep(Math.max(asked ?? 0, base / 2 + this.o.random() * (base / 2)));
      }
    }
  }

  private async runBatch(jobs: QuestionJob[]): Promise<void> {
    this.active++;
    this.stats.active = this.active;
    this.stats.batches++;
    this.stats.questions += jobs.length;
    try {
      const maxTokens = answerBudget(jobs);
      const res = await this.send({ messages: messagesOf(jobs), json: true, maxTokens });
      let answers: Map<number, unknown>;
      let problem: string | undefined;
      try {
        answers = parseBatchReply(res.text, jobs.length);
      } catch (e) {
        answers = new Map();
        problem = (e as Error).message;
      }
      // Why a reply has no usable answer, when the server said: cut at the budget, or refused.
      const why = replyProblem(res, maxTokens);
      if (why) problem = problem ? `${why}; ${problem}` : why;
      const missing = jobs.filter((_, i) => answers.get(i) === undefined).length;
      this.outcome(missing ? 'malformed' : 'ok', missing ? new MalformedAnswerError(problem ?? `the reply has no answer for ${missing} of its ${jobs.length} questions`) : undefined);
      // Asked alone again only when the reply answered some of the batch: the model can answer
      // this way and lost track of the rest. A reply with no answer in it (not JSON, refused,
      // cut before its first answer) would most likely be the reply to each question alone too.
      const split = jobs.length > 1 && answers.size > 0;
      jobs.forEach((j, i) => {
        const a = answers.get(i);
        if (a !== undefined) j.resolve(a);
        else if (split && !j.alone) {
          // A model that loses track of one question in a long batch usually answers it alone.
          j.alone = true;
          this.lane(j.priority).unshift(j);
        } else j.reject(new MalformedAnswerError(problem ?? 'the reply has no answer for this question'));
      });
    } catch (err) {
      this.stats.failures++;
      for (const j of jobs) j.reject(err);
    } finally {
      this.active--;
      this.stats.active = this.active;
      this.stats.queued = this.queued;
      this.pump();
    }
  }

  private async runChat(job: ChatJob): Promise<void> {
    this.active++;
    this.stats.active = this.active;
    this.stats.chats++;
    try {
      const res = await this.send(job.req);
      this.outcome('ok');
      job.resolve(res);
    } catch (err) {
      this.stats.failures++;
      job.reject(err);
    } finally {
      this.active--;
      this.stats.active = this.active;
      this.pump();
    }
  }

  private outcome(outcome: ModelOutcome, err?: unknown): void {
    try {
      this.o.onRequest?.(this.model.role, outcome, err);
    } catch {
      // What a listener does is its own business: never a request's.
    }
  }

  /**
   * Fails what is waiting and aborts the requests in flight (ModelQueueClosedError): a stop does
   * not wait for a slow model's answers.
   */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.stop.abort();
    const err = new ModelQueueClosedError(this.model.role);
    for (const j of [...this.high.splice(0), ...this.normal.splice(0), ...this.low.splice(0)]) j.reject(err);
    for (const w of this.spaceWaiters.splice(0)) w();
    this.stats.queued = 0;
  }
}

/**
 * The request's max_tokens: 200 for the reply's frame, and each question's answer budget (a
 * decision's own max_tokens when its caller set one: an answer that lists many ids needs more
 * than DEFAULT_ANSWER_TOKENS).
 */
function answerBudget(jobs: readonly Pick<QuestionJob, 'sort' | 'item'>[]): number {
  let n = 200;
  for (const j of jobs) n += (j.sort === 'decide' ? (j.item as DecisionItem).max_tokens : undefined) ?? DEFAULT_ANSWER_TOKENS;
  return n;
}

/** What the server said about a reply that may not be usable: cut at max_tokens, or a refusal. */
function replyProblem(res: ChatResponse, maxTokens: number): string | undefined {
  if (res.refusal) return `the model refused: ${res.refusal.slice(0, 200)}`;
  // The server's count when it gave one: a reasoning model's limit includes its thinking (ModelParams).
  if (res.finishReason === 'length') return `the answer was cut at ${res.usage?.output_tokens || maxTokens} tokens (max_tokens) before it was complete`;
  if (!res.text.trim()) return `the reply has no text${res.finishReason ? ` (finish_reason ${res.finishReason})` : ''}`;
  return undefined;
}

function messagesOf(jobs: readonly QuestionJob[]) {
  switch (jobs[0].sort) {
    case 'judge':
      return batchMessages(jobs.map((j) => j.item as BatchItem));
    case 'look':
      return secondLookMessages(jobs.map((j) => j.item as LookItem));
    case 'decide':
      return decisionMessages(jobs.map((j) => j.item as DecisionItem));
  }
}
