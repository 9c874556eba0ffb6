import { credentials, Metadata, status as Status, type ServiceError, type ClientOptions } from '@grpc/grpc-js';
import { v1 } from '@neatroots/proto';
import type { DecisionEndpoint, DecisionItem, DecisionReply, QuestionAnswerer } from '@neatroots/questions';

/**
 * The question service as the gateway of sopops' checker (DecisionGateway in @neatroots/sop):
 * in-process, the answerer itself; distributed, neatroots.v1.Question's Decide over gRPC.
 * Either way each decision joins the same batching queue as every other question.
 */
export interface DecisionsGateway {
  decide(endpoint: DecisionEndpoint, item: DecisionItem): Promise<DecisionReply>;
  decisionModels(): Promise<{ decision: string | null; reasoning: string | null }>;
}

/** In-process: a full queue makes the check wait for room (back-pressure), as a bus consumer does. */
export function answererDecisions(answerer: QuestionAnswerer): DecisionsGateway {
  return {
    decide: (endpoint, item) => answerer.decide(endpoint, item, { wait: true }),
    decisionModels: () => answerer.decisionModels(),
  };
}

export interface DecisionsClientOptions {
  /** Per call; a decision waits in the model queue, so longer than a model call. */
  timeoutMs?: number;
  /** RESOURCE_EXHAUSTED (a full queue) is retried this many times, backing off. */
  busyRetries?: number;
  backoffMs?: number;
  /** The gRPC client's options (the deployment's internal token: internalClientOptions). */
  client?: ClientOptions;
}

/** Over gRPC: the review service's checker in the distributed deployment. */
export class QuestionDecisionsClient implements DecisionsGateway {
  private readonly client: v1.QuestionClient;
  private readonly o: Required<Omit<DecisionsClientOptions, 'client'>>;

  constructor(address: string, opts: DecisionsClientOptions = {}) {
    this.client = new v1.QuestionClient(address, credentials.createInsecure(), opts.client ?? {});
    this.o = { timeoutMs: opts.timeoutMs ?? 180_000, busyRetries: opts.busyRetries ?? 5, backoffMs: opts.backoffMs ?? 500 };
  }

  async decide(endpoint: DecisionEndpoint, item: DecisionItem): Promise<DecisionReply> {
    for (let attempt = 0; ; attempt++) {
      try {
        const r = await this.unary<v1.DecideResponse>((md, o, cb) => this.client.decide({ endpoint, ...item }, md, o, cb));
        return r.ok ? { ok: true, answer: JSON.parse(r.answer_json) as unknown, model: r.model, cached: r.cached } : { ok: false, reason: r.reason };
      } catch (err) {
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
    const r = await this.unary<v1.DecisionModelsResponse>((md, o, cb) => this.client.decisionModels({}, md, o, cb)).catch((e: ServiceError) => {
      throw new Error(`question service: ${e.details || e.message}`);
    });
    return { decision: r.decision || null, reasoning: r.reasoning || null };
  }

  close(): void {
    this.client.close();
  }

  private unary<R>(call: (md: Metadata, o: { deadline: Date }, cb: (err: ServiceError | null, res: R) => void) => unknown): Promise<R> {
    return new Promise((resolve, reject) => {
      call(new Metadata(), { deadline: new Date(Date.now() + this.o.timeoutMs) }, (err, res) => (err ? reject(err) : resolve(res)));
    });
  }
}
