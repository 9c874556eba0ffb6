import { isRuleCheck, RuleEngine, windowKey, type FindingEvent, type NoteOut, type RuleSet, type RunWindow } from '@neatroots/checks';
import { windowLayer, type WindowStore } from '@neatroots/ports';
import type { Span } from '@neatroots/spans';

/**
 * Halt before the harm (issue 14): before an agent runs a tool call, the SDK asks whether the
 * call would halt the run. The answer comes from the same rules and the run's own window as
 * the live engine, evaluated by the same RuleEngine code on a copy of the window: the
 * intended call is applied as if it had just run, waits such as requires_before's 250 ms are
 * ended at once (the call has not happened: no late span can excuse it), and what would halt
 * is the answer. Nothing is saved and nothing is published; the call, once run, arrives as a
 * span like any other.
 */

export interface PrecheckAnswer {
  decision: 'allow' | 'halt';
  /** The rule that would halt, and what the agent is told. */
  check_id?: string;
  finding_id?: string;
  title?: string;
  text?: string;
}

/** The window did not see the spans the SDK exported before asking, in time. */
export class PrecheckTimeoutError extends Error {
  constructor(ms: number, seen: number, known: number) {
    super(`the run's window saw ${seen} of its ${known} exported spans within ${ms} ms`);
    this.name = 'PrecheckTimeoutError';
  }
}

/** The caller gave up (its call was cancelled) before the answer: the check stopped waiting. */
export class PrecheckCancelledError extends Error {
  constructor() {
    super('the pre-call check was cancelled by its caller');
    this.name = 'PrecheckCancelledError';
  }
}

/**
 * The longest a pre-call check waits for the spans exported before it, whatever it is asked:
 * the most NEATROOTS_PRECHECK_TIMEOUT_MS may be (ingest cuts a request's timeout_ms to that
 * setting; this bounds a caller that asks the rule engine itself).
 */
export const MAX_PRECHECK_TIMEOUT_MS = 60_000;

export interface PrecheckOptions {
  windows: WindowStore<RunWindow>;
  rules: () => RuleSet;
  steering?: (project: string) => boolean | Promise<boolean>;
  quiet?: (project: string, checkId: string) => boolean | Promise<boolean>;
  /**
   * How often the run's window is read again while the check waits for the spans exported
   * before it (default 1 ms: an in-memory read). Over Redis, shared by every replica, 2 ms
   * keeps the wait short without a read loop hammering it.
   */
  pollMs?: number;
}

export interface PrecheckRequest {
  project: string;
  /** The call about to run (type, tool, input; its span_id is the one it will be exported with). */
  span: Span;
  /** Spans of the run the SDK exported before asking: the answer waits until the window saw them. */
  knownSpans?: number;
  /** How long to wait for them (default 1,000 ms, at most MAX_PRECHECK_TIMEOUT_MS). */
  timeoutMs?: number;
  /** When the caller stops waiting (epoch ms): the wait ends then, whatever `timeoutMs` says. */
  deadline?: number;
  /** Aborted when the caller gives up (its call cancelled): the wait ends at once. */
  signal?: AbortSignal;
}

/**
 * The check's copy of a window: all of it cloned but the ids of the spans seen, which the engine
 * only looks up and adds to. The copy's own ids are a layer over the live ones (windowLayer; the
 * engine reads through it): a long run's thousands of ids were copied for every check, on the
 * thread that answers. Not the live record as a prototype: V8 turns an object used as one into a
 * prototype, slow to add to, and the live engine adds every new span id of the run to it.
 */
function copyWindow(w: RunWindow): RunWindow {
  const { seen, ...rest } = w;
  const copy = structuredClone(rest) as RunWindow;
  copy.seen = windowLayer(seen);
  return copy;
}

/** A window store that reads the live windows and keeps what a precheck writes to itself (`mine()`, a new map per check). */
function overlay(live: WindowStore<RunWindow>, current: () => Map<string, RunWindow>): WindowStore<RunWindow> {
  return {
    load: async (keys, members) => {
      const mine = current();
      const out = new Map<string, RunWindow>();
      const missing = keys.filter((k) => !mine.has(k));
      const read = missing.length ? await live.load(missing, members) : new Map<string, RunWindow>();
      // The live windows are copied once; the copies are this check's to change.
      for (const k of keys) {
        const w = mine.get(k) ?? (read.has(k) ? copyWindow(read.get(k)!) : undefined);
        if (w) out.set(k, w);
      }
      return out;
    },
    save: async (entries) => entries.forEach((e) => current().set(e.key, e.window)),
    delete: async (keys) => keys.forEach((k) => current().delete(k)),
    wakeAt: async () => undefined,
    setWakes: async () => undefined,
    takeDue: async () => [],
    close: async () => undefined,
  };
}

/** The tools a halting rule names for a project and workflow ('*' when one acts on any tool call). */
export function haltingTools(set: RuleSet, project: string, workflow: string | undefined): string[] {
  const tools = new Set<string>();
  for (const r of set.rules) {
    const c = r.check;
    if (!isRuleCheck(c) || c.action !== 'halt' || !r.canHalt || !r.appliesTo(project, workflow)) continue;
    const filter = c.rule.type === 'requires_before' ? c.rule.call : 'span' in c.rule ? c.rule.span : undefined;
    if (!filter?.tool?.length) tools.add('*');
    else filter.tool.forEach((t) => tools.add(t));
  }
  return [...tools].sort();
}

const NO_OUTPUT = { findings: [] as FindingEvent[], notes: [] as NoteOut[] };

export class Prechecker {
  /**
   * What the current check wrote: its copy of the window. A new map for every check, not one
   * map cleared: a cleared map's old table keeps its entries and a pointer to the new table,
   * so once one table had lived long enough to be tenured, every later table and window copy
   * was kept alive by the one before it until a full collection (about 2 MB tenured per young
   * collection at 1,000 checks/s, each collection 4-6 ms of the answering thread).
   */
  private mine = new Map<string, RunWindow>();
  /**
   * An engine of its own over copies of the windows, so the live engine's steps are not held
   * up; one for every check (its per-rule-set caches stay warm), the checks one at a time.
   */
  private readonly engine: RuleEngine;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(private readonly opts: PrecheckOptions) {
    this.engine = new RuleEngine({ windows: overlay(opts.windows, () => this.mine), rules: opts.rules, steering: opts.steering, quiet: opts.quiet });
  }

  async precheck(req: PrecheckRequest): Promise<PrecheckAnswer> {
    const { project, span } = req;
    const key = windowKey(project, span.run_id);
    const started = Date.now();
    // Not past the caller's deadline, nor past the bound whatever the caller asked (a client
    // whose spans never come would otherwise keep a read of the window going every poll).
    const until = Math.min(started + Math.min(req.timeoutMs ?? 1_000, MAX_PRECHECK_TIMEOUT_MS), req.deadline ?? Infinity);
    const { signal } = req;
    if (signal?.aborted) throw new PrecheckCancelledError();
    // The spans exported before the question must be in the window, or a lookup that did
    // happen would be missed and the refund halted for nothing.
    // The call's own span id: whether it was seen (a store that keeps `seen` apart loads only that).
    const members = new Map([[key, { seen: [span.span_id] }]]);
    let live = (await this.opts.windows.load([key], members)).get(key);
    while (req.knownSpans && Prechecker.seen(live) < req.knownSpans) {
      if (signal?.aborted) throw new PrecheckCancelledError();
      if (Date.now() >= until) throw new PrecheckTimeoutError(Math.max(0, until - started), Prechecker.seen(live), req.knownSpans);
      await new Promise((r) => setTimeout(r, this.opts.pollMs ?? 1));
      // The caller may have given up while this waited: no read for an answer nobody takes.
      if (signal?.aborted) throw new PrecheckCancelledError();
      live = (await this.opts.windows.load([key], members)).get(key);
    }
    const run = this.chain.then(() => {
      if (signal?.aborted) throw new PrecheckCancelledError();
      return this.evaluate(project, span, key, live);
    });
    this.chain = run.catch(() => undefined);
    return run;
  }

  /**
   * How many spans the window saw: its span count, which moves with each id added to `seen`
   * (counting the ids made garbage in proportion to a long run's length on the answering
   * thread, and a store that keeps `seen` apart loads only the ids asked about).
   */
  private static seen(w: RunWindow | undefined): number {
    return w?.metrics.spans ?? 0;
  }

  private async evaluate(project: string, span: Span, key: string, live: RunWindow | undefined): Promise<PrecheckAnswer> {
    this.mine = new Map();
    // The window as read above (it holds the spans asked for), copied: read once per check.
    if (live) this.mine.set(key, copyWindow(live));
    const engine = this.engine;
    const now = Date.now();
    const applied = await engine.process([{ project, received_ms: now, item: { kind: 'span', span: { ...span, status: 'ok', start_ms: span.start_ms ?? now } } }]);
    await applied.commit();
    // Only a window left with a wait pending (wake_at) has anything for the tick to fire: most
    // allowed calls end here, without a second engine step's garbage on the answering thread.
    const waited = this.mine.get(key)?.wake_at !== undefined ? await engine.tick(now, { keys: [key], all: true }) : NO_OUTPUT;
    const findings = new Map<string, FindingEvent>([...applied.findings, ...waited.findings].map((f) => [f.id, f]));
    const halt = [...applied.notes, ...waited.notes].find((n: NoteOut) => n.kind === 'halt' && findings.get(n.finding_id)?.span_ids.includes(span.span_id));
    if (halt) return { decision: 'halt', check_id: halt.check_id, finding_id: halt.finding_id, title: halt.title, text: halt.text };
    // A run already halted (a secret in an LLM call, the call that used up the token budget):
    // every later call halts, while that finding is open and its check may still halt.
    const before = live?.halts ? await this.openHalt(project, live) : undefined;
    return before ?? { decision: 'allow' };
  }

  /** A halt the run's window holds (raised before, not resolved) whose check still halts in this project. */
  private async openHalt(project: string, w: RunWindow): Promise<PrecheckAnswer | undefined> {
    const set = this.opts.rules();
    for (const [finding_id, h] of Object.entries(w.halts ?? {})) {
      const r = set.rules.find((x) => x.check.id === h.check_id);
      if (!r || !isRuleCheck(r.check) || r.check.action !== 'halt' || !r.canHalt || !r.appliesTo(project, w.workflow)) continue;
      if (!((await this.opts.steering?.(project)) ?? false)) return undefined;
      if (await this.opts.quiet?.(project, h.check_id)) continue;
      return { decision: 'halt', check_id: h.check_id, finding_id, title: h.title, text: h.text };
    }
    return undefined;
  }

}
