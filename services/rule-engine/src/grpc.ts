import { credentials, Metadata, status, type sendUnaryData, type ServerUnaryCall, type ServiceError, type ClientOptions } from '@grpc/grpc-js';
import { envelopeFromProto, envelopeToProto } from '@neatroots/messages';
import { v1 } from '@neatroots/proto';
import { MAX_PRECHECK_TIMEOUT_MS, PrecheckCancelledError, PrecheckTimeoutError, type PrecheckAnswer, type PrecheckRequest } from './precheck';

/**
 * The pre-call check over gRPC (neatroots.v1.RuleEngine), for the distributed deployment:
 * the server half runs in the rule engine's process, the client half in ingest's, which the
 * SDK asks. The answer comes from the same Prechecker as in the embedded default, over the
 * shared window store, so any replica answers for any run.
 */

/** What the server answers from: the rule-engine service's pre-call checks. */
export interface PrecheckAnswerer {
  precheck(req: PrecheckRequest): Promise<PrecheckAnswer>;
  haltingTools(project: string, workflow?: string): string[] | Promise<string[]>;
}

const toResponse = (a: PrecheckAnswer): v1.PreCheckResponse => ({ decision: a.decision, check_id: a.check_id ?? '', finding_id: a.finding_id ?? '', title: a.title ?? '', text: a.text ?? '' });

export function ruleEngineGrpcService(engine: PrecheckAnswerer): { service: typeof v1.RuleEngineService; implementation: v1.RuleEngineServer } {
  const implementation: v1.RuleEngineServer = {
    preCheck: (call: ServerUnaryCall<v1.EnginePreCheckRequest, v1.PreCheckResponse>, cb: sendUnaryData<v1.PreCheckResponse>) => {
      const req = call.request;
      let span;
      try {
        if (!req.call) throw new Error('call: is required');
        const env = envelopeFromProto(req.call);
        if (env.item.kind !== 'span') throw new Error(`call: is a ${env.item.kind}, not a span`);
        span = { project: env.project, span: env.item.span };
      } catch (e) {
        cb({ code: status.INVALID_ARGUMENT, details: `rule engine: ${(e as Error).message}` });
        return;
      }
      // The wait ends when the caller gives up (its call cancelled, or its deadline passed: gRPC
      // cancels the call then too), and is never longer than the bound, whatever it asked.
      const gaveUp = new AbortController();
      call.on('cancelled', () => gaveUp.abort());
      const d = call.getDeadline();
      const deadline = d instanceof Date ? d.getTime() : Number.isFinite(d) ? d : undefined;
      const timeoutMs = req.timeout_ms > 0 ? Math.min(req.timeout_ms, MAX_PRECHECK_TIMEOUT_MS) : undefined;
      engine.precheck({ ...span, knownSpans: req.known_spans, timeoutMs, deadline, signal: gaveUp.signal }).then(
        (a) => cb(null, toResponse(a)),
        (err: unknown) =>
          cb(
            err instanceof PrecheckTimeoutError
              ? { code: status.DEADLINE_EXCEEDED, details: err.message }
              : err instanceof PrecheckCancelledError
                ? { code: status.CANCELLED, details: err.message }
                : { code: status.INTERNAL, details: `rule engine: ${(err as Error)?.message ?? String(err)}` },
          ),
      );
    },
    haltingTools: (call: ServerUnaryCall<v1.HaltingToolsRequest, v1.HaltingToolsResponse>, cb: sendUnaryData<v1.HaltingToolsResponse>) => {
      Promise.resolve()
        .then(() => engine.haltingTools(call.request.project, call.request.workflow || undefined))
        .then(
          (tools) => cb(null, { tools }),
          (err: unknown) => cb({ code: status.INTERNAL, details: `rule engine: ${(err as Error)?.message ?? String(err)}` }),
        );
    },
  };
  return { service: v1.RuleEngineService, implementation };
}

/** What a forwarded check leaves of the caller's deadline for the way back. */
const DEADLINE_MARGIN_MS = 5;

/** The rule engine could not be reached (gRPC UNAVAILABLE: not running, not listening, shutting down). */
export class RuleEngineUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RuleEngineUnavailableError';
  }
}

/**
 * The rule engine's pre-call checks, asked over gRPC. Its failures are named as the embedded
 * engine's are, so ingest maps both alike: out of time is a PrecheckTimeoutError (the SDK
 * gets DEADLINE_EXCEEDED), no engine to ask a RuleEngineUnavailableError (UNAVAILABLE).
 */
export class RuleEngineClient {
  private readonly client: v1.RuleEngineClient;

  constructor(readonly address: string, clientOptions: ClientOptions = {}) {
    this.client = new v1.RuleEngineClient(address, credentials.createInsecure(), clientOptions);
  }

  /**
   * `deadline` (epoch ms): the caller's own, so the answer is not waited for after it gave up;
   * the engine is told to give up a little before it, so its own reason (how many of the
   * exported spans the window saw) comes back rather than a bare deadline.
   */
  precheck(req: PrecheckRequest & { deadline?: number }): Promise<PrecheckAnswer> {
    const asked = Math.min(req.timeoutMs ?? 1_000, MAX_PRECHECK_TIMEOUT_MS);
    const timeoutMs = req.deadline === undefined ? asked : Math.max(1, Math.min(asked, req.deadline - Date.now() - DEADLINE_MARGIN_MS));
    const call: v1.EnginePreCheckRequest = {
      call: envelopeToProto({ project: req.project, received_ms: Date.now(), item: { kind: 'span', span: req.span } }),
      known_spans: req.knownSpans ?? 0,
      timeout_ms: timeoutMs,
    };
    // Without a deadline from the caller, a little past the engine's own: its answer says more.
    const deadline = req.deadline ?? Date.now() + timeoutMs + 1_000;
    return new Promise((resolve, reject) => {
      const sent = this.client.preCheck(call, new Metadata(), { deadline }, (err, res) => {
        req.signal?.removeEventListener('abort', cancel);
        if (!err) {
          resolve({ decision: res.decision === 'halt' ? 'halt' : 'allow', ...(res.decision === 'halt' ? { check_id: res.check_id, finding_id: res.finding_id, title: res.title, text: res.text } : {}) });
          return;
        }
        reject(this.failure(err, 'PreCheck'));
      });
      // The caller gave up: the engine's wait is cancelled with the call (its server aborts the check).
      const cancel = () => sent.cancel();
      if (req.signal?.aborted) cancel();
      else req.signal?.addEventListener('abort', cancel, { once: true });
    });
  }

  haltingTools(project: string, workflow?: string, timeoutMs = 5_000): Promise<string[]> {
    return new Promise((resolve, reject) =>
      this.client.haltingTools({ project, workflow: workflow ?? '' }, new Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) =>
        err ? reject(this.failure(err, 'HaltingTools')) : resolve(res.tools),
      ),
    );
  }

  close(): void {
    this.client.close();
  }

  private failure(err: ServiceError, method: string): Error {
    const why = err.details || err.message;
    if (err.code === status.DEADLINE_EXCEEDED) {
      const e = new Error(`rule engine at ${this.address}: ${method}: ${why}`);
      e.name = 'PrecheckTimeoutError';
      return e;
    }
    if (err.code === status.UNAVAILABLE) return new RuleEngineUnavailableError(`rule engine at ${this.address}: ${method}: ${why}`);
    return new Error(`rule engine at ${this.address}: ${method}: ${why}`);
  }
}
