import { sha1Hex } from '@neatroots/checks';
import type { ChatModel, ChatRequest, ChatResponse, SharedCache } from '@neatroots/ports';
import { AgreementTracker } from './agreement';
import { ModelQueue, ModelQueueClosedError, QueueFullError, type ModelQueueOptions, type Priority } from './batcher';
import { AnswerCache, DEFAULT_CACHE_TTL_MS, TieredCache, type CacheResult } from './cache';
import { FastClassifier } from './classifier/classifier';
import type { SparseVector } from './classifier/features';
import type { DecisionEndpoint, DecisionItem, DecisionReply } from './decisions';
import { DEFAULT_EVIDENCE_CHARS, normalizedRunText, renderContext, renderEvidence } from './evidence';
import { judge, LLM_UNLIKELY, MalformedAnswerError, notChecked, questionKey, readRawAnswer, toAnswer, type QuestionDef, type RawAnswer, type Verdict } from './judge';
import { noteMessages, readSecondLook, type SecondLookReply } from './prompt';
import { quoteFound } from './quote';
import type { Answer, AnsweredBy, ContextDoc, EvidenceDoc } from './types';

/**
 * Which model answers, and how (the seed's "Which model answers" and "Findings' second look"):
 *   - the hosted decision model when it is on, otherwise the local LLM, otherwise the fast
 *     classifier for everything;
 *   - every fresh LLM answer is also put to the classifier in the background: agreement is
 *     recorded, then the classifier learns from it;
 *   - a question the classifier agrees on (90% of at least 30 answers) goes to it first; only
 *     what it flags goes on to the LLM (and a small share of the rest, so agreement stays current);
 *   - before an LLM answer raises anything, the second look: a quote that is really in the run,
 *     and a problem that still holds given what the run did earlier;
 *   - identical questions are answered from a cache; a model error or timeout is "not checked".
 */
export type Backend = 'auto' | 'decision' | 'local' | 'classifier';

export interface AnswererOptions {
  /** The hosted decision model (the seed's Jev), when it is on. */
  decision?: ChatModel;
  /** The local LLM (any OpenAI-compatible endpoint). */
  local?: ChatModel;
  /** The reasoning model (reviews of sopops' decisions); the local LLM when absent. */
  reasoning?: ChatModel;
  backend?: Backend;
  classifier?: FastClassifier;
  agreement?: AgreementTracker;
  /** Queue options for both endpoints, and per endpoint on top. */
  queue?: ModelQueueOptions;
  decisionQueue?: ModelQueueOptions;
  localQueue?: ModelQueueOptions;
  reasoningQueue?: ModelQueueOptions;
  /**
   * Cache of identical questions; false turns it off. `shared`: the deployment's cache (Redis
   * distributed, the database embedded) behind this process's, so replicas and a restarted
   * service share answers.
   */
  cache?: { max?: number; ttlMs?: number; shared?: SharedCache; now?: () => number } | false;
  /** Each cache lookup before a model is asked, by what asked and where the answer came from (metrics). */
  onCacheLookup?: (kind: 'question' | 'second_look' | 'decision', result: CacheResult) => void;
  evidenceChars?: number;
  /** Of the answers the classifier gives first, the share still put to the LLM in the background. */
  auditRate?: number;
  /**
   * The most such audits under way at once (default 100): beyond it, and while the model's queue
   * is half full or more, an audit is dropped (stats.audits_dropped) rather than queued.
   */
  maxAudits?: number;
  random?: () => number;
  onError?: (msg: string, err: unknown) => void;
}

export interface AskInput {
  q: QuestionDef;
  evidence: EvidenceDoc;
  context?: ContextDoc;
}

export interface AskOptions {
  priority?: Priority;
  /** Wait for room in a full queue (bus consumers) instead of failing with QueueFullError. */
  wait?: boolean;
  /** Default true; previews and drafts skip it. */
  secondLook?: boolean;
  /**
   * decide(): the caller stops waiting once this is aborted (a check cut short by a stop) and the
   * call rejects with its reason. The question already queued or sent is not taken back (it may
   * share its request with others): its answer is cached as usual, for whoever asks next.
   */
  signal?: AbortSignal;
}

export interface Endpoint {
  role: 'decision' | 'local';
  model: ChatModel;
  queue: ModelQueue;
}

export class NoModelError extends Error {
  constructor() {
    super('no LLM is configured (set NEATROOTS_DECISION_MODEL_URL or NEATROOTS_LLM_URL)');
    this.name = 'NoModelError';
  }
}

/** `p`, or a rejection with the signal's reason once it is aborted (`p` itself goes on). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason);
    if (signal.aborted) return abort();
    signal.addEventListener('abort', abort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}

/** A JSON object (a decision's answer), else undefined. */
function jsonObject(v: unknown): object | undefined {
  return v && typeof v === 'object' && !Array.isArray(v) ? v : undefined;
}

/** `shared` with every key prefixed. */
function prefixed(shared: SharedCache, prefix: string): SharedCache {
  return { get: (k) => shared.get(prefix + k), set: (k, v, ttlMs) => shared.set(prefix + k, v, ttlMs) };
}

/**
 * Why a model call failed, as a sentence (a not-checked reason, a decision's reason): "the model
 * timed out: no answer within 30000 ms", "the model answered HTTP 500: upstream 500", "the model
 * is rate limited (HTTP 429): ...", "the model refused the request (HTTP 401): ...", "the model
 * cannot be reached: ...", "the model call was aborted: ...", "the model failed: ..."; a message
 * that is a sentence about the model already ("the model server closed the connection ...") as
 * it is. The drafts' errors use the same phrases. Review's checker reads which of these asking
 * again may cure (retryableModelFailure in @neatroots/sop).
 */
export function describeError(e: unknown): string {
  const err = e as { message?: unknown; kind?: unknown; status?: unknown } | undefined;
  const message = typeof err?.message === 'string' ? err.message : String(e);
  const status = typeof err?.status === 'number' ? err.status : undefined;
  // The adapter writes an HTTP failure "HTTP 500: what the server said".
  const http = status !== undefined && message.startsWith(`HTTP ${status}: `) ? message.slice(`HTTP ${status}: `.length) : undefined;
  // A ModelError's kind (read by shape: it may come from another copy of the ports package).
  const kind = typeof err?.kind === 'string' ? err.kind : undefined;
  let out: string;
  if (kind !== undefined && message.startsWith('the model ')) out = message;
  else {
    switch (kind) {
      case 'timeout':
        out = `the model timed out: ${message}`;
        break;
      case 'rate_limited':
        out = http !== undefined ? `the model is rate limited (HTTP ${status}): ${http}` : `the model is rate limited: ${message}`;
        break;
      case 'server':
        out = http !== undefined ? `the model answered HTTP ${status}: ${http}` : `the model failed: ${message}`;
        break;
      case 'rejected':
        out = http !== undefined ? `the model refused the request (HTTP ${status}): ${http}` : `the model refused the request: ${message}`;
        break;
      case 'connection':
        out = `the model cannot be reached: ${message}`;
        break;
      case 'aborted':
        out = `the model call was aborted: ${message}`;
        break;
      default:
        out = `the model failed: ${message}`;
    }
  }
  return out.slice(0, 300);
}

export class QuestionAnswerer {
  readonly classifier: FastClassifier;
  readonly agreement: AgreementTracker;
  readonly decision?: Endpoint;
  readonly local?: Endpoint;
  /** The reasoning model's own queue, when it is a separate endpoint. */
  readonly reasoning?: { role: 'reasoning'; model: ChatModel; queue: ModelQueue };
  private readonly backend: Backend;
  private readonly decisionCache?: TieredCache<object>;
  private readonly cache?: TieredCache<RawAnswer>;
  private readonly lookCache?: TieredCache<SecondLookReply>;
  private readonly evidenceChars: number;
  private readonly auditRate: number;
  private readonly random: () => number;
  private readonly pending = new Set<Promise<unknown>>();
  private readonly maxAudits: number;
  private audits = 0;
  private readonly onError: (msg: string, err: unknown) => void;
  readonly stats = { asked: 0, answered: 0, classifier_first: 0, escalated: 0, cache_hits: 0, not_checked: 0, second_looks: 0, dropped_by_second_look: 0, audits: 0, audits_dropped: 0 };

  constructor(opts: AnswererOptions = {}) {
    this.classifier = opts.classifier ?? new FastClassifier();
    this.agreement = opts.agreement ?? new AgreementTracker();
    if (opts.decision) this.decision = { role: 'decision', model: opts.decision, queue: new ModelQueue(opts.decision, { ...opts.queue, ...opts.decisionQueue }) };
    if (opts.local) this.local = { role: 'local', model: opts.local, queue: new ModelQueue(opts.local, { ...opts.queue, ...opts.localQueue }) };
    if (opts.reasoning) this.reasoning = { role: 'reasoning', model: opts.reasoning, queue: new ModelQueue(opts.reasoning, { ...opts.queue, ...opts.reasoningQueue }) };
    this.backend = opts.backend ?? 'auto';
    if (this.backend === 'decision' && !this.decision) throw new Error('backend decision needs a decision model');
    if (this.backend === 'local' && !this.local) throw new Error('backend local needs a local LLM');
    if (opts.cache !== false) {
      const { max, ttlMs = DEFAULT_CACHE_TTL_MS, shared, now = Date.now } = opts.cache ?? {};
      // One shared cache, each kind's keys apart in it. "@2": entries carry their expiry
      // (TieredCache), apart from the bare answers an earlier version kept under the kind alone.
      const tier = <V>(kind: 'question' | 'second_look' | 'decision', read: (v: unknown) => V | undefined) =>
        new TieredCache<V>(new AnswerCache<V>(max, ttlMs, now), shared && prefixed(shared, `${kind}@2\u0000`), ttlMs, read, opts.onCacheLookup && ((r) => opts.onCacheLookup!(kind, r)), now);
      this.cache = tier('question', readRawAnswer);
      this.lookCache = tier('second_look', readSecondLook);
      this.decisionCache = tier('decision', jsonObject);
    }
    this.evidenceChars = opts.evidenceChars ?? DEFAULT_EVIDENCE_CHARS;
    this.auditRate = opts.auditRate ?? 0.05;
    this.maxAudits = Math.max(1, opts.maxAudits ?? 100);
    this.random = opts.random ?? Math.random;
    this.onError = opts.onError ?? ((msg, err) => console.error(`questions: ${msg}`, err));
  }

  /** The LLM that answers, if any: the decision model when it is on, else the local LLM. */
  llm(): Endpoint | undefined {
    switch (this.backend) {
      case 'classifier':
        return undefined;
      case 'decision':
        return this.decision;
      case 'local':
        return this.local;
      case 'auto':
        return this.decision ?? this.local;
    }
  }

  /** Whether the local LLM stands in for the decision model (the seed's cost-control mode). */
  localStandsIn(): boolean {
    return this.llm()?.role === 'local';
  }

  async ask(input: AskInput, opts: AskOptions = {}): Promise<Answer> {
    this.stats.asked++;
    const { q, evidence } = input;
    const key = questionKey(q);
    // Made ready as ready() does; without a promise a task when both are ready already.
    const loading = this.classifier.readyNow(q);
    const recording = this.agreement.readyNow(key);
    await (loading || recording ? Promise.all([loading, recording]) : undefined);
    let x: SparseVector | undefined;
    const vec = () => (x ??= this.classifier.vector(evidence));
    const llm = this.llm();
    // No vector here: the classifier makes one only for a question it has learnt (a heuristic
    // or "not learnt yet" needs none, and with no model nothing learns from it).
    if (!llm) return this.classifierOnly(input, opts);

    if (this.agreement.classifierFirst(key)) {
      const c = this.classifier.answer(q, evidence, vec());
      if (c.status === 'answered' && !c.flagged) {
        this.stats.classifier_first++;
        if (this.random() < this.auditRate) this.audit(llm, input, vec());
        return this.count(c);
      }
      this.stats.escalated++;
    }

    const first = await this.askLlm(llm, input, opts, vec());
    if (!('verdict' in first)) return this.count(first);
    const { verdict, raw, cached, rendered } = first;
    let answer = toAnswer(verdict, llm.role, raw.quote);
    if (cached) answer.cached = true;
    if (verdict.flagged && opts.secondLook !== false) answer = await this.secondLook(llm, input, verdict, rendered, raw.quote, answer, opts);
    return this.count(answer);
  }

  /**
   * Puts a classifier-first answer to the LLM in the background, at the lowest priority and
   * without waiting for room: never while many audits are under way or the model's queue is half
   * full (a slow or hung model), and given up when real work needs its place (QueueFullError).
   */
  private audit(llm: Endpoint, input: AskInput, x: SparseVector): void {
    if (this.audits >= this.maxAudits || llm.queue.queued * 2 >= llm.queue.maxQueue) {
      this.stats.audits_dropped++;
      return;
    }
    this.stats.audits++;
    this.audits++;
    this.track(
      this.askLlm(llm, input, { priority: 'background', wait: false }, x)
        .catch((e) => {
          if (e instanceof QueueFullError) this.stats.audits_dropped++;
        })
        .finally(() => this.audits--),
    );
  }

  private count(a: Answer): Answer {
    if (a.status === 'not_checked') this.stats.not_checked++;
    else this.stats.answered++;
    return a;
  }

  /** Asks the LLM (or the cache); compares and teaches the classifier on a fresh answer. */
  private async askLlm(
    llm: Endpoint,
    input: AskInput,
    opts: AskOptions,
    x: SparseVector,
  ): Promise<Answer | { verdict: Verdict; raw: RawAnswer; cached: boolean; rendered: string }> {
    const { q, evidence } = input;
    const rendered = renderEvidence(evidence, this.evidenceChars);
    const itemKey = sha1Hex(JSON.stringify([q.kind, q.ask, q.options ?? null, q.levels ?? null, rendered]));
    const cacheKey = `${llm.model.id}\u0000${itemKey}`;
    let raw = await this.cache?.get(cacheKey);
    const cached = raw !== undefined;
    if (cached) this.stats.cache_hits++;
    else {
      let obj: unknown;
      try {
        obj = await llm.queue.ask(cacheKey, { q, evidence: rendered }, { priority: opts.priority, wait: opts.wait });
      } catch (e) {
        if (e instanceof QueueFullError || e instanceof ModelQueueClosedError) throw e;
        return notChecked(describeError(e), llm.role);
      }
      raw = readRawAnswer(obj);
      if (!raw) return notChecked('the model gave a malformed answer', llm.role);
    }
    let verdict: Verdict;
    try {
      verdict = judge(q, raw!, true);
    } catch (e) {
      return notChecked(`the model gave a malformed answer: ${(e as Error).message}`, llm.role);
    }
    if (!cached) {
      // In the shared cache before the answer goes back to its batch: a crash before that batch is marked done reads it from there.
      await this.cache?.set(cacheKey, raw!);
      const r = raw!;
      // Compared before it learns, so agreement measures predictions, not memory. Made ready
      // again first: the model and record of a question asked a while ago may have been let go
      // (their bounds), and are read back rather than started afresh over what is stored.
      const key = questionKey(q);
      this.track(
        Promise.all([this.classifier.ready([q]), this.agreement.ready([key])]).then(() => {
          const c = this.classifier.answer(q, evidence, x);
          if (c.status === 'answered') this.agreement.record(key, q.id, c.flagged === verdict.flagged, verdict.flagged);
          this.classifier.learn(q, evidence, r, x);
        }),
      );
    }
    return { verdict, raw: raw!, cached, rendered };
  }

  private classifierOnly(input: AskInput, opts: AskOptions): Answer {
    const a = this.classifier.answer(input.q, input.evidence);
    // No LLM to take a second look: the classifier's own quote must still be in the run.
    if (a.flagged && opts.secondLook !== false && !quoteFound(a.quote, '', () => normalizedRunText(input.evidence, input.context))) {
      return this.count({ ...a, flagged: false, unsupported: true, reason: 'the quote is not in the run', quote: undefined });
    }
    return this.count(a);
  }

  private async secondLook(
    llm: Endpoint,
    input: AskInput,
    verdict: Verdict,
    rendered: string,
    firstQuote: string | undefined,
    answer: Answer,
    opts: AskOptions,
  ): Promise<Answer> {
    this.stats.second_looks++;
    const context = renderContext(input.context);
    const key = `${llm.model.id}\u0000${sha1Hex(JSON.stringify([input.q.ask, rendered, context, firstQuote ?? '']))}`;
    let reply = await this.lookCache?.get(key);
    if (!reply) {
      try {
        // Second looks are batched like questions (one sort per request).
        const obj = await llm.queue.look(key, { q: input.q, verdict, evidence: rendered, context, quote: firstQuote }, { priority: opts.priority, wait: opts.wait });
        reply = readSecondLook(obj);
      } catch (e) {
        if (e instanceof QueueFullError || e instanceof ModelQueueClosedError) throw e;
        return notChecked(`second look: ${describeError(e)}`, llm.role);
      }
      await this.lookCache?.set(key, reply);
    }
    const quote = reply.quote ?? firstQuote;
    if (!reply.holds) {
      this.stats.dropped_by_second_look++;
      return { ...answer, flagged: false, confidence: LLM_UNLIKELY, quote: undefined, reason: `second look: it does not hold given what the run did earlier${reply.reason ? ` (${reply.reason})` : ''}` };
    }
    if (!quoteFound(quote, '', () => normalizedRunText(input.evidence, input.context))) {
      this.stats.dropped_by_second_look++;
      return {
        ...answer,
        flagged: false,
        unsupported: true,
        confidence: LLM_UNLIKELY,
        quote: undefined,
        reason: `second look: the quote ${JSON.stringify((quote ?? '').slice(0, 120))} is not in the run`,
      };
    }
    return { ...answer, quote };
  }

  /**
   * A note for the agent about a finding, written by the LLM (the seed: "note-writing jumps
   * the LLM queue"). Undefined when there is no LLM or it failed: the caller falls back to
   * the check's guidance.
   */
  async writeNote(q: QuestionDef, quote: string | undefined, guidance: string | undefined, priority: Priority = 'note'): Promise<string | undefined> {
    const llm = this.llm();
    if (!llm) return undefined;
    try {
      const res = await llm.queue.chat({ messages: noteMessages(q, quote, guidance), maxTokens: 200 }, { priority, wait: true });
      const text = res.text.trim();
      return text ? text.slice(0, 1000) : undefined;
    } catch (e) {
      // Stopping: the batch fails and is delivered again at the next start.
      if (e instanceof ModelQueueClosedError) throw e;
      this.onError('writing a note failed; using the check guidance', e);
      return undefined;
    }
  }

  /**
   * The endpoint that answers a caller's decisions: `decision` is the decision model when it is
   * on, else the local LLM; `reasoning` is the reasoning model, else the local LLM. Neither
   * follows the questions' backend (NEATROOTS_CLASSIFIER_BACKEND), which routes questions only.
   */
  decisionEndpoint(which: DecisionEndpoint): { model: ChatModel; queue: ModelQueue } | undefined {
    return which === 'reasoning' ? (this.reasoning ?? this.local) : (this.decision ?? this.local);
  }

  /** The model names that answer decisions on each endpoint (null: none configured). */
  async decisionModels(): Promise<{ decision: string | null; reasoning: string | null }> {
    const name = (e?: { model: ChatModel }) => (e ? (e.model.name ?? e.model.id) : null);
    return { decision: name(this.decisionEndpoint('decision')), reasoning: name(this.decisionEndpoint('reasoning')) };
  }

  /**
   * One decision written by the caller (sopops' checker), batched with the others asked at
   * once on the same endpoint, cached like the questions. A model error, a timeout, a reply
   * that is not a JSON object or one the caller's `usable` rejects is `ok: false` with a plain
   * reason: never an answer, and never cached (asked again, the model is asked again). A stop
   * (the queues closed) is no such reason: ModelQueueClosedError is thrown.
   */
  async decide(which: DecisionEndpoint, item: DecisionItem, opts: AskOptions = {}): Promise<DecisionReply> {
    const e = this.decisionEndpoint(which);
    if (!e) return { ok: false, reason: `no ${which === 'reasoning' ? 'reasoning model or local LLM' : 'decision model or local LLM'} is configured` };
    const model = e.model.name ?? e.model.id;
    const key = `${e.model.id}\u0000${sha1Hex(JSON.stringify([item.instructions, item.subject, item.ask]))}`;
    opts.signal?.throwIfAborted();
    const hit = await this.decisionCache?.get(key);
    // A cached answer the caller cannot use (cached by a caller that did not say what it can) is asked again.
    if (hit !== undefined && !item.usable?.(hit)) return { ok: true, answer: hit, model, cached: true };
    let answer: unknown;
    const asked = e.queue.decide(key, item, { priority: opts.priority, wait: opts.wait });
    // Cached for whoever asks next even when this caller has stopped waiting.
    const kept = asked.then(
      async (a) => {
        const o = jsonObject(a);
        if (o && !item.usable?.(o)) await this.decisionCache?.set(key, o);
      },
      () => undefined,
    );
    try {
      answer = await untilAborted(asked, opts.signal);
    } catch (err) {
      if (opts.signal?.aborted) {
        kept.catch(() => undefined);
        throw opts.signal.reason;
      }
      // Stopping (the queue closed): no decision is made, and none is said not made; the caller's
      // job fails this try and asks again (before, a check recorded its rules as not checked, the
      // model failed "because the process is stopping").
      if (err instanceof QueueFullError || err instanceof ModelQueueClosedError) throw err;
      if (err instanceof MalformedAnswerError) return { ok: false, reason: `the model gave a malformed answer (${err.message})` };
      return { ok: false, reason: describeError(err) };
    }
    const obj = jsonObject(answer);
    if (!obj) return { ok: false, reason: 'the model gave a malformed answer (not a JSON object)' };
    const unusable = item.usable?.(obj);
    if (unusable) return { ok: false, reason: `the model gave a malformed answer (${unusable})` };
    await kept;
    return { ok: true, answer, model, cached: false };
  }

  /** A free-form call through the gateway (review decisions, reasoning, drafts). */
  async chat(req: ChatRequest, opts: AskOptions = {}): Promise<ChatResponse & { answered_by: AnsweredBy }> {
    const llm = this.llm();
    if (!llm) throw new NoModelError();
    const res = await llm.queue.chat(req, { priority: opts.priority, wait: opts.wait });
    return { ...res, answered_by: llm.role };
  }

  private track(p: Promise<unknown>): void {
    const t = p.catch((err) => this.onError('background agreement check failed', err)).finally(() => this.pending.delete(t));
    this.pending.add(t);
  }

  /** Resolves when the background agreement checks started so far are done. */
  async idle(): Promise<void> {
    while (this.pending.size) await Promise.all([...this.pending]);
  }

  /**
   * Saves what was learnt: the agreement records, and the classifier's models unless `models`
   * is false (a model is hundreds of KB written whole: the question service saves them less
   * often than the agreement, which the rule engine reads within 30 s).
   *
   * It saves what has been learnt so far and does not wait for the background checks still
   * under way (the classifier-first answers put to the LLM, which can wait in the model queue:
   * under steady traffic there always are some, and a save that waited for them never ended).
   * What they learn is saved by a later flush. `drain` (shutdown) waits for them all first.
   */
  async flush(opts: { models?: boolean; drain?: boolean } = {}): Promise<void> {
    if (opts.drain) await this.idle();
    await Promise.all([opts.models === false ? undefined : this.classifier.flush(), this.agreement.flush()]);
  }

  queueStats(): Record<string, ModelQueue['stats']> {
    const out: Record<string, ModelQueue['stats']> = {};
    if (this.decision) out.decision = this.decision.queue.stats;
    if (this.local) out.local = this.local.queue.stats;
    if (this.reasoning) out.reasoning = this.reasoning.queue.stats;
    return out;
  }

  /**
   * Closes the model queues: what waits in them fails and the requests in flight are aborted
   * (ModelQueueClosedError), so a stop does not wait for a slow model; the background audits end with them.
   */
  close(): void {
    this.decision?.queue.close();
    this.local?.queue.close();
    this.reasoning?.queue.close();
  }
}
