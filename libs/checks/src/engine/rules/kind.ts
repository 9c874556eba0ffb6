import type { RunEnd, Span } from '@neatroots/spans';
import type { FindingEvent, RuleCheck, RuleSpec, RuleType } from '../../types';
import type { CompiledRule, TextMatcher } from '../compile';
import type { RunEndView, SpanView } from '../span-view';
import type { CheckState, OpenFinding, RunWindow } from '../window';

/** The spec of one rule type, as schema.ts validated it. */
export type RuleOf<T extends RuleType> = Extract<RuleSpec, { type: T }>;

/** What the engine needs to know of a rule to record its findings. */
export type RuleRef = Pick<CompiledRule, 'check' | 'priority' | 'canHalt'>;

/** What compiling a rule may need from outside the domain (the app picks the regex engine). */
export interface CompileDeps {
  matcher(check: RuleCheck, pattern: string): TextMatcher;
}

/**
 * What a rule may do within one engine step. The engine owns findings (ids, guidance,
 * actions, notes); a rule only says what it saw.
 */
export interface RuleStep {
  /** Span ids kept per finding that grows (a streak, a run's matches). */
  readonly maxSpanIds: number;
  /** How long requires_before waits for a late span. */
  readonly requiresWaitMs: number;
  /**
   * An answer that comes later (a match run off the event loop): `then` runs once the
   * batch's spans are applied, in the order deferred, before the step's findings are settled.
   * A rule's own state is only its own, so applying its effect after the other rules' is safe.
   */
  defer<T>(answer: Promise<T>, then: (value: T) => void): void;
  /** A new finding, its id derived from the run, the check and `anchor` (so a redelivery raises nothing new). */
  raise(w: RunWindow, r: RuleRef, anchor: string, spans: string[], count: number, at: number, received: number, vars: Record<string, unknown>): void;
  /** A change to a finding the rule keeps open in its state. */
  emit(
    w: RunWindow,
    r: RuleRef,
    status: FindingEvent['status'],
    f: OpenFinding,
    at: number,
    received: number,
    vars: Record<string, unknown>,
  ): void;
}

/**
 * One rule type: everything the engine does differently for it lives in its module
 * (rules/<type>.ts). `D` is what `compile` builds once per check. Handlers keep their
 * per-run state in `w.checks[check.id]` (via `state`), plain JSON and small, because the
 * window is loaded and saved on every batch and moves between replicas.
 */
export interface RuleKind<T extends RuleType = RuleType, D = unknown> {
  readonly type: T;
  /** How specific the type is: in a group the highest heads it, unless a check sets priority. */
  readonly priority: number;
  /** Sees every span of the runs it applies to, whatever its span types (a metric of the whole run). */
  readonly everySpan?: boolean;
  /**
   * Sees a layer of a tool call already sent (an MCP client or server span under the framework's
   * tool span, ../layers.ts): a rule that reads text or the run's metrics, not one that counts calls.
   */
  readonly seesLayers?: boolean;
  /** Anything built once per check rather than per span (predicates, matchers, word lists). */
  compile?(rule: RuleOf<T>, check: RuleCheck, deps: CompileDeps): D;
  /** The span types and tools the rule can act on when not its `span` filter's (undefined: any). */
  reach?(rule: RuleOf<T>): { types?: readonly string[]; tools?: readonly string[] };
  /** A span that passed the rule's `span` filter (new to the run: duplicates never get here). */
  onSpan?(x: RuleStep, w: RunWindow, r: CompiledRule<T, D>, span: Span, view: SpanView, received: number): void;
  /**
   * A span the rule was given as a call (it passed the rule's filter) turned out a layer of an
   * earlier call: its middle layer came last and linked them (../layers.ts callsJoined). The rule
   * takes it out of what it counts; a finding it already raised stays.
   */
  onTakenBack?(x: RuleStep, w: RunWindow, r: CompiledRule<T, D>, spanId: string): void;
  /** The run's end (once, even if run_end is redelivered). */
  onRunEnd?(x: RuleStep, w: RunWindow, r: CompiledRule<T, D>, run: RunEnd, view: RunEndView, received: number): void;
  /** Fires what waited until `now`; returns the rule's next deadline in this run, if any. */
  onWake?(x: RuleStep, w: RunWindow, r: CompiledRule<T, D>, now: number): number | undefined;
}

/**
 * A check's state in the window. A check id may be `constructor` (ids are lower-case words): a
 * window parsed from JSON reads that through Object's prototype until the check has a state of
 * its own, and a state is always an object.
 */
function stateOf(w: RunWindow, checkId: string): CheckState | undefined {
  const st = w.checks[checkId];
  return typeof st === 'object' ? st : undefined;
}

/**
 * The rule's state in this run, created on first use. `t` tells the shapes apart in a stored
 * window, and `r` the rule type that made it: a check whose type changed (hot reload) while
 * its runs go on starts afresh, never from another type's state (a repeat handed a count's, a
 * threshold a count's `fired`). A state saved before `r` was kept is taken as the rule's own
 * when its shape fits.
 */
export function state<S extends CheckState>(w: RunWindow, r: RuleRef, t: S['t'], init: () => S): S {
  let st = stateOf(w, r.check.id) as S | undefined;
  const type = r.check.rule.type;
  if (!st || st.t !== t || (st.r !== undefined && st.r !== type)) {
    st = init();
    st.r = type;
    w.checks[r.check.id] = st;
  } else if (st.r === undefined) st.r = type;
  return st;
}

/** The rule's state in this run if it has one of shape `t`, made by a rule of its type. */
export function existing<S extends CheckState>(w: RunWindow, r: RuleRef, t: S['t']): S | undefined {
  const st = stateOf(w, r.check.id);
  return st && st.t === t && (st.r === undefined || st.r === r.check.rule.type) ? (st as S) : undefined;
}

export function pushCapped(list: string[], id: string, max: number): void {
  list.push(id);
  if (list.length > max) list.splice(0, list.length - max);
}

/** A rule that fires once per run keeps only this. */
export interface CountState extends CheckState {
  t: 'count';
  n: number;
  fired?: 1;
}

export const newCount = (): CountState => ({ t: 'count', n: 0 });
