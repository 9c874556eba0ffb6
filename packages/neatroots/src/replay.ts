import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { compileRuleSet, SafeMatching, type Check, type FindingEvent } from '@neatroots/checks';
import { makeTopics } from '@neatroots/messages';
import { createMetrics, loadConfig, replayPlatform, startServices, type ModelConfig, type Services } from '@neatroots/platform';
import type { Logger } from '@neatroots/ports';
import { questionModule, type QuestionLink } from '@neatroots/question';
import { MemoryPlanStore, questionSet, type QuestionResult } from '@neatroots/questions';
import { ruleEngineModule, type RuleEngineService } from '@neatroots/rule-engine';
import { DEFAULT_SPAN_LIMITS, itemRunId, parseJsonlLine, type Envelope, type LimitCheck, type SpanLimits, type StreamItem } from '@neatroots/spans';
import { localLlmStandsIn, questionServiceConfig } from './questions';

/** The finding event of CONTRACTS.md section 3, fields in the contract's order. */
export function findingLine(f: FindingEvent): Record<string, unknown> {
  const line: Record<string, unknown> = {
    check_id: f.check_id,
    run_id: f.run_id,
    status: f.status,
    span_ids: f.span_ids,
    count: f.count,
    action: f.action,
    title: f.title,
    guidance: f.guidance,
    at_ms: f.at_ms,
    id: f.id,
  };
  if (f.group) line.group = f.group;
  if (f.halt_suppressed) line.halt_suppressed = true;
  // Question findings add the words that show the problem and how sure the answer is.
  if (f.quote) line.quote = f.quote;
  if (f.probability !== undefined) line.probability = f.probability;
  if (f.confidence) line.confidence = f.confidence;
  return line;
}

export interface SummaryLine {
  check_id: string;
  run_id: string;
  state: 'open' | 'resolved';
  count: number;
}

/**
 * One line per check and run: open while any of its findings in the run is open, and the
 * count summed over its findings (a streak's length, the number of slow spans...).
 */
export class Summary {
  private readonly byFinding = new Map<string, FindingEvent>();

  add(f: FindingEvent): void {
    this.byFinding.set(f.id, f);
  }

  lines(): SummaryLine[] {
    const out = new Map<string, SummaryLine>();
    for (const f of this.byFinding.values()) {
      const k = `${f.check_id}\u0000${f.run_id}`;
      const cur = out.get(k) ?? { check_id: f.check_id, run_id: f.run_id, state: 'resolved', count: 0 };
      cur.count += f.count;
      if (f.status !== 'resolved') cur.state = 'open';
      out.set(k, cur);
    }
    return [...out.values()];
  }
}

export interface ReplayOptions {
  checks: readonly Check[];
  /** Called with every finding event in the order they happen. */
  onFinding(f: FindingEvent): void;
  log?: (msg: string) => void;
  /** Whether halts act (replay shows what steering would do: on by default). */
  steering?: boolean;
  /**
   * Question checks are answered by the models configured (loadModelConfig), with the queue
   * settings the question service uses, else by the built-in fast classifier; false leaves
   * them out.
   */
  models?: ModelConfig | false;
  /** A question that could not be answered (a model error or timeout): not checked, never a pass. */
  onNotChecked?(r: QuestionResult): void;
  /** Wraps the configured models (a preview counts and bounds its model calls). */
  wrapModels?(models: QuestionModels): QuestionModels;
  /** Items a publish (default BATCH); the findings are the same whatever it is. */
  batch?: number;
}

/** The model clients the question service is given. */
type QuestionModels = NonNullable<ReturnType<typeof questionServiceConfig>['models']>;

function itemTime(item: StreamItem): number | undefined {
  if (item.kind === 'span') return item.span.end_ms ?? item.span.start_ms;
  return item.run.ts_ms;
}

function itemProject(item: StreamItem, projects: Map<string, string>): string {
  const runId = item.kind === 'span' ? item.span.run_id : item.run.run_id;
  const explicit = item.kind === 'span' ? item.span.project : item.kind === 'run_start' ? item.run.project : undefined;
  if (explicit) {
    projects.set(runId, explicit);
    return explicit;
  }
  return projects.get(runId) ?? 'default';
}

/**
 * Replays recorded items through the same services as `neatroots start` (startServices with
 * the rule-engine and question modules) on the replay platform: its bus has one partition and
 * its clock is the recording's. Each item is stamped with its own time (end_ms, else
 * start_ms, else ts_ms; never earlier than the item before) and published in batches of
 * BATCH; the rule engine takes a batch's items one at a time, each at its time, and lets
 * the questions each led to be answered before the next (RecordedClock), so requires_before's
 * 250 ms wait behaves as it did live, findings come in the recording's order, and with the
 * fast classifier the output is the same on every run.
 */
export class Replayer {
  private readonly platform = replayPlatform({ onError: (err, topic) => this.log(`${topic}: ${(err as Error)?.message ?? err}`) });
  // Replay's own settings, not the environment's: plans are read straight from memory, and a
  // batch waits for the plans it started (the same output every time).
  private readonly config = { ...loadConfig({}), planCacheMs: 0, awaitPlans: true };
  private readonly topics = makeTopics(this.config.NEATROOTS_TOPIC_PREFIX);
  private readonly projects = new Map<string, string>();
  // The recording's time so far (the clock itself is moved by the rule engine, item by item).
  private time = 0;
  private pending: { key: string; value: Envelope }[] = [];
  private running = false;
  private readonly log: (msg: string) => void;
  private readonly started: Promise<{ services: Services; matching: SafeMatching }>;
  // The model queues' batching timers do not hold Node open (a service must be able to
  // stop): without this a command whose last work is a question would exit before its answer.
  private readonly keepAlive = setInterval(() => undefined, 60_000);
  private closing?: Promise<void>;

  constructor(private readonly opts: ReplayOptions) {
    this.log = opts.log ?? ((m: string) => process.stderr.write(`${m}\n`));
    this.started = this.start();
    // Said at the first push or end, not as an unhandled rejection.
    this.started.catch(() => undefined);
  }

  private async start(): Promise<{ services: Services; matching: SafeMatching }> {
    const { opts } = this;
    const matching = new SafeMatching({ warn: this.log });
    const rules = compileRuleSet(opts.checks, matching.matcher);
    const asked = questionSet(opts.models === false ? [] : opts.checks);
    // Without the library (--no-library) there is nothing to plan from.
    const plans = asked.questions.some((c) => c.source === 'library') ? new MemoryPlanStore() : undefined;
    const onNotChecked = opts.onNotChecked;
    const review = {
      isQuiet: async () => false,
      data: {
        plans,
        // Nothing is kept: the classifier and agreement learn in memory for this replay only.
        classifier: undefined,
        agreement: undefined,
        results: { record: async (rs: readonly QuestionResult[]) => rs.forEach((r) => r.answer.status === 'not_checked' && onNotChecked?.(r)) },
        putCheck: async () => undefined,
      },
    };
    const models = opts.models || undefined;
    await this.platform.bus().subscribe(this.topics.findings, { group: 'replay' }, async (batch) => {
      // The in-process bus passes the services' own FindingEvents (by reference, not encoded).
      for (const r of batch.records) opts.onFinding(r.value as FindingEvent);
    });
    const services = await startServices({
      platform: this.platform,
      // The two modules themselves, not compose.ts's table of all five: a command that runs no
      // server does not load the api's and review's (NestJS, the drivers: half a second of start).
      modules: asked.questions.length ? [ruleEngineModule, questionModule] : [ruleEngineModule],
      config: this.config,
      log: lineLogger(this.log),
      metrics: createMetrics('replay'),
      links: {
        review: () => review,
        checks: () => ({ rules: () => rules, questions: () => asked, reload: async () => undefined }),
        steering: () => async () => opts.steering ?? true,
        models: () => ({ localLlmStandsIn: models ? localLlmStandsIn(models) : false, question: models ? wrapped(questionServiceConfig(models), opts.wrapModels) : {} }),
      },
    });
    return { services, matching };
  }

  /**
   * Takes the next item. Not an async function: an item that only joins the batch returns a
   * promise already settled instead of making one (an async call per item showed in replay's
   * profile); the batch's last item returns its publish.
   */
  push(item: StreamItem): Promise<void> {
    // Awaited only until it has started (a wait per item costs a turn of the microtask queue).
    if (!this.running) return this.started.then(() => {
      this.running = true;
      return this.push(item);
    });
    const t = itemTime(item);
    if (t !== undefined && t > this.time) this.time = t;
    const project = itemProject(item, this.projects);
    this.pending.push({ key: itemRunId(item), value: { project, received_ms: this.time, item } });
    if (this.pending.length >= (this.opts.batch ?? BATCH)) return this.flush();
    return JOINED;
  }

  /** Publishes the items read so far and waits until they, and all they led to, are done. */
  private async flush(): Promise<void> {
    const records = this.pending;
    this.pending = [];
    if (records.length) await this.platform.bus().publish(this.topics.events, records);
    await this.platform.bus().idle();
  }

  /** The end of the recording: no late span can come, so every wait still pending fires. */
  async end(): Promise<void> {
    try {
      const { services } = await this.started;
      await this.flush();
      await (await services.link<RuleEngineService>('rule-engine')).end();
      await this.platform.bus().idle();
      if (services.running.has('question')) await (await services.link<QuestionLink>('question')).service.idle();
      await this.platform.bus().idle();
    } finally {
      await this.close();
    }
  }

  /** Stops the services (after end(), or when reading the recording failed part way). */
  close(): Promise<void> {
    return (this.closing ??= (async () => {
      clearInterval(this.keepAlive);
      const started = await this.started.catch(() => undefined);
      await started?.services.close();
      await started?.matching.close();
    })());
  }
}

/**
 * Items a publish: a batch step (the bus's delivery, the rule engine's lock, waiting for the
 * bus to go idle) cost about as much as the item itself when paid per item. Few: items read
 * ahead stay alive until their batch is done, and a thousand of them (1,000 parsed spans)
 * made every young-generation collection copy them (more CPU than one item a batch); 32 was
 * the cheapest of 1-1,000 on bench/replay.js's file.
 */
const BATCH = 32;

/** What push() returns for an item that joined the batch. */
const JOINED: Promise<void> = Promise.resolve();

function wrapped(q: ReturnType<typeof questionServiceConfig>, wrap?: (m: QuestionModels) => QuestionModels): ReturnType<typeof questionServiceConfig> {
  return wrap && q.models ? { ...q, models: wrap(q.models) } : q;
}

/** The services' log lines as replay's warnings. */
function lineLogger(log: (msg: string) => void): Logger {
  const logger: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (msg) => log(msg),
    error: (msg, err) => log(err === undefined ? msg : `${msg}: ${(err as Error)?.message ?? err}`),
    child: () => logger,
  };
  return logger;
}

/**
 * What a replayed line may hold: ingest's limits on nesting and sizes (JSON nested thousands
 * deep would overflow the engine's stack instead of being reported with its line), but any
 * time: a recorded file is not checked against this machine's clock, so maxFutureMs is ignored.
 * `neatroots replay` passes the environment's NEATROOTS_MAX_* (spanLimitsOf), as ingest uses.
 */
function replayLimits(limits: SpanLimits): LimitCheck {
  return { limits: { ...limits, maxFutureMs: Number.POSITIVE_INFINITY }, now: 0 };
}

/**
 * Reads JSON Lines files in order, a line at a time (large files are streamed), each line held
 * to `limits` but the clock (default: ingest's defaults, DEFAULT_SPAN_LIMITS).
 */
export async function* readItems(files: readonly string[], limits: SpanLimits = DEFAULT_SPAN_LIMITS): AsyncGenerator<StreamItem> {
  const check = replayLimits(limits);
  for (const file of files) {
    const rl = createInterface({ input: createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity });
    let n = 0;
    for await (const line of rl) {
      n++;
      const item = parseJsonlLine(line, file, n, check);
      if (item) yield item;
    }
  }
}
