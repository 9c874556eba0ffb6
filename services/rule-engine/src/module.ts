import { DISABLED_CHECKS_BOARD, disabledChecks, RUN_WINDOW_MEMBER_FIELDS, shareDisabledChecks, type DisabledCheck, type QuestionCheck, type RuleSet, type RunWindow } from '@neatroots/checks';
import { findingDelayHook, syncCounter, type ServiceModule } from '@neatroots/ports';
import {
  ClassifierFirstView, LOCAL_LLM_POLICY, QUESTION_WINDOW_LIST_FIELDS, QUESTION_WINDOW_MEMBER_FIELDS, QuestionScheduler, questionKey,
  type AgreementRecord, type PlanStore, type QuestionSet, type ResultSink, type SchedulerWindow, type SpanPolicy,
} from '@neatroots/questions';
import { makeTopics } from '@neatroots/messages';
import { ruleEngineGrpcService } from './grpc';
import { startRuleEngine } from './service';

/** The configuration the rule engine reads. */
export interface RuleEngineConfig {
  NEATROOTS_TOPIC_PREFIX: string;
  NEATROOTS_WINDOW_TTL_MS: number;
  NEATROOTS_WINDOW_IDLE_MS: number;
  /** How often a live trace question may be asked again per run (QuestionScheduler's liveTraceGapMs). */
  NEATROOTS_LIVE_TRACE_GAP_MS: number;
  /** How often the embedded journal writes the run windows saved since (startRuleEngine's windowCheckpointMs). */
  NEATROOTS_WINDOW_CHECKPOINT_MS?: number;
  /** Embedded: question task records waiting past which no new questions are handed over (startRuleEngine's questions.maxBacklog). */
  NEATROOTS_MAX_QUESTION_BACKLOG?: number;
  /**
   * How long the question scheduler keeps a run's plan before reading it again (its default
   * when absent). Replay sets 0: its plans are in memory, and one made on a run's run_start
   * must be used for the rest of the run.
   */
  planCacheMs?: number;
}

/** What it asks of the other links (each provider gives at least this). */
interface Links {
  /** The review service: quiet checks, the plans question checks are scheduled by, and the question results (a shed question is not checked). */
  review: { isQuiet(project: string, checkId: string): Promise<boolean>; data: { plans: PlanStore; agreement?: { list(): Promise<AgreementRecord[]> }; results?: ResultSink } };
  /** The checks in effect, reloaded without a restart. */
  checks: { rules(): RuleSet; questions(): QuestionSet };
  /** Whether halts act in a project. */
  steering: (project: string) => Promise<boolean>;
  /** The question checks' cost control: the local LLM answers alone (fewer, later questions). */
  models: { localLlmStandsIn: boolean };
}

/**
 * The rule engine as a module: a consumer group on the events topic evaluating rule checks,
 * with the question scheduler beside it handing due question checks to the question service.
 */
export const ruleEngineModule: ServiceModule<RuleEngineConfig> = {
  name: 'rule-engine',
  needs: ['bus', 'windows', 'review', 'checks', 'steering', 'models'],
  provides: ['rule-engine'],
  async start(ctx) {
    const link = <K extends keyof Links>(k: K) => ctx.link<Links[K]>(k);
    const [review, checks, steering, models] = await Promise.all([link('review'), link('checks'), link('steering'), link('models')]);
    const topics = makeTopics(ctx.config.NEATROOTS_TOPIC_PREFIX);
    const schedulerWindows = await ctx.platform.windows<SchedulerWindow>(':qs', { memberFields: QUESTION_WINDOW_MEMBER_FIELDS, listFields: QUESTION_WINDOW_LIST_FIELDS });
    const engine = await startRuleEngine({
      bus: ctx.platform.bus(),
      windows: await ctx.platform.windows<RunWindow>('', { memberFields: RUN_WINDOW_MEMBER_FIELDS }),
      rules: checks.rules,
      topics,
      questions: {
        scheduler: new QuestionScheduler({
          windows: schedulerWindows,
          questions: checks.questions,
          plans: review.data.plans,
          policy: spanPolicy(models.localLlmStandsIn, review.data.agreement, (err) => ctx.log.warn(`rule engine: reading which questions the fast classifier answers first failed: ${(err as Error).message}`)),
          liveTraceGapMs: ctx.config.NEATROOTS_LIVE_TRACE_GAP_MS,
          // The scheduler's run windows are kept as long as the rule engine's.
          ttlAfterEndMs: ctx.config.NEATROOTS_WINDOW_TTL_MS,
          ttlIdleMs: ctx.config.NEATROOTS_WINDOW_IDLE_MS,
          planCacheMs: ctx.config.planCacheMs,
          now: ctx.platform.clock && (() => ctx.platform.clock!.now()),
        }),
        topic: topics.questions,
        windows: schedulerWindows,
        // Kafka's backlog() counts what waits to be sent, not what a group has not taken: its retention bounds the topic.
        maxBacklog: ctx.platform.kind === 'distributed' ? 0 : ctx.config.NEATROOTS_MAX_QUESTION_BACKLOG,
        // A question not handed over is recorded as not checked, with why (the run page lists it).
        results: review.data.results,
      },
      steering,
      quiet: review.isQuiet,
      recorded: ctx.platform.clock,
      mergeBatches: ctx.platform.kind === 'distributed',
      windowTtlAfterEndMs: ctx.config.NEATROOTS_WINDOW_TTL_MS,
      windowTtlIdleMs: ctx.config.NEATROOTS_WINDOW_IDLE_MS,
      windowCheckpointMs: ctx.config.NEATROOTS_WINDOW_CHECKPOINT_MS,
      log: (m, err, fields) => ctx.log.error(m, err, fields),
      onFindingsPublished: findingDelayHook(ctx),
      // Distributed: the windows are in Redis, shared; a wait for exported spans polls it less often.
      ...(ctx.platform.kind === 'distributed' ? { precheckPollMs: 2 } : {}),
    });
    // Pre-call checks for the ingest processes (the distributed deployment; not served in-process).
    ctx.serveGrpc('neatroots.v1.RuleEngine', ruleEngineGrpcService(engine));
    // The engine's finding count, as the Prometheus counter.
    const stopSync = syncCounter(ctx.metrics.findings, { status: 'any' }, () => engine.metrics.findings);
    const stopShedSync = syncCounter(ctx.metrics.questionTasksShed, {}, () => engine.metrics.questionsShed);
    // Checks disabled for a slow pattern (this process's matchers), as a gauge per check, rebuilt
    // on every change: a check whose pattern changed or that was deleted leaves the list, and the gauge.
    const showDisabled = (all: DisabledCheck[]) => {
      ctx.metrics.checksDisabled.reset();
      for (const d of all) ctx.metrics.checksDisabled.set({ check_id: d.check_id, source: d.source ?? '' }, 1);
    };
    showDisabled(disabledChecks.list());
    const unwatch = disabledChecks.onChange(showDisabled);
    // Distributed, the api runs elsewhere: the list goes on the deployment's board for it to read.
    const board = ctx.platform.sharedBoard ? await ctx.platform.sharedBoard(DISABLED_CHECKS_BOARD) : undefined;
    const unshare = board ? shareDisabledChecks(board, disabledChecks, { onError: (err) => ctx.log.error('rule engine: the disabled checks could not be shared', err) }) : undefined;
    return {
      provides: { 'rule-engine': engine },
      stop: async () => {
        await unshare?.();
        unwatch();
        stopSync();
        stopShedSync();
        await engine.close();
      },
    };
  },
};

/**
 * The question scheduler's cost control: when the local LLM stands in for the decision model,
 * span questions are asked about the newest waiting span only, at most four a run; a question
 * the fast classifier now answers first (it agreed with the LLM often enough, as the question
 * service records it) is asked about every span, as with the decision model.
 */
export function spanPolicy(
  localLlmStandsIn: boolean,
  agreement: { list(): Promise<AgreementRecord[]> } | undefined,
  onError: (err: unknown) => void,
): SpanPolicy | ((q: QuestionCheck) => SpanPolicy | undefined) | undefined {
  if (!localLlmStandsIn) return undefined;
  if (!agreement) return LOCAL_LLM_POLICY;
  const first = new ClassifierFirstView(() => agreement.list(), { onError });
  return (q) => (first.has(questionKey(q)) ? undefined : LOCAL_LLM_POLICY);
}
