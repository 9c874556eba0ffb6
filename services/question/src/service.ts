import type { FindingEvent, QuestionCheck } from '@neatroots/checks';
import { mergingBatches, type Bus, type BusBatch, type ChatModel, type Db, type Subscription, type Topic, type WindowStore } from '@neatroots/ports';
import {
  AgreementTracker,
  FastClassifier,
  Planner,
  QuestionAnswerer,
  QuestionProcessor,
  type AgreementStore,
  type AnswererOptions,
  type Backend,
  type ClassifierStore,
  type DbCheckSink,
  type ModelQueueOptions,
  type Plan,
  type PlanStore,
  type QuestionFindingsWindow,
  type ResultSink,
} from '@neatroots/questions';
import {
  FINDINGS_TOPIC,
  NOTES_TOPIC,
  QUESTIONS_TOPIC,
  type FindingMessage,
  type Note,
  type QuestionTaskMessage,
} from '@neatroots/messages';
import { ChecksRepo, QuestionsRepo } from '@neatroots/store';
import { startQuestionGrpc, type QuestionGrpc } from './grpc';

/**
 * The question service: the one gateway to models (ARCHITECTURE.md). It consumes the question
 * tasks the rule engine's scheduler publishes, answers them through the batching model queues
 * (or the fast classifier), and publishes findings and notes exactly as the rule engine does:
 * publish first, then save its windows, then the bus moves the offset. A crash in between
 * answers the batch again and publishes the same finding ids. Other services ask it over gRPC
 * (neatroots.v1.Question). In the embedded deployment the same function runs in-process.
 */
export interface QuestionTopics {
  questions: Topic<QuestionTaskMessage[]>;
  findings: Topic<FindingMessage>;
  notes: Topic<Note>;
}

export interface QuestionServiceOptions {
  bus: Bus;
  /** The runs' question findings (keys prefixed "qf"); any window store, shared or not. */
  windows: WindowStore<QuestionFindingsWindow>;
  /** The OpenAI-compatible endpoints (modelsFromConfig in @neatroots/platform); none: the fast classifier answers. */
  models?: { decision?: ChatModel; local?: ChatModel; reasoning?: ChatModel };
  backend?: Backend;
  /**
   * A migrated database: classifier models, agreement, plans, question results and the
   * planner's questions (db_checks) are kept there. Without it they live in memory.
   */
  db?: Db;
  classifierStore?: ClassifierStore;
  agreementStore?: AgreementStore;
  plans?: PlanStore;
  results?: ResultSink;
  checks?: DbCheckSink;
  /** The question checks in effect: the planner picks from the library ones. */
  questions?: () => readonly QuestionCheck[];
  /** After a plan is stored (reload the database checks, so its new questions load). */
  onPlan?: (plan: Plan) => void;
  quiet?: (project: string, checkId: string) => boolean | Promise<boolean>;
  topics?: Partial<QuestionTopics>;
  /** Consumer group; replicas share it. */
  group?: string;
  /** Consumers in this process: more partitions answered at once, so more questions per model request. */
  consumers?: number;
  /**
   * The consumers' batches that come together are taken as one step (mergingBatches): one read
   * and write of the findings windows and one publish for them all. For Redis and Kafka, where
   * those are round trips (the distributed deployment).
   */
  mergeBatches?: boolean;
  /** neatroots.v1.Question over gRPC; off unless a port is given (0 picks a free one). */
  grpc?: { port: number; host?: string };
  queue?: ModelQueueOptions;
  decisionQueue?: ModelQueueOptions;
  localQueue?: ModelQueueOptions;
  reasoningQueue?: ModelQueueOptions;
  cache?: AnswererOptions['cache'];
  /** Each cache lookup before a model is asked (metrics: neatroots_question_cache_lookups_total). */
  onCacheLookup?: AnswererOptions['onCacheLookup'];
  /** When a question goes to the fast classifier first (default: 90% agreement over at least 30 answers). */
  routing?: { minAnswers?: number; minRate?: number };
  auditRate?: number;
  /** How often what the classifier learnt is written to the database. */
  flushMs?: number;
  /** How often the classifier's models are saved (rounded to a multiple of flushMs). Default 60 s; close saves them too. */
  modelFlushMs?: number;
  heartbeatMs?: number;
  /**
   * How long close() lets the batches in hand finish before it closes the model queues (what
   * waits in them fails, the requests in flight are aborted; the batches fail, are not
   * committed and are delivered again). Default 0: the embedded stop has drained already.
   */
  stopGraceMs?: number;
  /** A batch waits for the plans it started (replay: the same output every time). */
  awaitPlans?: boolean;
  /** The clock plans are dated by (replay: the recording's). */
  now?: () => number;
  log?: (msg: string, err?: unknown) => void;
  /** A model's failure that is not a bug (the planner's LLM timed out, say): a line at warn level. */
  warn?: (msg: string) => void;
  /** The findings of a batch once their publish was acknowledged (metrics: neatroots_finding_delay_seconds). */
  onFindingsPublished?: (findings: readonly FindingEvent[]) => void;
}

export interface QuestionServiceMetrics {
  batches: number;
  tasks: number;
  findings: number;
  notes: number;
  errors: number;
}

export interface QuestionService {
  answerer: QuestionAnswerer;
  processor: QuestionProcessor;
  metrics: QuestionServiceMetrics;
  /** The gRPC port, when served. */
  grpcPort?: number;
  /** Resolves when plans and background agreement checks in progress are done (tests, replay). */
  idle(): Promise<void>;
  /**
   * Stops the consumers, lets the batches in hand finish for stopGraceMs, then closes the model
   * queues (the batches still waiting on the model fail and are delivered again: a stop does
   * not wait for a slow model), stops the gRPC server and flushes what was learnt.
   */
  close(): Promise<void>;
}

export async function startQuestionService(opts: QuestionServiceOptions): Promise<QuestionService> {
  const log = opts.log ?? ((msg, err) => console.error(`question: ${msg}`, err ?? ''));
  const repo = opts.db ? new QuestionsRepo(opts.db) : undefined;
  const checksRepo = opts.db ? new ChecksRepo(opts.db) : undefined;
  const topics: QuestionTopics = {
    questions: opts.topics?.questions ?? QUESTIONS_TOPIC,
    findings: opts.topics?.findings ?? FINDINGS_TOPIC,
    notes: opts.topics?.notes ?? NOTES_TOPIC,
  };
  const answerer = new QuestionAnswerer({
    decision: opts.models?.decision,
    local: opts.models?.local,
    reasoning: opts.models?.reasoning,
    backend: opts.backend,
    classifier: new FastClassifier({ store: opts.classifierStore ?? repo }),
    agreement: new AgreementTracker({ store: opts.agreementStore ?? repo?.agreement, ...opts.routing }),
    queue: opts.queue,
    decisionQueue: opts.decisionQueue,
    localQueue: opts.localQueue,
    reasoningQueue: opts.reasoningQueue,
    cache: opts.cache,
    onCacheLookup: opts.onCacheLookup,
    auditRate: opts.auditRate,
    onError: (msg, err) => log(msg, err),
  });
  const library = () => (opts.questions?.() ?? []).filter((q) => q.source === 'library');
  const planner = new Planner({
    get library() {
      return library();
    },
    chat: answerer.llm() ? (messages) => answerer.chat({ messages, json: true, maxTokens: 1500 }, { wait: true }) : undefined,
    now: opts.now,
    onError: (msg, err) => log(msg, err),
    onWarn: opts.warn ?? ((msg) => console.warn(`question: ${msg}`)),
  });
  const processor = new QuestionProcessor({
    answerer,
    windows: opts.windows,
    quiet: opts.quiet,
    plans: opts.plans ?? repo,
    planner,
    checks: opts.checks ?? checksRepo,
    onPlan: opts.onPlan,
    results: opts.results ?? repo,
    awaitPlans: opts.awaitPlans,
    wait: true,
    log,
  });
  const metrics: QuestionServiceMetrics = { batches: 0, tasks: 0, findings: 0, notes: 0, errors: 0 };
  const heartbeatMs = opts.heartbeatMs ?? 3_000;

  // Answers can take a while (a local LLM, a retry): the batches in hand say they are alive,
  // from one timer for the service rather than one per batch (a timer set and cleared for
  // every batch cost replay, whose batches are an item's few questions, more than the batch).
  // It holds the process open only while a batch is in hand, as the timer per batch did.
  const inHand = new Set<BusBatch<QuestionTaskMessage[]>>();
  const beat = setInterval(() => {
    for (const batch of inHand) batch.heartbeat().catch((err) => log('heartbeat failed', err));
  }, heartbeatMs);
  beat.unref();

  const handle = async (batch: BusBatch<QuestionTaskMessage[]>) => {
    if (inHand.add(batch).size === 1) beat.ref();
    try {
      const tasks = batch.records.length === 1 ? batch.records[0].value : batch.records.flatMap((r) => r.value);
      const out = await processor.process(tasks);
      if (out.findings.length) {
        await opts.bus.publish(topics.findings, out.findings.map((f) => ({ key: f.run_id, value: f })));
        opts.onFindingsPublished?.(out.findings);
        metrics.findings += out.findings.length;
      }
      if (out.notes.length) {
        await opts.bus.publish(topics.notes, out.notes.map((n) => ({ key: n.run_id, value: n })));
        metrics.notes += out.notes.length;
      }
      await out.commit();
      metrics.batches++;
      metrics.tasks += tasks.length;
    } catch (err) {
      metrics.errors++;
      throw err;
    } finally {
      inHand.delete(batch);
      if (!inHand.size) beat.unref();
    }
  };

  const subs: Subscription[] = [];
  let grpc: QuestionGrpc | undefined;
  try {
    const merged = opts.mergeBatches ? mergingBatches(handle) : handle;
    for (let i = 0; i < Math.max(1, opts.consumers ?? 4); i++) {
      subs.push(await opts.bus.subscribe(topics.questions, { group: opts.group ?? 'question' }, merged));
    }
    if (opts.grpc) grpc = await startQuestionGrpc(answerer, { ...opts.grpc, log, checks: opts.questions });
  } catch (e) {
    clearInterval(beat);
    await Promise.all(subs.map((s) => s.close()));
    answerer.close();
    throw e;
  }

  const flushMs = opts.flushMs ?? 5_000;
  // The models every modelFlushMs: each is written whole (hundreds of KB), and the embedded
  // database reclaims the space of the old copies only at its hourly VACUUM.
  const modelsEvery = Math.max(1, Math.round((opts.modelFlushMs ?? 60_000) / flushMs));
  // A save does not wait for the background checks under way (flush), and never two at once:
  // a tick while the last save is still being written is skipped (the models' turn is kept for
  // the next tick that saves), so slow writes do not pile up one save per tick.
  let ticks = 0;
  let modelsDue = false;
  let saving: Promise<void> | undefined;
  const flusher = setInterval(() => {
    if (++ticks % modelsEvery === 0) modelsDue = true;
    if (saving) return;
    const models = modelsDue;
    modelsDue = false;
    saving = answerer
      .flush({ models })
      .catch((err) => {
        if (models) modelsDue = true;
        log('saving what the classifier learnt failed (will retry)', err);
      })
      .finally(() => (saving = undefined));
  }, flushMs);
  flusher.unref();

  let closed: Promise<void> | undefined;
  return {
    answerer,
    processor,
    metrics,
    grpcPort: grpc?.port,
    idle: async () => {
      await processor.idle();
      await answerer.idle();
    },
    close: () =>
      (closed ??= (async () => {
        clearInterval(flusher);
        clearInterval(beat);
        const consumers = Promise.all(subs.map((s) => s.close()));
        const graceMs = opts.stopGraceMs ?? 0;
        if (graceMs > 0) {
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([consumers, new Promise<void>((r) => (timer = setTimeout(r, graceMs)))]);
          clearTimeout(timer);
        }
        // What waits for the model fails now, and the requests in flight are aborted: their
        // batches fail, are not committed and are delivered again at the next start (the answers
        // already given are in the shared cache: not asked again). The background audits end too.
        answerer.close();
        await grpc?.close();
        await consumers;
        await processor.idle();
        await saving;
        try {
          // What the answers given so far taught (the audits ended with the queues).
          await answerer.flush({ drain: true });
        } catch (err) {
          log('saving what the classifier learnt failed on shutdown', err);
        }
      })()),
  };
}
