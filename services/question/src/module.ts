import { findingDelayHook, syncCounter, type ServiceModule } from '@neatroots/ports';
import {
  draftCheck,
  type AgreementStore,
  type ClassifierStore,
  type Draft,
  type DraftRequest,
  type PlanStore,
  type QuestionFindingsWindow,
  type QuestionSet,
  type ResultSink,
} from '@neatroots/questions';
import { makeTopics } from '@neatroots/messages';
import { answererDecisions, type DecisionsGateway } from './decisions';
import { agreementStats, questionGrpcService } from './grpc';
import { MODEL_OUTCOMES, modelRequestWatch } from './model-health';
import { startQuestionService, type QuestionService, type QuestionServiceOptions } from './service';

/** The configuration the question service reads (the model endpoints come as the models link). */
export interface QuestionConfig {
  NEATROOTS_TOPIC_PREFIX: string;
  /** A batch waits for the plans it started (replay: the same output every time). */
  awaitPlans?: boolean;
  /** Consumers of the question tasks; unset: 1 distributed, 4 elsewhere. */
  NEATROOTS_QUESTION_CONSUMERS?: number;
  /** Distributed, how long a stop lets the batches in hand finish before it fails what waits on the model (embedded: the bus's drain did). */
  NEATROOTS_DRAIN_MS?: number;
}

interface Links {
  /** The review service keeps what the question service learns (it owns the database). */
  review: {
    isQuiet(project: string, checkId: string): Promise<boolean>;
    data: {
      plans: PlanStore;
      classifier: ClassifierStore;
      agreement: AgreementStore;
      results: ResultSink;
      putCheck(c: { id: string; yaml: string; origin: 'planner'; project: string | null; workflow: string | null }): Promise<void>;
    };
  };
  checks: { questions(): QuestionSet; reload(): Promise<void>; refresh?(): Promise<void> };
  /** Models, routing, queues and cache, from the validated configuration. */
  models: { question: Pick<QuestionServiceOptions, 'models' | 'backend' | 'queue' | 'decisionQueue' | 'localQueue' | 'cache'> };
}

/** What the question service offers the others in this process. */
export interface QuestionLink {
  service: QuestionService;
  /** Agreement per question of the checks that apply in a project (the api's models/agreement). */
  modelStats(project: string, checkId?: string): ReturnType<typeof agreementStats>;
  /** The gateway sopops' checker asks its decisions through (the same queues as the questions). */
  decisions: DecisionsGateway;
  /**
   * A check drafted from a plain-language concern by the LLM, through the same queues (the
   * authoring API's checks/draft); NoModelError when no LLM is configured.
   */
  draft?(req: DraftRequest): Promise<Draft>;
}

export const QUESTION_LINK = 'question';

/**
 * The question service as a module: the one gateway to models. It answers the question tasks
 * the rule engine's scheduler publishes, and neatroots.v1.Question over gRPC.
 */
export const questionModule: ServiceModule<QuestionConfig> = {
  name: 'question',
  needs: ['bus', 'windows', 'review', 'checks', 'models'],
  // What it serves over gRPC (decisions, drafts, the models' answers) asks the models, not
  // Kafka or Redis: their outage stops its consumers and scheduler, not its answers.
  readyOn: [],
  provides: [QUESTION_LINK],
  async start(ctx) {
    const link = <K extends keyof Links>(k: K) => ctx.link<Links[K]>(k);
    const [review, checks, models] = await Promise.all([link('review'), link('checks'), link('models')]);
    const { cache } = models.question;
    const questions = () => checks.questions().questions;
    // The deployment's shared cache behind this process's (Redis distributed, the database
    // embedded): a replica, or this service after a crash, is answered without asking the model again.
    const shared = cache !== false && ctx.platform.sharedCache ? await ctx.platform.sharedCache('answers') : undefined;
    // Every model request's outcome on /metrics, and a failing model said in the log (a line a minute per endpoint).
    const onRequest = modelRequestWatch({ counter: ctx.metrics.modelRequests, warn: (m, fields) => ctx.log.warn(m, fields) });
    const bus = ctx.platform.bus();
    const topics = makeTopics(ctx.config.NEATROOTS_TOPIC_PREFIX);
    const service = await startQuestionService({
      bus,
      // Distributed, the batches of one fetch are answered as one step (mergingBatches), and one
      // consumer takes every partition in its fetches; more consumers fetch on their own and
      // their batches seldom meet (at 2,000 spans/s four of them cost the service a fifth more
      // CPU and the receipt-to-finding p99 a fifth more). With a slow model, more consumers
      // keep its queue full between steps: NEATROOTS_QUESTION_CONSUMERS.
      mergeBatches: ctx.platform.kind === 'distributed',
      consumers: ctx.config.NEATROOTS_QUESTION_CONSUMERS ?? (ctx.platform.kind === 'distributed' ? 1 : 4),
      topics,
      windows: await ctx.platform.windows<QuestionFindingsWindow>(':q'),
      ...models.question,
      queue: { ...models.question.queue, onRequest },
      cache: cache === false ? false : { ...cache, shared },
      onCacheLookup: (kind, result) => ctx.metrics.questionCache.inc({ kind, result }),
      questions,
      // A plan's new questions are database checks: read them in (the set is reloaded only if they changed).
      onPlan: () => void (checks.refresh ? checks.refresh() : checks.reload()).catch((err) => ctx.log.error('checks reload after a plan failed', err)),
      quiet: review.isQuiet,
      classifierStore: review.data.classifier,
      agreementStore: review.data.agreement,
      plans: review.data.plans,
      results: review.data.results,
      checks: { put: (c) => review.data.putCheck(c) },
      awaitPlans: ctx.config.awaitPlans,
      now: ctx.platform.clock && (() => ctx.platform.clock!.now()),
      log: (m, err) => ctx.log.error(m, err),
      warn: (m) => ctx.log.warn(m),
      onFindingsPublished: findingDelayHook(ctx),
      // Embedded, the stop's drain has waited already: what still waits on the model fails at once.
      stopGraceMs: ctx.platform.kind === 'distributed' ? (ctx.config.NEATROOTS_DRAIN_MS ?? 10_000) : 0,
    });
    // The tasks processed, as the Prometheus counter (neatroots_bus_consumed_total counts records).
    const stopSync = [syncCounter(ctx.metrics.questionTasks, {}, () => service.metrics.tasks)];
    // Each endpoint's outcomes and the questions' results from 0, so the first failure is an increase.
    for (const endpoint of Object.keys(service.answerer.queueStats())) for (const outcome of MODEL_OUTCOMES) ctx.metrics.modelRequests.inc({ endpoint, outcome }, 0);
    const { stats } = service.answerer;
    for (const result of ['answered', 'not_checked', 'escalated'] as const) {
      ctx.metrics.questions.inc({ result }, 0);
      stopSync.push(syncCounter(ctx.metrics.questions, { result }, () => stats[result]));
    }
    // What waits now, once a second: each model queue, and embedded the question tasks not processed
    // yet (distributed, neatroots_consumer_lag says it for Kafka). A slow model shows here long
    // before neatroots_question_tasks_total moves (it counts a bus batch once it is done).
    const gauges = setInterval(() => {
      for (const [endpoint, q] of Object.entries(service.answerer.queueStats())) {
        ctx.metrics.modelQueue.set({ endpoint, state: 'queued' }, q.queued);
        ctx.metrics.modelQueue.set({ endpoint, state: 'active' }, q.active);
      }
      if (ctx.platform.kind === 'embedded' && bus.backlog) ctx.metrics.busBacklog.set({ topic: topics.questions.name }, bus.backlog(topics.questions.name));
    }, 1000);
    gauges.unref();
    stopSync.push(() => clearInterval(gauges));
    ctx.serveGrpc('neatroots.v1.Question', questionGrpcService(service.answerer, (m, err) => ctx.log.error(m, err), questions));
    const provided: QuestionLink = {
      service,
      modelStats: (project, checkId) => agreementStats(service.answerer, { project, checkId, checks: questions }),
      decisions: answererDecisions(service.answerer),
      draft: (req) => draftCheck(req, (messages) => service.answerer.chat({ messages, json: true, maxTokens: 800 }, { wait: true })),
    };
    return {
      provides: { [QUESTION_LINK]: provided },
      stop: () => {
        for (const stop of stopSync) stop();
        return service.close();
      },
    };
  },
};
