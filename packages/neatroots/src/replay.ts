import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import {
  compileRuleSet,
  RuleEngine,
  SafeMatching,
  windowKey,
  type Check,
  type EngineOutput,
  type FindingEvent,
  type RunWindow,
} from '@neatroots/checks';
import { MemoryWindowStore } from '@neatroots/platform';
import type { QuestionServiceOptions } from '@neatroots/question';
import {
  LOCAL_LLM_POLICY,
  MemoryPlanStore,
  Planner,
  QuestionAnswerer,
  QuestionProcessor,
  QuestionScheduler,
  questionSet,
  type QuestionResult,
  type QuestionFindingsWindow,
  type SchedulerWindow,
} from '@neatroots/questions';
import { DEFAULT_SPAN_LIMITS, parseJsonlLine, type Envelope, type LimitCheck, type StreamItem } from '@neatroots/spans';

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
   * Question checks are answered by the models given, with the queue settings the question
   * service uses (questionServiceConfig), else by the built-in fast classifier; false leaves
   * them out.
   */
  questions?: Partial<Pick<QuestionServiceOptions, 'models' | 'backend' | 'queue' | 'decisionQueue' | 'localQueue' | 'cache'>> | false;
  /** A question that could not be answered (a model error or timeout): not checked, never a pass. */
  onNotChecked?(r: QuestionResult): void;
}

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
 * Runs the real rule engine over recorded items, and the question checks beside it. The clock
 * is the recording's: each item arrives at its own time (end_ms, else start_ms, else ts_ms;
 * never earlier than the item before), so requires_before's 250 ms wait behaves as it did
 * live, and with the fast classifier the output is the same on every run.
 */
export class Replayer {
  private readonly engine: RuleEngine;
  private readonly questions?: { scheduler: QuestionScheduler; processor: QuestionProcessor; answerer: QuestionAnswerer };
  private readonly windows = new MemoryWindowStore<RunWindow>(() => 0);
  private readonly projects = new Map<string, string>();
  private readonly keys = new Set<string>();
  private clock = 0;
  private readonly matching: SafeMatching;

  constructor(private readonly opts: ReplayOptions) {
    const log = opts.log ?? ((m: string) => process.stderr.write(`${m}\n`));
    this.matching = new SafeMatching({ warn: log });
    const set = compileRuleSet(opts.checks, this.matching.matcher);
    this.engine = new RuleEngine({ windows: this.windows, rules: () => set, steering: () => opts.steering ?? true });
    const asked = questionSet(opts.checks);
    if (opts.questions !== false && asked.questions.length) {
      const q = opts.questions || {};
      const answerer = new QuestionAnswerer({
        ...q.models,
        backend: q.backend,
        queue: q.queue,
        decisionQueue: q.decisionQueue,
        localQueue: q.localQueue,
        cache: q.cache,
        onError: (m, err) => log(`${m}: ${(err as Error)?.message ?? err}`),
      });
      const library = asked.questions.filter((c) => c.source === 'library');
      // Without the library (--no-library) there is nothing to plan from.
      const plans = library.length ? new MemoryPlanStore() : undefined;
      const planner = new Planner({
        library,
        chat: answerer.llm() ? (messages) => answerer.chat({ messages, json: true, maxTokens: 1500 }, { wait: true }) : undefined,
        now: () => this.clock,
        onError: (m) => log(m),
      });
      this.questions = {
        answerer,
        // Plans are read straight from memory: a plan made on a run's run_start is used for the rest of it.
        scheduler: new QuestionScheduler({
          windows: new MemoryWindowStore<SchedulerWindow>(() => 0),
          questions: () => asked,
          plans,
          policy: answerer.localStandsIn() ? LOCAL_LLM_POLICY : undefined,
          planCacheMs: 0,
          now: () => this.clock,
        }),
        processor: new QuestionProcessor({
          answerer,
          windows: new MemoryWindowStore<QuestionFindingsWindow>(() => 0),
          plans,
          planner,
          awaitPlans: true,
          log: (m) => log(m),
        }),
      };
    }
  }

  private async emit(out: EngineOutput): Promise<void> {
    for (const f of out.findings) this.opts.onFinding(f);
    await out.commit();
  }

  async push(item: StreamItem): Promise<void> {
    const t = itemTime(item);
    if (t !== undefined && t > this.clock) this.clock = t;
    const project = itemProject(item, this.projects);
    const env: Envelope = { project, received_ms: this.clock, item };
    this.keys.add(windowKey(project, item.kind === 'span' ? item.span.run_id : item.run.run_id));
    await this.emit(await this.engine.tick(this.clock));
    await this.emit(await this.engine.process([env]));
    if (this.questions) {
      const due = await this.questions.scheduler.process([env]);
      if (due.tasks.length) {
        const out = await held(this.questions.processor.process(due.tasks));
        for (const f of out.findings) this.opts.onFinding(f);
        for (const r of out.results) if (r.answer.status === 'not_checked') this.opts.onNotChecked?.(r);
        await out.commit();
      }
      await due.commit();
    }
  }

  /** The end of the recording: no late span can come, so every wait still pending fires. */
  async end(): Promise<void> {
    await this.emit(await this.engine.tick(this.clock, { keys: [...this.keys], all: true }));
    await this.matching.close();
    if (this.questions) {
      await held(this.questions.processor.idle());
      await held(this.questions.answerer.idle());
      this.questions.answerer.close();
    }
  }
}

/**
 * Keeps the process up while `p` waits: the model queues' batching timers do not hold Node
 * open (a service must be able to stop), so a command whose last work is a question would
 * otherwise exit before its answer, printing nothing.
 */
async function held<T>(p: Promise<T>): Promise<T> {
  const keep = setInterval(() => undefined, 60_000);
  try {
    return await p;
  } finally {
    clearInterval(keep);
  }
}

/**
 * What a replayed line may hold: ingest's limits on nesting and sizes (JSON nested thousands
 * deep would overflow the engine's stack instead of being reported with its line), but any
 * time: a recorded file is not checked against this machine's clock.
 */
const REPLAY_LIMITS: LimitCheck = { limits: { ...DEFAULT_SPAN_LIMITS, maxFutureMs: Number.POSITIVE_INFINITY }, now: 0 };

/** Reads JSON Lines files in order, a line at a time (large files are streamed). */
export async function* readItems(files: readonly string[]): AsyncGenerator<StreamItem> {
  for (const file of files) {
    const rl = createInterface({ input: createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity });
    let n = 0;
    for await (const line of rl) {
      n++;
      const item = parseJsonlLine(line, file, n, REPLAY_LIMITS);
      if (item) yield item;
    }
  }
}
