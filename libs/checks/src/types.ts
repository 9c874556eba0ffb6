import type { RunEndStatus, SpanType } from '@neatroots/spans';

/**
 * Checks after validation (CONTRACTS.md section 2 and the neatroots seed). The YAML files are
 * parsed and validated by `schema.ts` into these types; nothing else reads YAML.
 */

/** Where a check came from, in load order: later wins on the same id. */
export const CHECK_SOURCES = ['library', 'user', 'project', 'database'] as const;
export type CheckSource = (typeof CHECK_SOURCES)[number];

export const RULE_TYPES = [
  'repeat', 'errors', 'count', 'slow', 'threshold', 'match', 'requires_before', 'unrecovered_error', 'run_end',
] as const;
export type RuleType = (typeof RULE_TYPES)[number];

export const QUESTION_KINDS = ['yes_no', 'choice', 'score'] as const;
export type QuestionKind = (typeof QUESTION_KINDS)[number];

export const METRICS = [
  'total_tokens', 'input_tokens', 'output_tokens', 'cost', 'llm_calls', 'tool_calls', 'spans', 'errors', 'duration_ms',
] as const;
export type Metric = (typeof METRICS)[number];

export const SAME_FIELDS = ['tool', 'name', 'input', 'output', 'error'] as const;
export type SameField = (typeof SAME_FIELDS)[number];

export const MATCH_FIELDS = ['input', 'output', 'error', 'name'] as const;
export type MatchField = (typeof MATCH_FIELDS)[number];

/** Every key optional; a list matches any of its values. */
export interface SpanFilter {
  type?: SpanType[];
  name?: string[];
  tool?: string[];
  status?: ('ok' | 'error')[];
}

export type RuleSpec =
  | { type: 'repeat'; span: SpanFilter; same: SameField[]; at_least: number }
  | { type: 'errors'; span: SpanFilter; at_least: number }
  | { type: 'count'; span: SpanFilter; at_least: number }
  | { type: 'slow'; span: SpanFilter; at_least_ms: number }
  | { type: 'threshold'; metric: Metric; at_least: number }
  | { type: 'match'; span: SpanFilter; pattern: string; in: MatchField[] }
  | { type: 'requires_before'; call: SpanFilter; requires: SpanFilter }
  | { type: 'unrecovered_error'; span: SpanFilter; words?: string[] }
  | { type: 'run_end'; ends: RunEndStatus[] };

export interface AppliesTo {
  workflow?: string[];
  project?: string[];
  /**
   * Projects where this check is not in effect, because a check with the same id overrides it
   * there (a project's own .neatroots/checks/ version). Set by loading, never written in YAML.
   */
  not_project?: string[];
}

interface CheckBase {
  id: string;
  title: string;
  description?: string;
  guidance?: string;
  group?: string;
  /** Higher heads its group (the most specific check); defaults by rule type. */
  priority?: number;
  applies_to?: AppliesTo;
  source: CheckSource;
  /** The file it was loaded from (absent for database checks). */
  file?: string;
}

export interface RuleCheck extends CheckBase {
  kind: 'rule';
  rule: RuleSpec;
  action: 'flag' | 'halt';
}

export interface Evidence {
  spans?: SpanFilter;
  fields?: ('input' | 'output' | 'error' | 'status' | 'name' | 'tool')[];
  last?: number;
  final_output?: boolean;
  /** The run_start's first user message (what the agent was asked to do). */
  user_message?: boolean;
  /** The run_start's system prompt (the rules the agent was given). */
  system_prompt?: boolean;
}

export interface QuestionCheck extends CheckBase {
  kind: QuestionKind;
  scope: 'span' | 'trace' | 'session';
  ask: string;
  evidence?: Evidence;
  when: 'live' | 'end';
  /** yes_no: the probability at or above which it flags. */
  flag_at?: number;
  /** choice: label -> description, and the labels that flag. */
  options?: Record<string, string>;
  flag_on?: string[];
  /** score: level descriptions, numbered from zero, and the expected level that flags. */
  levels?: string[];
  flag_at_level?: number;
  action: 'flag';
}

export type Check = RuleCheck | QuestionCheck;

export function isRuleCheck(c: Check): c is RuleCheck {
  return c.kind === 'rule';
}

/** Whether a loaded check is in effect in a project (applies_to.project, and not_project from loading). */
export function appliesInProject(c: Pick<CheckBase, 'applies_to'>, project: string): boolean {
  const only = c.applies_to?.project;
  if (only?.length && !only.includes(project)) return false;
  return !c.applies_to?.not_project?.includes(project);
}

/** A check definition problem: names the file, the check id and the field. */
export class CheckError extends Error {
  constructor(
    readonly file: string,
    readonly checkId: string | undefined,
    readonly field: string | undefined,
    readonly reason: string,
  ) {
    super(`${file}${checkId ? `: check ${checkId}` : ''}${field ? `: ${field}` : ''}: ${reason}`);
    this.name = 'CheckError';
  }
}

/**
 * Every problem found in a check file or a check, so one run reports them all. It is a
 * CheckError (the first problem's file, id and field) whose message lists each problem on a line.
 */
export class CheckProblems extends CheckError {
  constructor(readonly problems: readonly CheckError[]) {
    super(problems[0].file, problems[0].checkId, problems[0].field, problems[0].reason);
    this.message = problems.map((p) => p.message).join('\n');
    this.name = 'CheckProblems';
  }
}

/** The single problems a CheckError stands for (one, or each of a CheckProblems). */
export function checkProblems(e: CheckError): readonly CheckError[] {
  return e instanceof CheckProblems ? e.problems : [e];
}

/** One error for a list of problems: the problem itself when there is one. */
export function checkFailure(problems: readonly CheckError[]): CheckError {
  return problems.length === 1 ? problems[0] : new CheckProblems(problems.flatMap(checkProblems));
}

/**
 * What the engine emits when a check's state changes (CONTRACTS.md section 3): the findings
 * topic's message (FindingMessage in @neatroots/messages is this, read back from the bus), with
 * the check's rank and source always known here.
 * Its id is deterministic: the same spans give the same id, so a redelivered batch writes
 * nothing new.
 */
export interface FindingEvent {
  id: string;
  check_id: string;
  run_id: string;
  project: string;
  workflow?: string;
  status: 'raised' | 'updated' | 'resolved';
  span_ids: string[];
  count: number;
  action: 'flag' | 'halt';
  halt_suppressed?: boolean;
  title: string;
  guidance: string;
  at_ms: number;
  group?: string;
  /** Higher heads its group (the most specific check). */
  priority: number;
  kind: string;
  source: CheckSource;
  received_ms?: number;
  /** Question findings: the words of the run that show the problem. */
  quote?: string;
  /** Question findings: the probability of a problem (an LLM's is capped at 0.9). */
  probability?: number;
  /** Question findings: how it is shown, "Very likely (LLM judgment)" or a percentage. */
  confidence?: string;
  /** Question findings: decision, local or classifier. */
  answered_by?: string;
}
