import { layerBase } from '@neatroots/ports';
import type { RunEndStatus } from '@neatroots/spans';
import type { ToolSpanMarks, ToolSpanRing } from './layers';

/**
 * One run's rule-engine state. Plain JSON so it can live in Redis between batches and
 * move between replicas: nothing about a run is held only in a closure or a class.
 * Keep it small: it is read and written on every batch that touches the run.
 */
export interface RunWindow {
  v: 1;
  /** The store's revision when this window was saved: the next save expects it (compare-and-set). */
  rev?: number;
  run_id: string;
  project: string;
  workflow?: string;
  /**
   * Span ids seen: a re-exported span (same run_id and span_id) is counted once. Only added to,
   * and read one id at a time (hasSeen): a store that keeps it apart (RUN_WINDOW_MEMBER_FIELDS)
   * loads only the ids of the spans in the batch.
   */
  seen: Record<string, 1>;
  metrics: RunMetrics;
  /** Set by run_end. */
  ended?: { status: RunEndStatus; at_ms: number };
  /** Per check id. */
  checks: Record<string, CheckState>;
  /** Groups that already sent a note in this run: one problem, one note. */
  noted_groups?: Record<string, string>;
  /**
   * The halts raised in this run and not resolved, by finding id (at most 20): what the agent was
   * told. The pre-call check halts any later call of a run that has one.
   */
  halts?: Record<string, { check_id: string; title: string; text: string }>;
  /**
   * The ids of the findings of the whole run (not of one span) raised in this run through the
   * engine's raise: raised again, such a finding is `updated`. At most one per check and anchor.
   * The value is the rule type that raised it (1 in windows written before the type was kept):
   * a check whose rule type changed meanwhile starts afresh and raises its own finding.
   */
  raised?: Record<string, string | 1>;
  /** Earliest pending requires_before deadline. */
  wake_at?: number;
  /** The run's last tool spans (at most MAX_TOOL_SPANS, three strings each), to tell the layers of one call (layers.ts). */
  tool_spans?: ToolSpanRing;
  /** Where the ring of tool_spans is written next once full. */
  tool_spans_next?: number;
  /** What each of tool_spans was taken as (a call or a layer), its status, type and name, slot for slot (layers.ts). */
  tool_span_marks?: ToolSpanMarks;
}

/** The run window's fields a window store may keep apart (WindowStoreOptions.memberFields). */
export const RUN_WINDOW_MEMBER_FIELDS: readonly string[] = ['seen'];

export interface RunMetrics {
  spans: number;
  llm_calls: number;
  tool_calls: number;
  errors: number;
  total_tokens: number;
  input_tokens: number;
  output_tokens: number;
  cost: number;
  first_ms?: number;
  last_ms?: number;
}

/** A finding the engine has raised and may still update or resolve. */
export interface OpenFinding {
  id: string;
  count: number;
  spans: string[];
  /** The guidance last sent, reused when it resolves (the call that ends a streak is not the streak). */
  guidance?: string;
}

/**
 * One check's state in a run. Each rule type's module (rules/<type>.ts) declares its own shape,
 * told apart by `t`; whatever it is, it is plain JSON, and small.
 */
export interface CheckState {
  t: string;
  /** The rule type that made it (rules/kind.ts `state`). */
  r?: string;
}

export function newWindow(run_id: string, project: string): RunWindow {
  return {
    v: 1,
    run_id,
    project,
    seen: {},
    metrics: { spans: 0, llm_calls: 0, tool_calls: 0, errors: 0, total_tokens: 0, input_tokens: 0, output_tokens: 0, cost: 0 },
    // A hash table from the start (no prototype: V8 makes it one): each run adds its checks'
    // states in its own order, and plain objects made that a different shape per order, read
    // by the engine for every rule on every span through V8's slowest lookups.
    checks: Object.create(null) as Record<string, CheckState>,
  };
}

/**
 * A record keyed by what an agent sends (span ids, tool names): its own entry only, never
 * Object's (`constructor`, `toString`, `__proto__` are names like any other).
 */
export function ownValue<T>(rec: Record<string, T>, key: string): T | undefined {
  return Object.prototype.hasOwnProperty.call(rec, key) ? rec[key] : undefined;
}

/** Sets an entry of such a record; `__proto__` as a key, not the record's prototype. */
export function setOwnValue<T>(rec: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__') Object.defineProperty(rec, key, { value, writable: true, enumerable: true, configurable: true });
  else rec[key] = value;
}

/**
 * Whether a window's span ids hold this one: its own (`seen`), or, when `seen` is a layer (a
 * pre-call check's copy, the question scheduler's step), the stored ones under it. `=== 1`: an
 * id such as `constructor` is not Object's property. The rule engine's windows and the question
 * scheduler's alike.
 */
export function hasSeen(seen: Record<string, 1>, spanId: string): boolean {
  return seen[spanId] === 1 || layerBase(seen)?.[spanId] === 1;
}

/** The window-store key of a run: runs are unique within a project. */
export function windowKey(project: string, run_id: string): string {
  return `${project}\u0000${run_id}`;
}
