import { hasSeen, MAX_EVIDENCE_LAST, parseDatabaseCheck, setOwnValue, sha1Hex, type QuestionCheck } from '@neatroots/checks';
import { windowLayer, type ArrayShift, type WindowStore } from '@neatroots/ports';
import { itemRunId, valueText, type Envelope, type ToolInfo } from '@neatroots/spans';
import {
  CONTEXT_CHARS,
  CONTEXT_SPANS,
  DEFAULT_FIELD_CHARS,
  DEFAULT_SPAN_CONTEXT,
  DEFAULT_TRACE_LAST,
  contextDoc,
  contextOfRing,
  cut,
  evidenceFilter,
  isToolSpan,
  matchesFilter,
  pickFields,
  shorten,
  summarizeSpan,
} from './evidence';
import { appliesTo, fillParams, libraryGate, type QuestionSet, type RunStartInfo } from './library';
import { needsPlan, toolsHash, type PlanStore } from './planner';
import { saveWindows, type WindowToSave } from './windows';
import type { ContextDoc, EvidenceDoc, Plan, PlanTask, QuestionTask, RunSummary, SpanSummary } from './types';

/**
 * The question scheduler: runs beside the rule engine, on the same stream, and decides when a
 * question check is due (the seed's `when` and `scope`), builds what it can see (evidence) and
 * hands it on as a question task. Its per-run state lives in the window store like the rule
 * engine's (keys prefixed "q"), as plain JSON: a bounded ring of compact span summaries, the
 * spans waiting to be asked about, and per question how often it was asked.
 *
 * When the local LLM stands in for the decision model (`policy`), span-level questions are
 * asked only about the newest waiting span, at most four times per check per run (the seed's
 * cost control); with the fast classifier or the decision model every span is asked.
 */
export interface SpanPolicy {
  /** Ask only about the newest span waiting; older waiting ones are skipped. */
  newestOnly: boolean;
  /** Live asks per check per run (span-level questions, and live trace questions). */
  perRunCap: number;
  /** After an ask, spans of the same check wait this long (the local LLM is busy meanwhile). */
  gapMs: number;
}

export const LOCAL_LLM_POLICY: SpanPolicy = { newestOnly: true, perRunCap: 4, gapMs: 3_000 };

export interface QuestionWindow {
  v: 1;
  /** The store's revision when loaded: saves are compare-and-set, like the rule engine's. */
  rev?: number;
  run_id: string;
  project: string;
  workflow?: string;
  session_id?: string;
  start?: RunStartInfo;
  /** The run's latest spans, oldest first. */
  ring: SpanSummary[];
  /** Spans that fell out of the ring. */
  dropped: number;
  /** Tool calls among them (what a span question is shown from earlier in the run). */
  dropped_tools?: number;
  /** Span ids seen (a re-exported span asks nothing new); only added to (QUESTION_WINDOW_MEMBER_FIELDS). */
  seen: Record<string, 1>;
  uses_tools?: 1;
  ended?: { status: string; final_output?: string; at_ms: number };
  checks: Record<string, QuestionState>;
}

/** The question window's fields a window store may keep apart (WindowStoreOptions.memberFields). */
export const QUESTION_WINDOW_MEMBER_FIELDS: readonly string[] = ['seen'];

/** The question window's array fields a window store may keep apart (WindowStoreOptions.listFields): the ring, only appended to and cut from its start. */
export const QUESTION_WINDOW_LIST_FIELDS: readonly string[] = ['ring'];

export interface QuestionState {
  asked: number;
  /** Span scope: ids of matching spans not asked about yet, newest last. */
  waiting?: string[];
  /** Trace scope: new evidence since the last ask. */
  dirty?: 1;
  last_asked_ms?: number;
  /** Spans never asked about (cost control, or past the spans held for a question: MAX_HELD). */
  skipped?: number;
  /** Trace and session scope: spans this question's filter matches that fell out of the ring. */
  omitted?: number;
  final_done?: 1;
}

export interface QuestionSessionWindow {
  v: 1;
  rev?: number;
  project: string;
  session_id: string;
  runs: RunSummary[];
}

export type SchedulerWindow = QuestionWindow | QuestionSessionWindow;

export interface SchedulerOutput {
  tasks: (QuestionTask | PlanTask)[];
  /**
   * The step was taken with `shed` (ProcessOptions): its question tasks are not to be handed
   * over, and were not counted as asked.
   */
  shed?: true;
  /** Saves the windows; call after the tasks are published (as the rule engine's commit). */
  commit(): Promise<void>;
}

/** How a step is taken. */
export interface ProcessOptions {
  /**
   * The question service is too far behind and the step's question tasks will not be handed
   * over (the rule engine records them as not checked): they are built as usual, but none
   * counts as asked. A trace or session question keeps its new evidence for its next ask, an end
   * question is not marked done (a late span of the run asks it again), and a span question's
   * shed ask does not use up the local LLM's per-run cap. The gaps between asks are kept (so
   * not checked is recorded no more often than the questions would have been asked). Plan
   * tasks go as usual.
   */
  shed?: boolean;
}

export interface QuestionSchedulerOptions {
  windows: WindowStore<SchedulerWindow>;
  questions: () => QuestionSet;
  /** Plans per workflow; with it, a workflow without a plan (or with new tools) gets a plan task. */
  plans?: PlanStore;
  /**
   * Cost control when the local LLM stands in; undefined asks about every span. A function is
   * asked per question: one the fast classifier answers first has no cap (the seed: "With Laya
   * or Jev every span is asked").
   */
  policy?: SpanPolicy | ((q: QuestionCheck) => SpanPolicy | undefined);
  ringSize?: number;
  /**
   * A live trace question is asked again at most this often per run while the run goes on
   * (by ingest's receipt times; the local LLM's policy waits its own gap). The spans that
   * arrive meanwhile are judged with the next ask, and every live question is asked once more
   * at run end. Default 1,000 ms: asked after every batch, a question re-judged the run's whole
   * evidence once per export, most of the bus's bytes at high rates.
   */
  liveTraceGapMs?: number;
  fieldChars?: number;
  /** Earlier runs a session-scope question sees. */
  sessionRuns?: number;
  ttlAfterEndMs?: number;
  ttlIdleMs?: number;
  /** How long a plan read from the store is trusted before it is read again. */
  planCacheMs?: number;
  /** A plan task is not sent again for the same workflow and tools within this time. */
  planRetryMs?: number;
  now?: () => number;
}

interface Step {
  windows: Map<string, QuestionWindow>;
  sessions: Map<string, QuestionSessionWindow>;
  touched: Set<string>;
  sessionsTouched: Set<string>;
  /** Runs whose items came in this step, with the latest receive time. */
  active: Map<string, { received: number; at: number }>;
  ending: Set<string>;
  /** Ended runs (their end asked in an earlier step) that a new span came for. */
  late: Set<string>;
  tasks: (QuestionTask | PlanTask)[];
  /** Workflows that may need a plan, decided once the step's plans are read. */
  planCandidates: { w: QuestionWindow; env: Envelope; hash: string; tools: ToolInfo[] }[];
  /** Workflow and tool pairs a tool span asked a plan for in this step (asked once a step). */
  toolPlans: Set<string>;
  /**
   * How each run's ring changed since it was loaded: summaries dropped from its start and
   * appended (the window journal writes that, not a comparison of the ring); null once a
   * re-exported span replaced one in place.
   */
  rings: Map<string, ArrayShift | null>;
  /** ProcessOptions.shed: no ask of this step counts. */
  shed: boolean;
}

/**
 * The window a step changes, over one the store holds (WindowStore.loadsStored: the embedded
 * stores hand out what they hold). The ring (at most ringSize summaries) and the per-question
 * states (a few, each with at most MAX_WAITING ids) are copied; the span ids seen, thousands in
 * a long run, are a layer over the stored ones (windowLayer; the store merges it on save).
 * Nothing reaches the stored window until the step's commit: a step whose tasks were never
 * published is done again from the window as it was, and asks the same questions.
 */
function stepCopy(w: QuestionWindow): QuestionWindow {
  const checks: Record<string, QuestionState> = {};
  for (const id in w.checks) {
    const st = w.checks[id];
    checks[id] = st.waiting ? { ...st, waiting: st.waiting.slice() } : { ...st };
  }
  return { ...w, ring: w.ring.slice(), seen: windowLayer(w.seen), checks };
}

/** A ring nothing was added to or dropped from in a step. */
const UNMOVED: ArrayShift = { dropped: 0, appended: 0 };

function sessionCopy(s: QuestionSessionWindow): QuestionSessionWindow {
  return { ...s, runs: s.runs.slice() };
}

export function questionWindowKey(project: string, runId: string): string {
  return `q\u0000${project}\u0000${runId}`;
}

export function sessionWindowKey(project: string, sessionId: string): string {
  return `qs\u0000${project}\u0000${sessionId}`;
}

function taskId(project: string, runId: string, checkId: string, anchor: string, asked: number): string {
  // The parts joined by NUL, as written (no array of them a task).
  return sha1Hex(`${project}\u0000${runId}\u0000${checkId}\u0000${anchor}\u0000${asked}`).slice(0, 24);
}

function planTaskId(project: string, workflow: string, hash: string): string {
  return sha1Hex(`plan\u0000${project}\u0000${workflow}\u0000${hash}`).slice(0, 24);
}

const MAX_WAITING = 200;

/** QuestionScheduler.lastFilled's key for a run with no run_start. */
const NO_START = {};

/**
 * Spans a run's window holds past the ring for span questions that wait (`when: end`, or the
 * local LLM's gap): the spans still waiting to be asked about and the earlier calls they show.
 * Past that the oldest go, and those still waiting are counted as skipped.
 */
export const MAX_HELD = MAX_WAITING;

/** Spans of a run kept for its questions, unless a question in effect asks to see more (`evidence.last`, at most MAX_EVIDENCE_LAST). */
export const DEFAULT_RING_SIZE = 40;

type PlanCandidate = Step['planCandidates'][number];

/** questionsFor's answer for a project, workflow and use of tools, with what it was worked out from. */
interface Applying {
  set: QuestionSet;
  questions: readonly QuestionCheck[];
  plan: Plan | undefined;
  written: QuestionCheck[] | undefined;
  out: readonly QuestionCheck[];
}

const NONE: readonly string[] = Object.freeze([]);

function ringHas(ring: readonly SpanSummary[], id: string): boolean {
  for (let i = 0; i < ring.length; i++) if (ring[i].id === id) return true;
  return false;
}

/** The ids still in the ring, in order: the array itself when all are (read only then). */
function inRing(ids: string[] | undefined, ring: readonly SpanSummary[]): readonly string[] {
  if (!ids) return NONE;
  for (let i = 0; i < ids.length; i++) {
    if (ringHas(ring, ids[i])) continue;
    const out = ids.slice(0, i);
    for (let j = i + 1; j < ids.length; j++) if (ringHas(ring, ids[j])) out.push(ids[j]);
    return out;
  }
  return ids;
}

function coveredBy(tools: readonly ToolInfo[], asked: readonly string[]): boolean {
  return tools.every((t) => asked.includes(t.name));
}

/**
 * One plan task per workflow a step: the tools of its candidates together (a run_start's, with
 * their descriptions, and those tool spans showed), the first candidate's run for the rest.
 */
function mergedCandidates(candidates: readonly PlanCandidate[], keyOf: (w: QuestionWindow) => string): PlanCandidate[] {
  if (candidates.length < 2) return [...candidates];
  const byKey = new Map<string, PlanCandidate>();
  for (const c of candidates) {
    const k = keyOf(c.w);
    const had = byKey.get(k);
    if (!had) {
      byKey.set(k, { ...c, tools: [...c.tools] });
      continue;
    }
    for (const t of c.tools) {
      const i = had.tools.findIndex((x) => x.name === t.name);
      if (i < 0) had.tools.push(t);
      else if (t.description && !had.tools[i].description) had.tools[i] = t;
    }
    had.hash = toolsHash(had.tools);
  }
  return [...byKey.values()];
}

export class QuestionScheduler {
  /** The ring's size for the set of questions in effect, by the set's version (a reload makes a new one). */
  private ringSized: { version: number; size: number } | undefined;
  private readonly fieldChars: number;
  private readonly sessionRuns: number;
  private readonly ttlAfterEnd: number;
  private readonly ttlIdle: number;
  private readonly planCacheMs: number;
  private readonly planRetryMs: number;
  private readonly liveTraceGapMs: number;
  private readonly now: () => number;
  private readonly plans = new Map<string, { plan?: Plan; at: number }>();
  /** The plan asked last per workflow, with its tools: one that asked for these tools already is not asked again within planRetryMs. */
  private readonly planRequested = new Map<string, { tools: readonly string[]; at: number }>();
  private readonly written = new Map<string, QuestionCheck[]>();
  /** questionsFor's answers, by the run's use of tools, workflow and project, with what each was worked out from. */
  private readonly applying = new Map<string, Map<string | undefined, [Applying | undefined, Applying | undefined]>>();
  /** Entries in `applying`. */
  private applyingSize = 0;
  /** planKey's answers, by project then workflow: asked at every span, the key is not made anew each time. */
  private readonly planKeys = new Map<string, Map<string, string>>();
  private planKeysSize = 0;
  private readonly filledChecks = new WeakMap<QuestionCheck, Map<string, QuestionCheck>>();
  /** By the run's start (NO_START without one), then by the question: its last wording and the parameters it was filled with. */
  private readonly lastFilled = new WeakMap<object, WeakMap<QuestionCheck, { params: Record<string, string> | undefined; q: QuestionCheck }>>();
  private chain: Promise<unknown> = Promise.resolve();

  constructor(private readonly opts: QuestionSchedulerOptions) {
    this.liveTraceGapMs = opts.liveTraceGapMs ?? 1_000;
    this.fieldChars = opts.fieldChars ?? DEFAULT_FIELD_CHARS;
    this.sessionRuns = opts.sessionRuns ?? 10;
    this.ttlAfterEnd = opts.ttlAfterEndMs ?? 10 * 60_000;
    this.ttlIdle = opts.ttlIdleMs ?? 6 * 60 * 60_000;
    this.planCacheMs = opts.planCacheMs ?? 5_000;
    this.planRetryMs = opts.planRetryMs ?? 10 * 60_000;
    this.now = opts.now ?? Date.now;
  }

  /**
   * The question with its parameters filled, the same object while its wording is the same:
   * the questions topic writes a check once a record, and its text once while the object lives.
   */
  private filled(base: QuestionCheck, params: Record<string, string> | undefined, start: RunStartInfo | undefined): QuestionCheck {
    // Asked for every span question at every span of a full ring: the last wording of the
    // question for these parameters and this run's start (neither changed once made: a plan's
    // picks are replaced whole, a run_start makes a new start) is taken as it is.
    let byBase = this.lastFilled.get(start ?? NO_START);
    if (!byBase) this.lastFilled.set(start ?? NO_START, (byBase = new WeakMap()));
    const last = byBase.get(base);
    if (last && last.params === params) return last.q;
    const q = this.fill(base, params, start);
    byBase.set(base, { params, q });
    return q;
  }

  private fill(base: QuestionCheck, params: Record<string, string> | undefined, start: RunStartInfo | undefined): QuestionCheck {
    const q = fillParams(base, params, start);
    if (q === base) return q;
    let byAsk = this.filledChecks.get(base);
    if (!byAsk) this.filledChecks.set(base, (byAsk = new Map()));
    const had = byAsk.get(q.ask);
    if (had) return had;
    if (byAsk.size >= 1_000) byAsk.clear();
    byAsk.set(q.ask, q);
    return q;
  }

  private policy(q: QuestionCheck): SpanPolicy | undefined {
    const p = this.opts.policy;
    return typeof p === 'function' ? p(q) : p;
  }

  /** Applies a batch of items, in order, and returns the questions that became due. */
  process(envs: readonly Envelope[], options: ProcessOptions = {}): Promise<SchedulerOutput> {
    const run = async (): Promise<SchedulerOutput> => {
      const set = this.opts.questions();
      if (!set.questions.length && !this.opts.plans) return { tasks: [], commit: async () => undefined };
      // Each run's key, with the span ids its window is asked about (a store that keeps `seen` apart loads those only).
      const members = new Map<string, { seen: string[] }>();
      // Each item's window key, made once a step (loadPlans and apply read it).
      const keys = new Array<string>(envs.length);
      for (let i = 0; i < envs.length; i++) {
        const e = envs[i];
        const key = (keys[i] = questionWindowKey(e.project, itemRunId(e.item)));
        let m = members.get(key);
        if (!m) members.set(key, (m = { seen: [] }));
        if (e.item.kind === 'span') m.seen.push(e.item.span.span_id);
      }
      const windows = (await this.opts.windows.load([...members.keys()], members)) as Map<string, QuestionWindow>;
      if (this.opts.windows.loadsStored === true) for (const [k, w] of windows) windows.set(k, stepCopy(w));
      const step: Step = {
        windows,
        sessions: new Map(),
        touched: new Set(),
        sessionsTouched: new Set(),
        active: new Map(),
        ending: new Set(),
        late: new Set(),
        tasks: [],
        planCandidates: [],
        toolPlans: new Set(),
        rings: new Map(),
        shed: options.shed === true,
      };
      // The plans first: which questions a run's spans wait for depends on them.
      await this.loadPlans(envs, keys, windows);
      for (let i = 0; i < envs.length; i++) this.apply(step, envs[i], keys[i], set);
      await this.loadSessions(step);
      for (const key of step.active.keys()) this.due(step, step.windows.get(key)!, set);
      return this.finish(step);
    };
    const p = this.chain.then(run, run);
    this.chain = p.catch(() => undefined);
    return p;
  }

  private apply(step: Step, env: Envelope, key: string, set: QuestionSet): void {
    const item = env.item;
    let w = step.windows.get(key);
    if (!w) {
      w = { v: 1, run_id: itemRunId(item), project: env.project, ring: [], dropped: 0, seen: {}, checks: {} };
      step.windows.set(key, w);
    }
    step.touched.add(key);
    // One object a run a step (read at once by each ask, never kept).
    const act = step.active.get(key);
    if (act) {
      act.received = env.received_ms;
      act.at = Math.max(act.at, env.received_ms);
    } else step.active.set(key, { received: env.received_ms, at: Math.max(0, env.received_ms) });
    if (item.kind === 'run_start') {
      const r = item.run;
      if (r.workflow) w.workflow = r.workflow;
      if (r.session_id) w.session_id = r.session_id;
      w.start = {};
      if (r.system_prompt) w.start.system_prompt = cut(r.system_prompt, this.fieldChars * 2);
      if (r.user_message) w.start.user_message = cut(r.user_message, this.fieldChars);
      if (r.tools?.length) {
        w.start.tools = r.tools.slice(0, 100).map((t) => (t.description ? { name: t.name, description: cut(t.description, 300) } : { name: t.name }));
        w.uses_tools = 1;
      }
      this.maybePlan(step, w, env);
      return;
    }
    if (item.kind === 'run_end') {
      if (w.ended) return;
      const out = valueText(item.run.final_output);
      w.ended = { status: item.run.status, at_ms: item.run.ts_ms ?? env.received_ms };
      if (item.run.final_output !== undefined) w.ended.final_output = cut(out, this.fieldChars * 2);
      step.ending.add(key);
      return;
    }
    const span = item.span;
    if (!w.workflow && span.workflow) w.workflow = span.workflow;
    if (!w.session_id && span.session_id) w.session_id = span.session_id;
    const summary = summarizeSpan(span, this.fieldChars);
    if (hasSeen(w.seen, span.span_id)) {
      // A re-exported span replaces the earlier copy and asks nothing new.
      const i = w.ring.findIndex((s) => s.id === span.span_id);
      if (i >= 0) {
        w.ring[i] = summary;
        step.rings.set(key, null);
      }
      return;
    }
    setOwnValue(w.seen, span.span_id, 1);
    // A span of a run whose end was asked about already: its trace, session and end questions are asked again.
    if (w.ended && !step.ending.has(key)) step.late.add(key);
    w.ring.push(summary);
    let shift = step.rings.get(key);
    if (shift === undefined) step.rings.set(key, (shift = { dropped: 0, appended: 0 }));
    if (shift) shift.appended++;
    if (isToolSpan(summary)) {
      w.uses_tools = 1;
      if (summary.tool) this.maybePlanTool(step, w, env, summary.tool);
    }
    // A library question the plan has not picked keeps no state (the window stays small).
    const questions = this.questionsFor(w, set);
    for (const q of questions) {
      if (!matchesFilter(summary, evidenceFilter(q.scope, q.evidence))) continue;
      const st = (w.checks[q.id] ??= { asked: 0 });
      if (q.scope === 'span') {
        const waiting = (st.waiting ??= []);
        waiting.push(span.span_id);
        if (waiting.length > MAX_WAITING) {
          st.skipped = (st.skipped ?? 0) + waiting.length - MAX_WAITING;
          waiting.splice(0, waiting.length - MAX_WAITING);
        }
      } else st.dirty = 1;
    }
    const ringSize = this.ringSize(set);
    if (w.ring.length > ringSize) this.cutRing(step, w, key, questions, ringSize, shift);
  }

  /**
   * The ring is over its size: spans fall out of its start. A live span question that asks about
   * every span (no local LLM policy) is asked now about the spans waiting, while the ring still
   * holds them and the calls before them; one that waits (`when: end`, the local LLM's gap)
   * keeps its oldest waiting span and the earlier calls it shows, up to MAX_HELD spans past the
   * ring. Trace and session questions count the spans they match that fall out (omitted).
   */
  private cutRing(step: Step, w: QuestionWindow, key: string, questions: readonly QuestionCheck[], ringSize: number, shift: ArrayShift | null | undefined): void {
    let drop = w.ring.length - ringSize;
    const plan = this.plan(w);
    for (const base of questions) {
      if (base.scope !== 'span') continue;
      const st = w.checks[base.id];
      if (!st?.waiting?.length) continue;
      const q = this.filled(base, plan?.picks.find((p) => p.id === base.id)?.params, w.start);
      const policy = this.policy(q);
      if (q.when !== 'end' && !policy) {
        this.dueSpans(step, w, q, st, step.active.get(key)!, false, undefined);
        continue;
      }
      const waiting = new Set(st.waiting);
      let at = 0;
      while (at < w.ring.length && !waiting.has(w.ring[at].id)) at++;
      // Back over the earlier tool calls it is shown.
      let shown = q.evidence?.last ?? DEFAULT_SPAN_CONTEXT;
      while (at > 0 && shown > 0) if (isToolSpan(w.ring[--at])) shown--;
      drop = Math.min(drop, at);
    }
    drop = Math.max(drop, w.ring.length - ringSize - MAX_HELD);
    if (drop <= 0) return;
    // What falls out is counted where it is, then cut (no filtered copies of it).
    const ring = w.ring;
    w.dropped += drop;
    let tools = 0;
    for (let i = 0; i < drop; i++) if (isToolSpan(ring[i])) tools++;
    if (tools) w.dropped_tools = (w.dropped_tools ?? 0) + tools;
    for (const q of questions) {
      if (q.scope === 'span') continue;
      const filter = evidenceFilter(q.scope, q.evidence);
      let n = 0;
      for (let i = 0; i < drop; i++) if (matchesFilter(ring[i], filter)) n++;
      if (n) {
        const st = (w.checks[q.id] ??= { asked: 0 });
        st.omitted = (st.omitted ?? 0) + n;
      }
    }
    ring.splice(0, drop);
    if (shift) shift.dropped += drop;
  }

  // ---- plans ---------------------------------------------------------------------------------

  private planKey(project: string, workflow: string): string {
    let byWorkflow = this.planKeys.get(project);
    let k = byWorkflow?.get(workflow);
    if (k !== undefined) return k;
    if (this.planKeysSize >= 10_000) {
      this.planKeys.clear();
      this.planKeysSize = 0;
      byWorkflow = undefined;
    }
    if (!byWorkflow) this.planKeys.set(project, (byWorkflow = new Map()));
    byWorkflow.set(workflow, (k = `${project}\u0000${workflow}`));
    this.planKeysSize++;
    return k;
  }

  /** The plans of the batch's workflows: its runs' as stored, and those its items name. */
  private async loadPlans(envs: readonly Envelope[], keys: readonly string[], windows: Map<string, QuestionWindow>): Promise<void> {
    if (!this.opts.plans) return;
    const now = this.now();
    const wanted = new Set<string>();
    for (let i = 0; i < envs.length; i++) {
      const e = envs[i];
      const w = windows.get(keys[i]);
      if (w?.workflow) wanted.add(this.planKey(w.project, w.workflow));
      const workflow = e.item.kind === 'run_start' ? e.item.run.workflow : e.item.kind === 'span' ? e.item.span.workflow : undefined;
      if (workflow) wanted.add(this.planKey(e.project, workflow));
    }
    await Promise.all(
      [...wanted].map(async (k) => {
        const cached = this.plans.get(k);
        if (cached && now - cached.at < this.planCacheMs) return;
        const [project, workflow] = k.split('\u0000');
        const plan = await this.opts.plans!.get(project, workflow);
        if (this.plans.size > 10_000) this.plans.clear();
        this.plans.set(k, { plan, at: now });
        if (plan && plan.written.length) this.written.set(k, this.parseWritten(plan));
        else this.written.delete(k);
      }),
    );
  }

  private parseWritten(plan: Plan): QuestionCheck[] {
    const out: QuestionCheck[] = [];
    for (const w of plan.written) {
      try {
        const c = parseDatabaseCheck(w);
        if (c.kind !== 'rule') out.push(c);
      } catch {
        // A planner question that no longer validates is left out; the loader reports it.
      }
    }
    return out;
  }

  private plan(w: QuestionWindow): Plan | undefined {
    return w.workflow ? this.plans.get(this.planKey(w.project, w.workflow))?.plan : undefined;
  }

  /** On run_start: a plan task when the workflow has no plan yet, or new tools appeared. */
  private maybePlan(step: Step, w: QuestionWindow, env: Envelope): void {
    if (!this.opts.plans || !w.workflow) return;
    this.planCandidate(step, w, env, w.start?.tools ?? []);
  }

  /**
   * On a tool span: a plan task when the workflow's plan does not know the tool. The seed's
   * "redone when new tools appear" for tools a run_start did not list, and the only way an agent
   * whose runs have no run_start (OpenTelemetry without content capture sends none) is planned:
   * from the tools its spans show. The cost on the hot path is a lookup in the plans held.
   */
  private maybePlanTool(step: Step, w: QuestionWindow, env: Envelope, tool: string): void {
    if (!this.opts.plans || !w.workflow) return;
    const k = this.planKey(w.project, w.workflow);
    if (this.plans.get(k)?.plan?.tools.includes(tool)) return;
    const start = w.start?.tools ?? [];
    if (start.some((t) => t.name === tool)) return; // its run_start asked already
    const once = `${k}\u0000${tool}`;
    if (step.toolPlans.has(once)) return;
    step.toolPlans.add(once);
    this.planCandidate(step, w, env, [...start, { name: tool }]);
  }

  private planCandidate(step: Step, w: QuestionWindow, env: Envelope, tools: ToolInfo[]): void {
    const k = this.planKey(w.project, w.workflow!);
    const known = this.plans.get(k);
    if (known && !needsPlan(known.plan, tools)) return;
    const hash = toolsHash(tools);
    const asked = this.planRequested.get(k);
    const now = this.now();
    if (asked && now - asked.at < this.planRetryMs && coveredBy(tools, asked.tools)) return;
    step.planCandidates.push({ w, env, hash, tools });
  }

  private emitPlans(step: Step): void {
    for (const { w, env, hash, tools } of mergedCandidates(step.planCandidates, (w) => this.planKey(w.project, w.workflow!))) {
      const k = this.planKey(w.project, w.workflow!);
      // Read now that the step's plans are loaded: the store may hold one made elsewhere.
      if (!needsPlan(this.plans.get(k)?.plan, tools)) continue;
      const asked = this.planRequested.get(k);
      if (asked && this.now() - asked.at < this.planRetryMs && coveredBy(tools, asked.tools)) continue;
      this.planRequested.set(k, { tools: tools.map((t) => t.name), at: this.now() });
      if (this.planRequested.size > 10_000) this.planRequested.clear();
      const task: PlanTask = {
        id: planTaskId(w.project, w.workflow!, hash),
        type: 'plan',
        project: w.project,
        run_id: w.run_id,
        workflow: w.workflow!,
        span_ids: [],
        final: false,
        at_ms: env.received_ms,
        received_ms: env.received_ms,
        plan: {
          project: w.project,
          workflow: w.workflow!,
          tools,
          ...(w.start?.system_prompt ? { system_prompt: w.start.system_prompt } : {}),
          ...(w.start?.user_message ? { user_message: w.start.user_message } : {}),
        },
      };
      step.tasks.push(task);
    }
  }

  // ---- sessions ------------------------------------------------------------------------------

  private async loadSessions(step: Step): Promise<void> {
    const keys = new Set<string>();
    for (const key of [...step.ending, ...step.late]) {
      const w = step.windows.get(key)!;
      if (w.session_id) keys.add(sessionWindowKey(w.project, w.session_id));
    }
    if (!keys.size) return;
    const got = (await this.opts.windows.load([...keys])) as Map<string, QuestionSessionWindow>;
    const copies = this.opts.windows.loadsStored === true;
    for (const k of keys) {
      const [, project, session_id] = k.split('\u0000');
      const s = got.get(k);
      step.sessions.set(k, s ? (copies ? sessionCopy(s) : s) : { v: 1, project, session_id, runs: [] });
    }
  }

  // ---- what is due ---------------------------------------------------------------------------

  /**
   * The questions in effect for a run (read only: the same array is handed to every span of the
   * run's project, workflow and use of tools while the set, the plan and its written questions
   * are the same objects). Asked at every span: worked out anew each time, it was a filter of
   * the whole set and a few allocations a span.
   */
  private questionsFor(w: QuestionWindow, set: QuestionSet): readonly QuestionCheck[] {
    const plan = this.plan(w);
    const usesTools = w.uses_tools === 1;
    const written = w.workflow ? this.written.get(this.planKey(w.project, w.workflow)) : undefined;
    let byWorkflow = this.applying.get(w.project);
    let both = byWorkflow?.get(w.workflow);
    const had = both?.[usesTools ? 1 : 0];
    if (had && had.set === set && had.questions === set.questions && had.plan === plan && had.written === written) return had.out;
    const out = set.questions.filter((q) => appliesTo(q, w.project, w.workflow) && libraryGate(q, usesTools, plan));
    // The plan's written questions stand in for their database checks until the check set loads
    // them (replay stores none). One whose check was deleted has left the plan (ChecksRepo.delete).
    if (written) {
      const ids = new Set(out.map((q) => q.id));
      // A loaded check with the same id (the saved copy, or the database source) wins.
      for (const q of written) if (!ids.has(q.id) && appliesTo(q, w.project, w.workflow)) out.push(q);
    }
    if (!had && this.applyingSize >= 10_000) {
      this.applying.clear();
      this.applyingSize = 0;
      byWorkflow = undefined;
      both = undefined;
    }
    if (!byWorkflow) this.applying.set(w.project, (byWorkflow = new Map()));
    if (!both) byWorkflow.set(w.workflow, (both = [undefined, undefined]));
    if (!had) this.applyingSize++;
    both[usesTools ? 1 : 0] = { set, questions: set.questions, plan, written, out };
    return out;
  }

  private due(step: Step, w: QuestionWindow, set: QuestionSet): void {
    const key = questionWindowKey(w.project, w.run_id);
    const now = step.active.get(key)!;
    const ending = step.ending.has(key);
    // Spans came after the run's end was asked about (OpenTelemetry sends the run's end with its
    // root span, and a child span may be exported later): what judges the run's end (trace,
    // session and `when: end` questions) is asked again about them, once a batch, as final.
    const late = !ending && step.late.has(key);
    const plan = this.plan(w);
    for (const base of this.questionsFor(w, set)) {
      const q = this.filled(base, plan?.picks.find((p) => p.id === base.id)?.params, w.start);
      const policy = this.policy(q);
      const st = (w.checks[q.id] ??= { asked: 0 });
      if (q.scope === 'span') {
        if (q.when === 'end' && !ending && !late) continue;
        this.dueSpans(step, w, q, st, now, ending || late, policy);
      } else if (late) {
        if (st.dirty) this.ask(step, w, q, st, 'run', now, true);
      } else if (q.scope === 'trace') {
        if (ending) {
          // The end always asks. With nothing new since the last live ask, it is that ask again
          // (the same task): the question service, which keeps the tasks it answered, answers
          // it only if it went unanswered (not checked).
          if (st.final_done) continue;
          const fresh = st.dirty || st.asked === 0 || q.evidence?.final_output === true;
          // Shed, a fresh end question stays to be asked (a late span asks it); the same task
          // again is on the bus already, or answered.
          if (!step.shed || !fresh) st.final_done = 1;
          this.ask(step, w, q, st, 'run', now, true, !fresh);
        } else if (q.when === 'live' && st.dirty && !w.ended && q.evidence?.final_output !== true) {
          // A live trace question is asked as its evidence grows, at most once a gap (it stays
          // dirty until then); one that reads the answer waits for it.
          if (policy && st.asked >= policy.perRunCap) continue;
          if (st.last_asked_ms !== undefined && now.at - st.last_asked_ms < (policy?.gapMs ?? this.liveTraceGapMs)) continue;
          this.ask(step, w, q, st, 'run', now, false);
        }
      } else if (ending && !st.final_done) {
        if (!step.shed) st.final_done = 1;
        this.ask(step, w, q, st, 'run', now, true);
      }
    }
    if ((ending || late) && w.session_id) this.recordSession(step, w);
  }

  private dueSpans(step: Step, w: QuestionWindow, q: QuestionCheck, st: QuestionState, now: { received: number; at: number }, ending: boolean, policy: SpanPolicy | undefined): void {
    const waiting = inRing(st.waiting, w.ring);
    st.skipped = (st.skipped ?? 0) + ((st.waiting?.length ?? 0) - waiting.length);
    if (!waiting.length) {
      delete st.waiting;
      return;
    }
    if (!policy) {
      for (const id of waiting) this.ask(step, w, q, st, id, now, ending);
      delete st.waiting;
      return;
    }
    if (st.asked >= policy.perRunCap) {
      st.skipped = (st.skipped ?? 0) + waiting.length;
      delete st.waiting;
      return;
    }
    const newest = waiting[waiting.length - 1];
    if (!ending && st.last_asked_ms !== undefined && now.at - st.last_asked_ms < policy.gapMs) {
      // Still busy with the last one: only the newest keeps waiting.
      st.skipped = (st.skipped ?? 0) + waiting.length - 1;
      st.waiting = [newest];
      return;
    }
    st.skipped = (st.skipped ?? 0) + waiting.length - 1;
    delete st.waiting;
    this.ask(step, w, q, st, newest, now, ending);
  }

  /** `again`: the last ask once more, as the same task (its id). */
  private ask(step: Step, w: QuestionWindow, q: QuestionCheck, st: QuestionState, anchor: string, now: { received: number; at: number }, final: boolean, again = false): void {
    const built = this.evidence(w, q, anchor === 'run' ? undefined : anchor, step);
    if (!built) return;
    const task: QuestionTask = {
      id: taskId(w.project, w.run_id, q.id, anchor, again ? st.asked - 1 : st.asked),
      type: 'question',
      project: w.project,
      run_id: w.run_id,
      check: q,
      scope: q.scope,
      anchor,
      evidence: built.evidence,
      context: built.context,
      span_ids: built.span_ids,
      final,
      at_ms: now.at,
      received_ms: now.received,
    };
    if (w.workflow) task.workflow = w.workflow;
    if (w.session_id) task.session_id = w.session_id;
    // Shed or not, the next ask waits its gap: a question service far behind is not sent more
    // often, nor are more of its questions recorded as not checked.
    st.last_asked_ms = now.at;
    if (step.shed) {
      // Not handed over: the question is as it was before the ask (its evidence still new, its
      // asks not counted), but for the spans a span question was waiting on, which are gone (the
      // rule engine records the task as not checked). The last ask again is that task, handed
      // over before: nothing to record.
      if (!again) step.tasks.push(task);
      return;
    }
    step.tasks.push(task);
    if (!again) st.asked++;
    delete st.dirty;
  }

  /**
   * How many of a run's spans its window keeps: 40, or as many as a question in effect asks to
   * be shown (`evidence.last`; a span question's earlier tool calls and the span itself), so a
   * question is never shown fewer than it asks for while the run has them.
   */
  private ringSize(set: QuestionSet): number {
    if (this.opts.ringSize !== undefined) return this.opts.ringSize;
    if (this.ringSized?.version !== set.version) {
      let n = DEFAULT_RING_SIZE;
      for (const q of set.questions) {
        const last = q.evidence?.last;
        if (last !== undefined) n = Math.max(n, Math.min(MAX_EVIDENCE_LAST, last) + (q.scope === 'span' ? 1 : 0));
      }
      this.ringSized = { version: set.version, size: n };
    }
    return this.ringSized.size;
  }

  /** What the question sees: the seed's evidence (spans, fields, last, final_output) and scope. */
  private evidence(w: QuestionWindow, q: QuestionCheck, focusId: string | undefined, step: Step) {
    const ev = q.evidence;
    const filter = evidenceFilter(q.scope, ev);
    const ring = w.ring;
    let doc: EvidenceDoc;
    let context: ContextDoc;
    if (q.scope === 'span') {
      let at = -1;
      for (let i = 0; i < ring.length; i++) {
        if (ring[i].id === focusId) {
          at = i;
          break;
        }
      }
      if (at < 0) return undefined;
      // Seed: a span-scope question "also sees the tool calls made earlier in the run": the last
      // `last` of them (as Array#slice(-last) keeps them), and the rest of the ring before it as context.
      let earlier = 0;
      for (let i = 0; i < at; i++) if (isToolSpan(ring[i])) earlier++;
      const last = ev?.last ?? DEFAULT_SPAN_CONTEXT;
      const skip = last > 0 ? Math.max(0, earlier - last) : last < 0 ? Math.min(-last, earlier) : 0;
      // The calls shown and the span, then the rest before it (the context, its newest
      // CONTEXT_SPANS kept as contextOf keeps them): each array made once, at its size.
      const spans = new Array<SpanSummary>(earlier - skip + 1);
      const before = at - (earlier - skip);
      const kept = new Array<SpanSummary>(Math.min(CONTEXT_SPANS, before));
      const keepFrom = before - kept.length;
      let tool = 0;
      let n = 0;
      let b = 0;
      for (let i = 0; i < at; i++) {
        const s = ring[i];
        if (isToolSpan(s) && tool++ >= skip) spans[n++] = pickFields(s, ev?.fields);
        else {
          if (b >= keepFrom) kept[b - keepFrom] = shorten(s, CONTEXT_CHARS);
          b++;
        }
      }
      spans[n] = pickFields(ring[at], ev?.fields);
      doc = { spans, focus: focusId };
      context = contextDoc(kept, before, w.start?.user_message);
      const omitted = skip + (w.dropped_tools ?? 0);
      if (omitted > 0) doc.omitted = omitted;
      if (w.start?.tools?.length) doc.tools = w.start.tools;
    } else {
      const matching = ring.filter((s) => matchesFilter(s, filter));
      const last = ev?.last ?? DEFAULT_TRACE_LAST;
      const shown = matching.slice(-last);
      doc = { spans: shown.map((s) => pickFields(s, ev?.fields)) };
      // The matching spans not shown: those past `last`, and those that fell out of the ring.
      const omitted = matching.length - shown.length + (w.checks[q.id]?.omitted ?? 0);
      if (omitted > 0) doc.omitted = omitted;
      // The ring before the first span shown is the context (not copied first).
      const first = shown.length ? ring.indexOf(shown[0]) : ring.length;
      context = contextOfRing(ring, Math.max(0, first), w.start?.user_message);
    }
    if (ev?.final_output && w.ended) {
      doc.final_output = w.ended.final_output ?? '';
      doc.run_status = w.ended.status;
    }
    if (ev?.user_message && w.start?.user_message) doc.user_message = w.start.user_message;
    if (ev?.system_prompt && w.start?.system_prompt) doc.system_prompt = w.start.system_prompt;
    if (q.scope === 'session' && w.session_id) {
      const s = step.sessions.get(sessionWindowKey(w.project, w.session_id));
      if (s) doc.runs = s.runs.filter((r) => r.run_id !== w.run_id).slice(-this.sessionRuns);
    }
    return {
      evidence: doc,
      context,
      span_ids: focusId ? [focusId] : doc.spans.map((s) => s.id),
    };
  }

  private recordSession(step: Step, w: QuestionWindow): void {
    const key = sessionWindowKey(w.project, w.session_id!);
    const s = step.sessions.get(key);
    if (!s || s.runs.some((r) => r.run_id === w.run_id)) return;
    const run: RunSummary = {
      run_id: w.run_id,
      spans: w.ring.filter(isToolSpan).slice(-5).map((x) => ({ ...x, input: x.input && cut(x.input, 300), output: x.output && cut(x.output, 300) })),
    };
    if (w.ended?.status) run.status = w.ended.status;
    if (w.start?.user_message) run.user_message = cut(w.start.user_message, 500);
    if (w.ended?.final_output) run.final_output = cut(w.ended.final_output, 800);
    s.runs.push(run);
    if (s.runs.length > this.sessionRuns) s.runs.splice(0, s.runs.length - this.sessionRuns);
    step.sessionsTouched.add(key);
  }

  private finish(step: Step): SchedulerOutput {
    this.emitPlans(step);
    const windows: WindowToSave<SchedulerWindow>[] = [];
    for (const key of step.touched) {
      const w = step.windows.get(key)!;
      // A ring with a summary replaced in place (null) is compared whole by a journaling store.
      const ring = step.rings.get(key);
      windows.push({ key, window: w, ttlMs: w.ended ? this.ttlAfterEnd : this.ttlIdle, shifted: ring === null ? undefined : { ring: ring ?? UNMOVED }, rest: w.ended !== undefined });
    }
    for (const key of step.sessionsTouched) windows.push({ key, window: step.sessions.get(key)!, ttlMs: this.ttlIdle * 4 });
    return {
      tasks: step.tasks,
      ...(step.shed ? { shed: true as const } : {}),
      // Compare-and-set: if another replica saved one of these runs meanwhile, nothing is
      // written and the batch is read again (the tasks it published have the same ids).
      commit: () => saveWindows(this.opts.windows, windows),
    };
  }
}
