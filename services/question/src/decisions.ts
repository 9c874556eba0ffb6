import { credentials, Metadata, status as Status, type ServiceError, type ClientOptions } from '@grpc/grpc-js';
import { v1 } from '@neatroots/proto';
import type { DecisionEndpoint, DecisionItem, DecisionReply, QuestionAnswerer } from '@neatroots/questions';

/**
 * The question service as the gateway of sopops' checker (DecisionGateway in @neatroots/sop):
 * in-process, the answerer itself; distributed, neatroots.v1.Question's Decide over gRPC.
 * Either way each decision joins the same batching queue as every other question.
 */
export interface DecisionsGateway {
  /** `signal` aborted: given up (over gRPC, the call cancelled), rejecting with its reason. */
  decide(endpoint: DecisionEndpoint, item: DecisionItem, opts?: { signal?: AbortSignal }): Promise<DecisionReply>;
  decisionModels(): Promise<{ decision: string | null; reasoning: string | null }>;
}

/** In-process: a full queue makes the check wait for room (back-pressure), as a bus consumer does. */
export function answererDecisions(answerer: QuestionAnswerer): DecisionsGateway {
  return {
    decide: (endpoint, item, opts) => answerer.decide(endpoint, item, { wait: true, signal: opts?.signal }),
    decisionModels: () => answerer.decisionModels(),
  };
}

/**
 * What a caller of the question service knows of its models: the validated model configuration
 * (ModelConfig in @neatroots/platform has these fields). Every process of a deployment reads the
 * same model variables, so the caller's configuration is the question service's.
 */
export interface ModelTimeouts {
  decision?: { timeoutMs: number };
  local?: { timeoutMs: number };
  reasoning?: { timeoutMs: number };
  backend?: 'auto' | 'decision' | 'local' | 'classifier';
  batch: { retries: number; maxWaitMs?: number };
}

/** An endpoint's model timeout when this process has none configured for it: the defaults of its variables. */
const DEFAULT_TIMEOUT_MS = { decision: 30_000, local: 60_000, reasoning: 120_000 } as const;
/**
 * The longest wait between two tries of a model request: the queue's backoff is at most 5 s, a
 * server's Retry-After is honoured up to 30 s.
 */
const RETRY_WAIT_MS = 30_000;
/** Time beyond the model's own: the gRPC round trip and the service's work. */
const SLACK_MS = 2_000;

/**
 * How long one model request may take in the question service: every try timing out, with the
 * longest wait between tries.
 */
export function modelRequestMs(timeoutMs: number, retries: number): number {
  return (retries + 1) * timeoutMs + retries * RETRY_WAIT_MS;
}

/**
 * The gRPC deadline of one call the question service answers with `ownRequests` model requests
 * (a decision: its batch, then itself again alone when the batch reply left it out; a free-form
 * chat: one), waiting first for a request ahead of it in its slot, and for the batch to fill.
 */
export function callDeadlineMs(timeoutMs: number, m: Pick<ModelTimeouts, 'batch'>, ownRequests: number): number {
  return (ownRequests + 1) * modelRequestMs(timeoutMs, m.batch.retries) + (m.batch.maxWaitMs ?? 0) + SLACK_MS;
}

/**
 * A decision's deadline: from the timeout of the model that answers the endpoint (the decision
 * model, else the local LLM; the reasoning model, else the local LLM), NEATROOTS_QUESTION_RETRIES
 * and the batch wait. With NEATROOTS_REASONING_MODEL_TIMEOUT_MS at its default (120 s) and 2
 * retries a reasoning decision may take 3 × (3 × 120 + 2 × 30) s + 2 s = 21 min 2 s.
 */
export function decisionDeadlineMs(m: ModelTimeouts, endpoint: DecisionEndpoint): number {
  const timeoutMs =
    endpoint === 'reasoning'
      ? (m.reasoning ?? m.local)?.timeoutMs ?? DEFAULT_TIMEOUT_MS.reasoning
      : (m.decision ?? m.local)?.timeoutMs ?? Math.max(DEFAULT_TIMEOUT_MS.decision, DEFAULT_TIMEOUT_MS.local);
  return callDeadlineMs(timeoutMs, m, 2);
}

/** A free-form chat's deadline (a check's draft): from the timeout of the LLM that answers it (the backend's). */
export function chatDeadlineMs(m: ModelTimeouts): number {
  const llm = m.backend === 'decision' ? m.decision : m.backend === 'local' ? m.local : (m.decision ?? m.local);
  return callDeadlineMs(llm?.timeoutMs ?? Math.max(DEFAULT_TIMEOUT_MS.decision, DEFAULT_TIMEOUT_MS.local), m, 1);
}

export interface DecisionsClientOptions {
  /**
   * Per call, fixed. Unset: a decision's deadline is decisionDeadlineMs of `models` (it waits in
   * the model queue, and its model calls are retried, so longer than a model call).
   */
  timeoutMs?: number;
  /** The model configuration the deadlines come from (default: every variable at its default). */
  models?: ModelTimeouts;
  /** RESOURCE_EXHAUSTED (a full queue) is retried this many times, backing off. */
  busyRetries?: number;
  backoffMs?: number;
  /** The gRPC client's options (the deployment's internal token: internalClientOptions). */
  client?: ClientOptions;
}

/** DecisionModels asks no model: the question service names them at once. */
const DECISION_MODELS_DEADLINE_MS = 30_000;

/** Over gRPC: the review service's checker in the distributed deployment. */
export class QuestionDecisionsClient implements DecisionsGateway {
  private readonly client: v1.QuestionClient;
  private readonly o: Required<Omit<DecisionsClientOptions, 'client' | 'timeoutMs'>> & { timeoutMs?: number };

  constructor(address: string, opts: DecisionsClientOptions = {}) {
    this.client = new v1.QuestionClient(address, credentials.createInsecure(), opts.client ?? {});
    this.o = { timeoutMs: opts.timeoutMs, models: opts.models ?? { batch: { retries: 2 } }, busyRetries: opts.busyRetries ?? 5, backoffMs: opts.backoffMs ?? 500 };
  }

  /** The gRPC deadline of a decision on this endpoint, in ms from the call. */
  deadlineMs(endpoint: DecisionEndpoint): number {
    return this.o.timeoutMs ?? decisionDeadlineMs(this.o.models, endpoint);
  }

  /**
   * `signal` aborted (the check stops): the call is cancelled and rejects with the signal's
   * reason. The question service goes on with the model request it made, and caches its answer.
   */
  async decide(endpoint: DecisionEndpoint, item: DecisionItem, opts: { signal?: AbortSignal } = {}): Promise<DecisionReply> {
    const { signal } = opts;
    for (let attempt = 0; ; attempt++) {
      signal?.throwIfAborted();
      try {
        const r = await this.unary<v1.DecideResponse>(this.deadlineMs(endpoint), (md, o, cb) => this.client.decide({ endpoint, ...item }, md, o, cb), signal);
        return r.ok ? { ok: true, answer: JSON.parse(r.answer_json) as unknown, model: r.model, cached: r.cached } : { ok: false, reason: r.reason };
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        const e = err as ServiceError;
        if (e.code === Status.RESOURCE_EXHAUSTED && attempt < this.o.busyRetries) {
          await new Promise((r) => setTimeout(r, this.o.backoffMs * 2 ** attempt));
          continue;
        }
        // Anything else is the question service being unreachable or unwell: the check job fails and is retried.
        throw new Error(`question service: ${e.details || e.message}`);
      }
    }
  }

  async decisionModels(): Promise<{ decision: string | null; reasoning: string | null }> {
    const r = await this.unary<v1.DecisionModelsResponse>(this.o.timeoutMs ?? DECISION_MODELS_DEADLINE_MS, (md, o, cb) => this.client.decisionModels({}, md, o, cb)).catch((e: ServiceError) => {
      throw new Error(`question service: ${e.details || e.message}`);
    });
    return { decision: r.decision || null, reasoning: r.reasoning || null };
  }

  close(): void {
    this.client.close();
  }

  private unary<R>(deadlineMs: number, call: (md: Metadata, o: { deadline: Date }, cb: (err: ServiceError | null, res: R) => void) => { cancel(): void } | unknown, signal?: AbortSignal): Promise<R> {
    return new Promise((resolve, reject) => {
      const cancel = () => (c as { cancel?: () => void }).cancel?.();
      const c = call(new Metadata(), { deadline: new Date(Date.now() + deadlineMs) }, (err, res) => {
        signal?.removeEventListener('abort', cancel);
        if (err) reject(err);
        else resolve(res);
      });
      signal?.addEventListener('abort', cancel, { once: true });
    });
  }
}
