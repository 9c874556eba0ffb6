import type { Lock, ProcedureCheck, SessionBody } from '@neatroots/sop';
import type { ListSessionsQuery, SessionInput, SessionRecord } from './sessions.repo';

/**
 * The SOP side of the review service as the api calls it: in-process in the embedded default,
 * over gRPC (neatroots.v1.Sop) distributed. Every shape here is a REST body of
 * docs/contracts.md; refusals are SopError, with the same status in both deployments.
 */
export interface SopQueries {
  saveHeadFile(workspace: string, path: string, text: string): Promise<{ path: string; version: string }>;
  deleteHeadFile(workspace: string, path: string): Promise<void>;
  pushHead(workspace: string, files: { path: string; text: string }[]): Promise<{ files: { path: string; version: string }[] }>;
  head(workspace: string): Promise<HeadView>;
  /** One file at head with its text (SopError 404 when head has no such file). */
  headFile(workspace: string, path: string): Promise<HeadFileView>;
  publish(workspace: string): Promise<ReleaseView>;
  /**
   * Newest first: every release whole (no query), or pages of `limit` after `cursor`; with
   * `fields: 'summary'` each release without its procedures' rules and its agents (the pages
   * list them: a workspace's releases whole can be tens of MB).
   */
  releases(workspace: string, q?: ReleasesQuery): Promise<ReleasesPage>;
  /** `ref`: the id, the number, or "live". */
  release(workspace: string, ref: string): Promise<ReleaseView>;
  receiveSession(workspace: string, session: unknown): Promise<{ id: string; external_id: string; status: 'queued' | 'unchanged' }>;
  getSession(workspace: string, id: string): Promise<SessionView>;
  /** A session's turns and tool calls as received (SopError 404 when there is no such session). */
  getSessionTranscript(workspace: string, id: string): Promise<SessionTranscriptView>;
  listSessions(workspace: string, q: ListSessionsQuery): Promise<SessionsListView>;
  /**
   * The session as stored checked again, its results replaced (SopError 404 when there is no
   * such session, 409 `transcript_expired` once retention emptied its transcript).
   */
  recheckSession(workspace: string, id: string): Promise<{ id: string; external_id: string; status: 'queued' }>;
}

export interface HeadView {
  workspace: string;
  files: { path: string; version: string; updated_at: string }[];
  /** The release head would be published over (null: none yet). */
  live_release: { id: string; number: number } | null;
  /** Paths added, changed or removed since the live release. */
  changed: { path: string; change: 'added' | 'changed' | 'removed' }[];
  /** A unified diff of head against the live release ('' when nothing is unpublished). */
  diff: string;
}

export interface HeadFileView {
  path: string;
  text: string;
  version: string;
  updated_at: string;
}

export interface ReleaseView {
  id: string;
  number: number;
  live: boolean;
  created_at: string;
  procedures: Lock['procedures'];
  agents: Lock['agents'];
}

/** GET .../releases: `fields=summary`, and a page of `limit` after `cursor` (none: all of them). */
export interface ReleasesQuery {
  fields?: 'summary';
  limit?: number;
  cursor?: string;
}

/** A release in the summary list: what it holds, counted, without the rules and agents themselves. */
export interface ReleaseSummaryView {
  id: string;
  number: number;
  live: boolean;
  created_at: string;
  procedures: { procedure_id: string; name: string; version: string; rule_count: number }[];
  agent_count: number;
}

export interface ReleasesPage {
  items: ReleaseView[] | ReleaseSummaryView[];
  /** The next page's cursor (null: this is the last page). */
  next_cursor: string | null;
}

/** A session as the API shows it: the checker's body, with where it stands. */
export interface SessionView extends Omit<SessionBody, 'status' | 'checks'> {
  id: string;
  status: SessionRecord['status'];
  /** The checker's own result, before suppressed findings were read as passed. */
  checked_result: SessionBody['result'];
  started_at: string | null;
  transcript_ref: string | null;
  received_at: string;
  checked_at: string | null;
  /** Why the check failed (status failed), or why some rules are not_checked though it was checked (the model failed on their questions). */
  error: string | null;
  checks: ProcedureCheck[];
}

/**
 * A session's transcript: its turns numbered from 0 in the order sent (the `turn` of a tool
 * call and of a rule's evidence), each with every field it was sent with, and its tool calls as sent.
 */
export interface SessionTranscriptView {
  id: string;
  external_id: string;
  turns: ({ index: number } & SessionInput['turns'][number])[];
  tool_calls: SessionInput['tool_calls'];
  /** When transcript retention emptied its turns and tool calls (then both are empty), else null. */
  transcript_expired_at: string | null;
}

export interface SessionsListView {
  items: Omit<SessionView, 'checks'>[];
  next_cursor: string | null;
}
