import { loadSession, type Session } from './session';
import type { RuleLineageView, SuggestionView } from '@neatroots/store';
import type { Insights, OverrideGiven, Pattern, ReleaseCompare, ReviewQueue, ReviewState, VerdictGiven, VerdictName } from './review-types';
import type { Head, Release, ReleaseSummary, SopIssue, SopSession, SopSessionRow, SopTranscript } from './sop-types';
import type { CheckDraft, CheckPreview, CheckProblem, ListedCheck, SavedCheck } from './authoring-types';
import type { AgreementRow, CheckStat, DisabledCheck, Finding, ListedSpan, Page, Problem, Run, RunDetail, Span } from './types';

/** An answer of the API that is not a success, with the API's own code and message. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** A check that does not validate: each problem with its field and line (`checks validate`'s). */
    readonly problems: CheckProblem[] = [],
    /** Procedures that would not compile: sopc's errors with their file and line. */
    readonly issues: SopIssue[] = [],
  ) {
    super(message);
  }
}

/** Query parameters; an array is the parameter repeated (?state=open&state=closed). */
type Params = Record<string, string | number | boolean | undefined | null | readonly string[]>;

/**
 * Calls /v1/projects/{project}/{path} with the session's key (`root: 'workspaces'`: the sopops
 * API, where the workspace is the project under the same key).
 */
export async function call<T>(
  s: Session,
  path: string,
  opts: {
    params?: Params;
    method?: 'GET' | 'POST' | 'PUT' | 'DELETE';
    body?: unknown;
    /** The body is sent as this text with this content type (a file saved at head), not as JSON. */
    raw?: { text: string; type: string };
    root?: 'projects' | 'workspaces';
    text?: boolean;
  } = {},
): Promise<T> {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(opts.params ?? {})) {
    if (Array.isArray(v)) for (const one of v) q.append(k, one);
    else if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const url = `/v1/${opts.root ?? 'projects'}/${encodeURIComponent(s.project)}/${path}${q.size ? `?${q}` : ''}`;
  const headers: Record<string, string> = { 'x-api-key': s.key, accept: 'application/json' };
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  if (opts.raw) headers['content-type'] = opts.raw.type;
  const body0 = opts.raw ? opts.raw.text : opts.body === undefined ? undefined : JSON.stringify(opts.body);
  let res: Response;
  try {
    res = await fetch(url, { method: opts.method ?? 'GET', headers, body: body0 });
  } catch (err) {
    throw new ApiFailure(0, 'network', `neatroots could not be reached (${(err as Error).message})`);
  }
  const text = await res.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON: a proxy's page, say. Its status tells enough.
  }
  if (!res.ok) {
    // The signed-in key taken away: the app asks to sign in again (a key being tried is not).
    if (res.status === 401 && loadSession()?.key === s.key) window.dispatchEvent(new Event('neatroots:unauthorized'));
    const e = (body as { error?: { code?: string; message?: string; problems?: CheckProblem[]; issues?: SopIssue[] } } | null)?.error;
    throw new ApiFailure(res.status, e?.code ?? 'http_' + res.status, e?.message ?? `${res.status} ${res.statusText}`, e?.problems ?? [], e?.issues ?? []);
  }
  // A JSON Lines answer (a regression set) is handed over as its text.
  return (opts.text ? text : body) as T;
}

/**
 * A file's path at head as a URL path (each segment encoded), or an Error before any request
 * when it names no file: a `.` or `..` segment (the browser resolves it in the URL, so another
 * file would be written, or a route other than head's asked), an empty one or a leading `/`.
 */
export function headFileUrl(path: string): string {
  const segments = path.split('/');
  if (segments.some((p) => p === '' || p === '.' || p === '..')) {
    throw new Error(`a path may not contain . or .. segments, empty segments or a leading / (${path})`);
  }
  return `head/${segments.map(encodeURIComponent).join('/')}`;
}

/** The endpoints the app uses (docs/api.md), typed. */
export const api = {
  runs: (s: Session, p: Params) => call<{ runs: Run[] } & Page>(s, 'runs', { params: p }),
  /** The run page with its spans' input and output cut to a preview (`truncated` says which): `span` gives one whole. */
  run: (s: Session, runId: string) => call<RunDetail & { spans: ListedSpan[] }>(s, `runs/${encodeURIComponent(runId)}`, { params: { bodies: 'preview' } }),
  /** The run as it is now, with only the spans stored after an earlier answer's `spans_since` (a page following a run still going). */
  runSince: (s: Session, runId: string, since: string) =>
    call<RunDetail & { spans: ListedSpan[] }>(s, `runs/${encodeURIComponent(runId)}`, { params: { bodies: 'preview', since } }),
  spans: (s: Session, runId: string, cursor: string) =>
    call<{ spans: ListedSpan[] } & Page>(s, `runs/${encodeURIComponent(runId)}/spans`, { params: { cursor, limit: 2000, bodies: 'preview' } }),
  /** One span whole (404 when the run has no such span). */
  span: (s: Session, runId: string, spanId: string) => call<{ span: Span }>(s, `runs/${encodeURIComponent(runId)}/spans/${encodeURIComponent(spanId)}`),
  findings: (s: Session, p: Params) => call<{ findings: Problem[] } & Page>(s, 'findings', { params: p }),
  dismiss: (s: Session, id: string) => call<{ finding: Finding }>(s, `findings/${encodeURIComponent(id)}/dismiss`, { method: 'POST', body: {} }),
  reopen: (s: Session, id: string) => call<{ finding: Finding }>(s, `findings/${encodeURIComponent(id)}/reopen`, { method: 'POST' }),
  checkStats: (s: Session) => call<{ checks: CheckStat[] }>(s, 'checks/stats'),
  disabledChecks: (s: Session) => call<{ checks: DisabledCheck[] }>(s, 'checks/disabled'),
  // writing checks (docs/authoring.md)
  checks: (s: Session) => call<{ checks: ListedCheck[] }>(s, 'checks'),
  draftCheck: (s: Session, concern: string) => call<CheckDraft>(s, 'checks/draft', { method: 'POST', body: { concern } }),
  previewCheck: (s: Session, yaml: string, runs: number, modelCalls?: number) =>
    call<CheckPreview>(s, 'checks/preview', { method: 'POST', body: { yaml, runs, ...(modelCalls ? { model_calls: modelCalls } : {}) } }),
  /** What save would refuse (the same errors), nothing saved and nothing run: the editor's live validation. */
  validateCheck: (s: Session, yaml: string) => call<{ check_id: string; warnings: string[] }>(s, 'checks/validate', { method: 'POST', body: { yaml } }),
  saveCheck: (s: Session, yaml: string) => call<SavedCheck>(s, 'checks', { method: 'POST', body: { yaml } }),
  haltCheck: (s: Session, id: string) => call<SavedCheck>(s, `checks/${encodeURIComponent(id)}/halt`, { method: 'POST', body: {} }),
  agreement: (s: Session) => call<{ questions: AgreementRow[] }>(s, 'models/agreement'),
  // sopops (docs/api.md#workspaces-sopops)
  sopSessions: (s: Session, p: Params) => call<{ items: SopSessionRow[]; next_cursor: string | null }>(s, 'sessions', { params: p, root: 'workspaces' }),
  sopSession: (s: Session, id: string) => call<SopSession>(s, `sessions/${encodeURIComponent(id)}`, { root: 'workspaces' }),
  /** Checks the session again as stored (202; 409 `transcript_expired` once retention emptied its transcript). */
  recheckSession: (s: Session, id: string) =>
    call<{ id: string; external_id: string; status: 'queued' }>(s, `sessions/${encodeURIComponent(id)}/recheck`, { method: 'POST', root: 'workspaces' }),
  /** The session as received: its turns (numbered as evidence counts them) and tool calls. */
  sopTranscript: (s: Session, id: string) => call<SopTranscript>(s, `sessions/${encodeURIComponent(id)}/transcript`, { root: 'workspaces' }),
  /**
   * Every release summed up (GET releases?fields=summary, 500 a page): number, date, id, its
   * procedures' names and versions, counts; never the rules and agents (a workspace's releases
   * whole were 28.7 MB with 100 releases of 20 procedures).
   */
  releaseSummaries: async (s: Session) => {
    const items: ReleaseSummary[] = [];
    let cursor: string | null = null;
    do {
      const page: { items: ReleaseSummary[]; next_cursor: string | null } = await call(s, 'releases', { params: { fields: 'summary', limit: 500, cursor }, root: 'workspaces' });
      items.push(...page.items);
      cursor = page.next_cursor;
    } while (cursor);
    return { items };
  },
  /** One release whole, its procedures with their rules and its agents (`live`: the live one; 404 when there is none). */
  release: (s: Session, ref: string) => call<Release>(s, `releases/${encodeURIComponent(ref)}`, { root: 'workspaces' }),
  /** What the Procedures page reads at once: every release summed up, the live one whole (null: none yet), and head. */
  procedures: async (s: Session) => {
    const [releases, head] = await Promise.all([api.releaseSummaries(s), api.head(s)]);
    // The live one whole only when the summaries name one: asking for releases/live in a
    // workspace with none is a 404 the browser logs as a failed load.
    const liveId = releases.items.find((r) => r.live)?.id;
    const live = liveId
      ? await api.release(s, liveId).catch((err: unknown) => {
          // Rolled back or replaced since the list was read: none live now, as far as this page knows.
          if (err instanceof ApiFailure && err.status === 404) return null;
          throw err;
        })
      : null;
    return { releases: releases.items, live, head };
  },
  head: (s: Session) => call<Head>(s, 'head', { root: 'workspaces' }),
  /** One file at head with its text, to edit it (404 when head has no such file). */
  headFile: async (s: Session, path: string) => call<{ path: string; text: string; version: string; updated_at: string }>(s, headFileUrl(path), { root: 'workspaces' }),
  /** One file saved at head (422 with sopc's issues when head would not compile). */
  saveHeadFile: async (s: Session, path: string, text: string) =>
    call<unknown>(s, headFileUrl(path), { method: 'PUT', raw: { text, type: path.endsWith('.md') ? 'text/markdown' : path.endsWith('.yaml') || path.endsWith('.yml') ? 'text/yaml' : 'text/plain' }, root: 'workspaces' }),
  publish: (s: Session) => call<{ id: string; number: number }>(s, 'releases', { method: 'POST', root: 'workspaces' }),
  // review (docs/review.md)
  reviewQueue: (s: Session, state: readonly ReviewState[], limit?: number) =>
    call<ReviewQueue>(s, 'review', { params: { state, limit }, root: 'workspaces' }),
  pattern: (s: Session, id: string) => call<Pattern>(s, `patterns/${encodeURIComponent(id)}`, { root: 'workspaces' }),
  giveVerdict: (s: Session, id: string, body: { verdict: VerdictName; note?: string; reviewer?: string; suggest?: boolean }) =>
    call<VerdictGiven>(s, `patterns/${encodeURIComponent(id)}/verdict`, { method: 'POST', body, root: 'workspaces' }),
  override: (s: Session, findingId: string, body: { correct: boolean; note?: string; reviewer?: string }) =>
    call<OverrideGiven>(s, `findings/${encodeURIComponent(findingId)}/override`, { method: 'POST', body, root: 'workspaces' }),
  regression: (s: Session, id: string) => call<string>(s, `patterns/${encodeURIComponent(id)}/regression`, { root: 'workspaces', text: true }),
  insights: (s: Session, p: Params) => call<Insights>(s, 'insights', { params: p, root: 'workspaces' }),
  compareReleases: (s: Session, p: { from?: string; to?: string; procedure?: string }) => call<ReleaseCompare>(s, 'insights/compare', { params: p, root: 'workspaces' }),
  ruleLineage: (s: Session, ruleId: string, procedure: string) =>
    call<RuleLineageView>(s, `rules/${encodeURIComponent(ruleId)}/lineage`, { params: { procedure }, root: 'workspaces' }),
  suggestion: (s: Session, id: string) => call<SuggestionView>(s, `suggestions/${encodeURIComponent(id)}`, { root: 'workspaces' }),
  /** A new suggestion for the pattern's verdict, generating (docs/suggestions.md). */
  suggest: (s: Session, patternId: string, body: { reviewer?: string }) =>
    call<SuggestionView>(s, `patterns/${encodeURIComponent(patternId)}/suggest`, { method: 'POST', body, root: 'workspaces' }),
  /** apply, rewrite or dismiss a suggestion (docs/suggestions.md). */
  actOnSuggestion: (s: Session, id: string, action: 'apply' | 'rewrite' | 'dismiss', body: { reviewer?: string; note?: string }) =>
    call<SuggestionView>(s, `suggestions/${encodeURIComponent(id)}/${action}`, { method: 'POST', body, root: 'workspaces' }),
};
