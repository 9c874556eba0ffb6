import type { Session } from './session';

/**
 * The body of GET /v1/workspaces/{ws}/sessions/{id}: a session's result and one check per
 * procedure the router considered; `sessionAsStored` adds what a stored session has beside it.
 */
import type { RuleKind } from './types';

export type StepStatus = 'done' | 'out_of_order' | 'skipped' | 'not_reached' | 'not_applicable';
export type NeverStatus = 'violated' | 'ok';
export type WarningStatus = 'present' | 'unheeded' | 'absent';
/**
 * A rule no model (and no tool call) decided. It is never a pass: it is not a finding, it
 * keeps a procedure from being `followed`, and its reason says what was missing.
 */
export type NotChecked = 'not_checked';
export type RuleStatus = StepStatus | NeverStatus | WarningStatus | NotChecked;

export type ProcedureResult = 'deviated' | 'partial' | 'followed' | 'not_measurable';
/** Worst first: a session's result is the first of these any of its checks has. */
export const RESULT_ORDER: readonly ProcedureResult[] = ['deviated', 'partial', 'followed', 'not_measurable'];

export interface Evidence {
  /** Indexes the session's turns. */
  turn: number;
  /** The words quoted (transcript), or the call (tool_calls: `tool {input}`). */
  quote: string | null;
  source: 'transcript' | 'tool_calls';
}

export interface RuleResult {
  rule_id: string;
  kind: RuleKind;
  index: number;
  text: string;
  status: RuleStatus;
  evidence: Evidence[];
  reason: string;
  finding: boolean;
  /** Set once stored (null offline). */
  finding_id: string | null;
  pattern_id: string | null;
  /** A reviewer's verdict or override suppressed this finding. */
  suppressed: boolean;
  override: { correct: boolean } | null;
}

export interface ProcedureCheck {
  procedure_id: string;
  procedure_name: string;
  procedure_version: string;
  release_id: string | null;
  applicable: boolean | null;
  excluded_reason: string | null;
  route_reason: string;
  result: ProcedureResult | null;
  checked_result: ProcedureResult | null;
  goal_reached: boolean | null;
  goal_reason: string | null;
  steps_applicable: number;
  steps_done: number;
  nevers_violated: number;
  model: string | null;
  prompt_version: string | null;
  rules: RuleResult[];
}

export interface SessionBody {
  id: string | null;
  external_id: string | null;
  agent: string | null;
  release_id: string | null;
  status: 'queued' | 'checked';
  result: ProcedureResult | null;
  checks: ProcedureCheck[];
}

/**
 * A session checked offline as `sopops check` prints it: the body GET
 * /v1/workspaces/{ws}/sessions/{id} answers, field for field and in its order. What only a
 * stored session has is null: its id, when it was received and checked, a failure's error;
 * `checked_result` is `result` (no finding is suppressed offline).
 */
export function sessionAsStored(body: SessionBody, session: Pick<Session, 'started_at' | 'transcript_ref'>): Record<string, unknown> {
  const { checks, ...head } = body;
  return {
    ...head,
    checked_result: body.result,
    started_at: session.started_at,
    transcript_ref: session.transcript_ref,
    received_at: null,
    checked_at: null,
    error: null,
    checks,
  };
}
