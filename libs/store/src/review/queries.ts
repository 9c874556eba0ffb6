import type { RuleLineageQueries } from '../sop/lineage.queries';
import type { SopResult } from '../sop/sessions.repo';
import type { CalibrationQueries } from './calibration';
import type { SuggestionQueries, SuggestionSummary, SuggestionView } from './suggestions';

/**
 * The review side of sopops as the api calls it (patterns, verdicts, overrides, the review
 * queue, insights): in-process in the embedded default, over gRPC distributed. Every shape is
 * a REST body of docs/review.md; refusals are SopError (400, 404, 409), with the same status
 * in both deployments.
 */
export interface ReviewSopQueries extends RuleLineageQueries, SuggestionQueries, CalibrationQueries {
  /** GET /v1/workspaces/{ws}/review */
  reviewQueue(workspace: string, q: ReviewQueueQuery): Promise<ReviewQueueView>;
  /** GET /v1/workspaces/{ws}/patterns: a page of them. */
  patterns(workspace: string, q: PatternsQuery): Promise<PatternsListView>;
  /** GET /v1/workspaces/{ws}/patterns/{id} */
  pattern(workspace: string, id: string, q: WindowQuery): Promise<PatternView>;
  /** POST /v1/workspaces/{ws}/patterns/{id}/verdict */
  giveVerdict(workspace: string, id: string, input: VerdictInput): Promise<VerdictGivenView>;
  /** POST /v1/workspaces/{ws}/findings/{id}/override */
  overrideFinding(workspace: string, findingId: string, input: OverrideInput): Promise<OverrideView>;
  /** GET /v1/workspaces/{ws}/patterns/{id}/regression: one object per JSON line. */
  regression(workspace: string, id: string): Promise<RegressionLine[]>;
  /** GET /v1/workspaces/{ws}/insights */
  insights(workspace: string, q: WindowQuery): Promise<InsightsView>;
  /** GET /v1/workspaces/{ws}/insights/compare: two releases side by side. */
  compareReleases(workspace: string, q: CompareQuery): Promise<ReleaseCompareView>;
  /** POST /v1/workspaces/{ws}/patterns/rename {all?}: names rule patterns with the reasoning model. */
  renamePatterns(workspace: string, input: RenameInput): Promise<RenamedView>;
  /** POST /v1/workspaces/{ws}/patterns/recluster {procedure?, rule?, force?}: failure modes and themes made again. */
  recluster(workspace: string, input: ReclusterInput): Promise<ReclusteredView>;
}

export interface ReclusterInput {
  procedure?: string;
  /** A rule id: its lineage. */
  rule?: string;
  /** Every rule with 8 or more findings, due or not. */
  force?: boolean;
}

export interface ReclusteredView {
  /** Findings put in a pattern or a failure mode. */
  assigned: number;
  /** Rules split into failure modes (again). */
  reclustered: number;
  /** Procedures whose rule patterns were grouped into themes. */
  themed: number;
  /** What could not be done and why (no reasoning model, a model error), or null. */
  reason: string | null;
}

export interface RenameInput {
  /** Every active rule pattern, not only those still named from their rule's text. */
  all?: boolean;
}

export interface RenamedView {
  renamed: number;
  /** Patterns asked about and not named (they keep their name). */
  failed: number;
  /** Why some or all were not named (no reasoning model, a model error, an unusable answer), or null. */
  reason: string | null;
}

export type VerdictName = 'real' | 'acceptable' | 'sop_wrong' | 'checker_wrong';
export type ReviewStateName = 'needs_review' | 'open' | 'fixing' | 'fixed' | 'regressed' | 'closed';
export type ReviewReasonName = 'no_verdict' | 'carried_over' | 'reclustered' | 'reworded' | 'came_back';
export type PatternKind = 'rule' | 'sub' | 'other';
export type FindingKind = 'step' | 'never' | 'warning';

/** The window of Insights and the patterns list: [from, to), by when each session happened. */
export interface WindowQuery {
  /** Days back from `to` (default 365). */
  days?: number;
  /** ISO times; from wins over days. */
  from?: string;
  to?: string;
  procedure?: string;
  /** A rule id: its lineage (every wording it has had). */
  rule?: string;
}

/** GET /patterns: the window and filters, and a page (most findings first). */
export interface PatternsQuery extends WindowQuery {
  /** Rule patterns a page, 1 to 500 (default 100). */
  limit?: number;
  /** The previous page's next_cursor. */
  cursor?: string;
}

export interface ReviewQueueQuery {
  /** Default: needs_review and regressed. */
  state?: ReviewStateName[];
  /** Default 50. */
  limit?: number;
}

export interface VerdictInput {
  verdict: VerdictName;
  note?: string;
  reviewer?: string;
  suggest?: boolean;
}

export interface OverrideInput {
  correct: boolean;
  note?: string;
  reviewer?: string;
}

export interface VerdictView {
  verdict: VerdictName;
  note: string | null;
  reviewer: string | null;
  created_at: string;
  /** A failure mode without its own verdict has its rule pattern's. */
  inherited: boolean;
  carried_over: boolean;
}

export interface ReviewFields {
  verdict: VerdictView | null;
  review_state: ReviewStateName;
  review_reason: ReviewReasonName | null;
  review_note: string;
  /** The release with the applied suggestion's edit, once there is one (fixing, fixed, regressed); else null. */
  fix_release: { id: string; number: number } | null;
  fix_sessions: number | null;
  fix_sessions_needed: number | null;
}

export interface RuleView {
  /** The lineage id: the id of the rule's first wording. */
  rule_id: string;
  /** The id of the wording sessions ran most recently. */
  current_rule_id: string;
  kind: FindingKind;
  index: number;
  /** The rule as sessions ran it most recently. */
  text: string;
  /** "Step 3", "Never rule 2", "Warning sign 1". */
  label: string;
}

export interface PatternSummary extends ReviewFields {
  id: string;
  kind: PatternKind;
  parent_id: string | null;
  name: string;
  named_by: 'rule_text' | 'model';
  description: string | null;
  procedure_id: string;
  procedure_name: string;
  rule: RuleView;
  theme: { id: string; name: string } | null;
  /** Counted in the window: findings not suppressed, and suppressed ones apart. */
  findings: number;
  suppressed: number;
  sessions: number;
  first_seen: string | null;
  last_seen: string | null;
  clustered_at: string | null;
  retired_at: string | null;
}

export interface PatternsListView {
  items: (PatternSummary & { sub_patterns: PatternSummary[] })[];
  /** The next page's cursor (null: the last page). */
  next_cursor: string | null;
  /** The workspace's last clustering (null: never clustered). */
  clustered_at: string | null;
  window: WindowView;
}

export interface WindowView {
  from: string;
  to: string;
}

export interface ExampleFinding {
  finding_id: string;
  session_id: string;
  external_id: string;
  started_at: string | null;
  status: string;
  excerpt: string;
  evidence: unknown[];
  suppressed: boolean;
}

/** One pattern; `sessions` is its sessions in the window (the list), `session_count` their number. */
export interface PatternView extends Omit<PatternSummary, 'sessions'> {
  session_count: number;
  verdict_history: VerdictView[];
  /** All time. */
  suppressed_count: number;
  failure_modes: PatternSummary[];
  /** Every wording of the rule with findings in the pattern, newest first. */
  wordings: { rule_id: string; text: string; findings: number; last_seen: string | null }[];
  /** Distinct quotes from the findings' evidence (the agent's own words, or the tool call). */
  example_phrasings: string[];
  /** Its sessions in the window, newest first (at most 100; session_count counts them all). */
  sessions: {
    session_id: string;
    external_id: string;
    started_at: string | null;
    finding_id: string;
    status: string;
    suppressed: boolean;
    override: { correct: boolean; note: string | null; reviewer: string | null } | null;
  }[];
  /** Its suggestions, newest first (proposed ones with their freshness). */
  suggestions: SuggestionSummary[];
  window: WindowView;
}

export interface VerdictGivenView extends VerdictView {
  pattern_id: string;
  /** The pattern's findings suppressed now (all time). */
  suppressed_count: number;
  review_state: ReviewStateName;
  review_reason: ReviewReasonName | null;
  review_note: string;
  /** The suggestion queued (suggest: true and a real, acceptable or sop_wrong verdict), generating; else null. */
  suggestion: SuggestionView | null;
  /** Present when `suggest` was asked and no suggestion was queued: why. */
  suggestion_note?: string;
}

export interface OverrideView {
  finding_id: string;
  session_id: string;
  procedure_id: string;
  rule_id: string;
  correct: boolean;
  note: string | null;
  reviewer: string | null;
  created_at: string;
  /** Whether the finding is suppressed now. */
  suppressed: boolean;
  /** The session's check and session results after the roll-up. */
  check_result: SopResult | null;
  session_result: SopResult | null;
}

export interface RegressionLine {
  session_id: string;
  external_id: string;
  transcript_ref: string | null;
  procedure_id: string;
  rule_id: string;
  rule_kind: FindingKind;
  rule_text: string;
  verdict: VerdictName;
  observed_status: string;
  expected_status: 'done' | 'ok' | 'present';
  expect: 'agent' | 'checker';
}

export interface QueueItem extends ReviewFields {
  pattern_id: string;
  kind: PatternKind;
  name: string;
  label: string;
  theme: { id: string; name: string } | null;
  procedure_id: string;
  procedure_name: string;
  rule_id: string;
  rule_text: string;
  sessions: number;
  examples: ExampleFinding[];
  /** Findings since the latest verdict (all of them without one), suppressed ones left out. */
  new_findings: number;
  suppressed_count: number;
  /** Its latest suggestion (proposed ones with their freshness), or null. */
  suggestion: SuggestionSummary | null;
}

export interface ReviewQueueView {
  items: QueueItem[];
  /** Items in the states asked for (before limit). */
  total: number;
  /** Active leaf patterns per review state. */
  counts: Record<ReviewStateName, number>;
  clustered_at: string | null;
}

export type ResultCounts = Record<SopResult, number>;

export interface InsightsView {
  window: WindowView;
  filters: { procedure: string | null; rule: string | null };
  tiles: {
    sessions: number;
    results: ResultCounts;
    /** followed / (followed + partial + deviated); not_measurable left out; null without any. */
    follow_rate: number | null;
    findings: number;
    suppressed: number;
  };
  scoreboard: {
    procedure_id: string;
    procedure_name: string;
    sessions: number;
    results: ResultCounts;
    follow_rate: number | null;
    /** The follow rate of each week of `weeks` (its checks in the window that week); null in a week without a judged session. */
    weekly_follow_rate: (number | null)[];
    findings: number;
    suppressed: number;
  }[];
  /** Monday of each week in the window (UTC, YYYY-MM-DD), oldest first: the axis of the weekly rates and of the ladder's trend. */
  weeks: string[];
  ladder: {
    pattern_id: string;
    procedure_id: string;
    rule_id: string;
    label: string;
    name: string;
    text: string;
    findings: number;
    suppressed: number;
    /** Sessions checked on its procedure in the window. */
    sessions: number;
    /** findings / sessions; null without sessions. */
    rate: number | null;
    /** Findings (not suppressed) per week of `weeks`. */
    trend: number[];
  }[];
}

/** GET /insights/compare: `from` and `to` are a release's id, number or `live`. */
export interface CompareQuery {
  /** Default: the release numbered just before `to`. */
  from?: string;
  /** Default: the live release. */
  to?: string;
  procedure?: string;
}

/** What the sessions checked on one release came to, for a procedure or a rule. */
export interface CompareSide {
  /** Sessions checked on the release (for a rule: on its procedure). */
  sessions: number;
  results: ResultCounts;
  follow_rate: number | null;
  findings: number;
  suppressed: number;
  /**
   * Findings per measurable session (followed, partial or deviated): the findings (not
   * suppressed) of its measurable sessions over their number, as its rules' `rate`s count
   * (not_measurable sessions and their findings left out); null without a measurable session.
   */
  rate: number | null;
}

/**
 * Two releases side by side: for each procedure, the sessions checked on each and their follow
 * rate; for each rule pattern (a rule through its lineage, so a reworded rule is one row), its
 * findings and their rate on each. Suppressed findings are counted apart, as in Insights.
 */
export interface ReleaseCompareView {
  from: { id: string; number: number; created_at: string };
  to: { id: string; number: number; created_at: string };
  filters: { procedure: string | null };
  procedures: {
    procedure_id: string;
    procedure_name: string;
    /** In that release's procedures (false: added or removed between the two). */
    in_from: boolean;
    in_to: boolean;
    from: CompareSide;
    to: CompareSide;
    rules: {
      pattern_id: string;
      rule_id: string;
      label: string;
      name: string;
      text: string;
      from: { findings: number; suppressed: number; rate: number | null };
      to: { findings: number; suppressed: number; rate: number | null };
    }[];
  }[];
}
