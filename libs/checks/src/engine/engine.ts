import type { WindowStore } from '@neatroots/ports';
import { canonicalJson, itemRunId, valueText, MAX_TEXT_CHARS, type Envelope, type RunEnd, type Span } from '@neatroots/spans';
import { fillGuidance } from '../guidance';
import type { FindingEvent, MatchField, RuleCheck } from '../types';
import type { CompiledRule } from './compile';
import { findingId, fingerprint } from './ids';
import { newWindow, windowKey, type CheckState, type OpenFinding, type RunWindow } from './window';

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
}

export interface EngineOutput {
  findings: FindingEvent[];
  notes: NoteOut[];
  /**
   * Saves the windows this step changed. Call it after the findings and notes are stored
   * or published: a crash in between re-runs the step from the previous windows and emits
   * the same findings with the same ids, instead of losing them.
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

interface Step {
  out: { findings: FindingEvent[]; notes: NoteOut[] };
  windows: Map<string, RunWindow>;
  touched: Set<string>;
  /** Findings of this step, finished (action, notes) once the step's spans are applied. */
  emitted: { ev: FindingEvent; w: RunWindow; r: CompiledRule }[];
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
  /** Rules in effect per project, workflow and span type; rebuilt when the checks change. */
  private readonly applicable = new Map<string, Map<string, Map<string, Map<string, CompiledRule[]>>>>();
  private applicableVersion = -1;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(private readonly opts: RuleEngineOptions) {
    this.windows = opts.windows;
    this.waitMs = opts.requiresWaitMs ?? 250;
    this.ttlAfterEnd = opts.ttlAfterEndMs ?? 10 * 60_000;
    this.ttlIdle = opts.ttlIdleMs ?? 6 * 60 * 60_000;
    this.maxSpans = opts.maxSpanIds ?? 50;
    this.wakeLeaseMs = opts.wakeLeaseMs ?? 5_000;
  }

  /** Applies a batch of accepted items, in order. */
  process(envs: readonly Envelope[]): Promise<EngineOutput> {
    return this.serial(async () => {
      const keyOf = new Array<string>(envs.length);
      const keys = new Set<string>();
      for (let i = 0; i < envs.length; i++) keys.add((keyOf[i] = windowKey(envs[i].project, itemRunId(envs[i].item))));
      const step = await this.begin([...keys]);
      for (let i = 0; i < envs.length; i++) this.apply(step, envs[i], keyOf[i]);
      return this.finish(step);
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
      for (const key of keys) {
        const w = step.windows.get(key);
        if (w) this.fireWaits(step, w, opts.all ? Infinity : now);
      }
      return this.finish(step);
    });
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.chain.then(fn, fn);
    this.chain = p.catch(() => undefined);
    return p;
  }

  private async begin(keys: string[]): Promise<Step> {
    const windows = await this.windows.load(keys);
    return { out: { findings: [], notes: [] }, windows, touched: new Set(), emitted: [] };
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
      ev.action = halts ? 'halt' : 'flag';
      if (wantsHalt && !halts) ev.halt_suppressed = true;
      step.out.findings.push(ev);
      if (ev.status !== 'raised' || (await this.opts.quiet?.(w.project, ev.check_id))) continue;
      // Checks in one group are one problem per run: one note, unless this one halts.
      if (ev.group && !halts) {
        const noted = (w.noted_groups ??= {});
        if (noted[ev.group]) continue;
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
      });
    }
  }

  private async finish(step: Step): Promise<EngineOutput> {
    await this.settle(step);
    const entries: { key: string; window: RunWindow; ttlMs: number; expectRev: number }[] = [];
    const wakes: { key: string; atMs: number | null }[] = [];
    for (const key of step.touched) {
      const w = step.windows.get(key)!;
      const expectRev = w.rev ?? 0;
      entries.push({ key, window: { ...w, rev: expectRev + 1 }, ttlMs: w.ended ? this.ttlAfterEnd : this.ttlIdle, expectRev });
      wakes.push({ key, atMs: w.wake_at ?? null });
    }
    return {
      ...step.out,
      commit: async () => {
        if (!entries.length) return;
        // Compare-and-set: if another replica saved one of these runs since they were loaded
        // (a rebalance, a tick elsewhere), this throws and the step is done again from a
        // fresh load; its findings have the same ids, so publishing them twice is harmless.
        await this.windows.save(entries);
        for (const e of entries) {
          const live = step.windows.get(e.key);
          if (live) live.rev = e.expectRev + 1;
        }
        await this.windows.setWakes(wakes);
      },
    };
  }

  private rulesFor(project: string, workflow: string | undefined, spanType = '*', tool?: string): CompiledRule[] {
    const set = this.opts.rules();
    if (set.version !== this.applicableVersion) {
      this.applicable.clear();
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
    let rules = byTool.get(tk);
    if (!rules) {
      rules = set.rules.filter(
        (r) =>
          r.appliesTo(project, workflow) &&
          (spanType === '*' ||
            r.check.rule.type === 'threshold' ||
            ((!r.spanTypes || r.spanTypes.has(spanType)) && (!r.spanTools || (tool !== undefined && r.spanTools.has(tool))))),
      );
      if (byTool.size > 1000) byTool.clear();
      byTool.set(tk, rules);
    }
    return rules;
  }

  private apply(step: Step, env: Envelope, key: string): void {
    const item = env.item;
    const run_id = itemRunId(item);
    let w = step.windows.get(key);
    if (!w) {
      w = newWindow(run_id, env.project);
      step.windows.set(key, w);
    }
    step.touched.add(key);
    const at = env.received_ms;
    if (item.kind === 'run_start') {
      if (item.run.workflow) w.workflow = item.run.workflow;
      return;
    }
    if (item.kind === 'run_end') {
      if (w.ended) return; // a redelivered run_end
      this.onRunEnd(step, w, item.run, env);
      return;
    }
    const span = item.span;
    if (w.seen[span.span_id]) return; // the same span exported twice counts once
    w.seen[span.span_id] = 1;
    if (!w.workflow && span.workflow) w.workflow = span.workflow;
    this.addMetrics(w, span);
    const view = new SpanView(span);
    for (const r of this.rulesFor(w.project, w.workflow, span.type, span.tool)) {
      const rule = r.check.rule;
      switch (rule.type) {
        case 'repeat':
          if (r.span(span)) this.onRepeat(step, w, r, span, env, view.same(rule.same));
          break;
        case 'errors':
          if (r.span(span)) this.onErrors(step, w, r, span, env);
          break;
        case 'count':
          if (r.span(span)) {
            const st = state<CountState>(w, r, () => ({ t: 'count', n: 0 }));
            st.n++;
            if (st.n >= rule.at_least && !st.fired) {
              st.fired = 1;
              this.raise(step, w, r, 'run', [span.span_id], st.n, at, env.received_ms, { tool: span.tool, name: span.name });
            }
          }
          break;
        case 'slow':
          if (r.span(span) && span.start_ms !== undefined && span.end_ms !== undefined) {
            const ms = span.end_ms - span.start_ms;
            if (ms >= rule.at_least_ms) {
              this.raise(step, w, r, `span:${span.span_id}`, [span.span_id], 1, at, env.received_ms, { tool: span.tool, name: span.name, ms });
            }
          }
          break;
        case 'threshold': {
          // The metric first: it is below the line on almost every span, and then no state is needed.
          const value = metricValue(w, rule.metric);
          if (value < rule.at_least) break;
          const st = state<CountState>(w, r, () => ({ t: 'count', n: 0 }));
          if (!st.fired) {
            st.fired = 1;
            this.raise(step, w, r, 'run', [span.span_id], 1, at, env.received_ms, { metric: rule.metric, value: round(value) });
          }
          break;
        }
        case 'match':
          if (r.span(span) && r.matcher!.test(view.text(rule.in))) {
            const st = state<MatchState>(w, r, () => ({ t: 'match' }));
            // One finding per run; later matching spans join it (as a span-scope question's do).
            if (!st.open) {
              st.open = { id: findingId(w.project, w.run_id, r.check.id, 'run'), count: 1, spans: [span.span_id] };
              this.emit(step, w, r, 'raised', st.open, at, env.received_ms, { tool: span.tool, name: span.name, pattern: rule.pattern });
            } else {
              st.open.count++;
              pushCapped(st.open.spans, span.span_id, this.maxSpans);
              this.emit(step, w, r, 'updated', st.open, at, env.received_ms, { tool: span.tool, name: span.name, pattern: rule.pattern });
            }
          }
          break;
        case 'requires_before':
          this.onRequires(step, w, r, span, env);
          break;
        case 'unrecovered_error':
          if (r.span(span) && span.tool) {
            const st = state<ToolsState>(w, r, () => ({ t: 'tools', last: {} }));
            const start = span.start_ms ?? span.end_ms ?? at;
            const cur = st.last[span.tool];
            if (!cur || start >= cur.start) st.last[span.tool] = { start, ok: span.status === 'ok', span: span.span_id };
          }
          break;
        case 'run_end':
          break;
      }
    }
  }

  private addMetrics(w: RunWindow, s: Span): void {
    const m = w.metrics;
    m.spans++;
    if (s.type === 'llm') m.llm_calls++;
    else if (s.type === 'tool' || s.type === 'mcp_tool') m.tool_calls++;
    if (s.status === 'error') m.errors++;
    const u = s.usage;
    if (u) {
      m.input_tokens += u.input_tokens ?? 0;
      m.output_tokens += u.output_tokens ?? 0;
      m.total_tokens += u.total_tokens ?? (u.input_tokens ?? 0) + (u.output_tokens ?? 0);
      m.cost += u.cost ?? 0;
    }
    const first = s.start_ms ?? s.end_ms;
    const last = s.end_ms ?? s.start_ms;
    if (first !== undefined && (m.first_ms === undefined || first < m.first_ms)) m.first_ms = first;
    if (last !== undefined && (m.last_ms === undefined || last > m.last_ms)) m.last_ms = last;
  }

  private onRepeat(step: Step, w: RunWindow, r: CompiledRule, span: Span, env: Envelope, values: string): void {
    const rule = r.check.rule as Extract<RuleCheck['rule'], { type: 'repeat' }>;
    const st = state<StreakState>(w, r, () => ({ t: 'streak', n: 0, spans: [] }));
    // Short values are kept as they are; long ones (large arguments) as a fingerprint.
    const key = values.length <= 96 ? values : fingerprint(values);
    const vars = { tool: span.tool, name: span.name, args: span.input };
    if (st.key === key) {
      st.n++;
      pushCapped(st.spans, span.span_id, this.maxSpans);
    } else {
      // A differing call ends the streak, and resolves its finding.
      if (st.open) this.emit(step, w, r, 'resolved', st.open, env.received_ms, env.received_ms, vars);
      st.key = key;
      st.n = 1;
      st.spans = [span.span_id];
      st.open = undefined;
    }
    this.streakFires(step, w, r, st, rule.at_least, env, vars);
  }

  private onErrors(step: Step, w: RunWindow, r: CompiledRule, span: Span, env: Envelope): void {
    const rule = r.check.rule as Extract<RuleCheck['rule'], { type: 'errors' }>;
    const st = state<StreakState>(w, r, () => ({ t: 'streak', n: 0, spans: [] }));
    const vars = { tool: span.tool, name: span.name, args: span.input };
    if (span.status === 'ok') {
      if (st.open) this.emit(step, w, r, 'resolved', st.open, env.received_ms, env.received_ms, vars);
      st.n = 0;
      st.spans = [];
      st.open = undefined;
      return;
    }
    st.n++;
    pushCapped(st.spans, span.span_id, this.maxSpans);
    this.streakFires(step, w, r, st, rule.at_least, env, vars);
  }

  private streakFires(
    step: Step,
    w: RunWindow,
    r: CompiledRule,
    st: Extract<CheckState, { t: 'streak' }>,
    atLeast: number,
    env: Envelope,
    vars: Record<string, unknown>,
  ): void {
    if (st.n < atLeast) return;
    if (!st.open) {
      st.open = { id: findingId(w.project, w.run_id, r.check.id, `streak:${st.spans[0]}`), count: st.n, spans: [...st.spans] };
      this.emit(step, w, r, 'raised', st.open, env.received_ms, env.received_ms, vars);
    } else {
      st.open.count = st.n;
      st.open.spans = [...st.spans];
      this.emit(step, w, r, 'updated', st.open, env.received_ms, env.received_ms, vars);
    }
  }

  private onRequires(step: Step, w: RunWindow, r: CompiledRule, span: Span, env: Envelope): void {
    const isReq = r.requires!(span) && span.status === 'ok';
    const isCall = r.call!(span);
    if (!isReq && !isCall) return;
    const st = state<RequiresState>(w, r, () => ({ t: 'requires', pending: [], raised: [] }));
    const start = span.start_ms ?? span.end_ms ?? env.received_ms;
    if (isReq && (st.ok_at === undefined || start < st.ok_at)) {
      st.ok_at = start;
      // A late requires span that started earlier satisfies the waits, and resolves what was raised.
      st.pending = st.pending.filter((p) => !(p.start > start));
      const still: typeof st.raised = [];
      for (const x of st.raised) {
        if (x.start > start) {
          this.emit(step, w, r, 'resolved', { id: x.id, count: 1, spans: [x.span] }, env.received_ms, env.received_ms, {
            requires: describeFilter(r.check, 'requires'),
          });
        } else still.push(x);
      }
      st.raised = still;
    }
    if (isCall && !(st.ok_at !== undefined && st.ok_at < start)) {
      if (!st.pending.some((p) => p.span === span.span_id) && !st.raised.some((x) => x.span === span.span_id)) {
        const deadline = env.received_ms + this.waitMs;
        st.pending.push({ span: span.span_id, name: span.tool ?? span.name, start, deadline, received: env.received_ms });
        if (w.wake_at === undefined || deadline < w.wake_at) w.wake_at = deadline;
      }
    }
  }

  private fireWaits(step: Step, w: RunWindow, now: number): void {
    let next: number | undefined;
    step.touched.add(windowKey(w.project, w.run_id));
    for (const r of this.rulesFor(w.project, w.workflow)) {
      if (r.check.rule.type !== 'requires_before') continue;
      const st = w.checks[r.check.id];
      if (!st || st.t !== 'requires') continue;
      const keep: typeof st.pending = [];
      for (const p of st.pending) {
        if (p.deadline <= now) {
          const id = findingId(w.project, w.run_id, r.check.id, `span:${p.span}`);
          st.raised.push({ span: p.span, start: p.start, id });
          // It happened when the wait ran out, whenever the tick noticed.
          this.emit(step, w, r, 'raised', { id, count: 1, spans: [p.span] }, p.deadline, p.received, {
            requires: describeFilter(r.check, 'requires'),
            name: p.name,
            tool: p.name,
          });
        } else {
          keep.push(p);
          if (next === undefined || p.deadline < next) next = p.deadline;
        }
      }
      st.pending = keep;
    }
    w.wake_at = next;
  }

  private onRunEnd(step: Step, w: RunWindow, run: RunEnd, env: Envelope): void {
    const at = env.received_ms;
    w.ended = { status: run.status, at_ms: run.ts_ms ?? at };
    if (run.ts_ms !== undefined && (w.metrics.last_ms === undefined || run.ts_ms > w.metrics.last_ms)) w.metrics.last_ms = run.ts_ms;
    const finalText = valueText(run.final_output).toLowerCase();
    for (const r of this.rulesFor(w.project, w.workflow)) {
      const rule = r.check.rule;
      if (rule.type === 'run_end') {
        if (rule.ends.includes(run.status)) this.raise(step, w, r, 'run', [], 1, at, env.received_ms, { name: run.status });
      } else if (rule.type === 'unrecovered_error') {
        const st = w.checks[r.check.id];
        if (!st || st.t !== 'tools') continue;
        const failed = Object.entries(st.last).filter(([, v]) => !v.ok);
        // It only counts when the run still gave an answer that says nothing failed (a hint, not proof).
        if (!failed.length || !finalText.trim() || r.words!.some((word) => finalText.includes(word))) continue;
        this.raise(step, w, r, 'run', failed.map(([, v]) => v.span), failed.length, at, env.received_ms, {
          tool: failed.map(([t]) => t).join(', '),
        });
      } else if (rule.type === 'threshold' && rule.metric === 'duration_ms') {
        const st = state<CountState>(w, r, () => ({ t: 'count', n: 0 }));
        const value = metricValue(w, rule.metric);
        if (!st.fired && value >= rule.at_least) {
          st.fired = 1;
          this.raise(step, w, r, 'run', [], 1, at, env.received_ms, { metric: rule.metric, value: round(value) });
        }
      }
    }
  }

  private raise(
    step: Step,
    w: RunWindow,
    r: CompiledRule,
    anchor: string,
    spans: string[],
    count: number,
    at: number,
    received: number,
    vars: Record<string, unknown>,
  ): void {
    const open: OpenFinding = { id: findingId(w.project, w.run_id, r.check.id, anchor), count, spans };
    this.emit(step, w, r, 'raised', open, at, received, vars);
  }

  private emit(
    step: Step,
    w: RunWindow,
    r: CompiledRule,
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

type StreakState = Extract<CheckState, { t: 'streak' }>;
type CountState = Extract<CheckState, { t: 'count' }>;
type MatchState = Extract<CheckState, { t: 'match' }>;
type RequiresState = Extract<CheckState, { t: 'requires' }>;
type ToolsState = Extract<CheckState, { t: 'tools' }>;

function state<S extends CheckState>(w: RunWindow, r: CompiledRule, init: () => S): S {
  let st = w.checks[r.check.id] as S | undefined;
  if (!st) {
    st = init();
    w.checks[r.check.id] = st;
  }
  return st;
}

function pushCapped(list: string[], id: string, max: number): void {
  list.push(id);
  if (list.length > max) list.splice(0, list.length - max);
}

/**
 * What the rules read of one span, computed at most once however many rules read it:
 * the JSON of its arguments and result, the values `repeat` compares, the text `match` reads.
 */
class SpanView {
  private inputText?: string;
  private outputText?: string;
  private inputCanon?: string;
  private outputCanon?: string;
  private texts?: Map<string, Buffer>;
  private sames?: Map<readonly string[], string>;

  constructor(readonly span: Span) {}

  same(fields: readonly string[]): string {
    let v = this.sames?.get(fields);
    if (v === undefined) {
      v = fields.length === 1 ? this.sameValue(fields[0]) : fields.map((f) => this.sameValue(f)).join('\u0001');
      (this.sames ??= new Map()).set(fields, v);
    }
    return v;
  }

  private sameValue(field: string): string {
    const s = this.span;
    switch (field) {
      case 'tool':
        return s.tool ?? '';
      case 'name':
        return s.name;
      case 'input':
        return (this.inputCanon ??= canonicalJson(s.input));
      case 'output':
        return (this.outputCanon ??= canonicalJson(s.output));
      case 'error':
        return s.error ?? '';
      default:
        return '';
    }
  }

  private field(f: MatchField): string {
    const s = this.span;
    if (f === 'input') return (this.inputText ??= valueText(s.input));
    if (f === 'output') return (this.outputText ??= valueText(s.output));
    return f === 'error' ? (s.error ?? '') : s.name;
  }

  /**
   * The text `match` reads: the fields asked for, the first 200,000 characters in all,
   * converted to UTF-8 once (RE2 would convert a string again on every test).
   */
  text(fields: readonly MatchField[]): Buffer {
    const key = fields.join(',');
    let buf = this.texts?.get(key);
    if (buf !== undefined) return buf;
    let out = '';
    for (const f of fields) {
      if (out.length >= MAX_TEXT_CHARS) break;
      const part = this.field(f);
      if (!part) continue;
      out += out ? `\n${part}` : part;
    }
    buf = Buffer.from(out.length > MAX_TEXT_CHARS ? out.slice(0, MAX_TEXT_CHARS) : out, 'utf8');
    (this.texts ??= new Map()).set(key, buf);
    return buf;
  }
}

function metricValue(w: RunWindow, metric: string): number {
  const m = w.metrics;
  if (metric === 'duration_ms') {
    if (m.first_ms === undefined || m.last_ms === undefined) return 0;
    return m.last_ms - m.first_ms;
  }
  return (m as unknown as Record<string, number>)[metric] ?? 0;
}

function round(v: number): number {
  return Math.round(v * 1000) / 1000;
}

function describeFilter(check: RuleCheck, which: 'requires'): string {
  const rule = check.rule;
  if (rule.type !== 'requires_before') return '';
  const f = rule[which];
  const names = [...(f.tool ?? []), ...(f.name ?? [])];
  return names.length ? names.join(' or ') : (f.type ?? []).join(' or ') || 'the required call';
}
