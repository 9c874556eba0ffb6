import { RuleEngine, type EngineOutput, type RuleSet, type RunWindow } from '@neatroots/checks';
import { WindowConflictError, type Bus, type Subscription, type Topic, type WindowStore } from '@neatroots/ports';
import type { QuestionScheduler, SchedulerOutput } from '@neatroots/questions';
import { QUESTIONS_TOPIC, type Envelope, type FindingMessage, type Note, type QuestionTaskMessage } from '@neatroots/spans';

export interface RuleEngineTopics {
  events: Topic<Envelope>;
  findings: Topic<FindingMessage>;
  notes: Topic<Note>;
}

export interface RuleEngineServiceOptions {
  bus: Bus;
  windows: WindowStore<RunWindow>;
  rules: () => RuleSet;
  topics: RuleEngineTopics;
  steering?: (project: string) => boolean | Promise<boolean>;
  quiet?: (project: string, checkId: string) => boolean | Promise<boolean>;
  /** Consumer group; replicas share it and split the partitions. */
  group?: string;
  /** How often pending requires_before waits are checked. */
  tickMs?: number;
  /**
   * Question checks: the scheduler runs beside the rule engine on the same batches and hands
   * the questions that are due to the question service (the questions topic). Without it the
   * service evaluates rules only.
   */
  questions?: { scheduler: QuestionScheduler; topic?: Topic<QuestionTaskMessage> };
  log?: (msg: string, err?: unknown) => void;
}

export interface RuleEngineMetrics {
  consumed: number;
  batches: number;
  findings: number;
  notes: number;
  /** Question tasks handed to the question service. */
  questions: number;
  errors: number;
}

export interface RuleEngineService {
  engine: RuleEngine;
  metrics: RuleEngineMetrics;
  close(): Promise<void>;
}

/**
 * The rule-engine service: a consumer group on the events topic. For each batch it
 * evaluates the rule checks, publishes findings and notes, and only then saves the run
 * windows; the bus moves its offset after that. A crash anywhere in between replays the
 * batch against the windows as they were, producing the same findings (same ids).
 */
export async function startRuleEngine(opts: RuleEngineServiceOptions): Promise<RuleEngineService> {
  const log = opts.log ?? ((msg, err) => console.error(`rule-engine: ${msg}`, err ?? ''));
  const engine = new RuleEngine({ windows: opts.windows, rules: opts.rules, steering: opts.steering, quiet: opts.quiet });
  const metrics: RuleEngineMetrics = { consumed: 0, batches: 0, findings: 0, notes: 0, questions: 0, errors: 0 };
  const questionsTopic = opts.questions?.topic ?? QUESTIONS_TOPIC;

  const emit = async (out: EngineOutput, asked?: SchedulerOutput) => {
    // Published together: the Kafka bus gathers concurrent publishes into one send, so the
    // step waits for one acknowledgement instead of one per topic.
    const sends: Promise<void>[] = [];
    if (out.findings.length) sends.push(opts.bus.publish(opts.topics.findings, out.findings.map((f) => ({ key: f.run_id, value: f }))));
    if (out.notes.length) sends.push(opts.bus.publish(opts.topics.notes, out.notes.map((n) => ({ key: n.run_id, value: n }))));
    if (asked?.tasks.length) sends.push(opts.bus.publish(questionsTopic, asked.tasks.map((t) => ({ key: t.run_id, value: t }))));
    await Promise.all(sends);
    metrics.findings += out.findings.length;
    metrics.notes += out.notes.length;
    metrics.questions += asked?.tasks.length ?? 0;
    // Windows are saved only once everything they led to is on the bus (the same order for both).
    await out.commit();
    await asked?.commit();
  };

  // One step at a time, publish and save included: a step that loaded a run's window while
  // the step before was still publishing would save over it (the compare-and-set refuses
  // that, and the batch is read again, but only after a delay).
  let chain: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(fn: () => Promise<T>): Promise<T> => {
    const p = chain.then(fn, fn);
    chain = p.catch(() => undefined);
    return p;
  };

  const sub: Subscription = await opts.bus.subscribe(opts.topics.events, { group: opts.group ?? 'rule-engine' }, (batch) =>
    exclusive(async () => {
      const envs = batch.records.map((r) => r.value);
      const out = await engine.process(envs);
      await emit(out, opts.questions ? await opts.questions.scheduler.process(envs) : undefined);
      metrics.consumed += envs.length;
      metrics.batches++;
    }),
  );

  let ticking = false;
  const timer = setInterval(() => {
    if (ticking) return;
    ticking = true;
    exclusive(async () => emit(await engine.tick(Date.now())))
      .catch((err) => {
        // Another replica saved the run meanwhile: its wake is leased, so it comes round again.
        if (err instanceof WindowConflictError) return;
        metrics.errors++;
        log('tick failed (will retry)', err);
      })
      .finally(() => (ticking = false));
  }, opts.tickMs ?? 50);
  timer.unref();

  return {
    engine,
    metrics,
    close: async () => {
      clearInterval(timer);
      await sub.close();
    },
  };
}
