/** The API's JSON (docs/api.md), as the app reads it. */

export interface Page {
  next_cursor: string | null;
}

export interface Run {
  project: string;
  run_id: string;
  workflow: string | null;
  session_id: string | null;
  started_at: string;
  ended_at: string | null;
  end_status: 'ok' | 'error' | 'no_output' | 'interrupted' | null;
  span_count: number;
  error_count: number;
  total_tokens: number;
  last_seen_at: string;
  open_findings: number;
  finding_count: number;
  final_output?: unknown;
}

export interface Span {
  run_id: string;
  span_id: string;
  parent_id?: string;
  type: string;
  name: string;
  tool?: string;
  input?: unknown;
  output?: unknown;
  error?: string | null;
  status: 'ok' | 'error';
  start_ms?: number;
  end_ms?: number;
  model?: string;
  usage?: Record<string, number>;
}

export type FindingState = 'open' | 'active' | 'resolved' | 'dismissed';

export interface Finding {
  id: string;
  run_id: string;
  workflow: string | null;
  check_id: string;
  check_source: string;
  kind: string;
  title: string;
  guidance: string;
  action: 'flag' | 'halt';
  halt_suppressed: boolean;
  group: string | null;
  priority: number;
  span_ids: string[];
  count: number;
  state: FindingState;
  quiet: boolean;
  raised_at: string;
  updated_at: string;
  resolved_at: string | null;
  active_at: string | null;
  dismissed_at: string | null;
  dismissed_by: string | null;
  dismiss_note: string | null;
  quote: string | null;
  probability: number | null;
  confidence: string | null;
  answered_by: string | null;
}

export interface Problem extends Finding {
  related: Finding[];
}

export interface RunDetail {
  run: Run;
  spans: Span[];
  spans_next_cursor: string | null;
  findings: Finding[];
  problems: Problem[];
}

export interface CheckStat {
  check_id: string;
  findings: number;
  dismissals: number;
  precision: number | null;
  quiet: boolean;
  retire_suggested: boolean;
}

export interface DisabledCheck {
  check_id: string;
  pattern: string;
  source?: string;
  reason: string;
  ms: number;
  limit_ms: number;
  since: string;
}

export interface AgreementRow {
  question_key: string;
  check_id: string;
  answers: number;
  agreed: number;
  rate: number;
  classifier_first: boolean;
  trained: number;
}
