import { markAdded, type WindowSave, type WindowStore } from '@neatroots/ports';
import { itemRunId, type Envelope, type RunEnd, type Span } from '@neatroots/spans';
import { fillGuidance } from '../guidance';
import type { FindingEvent } from '../types';
import type { CompiledRule } from './compile';
import { findingId } from './ids';
import { callsJoined, isLayer, rememberToolSpan } from './layers';
import type { RuleRef, RuleStep } from './rules';
import type { JointMatch } from './joint';
import { spanPlan, type SpanPlan } from './plan';
import { RunEndView, SpanView } from './span-view';
import { hasSeen, newWindow, ownValue, setOwnValue, windowKey, type OpenFinding, type RunWindow } from './window';

/** Open halts a window keeps (RunWindow.halts): one is enough to halt the run's later calls. */
const MAX_OPEN_HALTS = 20;

/** A note or halt for the agent, raised with a finding. */
export interface NoteOut {
  id: string;
  project: string;
  run_id: string;
  check_id: string;
  finding_id: string;
  kind: 'note' | 'halt';
  title: string;
  text: string;
  at_ms: number;
  /**
   * The group of the finding's check (not for halts). Routing only, never sent to agents: the
   * rule engine and the question service each send one note per group per run, and ingest
   * keeps it one across the two.
   */
  group?: string;
}

export interface EngineOutput {
  findings: FindingEvent[];
  notes: NoteOut[];
  /**
   * Saves the windows this step changed. Call it after the findings and notes are stored
   * or published: a crash in between re-runs the step from the previous windows and emits
   * the same findings with the same ids, instead of losing them. A step never committed is
   * done again from the windows as saved (Redis: what a step changed is in its own copies), or,
   * over the embedded stores, which hand out the windows they hold and so keep what the step
   * changed, its findings and notes come again with the next step on any of its runs (the batch
   * delivered again, a tick): see RuleEngine's `unsaved`. Either way they have the same ids.
   */
  commit(): Promise<void>;
}

export interface RuleSet {
  /** Changes whenever the checks change (hot reload), so per-workflow caches are dropped. */
  version: number;
  rules: CompiledRule[];
}

export interface RuleEngineOptions {
  windows: WindowStore<RunWindow>;
  rules: () => RuleSet;
  /** Whether steering (halts) is on for a project. Asked once per project per step. */
  steering?: (project: string) => boolean | Promise<boolean>;
  /** A check dismissed 3 times in a project is quiet there: findings recorded, no notes. */
  quiet?: (project: string, checkId: string) => boolean | Promise<boolean>;
  /** requires_before waits this long for a late `requires` span (seed: 250 ms). */
  requiresWaitMs?: number;
  /** How long a run's window is kept after its run_end (late spans) and after its last item. */
  ttlAfterEndMs?: number;
  ttlIdleMs?: number;
  /** Span ids kept per streak finding. */
  maxSpanIds?: number;
  /** How long a taken wake waits before it is offered again if its step never saved. */
  wakeLeaseMs?: number;
}

/** The rules of one project, workflow, span type and tool; the span plans by status (0 ok, 1 error, 2 any other). */
interface Applicable {
  rules: CompiledRule[];
  plans: SpanPlan[];
}

/** A finding raised in a step, finished (action, note) once the step's spans are applied. */
interface Emitted {
  ev: FindingEvent;
  w: RunWindow;
  r: RuleRef;
}

/** What a step left in a window the store holds, until a step on the window is saved (RuleEngine.unsaved). */
interface Unsaved {
  /** When the step recorded it (Date.now()). */
  at: number;
  emitted: Emitted[];
  /** Span ids added to the window's `seen` in place since its last save. */
  added?: string[];
}

/** A window in a step. */
interface Slot {
  w: RunWindow;
  /** Over a store changed in place (loadsStored): the span ids added to `w.seen` since its last save. */
  added?: string[];
}

interface Step {
  out: { findings: FindingEvent[]; notes: NoteOut[] };
  windows: Map<string, Slot>;
  touched: Set<string>;
  emitted: Emitted[];
  /** What the rule modules may do in this step. */
  rules: RuleStep;
  /** Answers that come later (see RuleStep.defer). */
  deferred: { answer: Promise<unknown>; then: (value: unknown) => void }[];
}

/**
 * The rule engine: evaluates the rule checks of CONTRACTS.md section 2 over a stream of
 * spans and run events, with every piece of per-run state in a RunWindow from the
 * window store. One engine instance serialises its own steps; the bus gives each run to
 * one consumer at a time.
 */
export class RuleEngine {
  private readonly windows: WindowStore<RunWindow>;
  private readonly waitMs: number;
  private readonly ttlAfterEnd: number;
  private readonly ttlIdle: number;
  private readonly maxSpans: number;
  private readonly wakeLeaseMs: number;
  /** Rules in effect per project, workflow, span type and tool; rebuilt when the checks change. */
  private readonly applicable = new Map<string, Map<string, Map<string, Map<string, Applicable>>>>();
  private applicableVersion = -1;
  /** The joint `match` passes of the rule set in effect (see plan.ts). */
  private readonly joints = new Map<string, JointMatch>();
  /** One view, reset for each span (steps are serial). */
  private readonly view = new SpanView();
  private chain: Promise<unknown> = Promise.resolve();
  /**
   * The store hands out the windows it holds (the embedded ones, WindowStore.loadsStored): a
   * step changes them in place, and what it changed stays there whether or not it is saved.
   */
  private readonly inPlace: boolean;
  /**
   * Over such a store, what the steps not saved yet raised, by window: a step whose commit never
   * came (its findings' publish failed, or it threw) has already marked its spans seen, so the
   * batch delivered again would raise nothing. Its findings and notes come instead with the next
   * step on the window (that batch, a tick), settled again, with the same ids, and are forgotten
   * once a step that carried them is saved. Copying every window a step used, so a step never
   * saved would leave none changed, cost the engine a quarter of its rate.
   */
  private readonly unsaved = new Map<string, Unsaved>();
  /** The windows of the step under way, from their load to its end (steps are serial): being changed in place. */
  private changing: ReadonlyMap<string, Slot> | undefined;

  constructor(private readonly opts: RuleEngineOptions) {
    this.windows = opts.windows;
    this.waitMs = opts.requiresWaitMs ?? 250;
    this.ttlAfterEnd = opts.ttlAfterEndMs ?? 10 * 60_000;
    this.ttlIdle = opts.ttlIdleMs ?? 6 * 60 * 60_000;
    this.maxSpans = opts.maxSpanIds ?? 50;
    this.wakeLeaseMs = opts.wakeLeaseMs ?? 5_000;
    this.inPlace = opts.windows.loadsStored === true;
  }

  /** Applies a batch of accepted items, in order. */
  process(envs: readonly Envelope[]): Promise<EngineOutput> {
    return this.serial(async () => {
      const keyOf = new Array<string>(envs.length);
      // Each run's key, with the span ids its window is asked about (a store that keeps `seen` apart loads those only).
      const members = new Map<string, { seen: string[] }>();
      // A batch holds many spans of a few runs: each run's key is built once, not per span.
      const byRun = new Map<string, Map<string, string>>();
      for (let i = 0; i < envs.length; i++) {
        const { project, item } = envs[i];
        const run = itemRunId(item);
        let runs = byRun.get(project);
        if (!runs) byRun.set(project, (runs = new Map()));
        let key = runs.get(run);
        if (key === undefined) {
          runs.set(run, (key = windowKey(project, run)));
          members.set(key, { seen: [] });
        }
        keyOf[i] = key;
        if (item.kind === 'span') members.get(key)!.seen.push(item.span.span_id);
      }
      const step = await this.begin([...members.keys()], members);
      return this.guarded(step, async () => {
        for (let i = 0; i < envs.length; i++) this.apply(step, envs[i], keyOf[i]);
        if (step.deferred.length) await this.applyDeferred(step);
        return this.finish(step);
      });
    });
  }

  /**
   * Fires requires_before waits whose 250 ms ran out by `now`. With `keys` and
   * `all`, fires every pending wait of those runs (the end of a replay: no late span can come).
   */
  tick(now: number, opts: { keys?: string[]; all?: boolean } = {}): Promise<EngineOutput> {
    return this.serial(async () => {
      // Leased, not removed: if this step dies before it saves, the wake comes round again.
      const keys = opts.keys ?? (await this.windows.takeDue(now, 10_000, this.wakeLeaseMs));
      if (!keys.length) return { findings: [], notes: [], commit: async () => undefined };
      const step = await this.begin(keys);
      // A wake whose window is gone (expired, evicted, deleted) has nothing to fire: it is
      // cleared with the step's commit, or its lease would offer it again and again.
      const gone = keys.filter((key) => !step.windows.has(key));
      return this.guarded(step, async () => {
        for (const key of keys) {
          const slot = step.windows.get(key);
          if (slot) this.fireWaits(step, slot.w, opts.all ? Infinity : now);
        }
        return this.finish(step, gone);
      });
    });
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.chain.then(fn, fn);
    this.chain = p.catch(() => undefined);
    return p;
  }

  private async begin(keys: string[], members?: ReadonlyMap<string, { seen: string[] }>): Promise<Step> {
    const windows = new Map<string, Slot>();
    for (const [key, w] of await this.windows.load(keys, members)) windows.set(key, { w });
    this.changing = windows;
    const step: Step = { out: { findings: [], notes: [] }, windows, touched: new Set(), emitted: [], rules: undefined as unknown as RuleStep, deferred: [] };
    if (this.unsaved.size) this.carry(step, keys);
    step.rules = {
      maxSpanIds: this.maxSpans,
      requiresWaitMs: this.waitMs,
      raise: (w, r, anchor, spans, count, at, received, vars) => this.raise(step, w, r, anchor, spans, count, at, received, vars),
      emit: (w, r, status, f, at, received, vars) => this.emit(step, w, r, status, f, at, received, vars),
      defer: (answer, then) => step.deferred.push({ answer, then: then as (value: unknown) => void }),
    };
    return step;
  }

  /**
   * Takes over what unsaved steps left in this step's windows: their findings come first in this
   * step's (settled again: a quiet check or steering may have changed meanwhile), the windows
   * are saved with this step, and their added span ids go with its save.
   */
  private carry(step: Step, keys: readonly string[]): void {
    for (const key of keys) {
      const u = this.unsaved.get(key);
      if (!u) continue;
      this.unsaved.delete(key);
      // A window never saved is not in the store: the step done again raises its findings anew.
      const slot = step.windows.get(key);
      if (!slot) continue;
      // The window as held now (a save since may have replaced the object the finding was raised on).
      for (const e of u.emitted) step.emitted.push({ ...e, w: slot.w });
      slot.added = u.added;
      step.touched.add(key);
    }
  }

  /**
   * Runs the rest of a step; over a store changed in place, a step that throws leaves what it
   * raised so far for the next step on its windows (see `unsaved`).
   */
  private async guarded(step: Step, rest: () => Promise<EngineOutput>): Promise<EngineOutput> {
    try {
      return await rest();
    } catch (err) {
      if (this.inPlace) this.keepUnsaved(step);
      throw err;
    } finally {
      if (this.changing === step.windows) this.changing = undefined;
    }
  }

  /**
   * Whether a window holds changes no commit has saved yet: the step under way uses it, or a
   * step whose commit has not come (or never will: `unsaved`) changed it. A store that writes
   * saved windows later (WindowStore.coalesce) leaves such a window for its next save.
   */
  isChanging(key: string): boolean {
    return this.changing?.has(key) === true || this.unsaved.has(key);
  }

  /** Records what the step left in the windows, until its commit (see `unsaved`); returns what it recorded. */
  private keepUnsaved(step: Step): Map<string, Unsaved> {
    const kept = new Map<string, Unsaved>();
    const at = Date.now();
    for (const [key, slot] of step.windows) if (slot.added) kept.set(key, { at, emitted: [], added: slot.added });
    // Every window the step changed, even with no span added and nothing raised (a run_end, a
    // check's state): until its commit it holds what no save has (see isChanging).
    for (const key of step.touched) if (!kept.has(key)) kept.set(key, { at, emitted: [] });
    for (const e of step.emitted) {
      const key = windowKey(e.w.project, e.w.run_id);
      let u = kept.get(key);
      if (!u) kept.set(key, (u = { at, emitted: [] }));
      u.emitted.push(e);
    }
    for (const [key, u] of kept) this.unsaved.set(key, u);
    return kept;
  }

  /**
   * The windows an unsaved step left changed since before `before` (Date.now() ms): a step on
   * them (a tick with these keys) publishes what it raised and saves them. For a batch that is
   * never delivered again (set aside after its tries): without it, its findings would wait for
   * the run's next item. A step still publishing holds its runs (the service's lock), and its
   * commit forgets them before a tick on them begins.
   */
  unsavedKeys(before: number): string[] {
    const keys: string[] = [];
    for (const [key, u] of this.unsaved) if (u.at < before) keys.push(key);
    return keys;
  }

  /** A step was committed: what it recorded is forgotten (not what a later step recorded since). */
  private forget(kept: Map<string, Unsaved>): void {
    for (const [key, u] of kept) if (this.unsaved.get(key) === u) this.unsaved.delete(key);
  }

  /** Waits for the step's deferred answers (all at once: one batch off the event loop), then applies them in order. */
  private async applyDeferred(step: Step): Promise<void> {
    const values = await Promise.all(step.deferred.map((d) => d.answer));
    for (let i = 0; i < values.length; i++) step.deferred[i].then(values[i]);
  }

  /**
   * Decides each finding's action and note: halts act only for the user's own rules where
   * steering is on; quiet checks send no note; a group sends one note per run.
   */
  private async settle(step: Step): Promise<void> {
    const steering = new Map<string, boolean>();
    for (const { ev, w, r } of step.emitted) {
      const wantsHalt = r.check.action === 'halt';
      let halts = false;
      if (wantsHalt && r.canHalt) {
        let on = steering.get(w.project);
        if (on === undefined) {
          on = (await this.opts.steering?.(w.project)) ?? false;
          steering.set(w.project, on);
        }
        halts = on;
      }
      // Asked for a raised finding (its note) and for one that would halt: a quiet check sends
      // no note, so it halts nothing either, and its findings say so.
      const quiet = (ev.status === 'raised' || halts) && (await this.opts.quiet?.(w.project, ev.check_id)) === true;
      if (quiet) halts = false;
      ev.action = halts ? 'halt' : 'flag';
      if (wantsHalt && !halts) ev.halt_suppressed = true;
      step.out.findings.push(ev);
      // The run's halts still open, for the pre-call check (a later call of a halted run halts).
      if (ev.status === 'resolved' && w.halts && ownValue(w.halts, ev.id)) delete w.halts[ev.id];
      if (ev.status !== 'raised' || quiet) continue;
      if (halts && (w.halts === undefined || Object.keys(w.halts).length < MAX_OPEN_HALTS)) {
        setOwnValue((w.halts ??= {}), ev.id, { check_id: ev.check_id, title: ev.title, text: ev.guidance });
      }
      // Checks in one group are one problem per run: one note, unless this one halts.
      if (ev.group && !halts) {
        const noted = (w.noted_groups ??= {});
        // The group's note is this finding's when a step not saved settled it before (`unsaved`).
        if (noted[ev.group] && noted[ev.group] !== ev.id) continue;
        noted[ev.group] = ev.id;
      }
      step.out.notes.push({
        id: `note-${ev.id}`,
        project: w.project,
        run_id: w.run_id,
        check_id: ev.check_id,
        finding_id: ev.id,
        kind: halts ? 'halt' : 'note',
        title: ev.title,
        text: ev.guidance,
        at_ms: ev.at_ms,
        ...(ev.group && !halts ? { group: ev.group } : {}),
      });
    }
  }

  /** `gone`: keys a tick took whose window is not there (their wakes are cleared with the commit). */
  private async finish(step: Step, gone: readonly string[] = []): Promise<EngineOutput> {
    await this.settle(step);
    const entries: (WindowSave<RunWindow> & { expectRev: number })[] = [];
    const wakes: { key: string; atMs: number | null }[] = [];
    // A store that sets the wakes with the save (Redis: one round trip, never half done).
    const withSave = this.windows.savesWakes === true;
    for (const key of step.touched) {
      const { w, added } = step.windows.get(key)!;
      const expectRev = w.rev ?? 0;
      const saved = { ...w, rev: expectRev + 1 };
      const window = added ? markAdded(saved, { seen: added }) : saved;
      const ttlMs = w.ended ? this.ttlAfterEnd : this.ttlIdle;
      // Span ids added in place: a store that journals edits compares the window's `seen` at those only.
      // An ended run's window with no wait left is at rest: kept for late spans, out of the way.
      entries.push({ key, window, ttlMs, expectRev, wakeAtMs: w.wake_at ?? null, ...(w.ended && w.wake_at === undefined ? { rest: true } : {}) });
      if (!withSave) wakes.push({ key, atMs: w.wake_at ?? null });
    }
    const kept = this.inPlace ? this.keepUnsaved(step) : undefined;
    return {
      ...step.out,
      commit: async () => {
        // Called once what the step raised is published: nothing of it is to come again.
        if (kept) this.forget(kept);
        // Begun with the save, not before it (a store that applies at call applies both now).
        const cleared = gone.length ? this.clearWakes(gone) : Promise.resolve();
        cleared.catch(() => undefined); // awaited below, after the save, which may throw first
        if (!entries.length) return cleared;
        // Compare-and-set: if another replica saved one of these runs since they were loaded
        // (a rebalance, a tick elsewhere), this throws and the step is done again from a
        // fresh load; its findings have the same ids, so publishing them twice is harmless.
        // The wakes are set once the save went through (by a store that savesWakes, with it).
        // A store that applies each change as it is called (the embedded ones; one process owns
        // it and steps on a run never overlap, so its compare-and-set does not fail): the wakes
        // are set in the same turn as the save, so a step that starts while this one's save is
        // still syncing sees both, and the wakes of a run's steps are set in the steps' order (a
        // wake set after the sync could undo a later step's).
        const atOnce = this.windows.appliedAtCall === true;
        const saved = this.windows.save(entries);
        await (atOnce ? Promise.all([saved, this.windows.setWakes(wakes)]) : saved);
        for (const e of entries) {
          const live = step.windows.get(e.key)?.w;
          if (live) live.rev = e.expectRev + 1;
        }
        if (!atOnce && wakes.length) await this.windows.setWakes(wakes);
        await cleared;
      },
    };
  }

  /**
   * Clears the wakes of windows that are gone. A store that can clears only those still without
   * a window (one saved meanwhile, by a step of this engine whose commit came first or by another
   * replica, keeps its wake).
   */
  private clearWakes(keys: readonly string[]): Promise<void> {
    const store = this.windows;
    return store.clearOrphanWakes ? store.clearOrphanWakes(keys) : store.setWakes(keys.map((key) => ({ key, atMs: null })));
  }

  private rulesFor(project: string, workflow: string | undefined, spanType = '*', tool?: string): CompiledRule[] {
    return this.applicableTo(project, workflow, spanType, tool).rules;
  }

  /** The plan for a span: its kind's rules, filters decided as far as the kind decides them. */
  private planFor(project: string, workflow: string | undefined, span: Span): SpanPlan {
    const a = this.applicableTo(project, workflow, span.type, span.tool);
    const i = span.status === 'ok' ? 0 : span.status === 'error' ? 1 : 2;
    return (a.plans[i] ??= spanPlan(a.rules, this.opts.rules().rules, span, this.joints));
  }

  private applicableTo(project: string, workflow: string | undefined, spanType: string, tool: string | undefined): Applicable {
    const set = this.opts.rules();
    if (set.version !== this.applicableVersion) {
      this.applicable.clear();
      this.joints.clear();
      this.applicableVersion = set.version;
    }
    // Nested maps, not concatenated keys: this runs for every span, and a fresh key string
    // would be built and hashed each time.
    let byWorkflow = this.applicable.get(project);
    if (!byWorkflow) {
      if (this.applicable.size > 10_000) this.applicable.clear();
      byWorkflow = new Map();
      this.applicable.set(project, byWorkflow);
    }
    const wf = workflow ?? '';
    let byType = byWorkflow.get(wf);
    if (!byType) {
      if (byWorkflow.size > 1000) byWorkflow.clear();
      byType = new Map();
      byWorkflow.set(wf, byType);
    }
    let byTool = byType.get(spanType);
    if (!byTool) {
      byTool = new Map();
      byType.set(spanType, byTool);
    }
    const tk = tool ?? '';
    let a = byTool.get(tk);
    if (!a) {
      const rules = set.rules.filter(
        (r) =>
          r.appliesTo(project, workflow) &&
          (spanType === '*' ||
            r.kind.everySpan ||
            ((!r.spanTypes || r.spanTypes.has(spanType)) && (!r.spanTools || (tool !== undefined && r.spanTools.has(tool))))),
      );
      if (byTool.size > 1000) byTool.clear();
      a = { rules, plans: [] };
      byTool.set(tk, a);
    }
    return a;
  }

  private apply(step: Step, env: Envelope, key: string): void {
    const item = env.item;
    const run_id = itemRunId(item);
    let slot = step.windows.get(key);
    if (!slot) {
      slot = { w: newWindow(run_id, env.project) };
      step.windows.set(key, slot);
    }
    const w = slot.w;
    step.touched.add(key);
    if (item.kind === 'run_start') {
      if (item.run.workflow) w.workflow = item.run.workflow;
      // The run began then, whenever its first span did (threshold's duration_ms counts from it).
      const ts = item.run.ts_ms;
      if (ts !== undefined && (w.metrics.first_ms === undefined || ts < w.metrics.first_ms)) w.metrics.first_ms = ts;
      return;
    }
    if (item.kind === 'run_end') {
      if (w.ended) return; // a redelivered run_end
      this.onRunEnd(step, w, item.run, env);
      return;
    }
    const span = item.span;
    // The same span exported twice counts once.
    if (hasSeen(w.seen, span.span_id)) return;
    if (!w.workflow && span.workflow) w.workflow = span.workflow;
    const m = w.metrics;
    const { first_ms, last_ms } = m;
    // Another layer of a tool call the run already sent (layers.ts): a span, not another call.
    const layer = isLayer(w, span);
    this.addMetrics(w, span, 1, layer);
    const plan = this.planFor(w.project, w.workflow, span);
    const view = this.view.reset(span, plan.match);
    // Each rule type's behaviour is in its own module (rules/<type>.ts). The plan's rules are
    // those whose filters this kind of span passes, but for the names a few filters ask for.
    const { rules, names } = plan;
    try {
      for (let i = 0; i < rules.length; i++) {
        const only = names[i];
        if (only && !only.has(span.name)) continue;
        if (layer && !rules[i].kind.seesLayers) continue;
        rules[i].kind.onSpan!(step.rules, w, rules[i], span, view, env.received_ms);
      }
    } catch (err) {
      // Not seen, and not in the run's metrics: over a store changed in place the batch
      // delivered again runs the span's rules again (those that ran before the throw see it
      // twice), rather than skipping it with the rules after the throw never run.
      this.addMetrics(w, span, -1, layer);
      m.first_ms = first_ms;
      m.last_ms = last_ms;
      throw err;
    }
    // Seen once its rules ran.
    setOwnValue(w.seen, span.span_id, 1);
    // The middle layer of a call come last: the calls it links but the first are layers too.
    if (layer) for (const back of callsJoined(w, span)) this.takeBack(step, w, back);
    rememberToolSpan(w, span, !layer);
    if (this.inPlace) (slot.added ??= []).push(span.span_id);
  }

  /**
   * Takes back a span counted as a call that a later layer showed to be a layer of an earlier
   * call (layers.ts callsJoined): out of the run's tool_calls and errors, and out of what the
   * rules that counted it count. Its findings stay.
   */
  private takeBack(step: Step, w: RunWindow, span: Span): void {
    w.metrics.tool_calls--;
    if (span.status === 'error') w.metrics.errors--;
    const { rules, names } = this.planFor(w.project, w.workflow, span);
    for (let i = 0; i < rules.length; i++) {
      const only = names[i];
      if ((only && !only.has(span.name)) || rules[i].kind.seesLayers) continue;
      rules[i].kind.onTakenBack?.(step.rules, w, rules[i], span.span_id);
    }
  }

  /**
   * Adds a span to the run's metrics (`sign` -1 takes its counts out again; not first_ms/last_ms).
   * A `layer` of a call already counted is a span, not another tool call or error.
   */
  private addMetrics(w: RunWindow, s: Span, sign: 1 | -1, layer: boolean): void {
    const m = w.metrics;
    m.spans += sign;
    if (s.type === 'llm') m.llm_calls += sign;
    else if ((s.type === 'tool' || s.type === 'mcp_tool') && !layer) m.tool_calls += sign;
    if (s.status === 'error' && !layer) m.errors += sign;
    const u = s.usage;
    if (u) {
      m.input_tokens += sign * (u.input_tokens ?? 0);
      m.output_tokens += sign * (u.output_tokens ?? 0);
      m.total_tokens += sign * (u.total_tokens ?? (u.input_tokens ?? 0) + (u.output_tokens ?? 0));
      m.cost += sign * (u.cost ?? 0);
    }
    if (sign < 0) return;
    const first = s.start_ms ?? s.end_ms;
    const last = s.end_ms ?? s.start_ms;
    if (first !== undefined && (m.first_ms === undefined || first < m.first_ms)) m.first_ms = first;
    if (last !== undefined && (m.last_ms === undefined || last > m.last_ms)) m.last_ms = last;
  }

  /** Gives the rules that wait (requires_before) the time `now`; the run wakes again at the earliest deadline left. */
  private fireWaits(step: Step, w: RunWindow, now: number): void {
    let next: number | undefined;
    step.touched.add(windowKey(w.project, w.run_id));
    for (const r of this.rulesFor(w.project, w.workflow)) {
      const at = r.kind.onWake?.(step.rules, w, r, now);
      if (at !== undefined && (next === undefined || at < next)) next = at;
    }
    w.wake_at = next;
  }

  private onRunEnd(step: Step, w: RunWindow, run: RunEnd, env: Envelope): void {
    w.ended = { status: run.status, at_ms: run.ts_ms ?? env.received_ms };
    if (run.ts_ms !== undefined && (w.metrics.last_ms === undefined || run.ts_ms > w.metrics.last_ms)) w.metrics.last_ms = run.ts_ms;
    const view = new RunEndView(run.final_output);
    for (const r of this.rulesFor(w.project, w.workflow)) r.kind.onRunEnd?.(step.rules, w, r, run, view, env.received_ms);
  }

  private raise(
    step: Step,
    w: RunWindow,
    r: RuleRef,
    anchor: string,
    spans: string[],
    count: number,
    at: number,
    received: number,
    vars: Record<string, unknown>,
  ): void {
    const open: OpenFinding = { id: findingId(w.project, w.run_id, r.check.id, anchor), count, spans };
    // A finding of the whole run raised again (unrecovered_error's failed call that arrives
    // after run_end, a second run_end) is the same finding grown: `updated`, never a second
    // `raised` (its note went with the first; its delay was counted once). A span's finding
    // needs no record: its span is applied once (`seen`), so its anchor comes once.
    if (!anchor.startsWith('span:')) {
      const raised = (w.raised ??= {});
      if (ownValue(raised, open.id) === r.check.rule.type) return this.emit(step, w, r, 'updated', open, at, received, vars);
      setOwnValue(raised, open.id, r.check.rule.type);
    }
    this.emit(step, w, r, 'raised', open, at, received, vars);
  }

  private emit(
    step: Step,
    w: RunWindow,
    r: RuleRef,
    status: FindingEvent['status'],
    f: OpenFinding,
    at: number,
    received: number,
    vars: Record<string, unknown>,
  ): void {
    const check = r.check;
    const guidance =
      status === 'resolved' && f.guidance !== undefined ? f.guidance : fillGuidance(check.guidance ?? check.title, { count: f.count, ...vars });
    if (status !== 'resolved') f.guidance = guidance;
    const ev: FindingEvent = {
      id: f.id,
      check_id: check.id,
      run_id: w.run_id,
      project: w.project,
      status,
      span_ids: [...f.spans],
      count: f.count,
      action: 'flag',
      title: check.title,
      guidance,
      at_ms: at,
      priority: r.priority,
      kind: check.kind,
      source: check.source,
      received_ms: received,
    };
    if (w.workflow) ev.workflow = w.workflow;
    if (check.group) ev.group = check.group;
    step.emitted.push({ ev, w, r });
  }
}
