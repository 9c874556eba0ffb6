import type { SopIssue } from '../sop/errors';
import type { PlanAgent, SuggestionStatus } from './suggestions.repo';

/**
 * Suggestions as the api calls them (docs/suggestions.md): in-process in the embedded default,
 * over gRPC distributed. Refusals are SopError (400, 404, 409, 422), the same in both.
 */
export interface SuggestionQueries {
  /** POST /v1/workspaces/{ws}/patterns/{id}/suggest: queued, answered generating. */
  suggest(workspace: string, patternId: string, input: unknown): Promise<SuggestionView>;
  /** GET /v1/workspaces/{ws}/suggestions?status= (newest first). */
  listSuggestions(workspace: string, q: ListSuggestionsQuery): Promise<{ items: SuggestionSummary[] }>;
  /** GET /v1/workspaces/{ws}/suggestions/{id} */
  getSuggestion(workspace: string, id: string): Promise<SuggestionView>;
  /** POST .../suggestions/{id}/apply {reviewer?} */
  applySuggestion(workspace: string, id: string, input: unknown): Promise<SuggestionView>;
  /** POST .../suggestions/{id}/rewrite {reviewer?}: the new one, generating. */
  rewriteSuggestion(workspace: string, id: string, input: unknown): Promise<SuggestionView>;
  /** POST .../suggestions/{id}/dismiss {note?, reviewer?} */
  dismissSuggestion(workspace: string, id: string, input: unknown): Promise<SuggestionView>;
  /** GET/PUT/DELETE /v1/workspaces/{ws}/github: the repo connection (never its token). */
  getRepoConnection(workspace: string): Promise<unknown>;
  putRepoConnection(workspace: string, input: unknown): Promise<unknown>;
  deleteRepoConnection(workspace: string): Promise<{ deleted: true }>;
}

export interface ListSuggestionsQuery {
  status?: SuggestionStatus[];
  /** Only this pattern's. */
  pattern?: string;
  limit?: number;
  /** The ones after this suggestion in the list's order (older): the next page. */
  before?: string;
}

export type Freshness = 'current' | 'merges' | 'conflict';

export interface SinceWritten {
  state: Freshness;
  /** The file's version at head now (null: the file is gone from head). */
  head_version: string | null;
  /** A unified diff of the file since the suggestion was written ('' for current). */
  changes: string;
  merged_text: string | null;
  conflicts: { line: number; base: string[]; current: string[]; suggested: string[] }[];
  issues: SopIssue[];
  /** For conflict: why, in one sentence. */
  reason: string | null;
}

/** A suggestion in a list: its dates, and freshness when proposed. */
export interface SuggestionSummary {
  id: string;
  pattern_id: string;
  procedure_id: string;
  path: string;
  rule_id: string;
  verdict: 'real' | 'acceptable' | 'sop_wrong';
  status: SuggestionStatus;
  prompt_version: string;
  model: string | null;
  rationale: string | null;
  pr_url: string | null;
  error: string | null;
  note: string | null;
  reviewer: string | null;
  rewrite_of: string | null;
  rewritten_as: string | null;
  created_at: string;
  applied_at: string | null;
  pr_opened_at: string | null;
  merged_at: string | null;
  /** The merge commit of its pull request once merged (as GitHub gave it; null otherwise). */
  merge_commit_sha: string | null;
  dismissed_at: string | null;
  /** The first release whose file has the edit (alone or merged with others), and when it was published. */
  released_in: { id: string; number: number } | null;
  released_at: string | null;
  /** For a proposed one: current, merges or conflict; null otherwise. */
  freshness: Freshness | null;
}

/** One suggestion (GET /suggestions/{id}). */
export interface SuggestionView extends SuggestionSummary {
  pattern: { id: string; name: string; kind: string; procedure_name: string; rule_text: string } | null;
  verdict_note: string | null;
  base_version: string;
  old_text: string;
  new_text: string | null;
  plan: { agents: PlanAgent[] } | null;
  changes_since: string | null;
  merged_into_version: string | null;
  /** For a proposed one: the file since it was written. */
  since_written: SinceWritten | null;
}
