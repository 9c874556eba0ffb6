import type { FindingEvent, NoteOut } from '@neatroots/checks';
import type { WindowStore } from '@neatroots/ports';
import type { QuestionTaskMessage } from '@neatroots/messages';
import type { QuestionAnswerer } from './answerer';
import { ModelQueueClosedError } from './batcher';
import { QuestionFindings, type QuestionFindingsWindow } from './findings';
import { forgetDeleted, needsPlan, Planner, type PlanStore } from './planner';
import type { Answer, Plan, PlanTask, QuestionResult, QuestionTask } from './types';

/**
 * What the question service does with a batch of tasks, without the transport: answer every
 * question (concurrently, so the model queue can batch them), apply the answers in task order
 * to the runs' question findings, write notes, record what was checked and what was not, and
 * plan workflows. The bus consumer and `neatroots replay` both run this.
 */

/**
 * Where planner-written questions go: the database checks (the fourth source). A put with origin
 * planner must leave a check a person saved or edited as it is (ChecksRepo.put does).
 */
export interface DbCheckSink {
  put(c: { id: string; yaml: string; origin: 'planner'; project: string | null; workflow: string | null }): Promise<unknown>;
}

/** Records of what was asked and answered (the run page's "not checked", quotes, agreement). */
export interface ResultSink {
  record(results: readonly QuestionResult[]): Promise<void>;
  /**
   * The question tasks handed to the question service (the rule engine's step that publishes
   * them): each waits for its result (record) until then, which the run page counts
   * (questions_pending). Idempotent by task id, and in either order with `record`.
   */
  handed?(tasks: readonly HandedTask[]): Promise<void>;
}

/** A question task handed to the question service, as ResultSink.handed records it. */
export interface HandedTask {
  task_id: string;
  project: string;
  run_id: string;
}

export interface QuestionProcessorOptions {
  answerer: QuestionAnswerer;
  windows: WindowStore<QuestionFindingsWindow>;
  quiet?: (project: string, checkId: string) => boolean | Promise<boolean>;
  plans?: PlanStore;
  planner?: Planner;
  checks?: DbCheckSink;
  /** Called after a plan is stored (the embedded app reloads its database checks). */
  onPlan?: (plan: Plan) => void;
  results?: ResultSink;
  /** Wait for plans before returning (replay and tests: the same output every time). */
  awaitPlans?: boolean;
  /** Bus consumers wait for room in a full model queue rather than fail (back-pressure). */
  wait?: boolean;
  log?: (msg: string, err?: unknown) => void;
}

export interface ProcessorOutput {
  findings: FindingEvent[];
  notes: NoteOut[];
  results: QuestionResult[];
  commit(): Promise<void>;
}

export class QuestionProcessor {
  readonly findings: QuestionFindings;
  private readonly planning = new Map<string, Promise<void>>();
  private readonly log: (msg: string, err?: unknown) => void;

  constructor(private readonly opts: QuestionProcessorOptions) {
    this.findings = new QuestionFindings({ windows: opts.windows, quiet: opts.quiet });
    this.log = opts.log ?? ((msg, err) => console.error(`question: ${msg}`, err ?? ''));
  }

  async process(messages: readonly QuestionTaskMessage[]): Promise<ProcessorOutput> {
    const questions: QuestionTask[] = [];
    const plans: Promise<void>[] = [];
    // The bus's decoder checked each task's shape (@neatroots/messages): taken as it comes.
    for (const t of messages) {
      if (t.type === 'plan') plans.push(this.plan(t));
      else questions.push(t);
    }
    const step = await this.findings.begin(questions);
    const todo = questions.filter((t) => !this.findings.isDone(step, t));
    const answers = await Promise.all(
      todo.map((t) => this.opts.answerer.ask({ q: t.check, evidence: t.evidence, context: t.context }, { wait: this.opts.wait ?? true })),
    );
    const results: QuestionResult[] = [];
    todo.forEach((t, i) => {
      const ev = this.findings.apply(step, t, answers[i]);
      results.push(this.result(t, answers[i], ev));
    });
    const out = await this.findings.finish(step, (t, a, priority) => this.opts.answerer.writeNote(t.check, a.quote, t.check.guidance, priority));
    if (this.opts.awaitPlans) await Promise.all(plans);
    return {
      findings: out.findings,
      notes: out.notes,
      results,
      commit: async () => {
        if (results.length && this.opts.results) await this.opts.results.record(results);
        await out.commit();
      },
    };
  }

  private result(t: QuestionTask, a: Answer, ev: FindingEvent | undefined): QuestionResult {
    const r: QuestionResult = { task_id: t.id, project: t.project, run_id: t.run_id, check_id: t.check.id, anchor: t.anchor, span_ids: t.span_ids, answer: a, at_ms: t.at_ms };
    if (ev) r.finding_id = ev.id;
    return r;
  }

  /** Plans a workflow once however many runs ask at the same time; the store decides if it is still needed. */
  private plan(t: PlanTask): Promise<void> {
    const { plans, planner } = this.opts;
    if (!plans || !planner) return Promise.resolve();
    const key = `${t.project}\u0000${t.workflow}`;
    const running = this.planning.get(key);
    if (running) return running;
    const p = (async () => {
      const current = await plans.get(t.project, t.workflow);
      if (current && !needsPlan(current, t.plan.tools)) return;
      const planned = await planner.plan(t.plan, current);
      // A question whose check was deleted while the LLM planned stays deleted (the store moved its id to `deleted`).
      const plan = current ? forgetDeleted(planned, (await plans.get(t.project, t.workflow))?.deleted) : planned;
      for (const w of plan.written) {
        // Saved when first written: one carried forward unchanged is not saved again (a person may
        // have edited it since; the store keeps a person's version from the planner's writes anyway).
        if (current?.written.some((x) => x.id === w.id && x.yaml === w.yaml)) continue;
        await this.opts.checks?.put({ id: w.id, yaml: w.yaml, origin: 'planner', project: t.project, workflow: t.workflow });
      }
      await plans.put(plan);
      this.opts.onPlan?.(plan);
    })()
      .catch((e) => {
        // The stop closed the model queues while the LLM planned (ModelQueueClosedError): a
        // normal shutdown, not a failure; the workflow's next run asks again, as for a failure.
        if (e instanceof ModelQueueClosedError) return;
        this.log(`planning workflow ${t.workflow} failed; the next run asks again`, e);
      })
      .finally(() => this.planning.delete(key));
    this.planning.set(key, p);
    return p;
  }

  /** Waits for plans in progress (shutdown, tests). */
  async idle(): Promise<void> {
    while (this.planning.size) await Promise.all([...this.planning.values()]);
  }
}
