/**
 * Checks written by people and coding agents (issue 14): what the api asks of the authoring
 * side of neatroots (draft, validate, preview, save, list, update, delete, halt). The api stays thin:
 * the composition root supplies an implementation (packages/neatroots: the question service
 * drafts, replay previews, review stores); the REST controller and the MCP tools both call it,
 * so people and agents meet the same rules, refused the same way.
 */

/** Who is writing: a person in the app or the CLI, or a coding agent over MCP. */
export type Author = 'app' | 'cli' | 'agent';

/** A check as given: the text of a YAML file holding one check, or the check as a JSON object. */
export interface CheckSubmission {
  yaml?: string;
  check?: Record<string, unknown>;
}

/** One validation problem, naming the field (and its line in the YAML when there is one). */
export interface CheckProblem {
  check_id?: string;
  field?: string;
  reason: string;
  line?: number;
  message: string;
}

/** A check of the project, wherever it comes from. */
export interface ListedCheck {
  id: string;
  kind?: string;
  action?: 'flag' | 'halt';
  title?: string;
  /** library, user, project or database. */
  source: string;
  file?: string;
  /** Database checks: who wrote the version stored (planner, agent, app, cli). */
  origin?: string;
  saved?: boolean;
  /** Database checks: the YAML as stored. */
  yaml?: string;
  /**
   * Checks in effect: the checks with the same id this one replaced (wholly or in this
   * project), earliest first, as `neatroots checks list` shows them.
   */
  overrides?: { source: string; file?: string }[];
  /** false for a database check that does not load (its `error` says why) or that a halt rule of yours overrides. */
  in_effect: boolean;
  error?: string;
  updated_at?: string;
}

export interface SavedCheck {
  check: ListedCheck;
  created: boolean;
  warnings: string[];
  /** Halt rules: whether halts act in the project (steering); off, the rule only flags. */
  steering?: boolean;
}

export interface DraftResult {
  /** The drafted check, validated (not saved). */
  check: Record<string, unknown>;
  yaml: string;
  kind: 'rule' | 'question';
  warnings: string[];
}

/** A check that save would accept, checked without saving or running anything. */
export interface ValidatedCheck {
  check_id: string;
  warnings: string[];
}

export interface PreviewOptions {
  /** The most recent runs to check (default 20, at most 100). */
  runs?: number;
  /** Model calls the preview may make for a question (default 20, at most 200). */
  model_calls?: number;
  by: Author;
  /**
   * Aborted when the caller gives up (its connection closed before the answer, or it cancelled
   * the MCP call): the preview frees its place at once, makes no model call after that and
   * stops, answering 499 `cancelled` to nobody.
   */
  signal?: AbortSignal;
  /**
   * The most wall-clock time (ms) the preview may take: past it, its model calls are stopped
   * and it answers with what it covered, the questions it could not answer and the runs it did
   * not reach listed in `not_checked`. The MCP tool's is below the MCP clients' 60 s timeout;
   * the REST endpoint's is the body's `time_ms` (at most MAX_PREVIEW_MS), else 120 s.
   */
  time_ms?: number;
}

export interface PreviewRun {
  run_id: string;
  workflow: string | null;
  started_at: string;
  /** The findings the check would raise in the run, as replay prints them. */
  findings: Record<string, unknown>[];
}

export interface PreviewResult {
  check: { id: string; kind: string; action: string };
  warnings: string[];
  runs: { checked: number; limit: number; flagged: number; more: boolean };
  model_calls: { used: number; limit: number; exhausted: boolean };
  flagged: PreviewRun[];
  /** Runs a question could not be answered on (a model error, a timeout, the call budget): not checked, never a pass. */
  not_checked: { run_id: string; reason: string }[];
  /** What the preview covered, in words. */
  bounds: string;
}

export interface Authoring {
  list(project: string): Promise<ListedCheck[]>;
  get(project: string, id: string): Promise<ListedCheck | null>;
  draft(project: string, concern: string, opts?: { workflow?: string }): Promise<DraftResult>;
  preview(project: string, submission: CheckSubmission, opts: PreviewOptions): Promise<PreviewResult>;
  /** Refuses exactly what save would (same errors), without saving or running anything. */
  validate(project: string, submission: CheckSubmission, opts: { by: Author }): Promise<ValidatedCheck>;
  /** Creates or replaces a database check; `id` (PUT) must be the check's own. */
  save(project: string, submission: CheckSubmission, opts: { by: Author; id?: string }): Promise<SavedCheck>;
  remove(project: string, id: string, by: Author): Promise<void>;
  /** Switches a database rule of a person's to action: halt. */
  halt(project: string, id: string, by: Author): Promise<SavedCheck>;
}

/** A refusal of the authoring side, answered as `{ error: { code, message, problems? } }`. */
export class AuthoringError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly problems?: CheckProblem[],
  ) {
    super(message);
    this.name = 'AuthoringError';
  }
}
