import type { CheckStat, FindingState } from '@neatroots/review-domain';
import type { RunEndStatus, RunStart, Span } from '@neatroots/spans';
import type { DeadLetterRecord } from './dead-letters.repo';

/**
 * What the store hands out, in the snake_case JSON of the REST API (CONTRACTS.md names).
 * Times are ISO-8601 strings.
 */

export interface RunRecord {
  project: string;
  run_id: string;
  workflow: string | null;
  session_id: string | null;
  started_at: string;
  ended_at: string | null;
  end_status: RunEndStatus | null;
  /** Its spans, a tool call traced at several layers (framework, MCP client, MCP server) counted once. */
  span_count: number;
  /** Its failed spans, a failed call traced at several layers counted once. */
  error_count: number;
  /** Every span stored for it, each layer of a call one (what its span pages list). */
  stored_span_count: number;
  total_tokens: number;
  last_seen_at: string;
  /**
   * When retention deleted the run's spans (NEATROOTS_SPAN_RETENTION_DAYS), else null: its
   * counters, findings and problems stay. Spans that arrive later are kept.
   */
  spans_expired_at: string | null;
  /** Open problems of the run: a group counts once, quiet and dismissed findings not at all. */
  open_findings: number;
  /**
   * Problems the run had, open or resolved (counted as open_findings is): a run whose
   * repeated calls stopped still shows that they happened.
   */
  finding_count: number;
  /** On the run page only (getRun), not in lists. */
  final_output?: unknown;
  /** The run_start event as given, on the run page only. */
  run_start?: RunStart | null;
}

/** Where a finding is in its life (the seed, Findings). */
/** The findings' life is domain code: its types come from there. */
export type { FindingState, CheckStat };

/**
 * List filters. `open` is every finding still open, including `active` ones (open, and a note
 * about it reached the agent); `resolved` and `open` leave dismissed ones out.
 */
export const FINDING_STATE_FILTERS = ['open', 'active', 'resolved', 'dismissed', 'all'] as const;
export type FindingStateFilter = (typeof FINDING_STATE_FILTERS)[number];

export interface FindingRecord {
  id: string;
  project: string;
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
  /** What the rule engine said last: open until it resolved. */
  status: 'open' | 'resolved';
  /** Derived: dismissed, else resolved, else active, else open. */
  state: FindingState;
  /** Raised while its check was quiet in the project: recorded, but it does not count. */
  quiet: boolean;
  raised_at: string;
  updated_at: string;
  resolved_at: string | null;
  active_at: string | null;
  dismissed_at: string | null;
  dismissed_by: string | null;
  dismiss_note: string | null;
  /** Question findings: the words of the run that show the problem (the second look's quote). */
  quote: string | null;
  /** Question findings: the probability of a problem (an LLM's is capped at 0.9). */
  probability: number | null;
  /** Question findings: "Very likely (LLM judgment)" for an LLM, else a percentage. */
  confidence: string | null;
  /** Question findings: which model answered (decision, local or classifier). */
  answered_by: string | null;
}

/**
 * One problem: the findings of one group's checks in one run, headed by the most specific
 * (highest priority, then earliest), counted once. A finding with no group is a problem alone.
 * The head's fields, with the other members under `related`.
 */
export interface Problem extends FindingRecord {
  related: FindingRecord[];
}

export interface Page<T> {
  items: T[];
  /** Pass back as `cursor` for the next page; null on the last page. */
  next_cursor: string | null;
}

/**
 * A page of a run's spans. `cut_at_bytes` is there only when the page stopped before its
 * `limit` because its spans' JSON reached that many bytes (SPAN_PAGE_BYTES): next_cursor
 * goes on from there.
 */
export interface SpanPage extends Page<Span> {
  cut_at_bytes?: number;
  /**
   * A page read from a since cursor (RunDetail.spans_since) only: the since cursor after its
   * spans (the one it was read from when it has none), to look again later.
   */
  since?: string;
}

/** What the run page is asked with: how many spans its first page holds (default 500). */
export interface RunDetailQuery {
  spans_limit?: number;
  /** `preview`: its spans as SpanPageQuery's. */
  bodies?: SpanBodies;
  /**
   * A `spans_since` of an earlier answer: the answer's spans are those stored since, in the
   * order they were stored, not the first page (a page following a run still going).
   */
  since?: string;
}

/**
 * How a list gives its spans' input and output: `full` (the default) as stored; `preview` each
 * longer than SPAN_PREVIEW_CHARS characters cut to its first SPAN_PREVIEW_CHARS (a value that
 * is not a string: of its JSON text), the span's `truncated` naming each cut field with its
 * full length. One span whole: ReviewQueries.getSpan.
 */
export type SpanBodies = 'full' | 'preview';
export const SPAN_BODIES: readonly SpanBodies[] = ['full', 'preview'];
export const SPAN_PREVIEW_CHARS = 200;
/** The most findings a run page's answer carries (RunDetail.findings): a run's newest, or those changed since. */
export const RUN_PAGE_FINDINGS = 500;

/** A page of a run's spans, with their bodies whole or cut to a preview. */
export interface SpanPageQuery extends PageQuery {
  bodies?: SpanBodies;
}

/** A page size (1 to the list's maximum, its default when absent) and where to go on. */
export interface PageQuery {
  limit?: number;
  cursor?: string;
}

export interface RunDetail {
  run: RunRecord;
  /**
   * The first page of the run's spans in the contract's JSON shape: by start time (to the
   * fraction of a millisecond given; spans without one last), then in the order they arrived.
   */
  spans: Span[];
  /** Where the next page of spans starts (ReviewQueries.listSpans); null when `spans` is all. */
  spans_next_cursor: string | null;
  /** There only when `spans` stopped at this many bytes of JSON, short of its limit (SpanPage). */
  spans_cut_at_bytes?: number;
  /**
   * Where the spans stored after this answer's start: pass it back as `since` (RunDetailQuery)
   * to read only those, with the run as it is then. A span cursor (ReviewQueries.listSpans
   * takes it too), of the run's spans in the order they were stored.
   */
  spans_since: string;
  /**
   * `findings_scope: 'newest'` (a first answer): the run's newest RUN_PAGE_FINDINGS findings (by
   * raised_at), quiet ones too (the run page shows them), oldest first. `'changed'` (an answer
   * read `since` an earlier one): only the findings stored or changed since that answer (counted
   * again, resolved, made active, dismissed, reopened), oldest first; a client keeps findings by
   * id. More than RUN_PAGE_FINDINGS changed since (or a `since` from before findings were
   * followed): the newest, as a first answer.
   */
  findings: FindingRecord[];
  findings_scope: 'newest' | 'changed';
  /** How many findings the run has in all, quiet ones too: more than a first answer's `findings`, the rest are paged with ListFindingsQuery's `run_id`. */
  findings_total: number;
  /** This answer's `findings` as problems (quiet ones left out), oldest first. */
  problems: Problem[];
  /**
   * Questions the run was asked that no model could answer (an error, a timeout, a question the
   * fast classifier has not learnt): never a pass, so the page says so. Each one not answered
   * since, oldest first.
   */
  not_checked: NotChecked[];
  /**
   * How many of the run's question tasks were handed to the question service and have no
   * result recorded yet (answered, not checked or not asked): the run is not done being
   * checked while this is above 0, however clean it looks.
   */
  questions_pending: number;
}

export interface NotChecked {
  check_id: string;
  /** The span judged (span scope), or 'run'. */
  anchor: string;
  span_ids: string[];
  reason: string | null;
  at: string;
}

export interface ListRunsQuery extends PageQuery {
  workflow?: string;
  session_id?: string;
  /** How the run ended (run_end), or `running`: no run_end yet. */
  end_status?: RunEndStatus | 'running';
  /** true: only runs with an open problem; false: only runs without. */
  has_open_findings?: boolean;
  /** Runs that started at or after this ISO-8601 time. */
  from?: string;
  /** Runs that started before this ISO-8601 time. */
  to?: string;
}

/** What `end_status` takes: how a run ended, or `running`. */
export const RUN_END_FILTERS = ['ok', 'error', 'no_output', 'interrupted', 'running'] as const;

export interface ListFindingsQuery {
  /**
   * Default `open`; with `run_id`, `all`: everything that happened in the run, each with
   * its state (a repeated call that stopped is `resolved`, not gone).
   */
  state?: FindingStateFilter;
  run_id?: string;
  /** Also list findings raised while their check was quiet (left out by default). */
  include_quiet?: boolean;
  limit?: number;
  cursor?: string;
}

export interface DismissInput {
  by?: string;
  note?: string;
}

/**
 * What the api asks of the review service: called in-process in the embedded deployment,
 * over gRPC in the distributed one. Unknown runs and findings give null.
 */
export interface ReviewQueries {
  listRuns(project: string, q?: ListRunsQuery): Promise<Page<RunRecord>>;
  /** The run page, with the first page of its spans (`spans_limit`, DEFAULT_SPAN_PAGE of them unless asked). */
  getRun(project: string, runId: string, q?: RunDetailQuery): Promise<RunDetail | null>;
  /** A page of the run's spans, in the run page's order; null for an unknown run. */
  listSpans(project: string, runId: string, q?: SpanPageQuery): Promise<SpanPage | null>;
  /** One span of the run, whole; null for an unknown run or span. */
  getSpan(project: string, runId: string, spanId: string): Promise<Span | null>;
  listFindings(project: string, q?: ListFindingsQuery): Promise<Page<Problem>>;
  dismiss(project: string, findingId: string, input?: DismissInput): Promise<FindingRecord | null>;
  reopen(project: string, findingId: string): Promise<FindingRecord | null>;
  checkStats(project: string): Promise<CheckStat[]>;
  /** What was set aside in the project (dead_letters), newest first. */
  listDeadLetters(project: string, q?: PageQuery): Promise<Page<DeadLetterRecord>>;
}
