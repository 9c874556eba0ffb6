import type { Evidence, RuleKind, SopResult } from './sop-types';

/** The review API's answers as the pages read them (docs/review.md). */

export type VerdictName = 'real' | 'acceptable' | 'sop_wrong' | 'checker_wrong';
export type ReviewState = 'needs_review' | 'open' | 'fixing' | 'fixed' | 'regressed' | 'closed';
export const REVIEW_STATES: readonly ReviewState[] = ['needs_review', 'regressed', 'open', 'fixing', 'fixed', 'closed'];
export const VERDICTS: readonly VerdictName[] = ['real', 'acceptable', 'sop_wrong', 'checker_wrong'];

export interface Verdict {
  verdict: VerdictName;
  note: string | null;
  reviewer: string | null;
  created_at: string;
  /** A failure mode without its own verdict shows its rule pattern's. */
  inherited: boolean;
  carried_over: boolean;
}

export interface ReviewFields {
  verdict: Verdict | null;
  review_state: ReviewState;
  review_reason: string | null;
  review_note: string;
  fix_release: { id: string; number: number } | null;
  fix_sessions: number | null;
  fix_sessions_needed: number | null;
}

export interface Theme {
  id: string;
  name: string;
}

export interface ExampleFinding {
  finding_id: string;
  session_id: string;
  external_id: string;
  started_at: string | null;
  status: string;
  excerpt: string;
  evidence: Evidence[];
  suppressed: boolean;
}

/**
 * A suggested edit as the API returns it. Only the fields the page shows are named; the rest
 * is read as it comes (suggestions are served as they land).
 */
export interface Suggestion {
  id: string;
  status: string;
  freshness?: string | null;
  rationale?: string | null;
  old_text?: string | null;
  new_text?: string | null;
  pr_url?: string | null;
  error?: string | null;
  created_at?: string | null;
  plan?: { agents?: { agent: string; diff?: string }[] } | null;
}

export interface QueueItem extends ReviewFields {
  pattern_id: string;
  kind: 'rule' | 'sub' | 'other';
  name: string;
  label: string;
  theme: Theme | null;
  procedure_id: string;
  procedure_name: string;
  rule_id: string;
  rule_text: string;
  sessions: number;
  examples: ExampleFinding[];
  new_findings: number;
  suppressed_count: number;
  suggestion: Suggestion | null;
}

export interface ReviewQueue {
  items: QueueItem[];
  total: number;
  counts: Record<ReviewState, number>;
  clustered_at: string | null;
}

export interface PatternSummary extends ReviewFields {
  id: string;
  kind: 'rule' | 'sub' | 'other';
  parent_id: string | null;
  name: string;
  description: string | null;
  procedure_id: string;
  procedure_name: string;
  rule: { rule_id: string; current_rule_id: string; kind: RuleKind; index: number; text: string; label: string };
  theme: Theme | null;
  findings: number;
  suppressed: number;
  first_seen: string | null;
  last_seen: string | null;
  clustered_at: string | null;
  retired_at: string | null;
}

export interface PatternSession {
  session_id: string;
  external_id: string;
  started_at: string | null;
  finding_id: string;
  status: string;
  suppressed: boolean;
  override: { correct: boolean; note: string | null; reviewer: string | null } | null;
}

export interface Pattern extends PatternSummary {
  session_count: number;
  sessions: PatternSession[];
  verdict_history: Verdict[];
  suppressed_count: number;
  failure_modes: (PatternSummary & { sessions?: number })[];
  wordings: { rule_id: string; text: string; findings: number; last_seen: string | null }[];
  example_phrasings: string[];
  suggestions?: Suggestion[];
  window: { from: string; to: string };
}

export interface VerdictGiven extends Verdict {
  pattern_id: string;
  suppressed_count: number;
  review_state: ReviewState;
  review_note: string;
}

export interface OverrideGiven {
  finding_id: string;
  correct: boolean;
  suppressed: boolean;
  session_result: SopResult | null;
}

export type ResultCounts = Record<SopResult, number>;

export interface Insights {
  window: { from: string; to: string };
  tiles: { sessions: number; results: ResultCounts; follow_rate: number | null; findings: number; suppressed: number };
  scoreboard: { procedure_id: string; procedure_name: string; sessions: number; results: ResultCounts; follow_rate: number | null; findings: number; suppressed: number }[];
  weeks: string[];
  ladder: { pattern_id: string; procedure_id: string; label: string; name: string; text: string; findings: number; suppressed: number; sessions: number; rate: number | null; trend: number[] }[];
}

/** How a state or a verdict reads on the page. */
export function words(v: string): string {
  return v.replace(/_/g, ' ');
}
