import { Server, status as Status, type sendUnaryData, type ServerUnaryCall } from '@grpc/grpc-js';
import { appliesInProject, CheckError, parseCheck, type QuestionCheck } from '@neatroots/checks';
import { bindGrpc, closeGrpcServer, v1 } from '@neatroots/proto';
import { ModelError } from '@neatroots/ports';
import { ANSWER_FORMATS } from '@neatroots/sop';
import { ModelQueueClosedError, NoModelError, QueueFullError, questionKey, type AgreementStat, type Answer, type EvidenceDoc, type QuestionAnswerer } from '@neatroots/questions';

/**
 * neatroots.v1.Question over gRPC: what other services (review's decisions) call. A full model
 * queue answers RESOURCE_EXHAUSTED at once, so callers back off instead of piling up requests.
 */
class CallError extends Error {
  constructor(
    readonly code: Status,
    message: string,
  ) {
    super(message);
  }
}

function questionOf(spec: v1.QuestionSpec | undefined): QuestionCheck {
  if (!spec) throw new CallError(Status.INVALID_ARGUMENT, 'question: is required');
  const raw: Record<string, unknown> = { id: spec.id || 'api-question', kind: spec.kind, scope: 'trace', ask: spec.ask };
  if (Object.keys(spec.options).length) raw.options = spec.options;
  if (spec.flag_on.length) raw.flag_on = spec.flag_on;
  if (spec.levels.length) raw.levels = spec.levels;
  if (spec.flag_at !== undefined) raw.flag_at = spec.flag_at;
  if (spec.flag_at_level !== undefined) raw.flag_at_level = spec.flag_at_level;
  try {
    const c = parseCheck(raw, 'request', 'user');
    if (c.kind === 'rule') throw new CallError(Status.INVALID_ARGUMENT, 'question.kind: must be yes_no, choice or score');
    return c;
  } catch (e) {
    if (e instanceof CheckError) throw new CallError(Status.INVALID_ARGUMENT, e.message.replace(/^request: (check [^:]+: )?/, 'question.'));
    throw e;
  }
}

function evidenceOf(req: v1.AskRequest): EvidenceDoc {
  if (req.evidence_json) {
    let doc: unknown;
    try {
      doc = JSON.parse(req.evidence_json);
    } catch (e) {
      throw new CallError(Status.INVALID_ARGUMENT, `evidence_json: is not valid JSON (${(e as Error).message})`);
    }
    if (!doc || typeof doc !== 'object' || !Array.isArray((doc as EvidenceDoc).spans)) {
      throw new CallError(Status.INVALID_ARGUMENT, 'evidence_json: must be an evidence document with a spans list');
    }
    return doc as EvidenceDoc;
  }
  if (!req.evidence_text) throw new CallError(Status.INVALID_ARGUMENT, 'evidence_text or evidence_json: one is required');
  return { spans: [], text: req.evidence_text };
}

export function answerToProto(a: Answer): v1.Answer {
  const out: v1.Answer = {
    status: a.status,
    flagged: a.flagged,
    label: a.label ?? '',
    probs: a.probs ?? {},
    quote: a.quote ?? '',
    answered_by: a.answered_by ?? '',
    confidence: a.confidence ?? '',
    reason: a.reason ?? '',
    cached: a.cached ?? false,
  };
  if (a.probability !== undefined) out.probability = a.probability;
  if (a.value !== undefined) out.value = a.value;
  return out;
}

function fail(cb: sendUnaryData<never>, e: unknown, log: (m: string, e?: unknown) => void): void {
  if (e instanceof CallError) return cb({ code: e.code, details: e.message });
  if (e instanceof QueueFullError) return cb({ code: Status.RESOURCE_EXHAUSTED, details: e.message });
  if (e instanceof NoModelError) return cb({ code: Status.FAILED_PRECONDITION, details: e.message });
  // The service is stopping (its model queues closed): away, as a service restarting is; not an error here.
  if (e instanceof ModelQueueClosedError) return cb({ code: Status.UNAVAILABLE, details: e.message });
  if (e instanceof ModelError) {
    // The model's failure after its retries (a timeout, a refused key, 5xx): an outage of the
    // model, not a fault here; one line without a stack. INTERNAL with the model's reason is what
    // callers read as the model's failure (draftFailure: 502 model_error).
    log(`a model call failed (${e.kind}${e.status ? `, HTTP ${e.status}` : ''}): ${e.message}`);
    return cb({ code: Status.INTERNAL, details: e.message });
  }
  log('unexpected error in a Question call', e);
  cb({ code: Status.INTERNAL, details: (e as Error)?.message ?? String(e) });
}

/**
 * Agreement per question with what the fast classifier learnt from it: the api's GET
 * /v1/projects/{project}/models/agreement. With a project, only the questions of checks that
 * apply there (another project's checks are not its key's to see).
 */
export async function agreementStats(
  answerer: QuestionAnswerer,
  opts: { checkId?: string; project?: string; checks?: () => readonly QuestionCheck[] } = {},
): Promise<(AgreementStat & { trained: number; ask: string })[]> {
  const stats = await answerer.agreement.stats(opts.checkId);
  const { project, checks } = opts;
  const inEffect = checks?.() ?? [];
  const mine = project && checks ? inEffect.filter((c) => appliesInProject(c, project)) : inEffect;
  const visible = project && checks ? new Set(mine.map((c) => c.id)) : undefined;
  // Another project's check of the same id (a copied check, a planner's plan-<workflow>-<slug>):
  // its key's counts and text are not this key's to see.
  const others = project && checks ? new Set(inEffect.filter((c) => !appliesInProject(c, project)).map((c) => questionKey(c))) : undefined;
  // A question's text by its key, from the project's own checks: a key no check in effect has is
  // an earlier wording's (its text is not kept).
  const asks = new Map(mine.map((c) => [questionKey(c), c.ask]));
  return stats
    .filter((s) => !visible || (visible.has(s.check_id) && (asks.has(s.question_key) || !others!.has(s.question_key))))
    .map((s) => ({ ...s, ask: asks.get(s.question_key) ?? '', trained: answerer.classifier.trainedByKey(s.question_key) }));
}

export interface QuestionGrpc {
  port: number;
  close(graceMs?: number): Promise<void>;
}

/**
 * neatroots.v1.Question as a definition and an implementation, for a process that serves
 * several services (and grpc.health.v1) on one gRPC server: `server.addService(svc.service,
 * svc.implementation)`.
 */
export function questionGrpcService(
  answerer: QuestionAnswerer,
  log: (m: string, e?: unknown) => void,
  /** The question checks in effect: the agreement of a project's questions only. */
  checks?: () => readonly QuestionCheck[],
): { service: typeof v1.QuestionService; implementation: v1.QuestionServer } {
  const opts = { log };
  const ask = async (req: v1.AskRequest) => {
    const q = questionOf(req.question);
    const evidence = evidenceOf(req);
    return answerer.ask(
      { q, evidence, context: req.context_text ? { spans: [], text: req.context_text } : undefined },
      { priority: req.priority === 'note' ? 'note' : 'normal', secondLook: !req.no_second_look, wait: false },
    );
  };
  const impl: v1.QuestionServer = {
    ask: (call: ServerUnaryCall<v1.AskRequest, v1.AskResponse>, cb: sendUnaryData<v1.AskResponse>) => {
      ask(call.request).then((a) => cb(null, { answer: answerToProto(a) }), (e) => fail(cb, e, opts.log));
    },
    askBatch: (call: ServerUnaryCall<v1.AskBatchRequest, v1.AskBatchResponse>, cb: sendUnaryData<v1.AskBatchResponse>) => {
      Promise.all(call.request.questions.map(ask)).then((as) => cb(null, { answers: as.map(answerToProto) }), (e) => fail(cb, e, opts.log));
    },
    complete: (call: ServerUnaryCall<v1.CompleteRequest, v1.CompleteResponse>, cb: sendUnaryData<v1.CompleteResponse>) => {
      const req = call.request;
      const messages = req.messages.map((m) => {
        if (m.role !== 'system' && m.role !== 'user' && m.role !== 'assistant') throw new CallError(Status.INVALID_ARGUMENT, `messages: role must be system, user or assistant, got "${m.role}"`);
        return { role: m.role as 'system' | 'user' | 'assistant', content: m.content };
      });
      answerer
        .chat({ messages, json: req.json, ...(req.max_tokens !== undefined ? { maxTokens: req.max_tokens } : {}) }, { priority: req.priority === 'note' ? 'note' : 'normal' })
        .then((r) => cb(null, { text: r.text, answered_by: r.answered_by }), (e) => fail(cb, e, opts.log));
    },
    decide: (call: ServerUnaryCall<v1.DecideRequest, v1.DecideResponse>, cb: sendUnaryData<v1.DecideResponse>) => {
      const { endpoint, instructions, subject, ask, max_tokens, answer_format } = call.request;
      if (endpoint !== 'decision' && endpoint !== 'reasoning') return fail(cb, new CallError(Status.INVALID_ARGUMENT, `endpoint: must be decision or reasoning, got "${endpoint}"`), opts.log);
      if (!instructions || !ask) return fail(cb, new CallError(Status.INVALID_ARGUMENT, `${instructions ? 'ask' : 'instructions'}: is required`), opts.log);
      const usable = answer_format ? ANSWER_FORMATS[answer_format] : undefined;
      if (answer_format && !Object.hasOwn(ANSWER_FORMATS, answer_format)) {
        return fail(cb, new CallError(Status.INVALID_ARGUMENT, `answer_format: must be one of ${Object.keys(ANSWER_FORMATS).join(', ')}, got "${answer_format.slice(0, 80)}"`), opts.log);
      }
      answerer.decide(endpoint, { instructions, subject, ask, ...(max_tokens ? { max_tokens } : {}), ...(usable ? { usable } : {}) }).then(
        (r) => cb(null, r.ok ? { ok: true, answer_json: JSON.stringify(r.answer), model: r.model, reason: '', cached: r.cached } : { ok: false, answer_json: '', model: '', reason: r.reason, cached: false }),
        (e) => fail(cb, e, opts.log),
      );
    },
    decisionModels: (_call: ServerUnaryCall<v1.DecisionModelsRequest, v1.DecisionModelsResponse>, cb: sendUnaryData<v1.DecisionModelsResponse>) => {
      answerer.decisionModels().then((m) => cb(null, { decision: m.decision ?? '', reasoning: m.reasoning ?? '' }), (e) => fail(cb, e, opts.log));
    },
    agreement: (call: ServerUnaryCall<v1.AgreementRequest, v1.AgreementResponse>, cb: sendUnaryData<v1.AgreementResponse>) => {
      const { check_id, project } = call.request;
      agreementStats(answerer, { checkId: check_id || undefined, project: project || undefined, checks }).then((questions) => cb(null, { questions }), (e) => fail(cb, e, opts.log));
    },
  };
  return {
    service: v1.QuestionService,
    implementation: {
      ...impl,
      // A message that cannot be read (a bad role) throws synchronously: answer it, do not crash.
      complete: (call: ServerUnaryCall<v1.CompleteRequest, v1.CompleteResponse>, cb: sendUnaryData<v1.CompleteResponse>) => {
        try {
          impl.complete(call, cb);
        } catch (e) {
          fail(cb, e, opts.log);
        }
      },
    },
  };
}

/** The Question service on a gRPC server of its own. */
export async function startQuestionGrpc(
  answerer: QuestionAnswerer,
  opts: { port: number; host?: string; log: (m: string, e?: unknown) => void; checks?: () => readonly QuestionCheck[] },
): Promise<QuestionGrpc> {
  const svc = questionGrpcService(answerer, opts.log, opts.checks);
  const server = new Server();
  server.addService(svc.service, svc.implementation);
  const port = await bindGrpc(server, opts.host ?? '127.0.0.1', opts.port);
  return { port, close: (graceMs) => closeGrpcServer(server, graceMs) };
}
