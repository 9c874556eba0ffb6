/** The sopops API's answers as the pages read them (docs/api.md#workspaces-sopops). */

export type SopResult = 'deviated' | 'partial' | 'followed' | 'not_measurable';
export type RuleKind = 'step' | 'never' | 'warning';

export interface Evidence {
  /** Indexes the session's turns. */
  turn: number;
  quote: string | null;
  source: 'transcript' | 'tool_calls';
}

export interface RuleResult {
  rule_id: string;
  kind: RuleKind;
  index: number;
  text: string;
  status: string;
  evidence: Evidence[];
  reason: string;
  finding: boolean;
  finding_id: string | null;
  suppressed: boolean;
}

export interface ProcedureCheck {
  procedure_id: string;
  procedure_name: string;
  procedure_version: string;
  release_id: string | null;
  applicable: boolean | null;
  excluded_reason: string | null;
  route_reason: string;
  result: SopResult | null;
  checked_result: SopResult | null;
  goal_reached: boolean | null;
  goal_reason: string | null;
  steps_applicable: number;
  steps_done: number;
  nevers_violated: number;
  model: string | null;
  prompt_version: string | null;
  rules: RuleResult[];
}

export interface SopSessionRow {
  id: string;
  external_id: string | null;
  agent: string | null;
  release_id: string | null;
  status: 'queued' | 'checked' | 'failed';
  result: SopResult | null;
  checked_result: SopResult | null;
  started_at: string | null;
  transcript_ref: string | null;
  received_at: string;
  checked_at: string | null;
  error: string | null;
}

export interface SopSession extends SopSessionRow {
  checks: ProcedureCheck[];
}

export interface LockRule {
  rule_id: string;
  kind: RuleKind;
  index: number;
  text: string;
  tool: string | null;
  required: boolean;
  when: string | null;
  action: string | null;
}

export interface Release {
  id: string;
  number: number;
  live: boolean;
  created_at: string;
  procedures: { procedure_id: string; name: string; version: string; goal: string | null; applies_when: string | null; rules: LockRule[] }[];
  agents: { agent: string; procedures: string[] }[];
}

export interface Head {
  files: { path: string; version: string; updated_at: string }[];
  live_release: { id: string; number: number } | null;
  changed: { path: string; change: 'added' | 'changed' | 'removed' }[];
  diff: string;
}

/** Rules in the order a procedure reads: steps, then never rules, then warning signs. */
const KIND_ORDER: Record<RuleKind, number> = { step: 0, never: 1, warning: 2 };
export function inReadingOrder<T extends { kind: RuleKind; index: number }>(rules: T[]): T[] {
  return [...rules].sort((a, b) => KIND_ORDER[a.kind] - KIND_ORDER[b.kind] || a.index - b.index);
}
