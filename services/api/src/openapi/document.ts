import { any, arr, bool, int, nullable, num, object, oneOf, record, ref, str, time, type Schema } from './schema';

/**
 * The API described as OpenAPI 3.1, served at GET /openapi.json for anyone writing a client.
 * openapi.spec.ts keeps it honest: every route the api serves is in it, and the real answers
 * of each documented route conform to its schemas (the review bodies strictly: a field the
 * API answers and the document does not name fails the test).
 */

const STATES = ['needs_review', 'open', 'fixing', 'fixed', 'regressed', 'closed'] as const;
const REASONS = ['no_verdict', 'carried_over', 'reclustered', 'reworded', 'came_back'] as const;
const VERDICTS = ['real', 'acceptable', 'sop_wrong', 'checker_wrong'] as const;
const RESULTS = ['deviated', 'partial', 'followed', 'not_measurable'] as const;
const RULE_KINDS = ['step', 'never', 'warning'] as const;
const PATTERN_KINDS = ['rule', 'sub', 'other'] as const;

const schemas: Record<string, Schema> = {
  Error: object({
    error: object({ code: str, message: str, issues: arr(any), issues_omitted: int, problems: arr(any) }, { optional: ['issues', 'issues_omitted', 'problems'] }),
  }),

  // --- neatroots: runs, spans, findings (docs/api.md)
  Run: object({
    project: str, run_id: str, workflow: nullable(str), session_id: nullable(str), started_at: time, ended_at: nullable(time),
    end_status: nullable(oneOf(['ok', 'error', 'no_output', 'interrupted'])), span_count: { ...int, description: 'Its spans, a tool call traced at several layers (framework, MCP client, MCP server) counted once' },
    error_count: { ...int, description: 'Its failed spans, a failed tool call traced at several layers counted once' },
    stored_span_count: { ...int, description: 'Every span stored for it, each layer of a call one (what its span pages list)' }, total_tokens: int,
    last_seen_at: time, spans_expired_at: nullable(time), open_findings: int, finding_count: int, final_output: any, run_start: any,
  }, { optional: ['final_output', 'run_start'] }),
  Span: object({ run_id: str, span_id: str, type: str, name: str, status: oneOf(['ok', 'error']) }),
  Finding: object({
    id: str, project: str, run_id: str, workflow: nullable(str), check_id: str, check_source: str, kind: str, title: str, guidance: str,
    action: oneOf(['flag', 'halt']), halt_suppressed: bool, group: nullable(str), priority: num, span_ids: arr(str), count: int,
    status: oneOf(['open', 'resolved']), state: str, quiet: bool, raised_at: time, updated_at: time, resolved_at: nullable(time),
    active_at: nullable(time), dismissed_at: nullable(time), dismissed_by: nullable(str), dismiss_note: nullable(str),
    quote: nullable(str), probability: nullable(num), confidence: nullable(str), answered_by: nullable(str),
  }),
  Problem: { allOf: [ref('Finding'), object({ related: arr(ref('Finding')) })] },
  RunDetail: object({
    run: ref('Run'), spans: arr(ref('Span')), spans_next_cursor: nullable(str), spans_cut_at_bytes: int, spans_since: str,
    // the run's newest 500 findings (findings_scope newest), or only those written since `since` (changed); findings_total: all of them
    findings: arr(ref('Finding')), findings_scope: oneOf(['newest', 'changed']), findings_total: int, problems: arr(ref('Problem')),
    not_checked: arr(object({ check_id: str, anchor: str, span_ids: arr(str), reason: nullable(str), at: time }, { closed: true })),
    questions_pending: int,
  }, { optional: ['spans_cut_at_bytes'] }),

  // --- sopops: procedures, releases, sessions (docs/procedures.md)
  Head: object({
    workspace: str, files: arr(object({ path: str, version: str, updated_at: time })), live_release: nullable(object({ id: str, number: int })),
    changed: arr(object({ path: str, change: oneOf(['added', 'changed', 'removed']) })), diff: str,
  }),
  Release: object({ id: str, number: int, live: bool, created_at: time, procedures: arr(object({ procedure_id: str, name: str, version: str, rules: arr(any) })), agents: arr(object({ agent: str, procedures: arr(str) })) }),
  ReleaseSummary: object({ id: str, number: int, live: bool, created_at: time, procedures: arr(object({ procedure_id: str, name: str, version: str, rule_count: int })), agent_count: int }),
  SessionRow: object({
    id: str, external_id: nullable(str), agent: nullable(str), status: oneOf(['queued', 'checked', 'failed']), result: nullable(oneOf(RESULTS)),
    checked_result: nullable(oneOf(RESULTS)), started_at: nullable(time), transcript_ref: nullable(str), received_at: time, checked_at: nullable(time), error: nullable(str),
  }),
  Session: { allOf: [ref('SessionRow'), object({ checks: arr(object({ procedure_id: str, procedure_name: str, result: nullable(oneOf(RESULTS)), rules: arr(any) })) })] },
  /** A session as received: turns keep every field they were sent with, tool calls too. */
  SessionTranscript: object({
    id: str, external_id: str, turns: arr(object({ index: int, role: oneOf(['user', 'agent']), text: str })),
    tool_calls: arr(object({ turn: int, tool: str, input: any, output: any, error: nullable(str) }, { optional: ['input', 'output', 'error'] })),
    transcript_expired_at: nullable(time),
  }),

  // --- review (docs/review.md): strict, every field named
  Verdict: object({ verdict: oneOf(VERDICTS), note: nullable(str), reviewer: nullable(str), created_at: time, inherited: bool, carried_over: bool }, { closed: true }),
  FixRelease: nullable(object({ id: str, number: int }, { closed: true })),
  Theme: nullable(object({ id: str, name: str }, { closed: true })),
  Window: object({ from: time, to: time }, { closed: true }),
  Rule: object({ rule_id: str, current_rule_id: str, kind: oneOf(RULE_KINDS), index: int, text: str, label: str }, { closed: true }),
  ExampleFinding: object({
    finding_id: str, session_id: str, external_id: str, started_at: nullable(time), status: str, excerpt: str, evidence: arr(any), suppressed: bool,
  }, { closed: true }),
  /** Suggestions are served as they land: their shape is described on their own pages. */
  // A suggestion (docs/contracts.md section 11): lists and the review queue give the summary; one suggestion adds the rest.
  Suggestion: object(
    {
      id: str, pattern_id: str, procedure_id: str, path: str, rule_id: str, verdict: oneOf(['real', 'acceptable', 'sop_wrong']),
      status: oneOf(['generating', 'proposed', 'failed', 'applied', 'pr_open', 'merged', 'dismissed']), prompt_version: str, model: nullable(str),
      rationale: nullable(str), pr_url: nullable(str), error: nullable(str), note: nullable(str), reviewer: nullable(str),
      rewrite_of: nullable(str), rewritten_as: nullable(str), created_at: time, applied_at: nullable(time), pr_opened_at: nullable(time),
      merged_at: nullable(time), merge_commit_sha: nullable(str), dismissed_at: nullable(time), released_in: nullable(object({ id: str, number: int })), released_at: nullable(time),
      freshness: nullable(oneOf(['current', 'merges', 'conflict'])),
      pattern: nullable(object({ id: str, name: str, kind: str, procedure_name: str, rule_text: str })), verdict_note: nullable(str), base_version: str,
      old_text: str, new_text: nullable(str), plan: nullable(object({ agents: arr(object({ agent: str, added: int, removed: int, diff: str })) })),
      changes_since: nullable(str), merged_into_version: nullable(str),
      since_written: nullable(object({
        state: oneOf(['current', 'merges', 'conflict']), head_version: nullable(str), changes: str, merged_text: nullable(str),
        conflicts: arr(object({ line: int, base: arr(str), current: arr(str), suggested: arr(str) })), issues: arr(object({ file: str, line: int, message: str })), reason: nullable(str),
      })),
    },
    { optional: ['pattern', 'verdict_note', 'base_version', 'old_text', 'new_text', 'plan', 'changes_since', 'merged_into_version', 'since_written'], closed: true },
  ),
  PatternSummary: object({
    id: str, kind: oneOf(PATTERN_KINDS), parent_id: nullable(str), name: str, named_by: oneOf(['rule_text', 'model']), description: nullable(str),
    procedure_id: str, procedure_name: str, rule: ref('Rule'), theme: ref('Theme'), findings: int, suppressed: int, sessions: int,
    first_seen: nullable(time), last_seen: nullable(time), clustered_at: nullable(time), retired_at: nullable(time),
    verdict: nullable(ref('Verdict')), review_state: oneOf(STATES), review_reason: nullable(oneOf(REASONS)), review_note: str,
    fix_release: ref('FixRelease'), fix_sessions: nullable(int), fix_sessions_needed: nullable(int),
  }, { closed: true }),
};

const review = {
  verdict: nullable(ref('Verdict')), review_state: oneOf(STATES), review_reason: nullable(oneOf(REASONS)), review_note: str,
  fix_release: ref('FixRelease'), fix_sessions: nullable(int), fix_sessions_needed: nullable(int),
};

schemas.QueueItem = object({
  pattern_id: str, kind: oneOf(PATTERN_KINDS), name: str, label: str, theme: ref('Theme'), procedure_id: str, procedure_name: str, rule_id: str,
  rule_text: str, sessions: int, examples: arr(ref('ExampleFinding')), new_findings: int, suppressed_count: int, suggestion: nullable(ref('Suggestion')), ...review,
}, { closed: true });
schemas.ReviewQueue = object({ items: arr(ref('QueueItem')), total: int, counts: record(STATES, int), clustered_at: nullable(time) }, { closed: true });
schemas.PatternsList = object({
  items: arr({ allOf: [ref('PatternSummary')], properties: { sub_patterns: arr(ref('PatternSummary')) }, required: ['sub_patterns'] }),
  next_cursor: nullable(str), clustered_at: nullable(time), window: ref('Window'),
}, { closed: true });
const summaryProps = (schemas.PatternSummary as { properties: Record<string, Schema> }).properties;
schemas.Pattern = object({
  ...Object.fromEntries(Object.entries(summaryProps).filter(([k]) => k !== 'sessions')),
  session_count: int,
  sessions: arr(object({
    session_id: str, external_id: str, started_at: nullable(time), finding_id: str, status: str, suppressed: bool,
    override: nullable(object({ correct: bool, note: nullable(str), reviewer: nullable(str) }, { closed: true })),
  }, { closed: true })),
  verdict_history: arr(ref('Verdict')), suppressed_count: int, failure_modes: arr(ref('PatternSummary')),
  wordings: arr(object({ rule_id: str, text: str, findings: int, last_seen: nullable(time) }, { closed: true })),
  example_phrasings: arr(str), suggestions: arr(ref('Suggestion')), window: ref('Window'),
}, { closed: true });
schemas.VerdictGiven = object({
  pattern_id: str, verdict: oneOf(VERDICTS), note: nullable(str), reviewer: nullable(str), created_at: time, inherited: bool, carried_over: bool,
  suppressed_count: int, review_state: oneOf(STATES), review_reason: nullable(oneOf(REASONS)), review_note: str,
  suggestion: nullable(ref('Suggestion')), suggestion_note: str,
}, { closed: true, optional: ['suggestion_note'] });
schemas.OverrideGiven = object({
  finding_id: str, session_id: str, procedure_id: str, rule_id: str, correct: bool, note: nullable(str), reviewer: nullable(str), created_at: time,
  suppressed: bool, check_result: nullable(oneOf(RESULTS)), session_result: nullable(oneOf(RESULTS)),
}, { closed: true });
const resultCounts = record(RESULTS, int);
schemas.Insights = object({
  window: ref('Window'),
  filters: object({ procedure: nullable(str), rule: nullable(str) }, { closed: true }),
  tiles: object({ sessions: int, results: resultCounts, follow_rate: nullable(num), findings: int, suppressed: int }, { closed: true }),
  scoreboard: arr(object({ procedure_id: str, procedure_name: str, sessions: int, results: resultCounts, follow_rate: nullable(num), weekly_follow_rate: arr(nullable(num)), findings: int, suppressed: int }, { closed: true })),
  weeks: arr({ type: 'string', format: 'date' }),
  ladder: arr(object({
    pattern_id: str, procedure_id: str, rule_id: str, label: str, name: str, text: str, findings: int, suppressed: int, sessions: int, rate: nullable(num), trend: arr(int),
  }, { closed: true })),
}, { closed: true });
const compareSide = object({ sessions: int, results: resultCounts, follow_rate: nullable(num), findings: int, suppressed: int, rate: nullable(num) }, { closed: true });
const compareRule = object({ findings: int, suppressed: int, rate: nullable(num) }, { closed: true });
const releaseBrief = object({ id: str, number: int, created_at: time }, { closed: true });
schemas.ReleaseCompare = object({
  from: releaseBrief,
  to: releaseBrief,
  filters: object({ procedure: nullable(str) }, { closed: true }),
  procedures: arr(object({
    procedure_id: str, procedure_name: str, in_from: bool, in_to: bool, from: compareSide, to: compareSide,
    rules: arr(object({ pattern_id: str, rule_id: str, label: str, name: str, text: str, from: compareRule, to: compareRule }, { closed: true })),
  }, { closed: true })),
}, { closed: true });
schemas.Renamed = object({ renamed: int, failed: int, reason: nullable(str) }, { closed: true });
schemas.RegressionLine = object({
  session_id: str, external_id: str, transcript_ref: nullable(str), procedure_id: str, rule_id: str, rule_kind: oneOf(RULE_KINDS), rule_text: str,
  verdict: oneOf(VERDICTS), observed_status: str, expected_status: oneOf(['done', 'ok', 'present']), expect: oneOf(['agent', 'checker']),
}, { closed: true });

// --- parameters and operations

type In = 'path' | 'query';
interface Param {
  name: string;
  in: In;
  required?: boolean;
  schema: Schema;
  description?: string;
  explode?: boolean;
}
const p = (name: string, where: In, schema: Schema = str, description?: string): Param => ({ name, in: where, required: where === 'path', schema, ...(description ? { description } : {}) });
const project = p('project', 'path', str, 'A project (its API key opens it).');
const ws = p('ws', 'path', str, 'A workspace: the project of the same name, with the same API keys.');
const id = (what: string) => p('id', 'path', str, what);
/** limit (1 to `max`, default `dflt`) and cursor. */
const pageOf = (dflt: number, max: number) => [
  p('limit', 'query', { type: 'integer', minimum: 1, maximum: max, default: dflt }),
  p('cursor', 'query', str, 'next_cursor of the previous page of this list (another list\'s is 400 invalid_cursor)'),
];
const page = pageOf(50, 500);
/** How a list gives its spans' input and output (SpanBodies). */
const bodies = p('bodies', 'query', oneOf(['full', 'preview']), 'full (the default): input and output as stored; preview: each longer than 200 characters cut to its first 200 (a value that is not a string: of its JSON text), the span\'s `truncated` naming each field cut with its full length in characters. GET .../spans/{span_id} gives one span whole.');
const window = [
  p('days', 'query', { type: 'integer', minimum: 1, maximum: 3650 }, 'Days back from `to` (default 365).'),
  p('from', 'query', str, 'ISO-8601; wins over days.'),
  p('to', 'query', str, 'ISO-8601 (default now).'),
  p('procedure', 'query', str, 'A procedure id.'),
  p('rule', 'query', str, "A rule id: its lineage (every wording it has had)."),
];

const json = (schema: Schema, description = 'OK') => ({ description, content: { 'application/json': { schema } } });
/** What any route with a key may answer besides its own: bad input, no key, another project's key, no such thing, a body refused, a fault. */
const errors = {
  '400': json(ref('Error'), 'Bad input: the error names the parameter or field'),
  '401': json(ref('Error'), 'No API key, or an unknown one (unauthorized)'),
  '403': json(ref('Error'), 'The key opens another project or workspace, or may only send spans (an ingest key) (forbidden)'),
  '404': json(ref('Error'), 'Not found'),
  '413': json(ref('Error'), 'The body is over its bound (payload_too_large)'),
  '415': json(ref('Error'), 'A body of a type the route does not read (unsupported_media_type)'),
  '500': json(ref('Error'), 'A fault of neatroots (internal; logged)'),
  '503': json(
    ref('Error'),
    'The distributed deployment: a service the api asks cannot answer right now (unavailable): restarting, its database away, or refusing the api for NEATROOTS_INTERNAL_TOKEN; with Retry-After: 5. Or a part this api is not set up to serve (not_served: no review side, question service or authoring side in its configuration): no Retry-After, asking again gets the same',
  ),
  '504': json(ref('Error'), 'The distributed deployment: the review service took longer than the api waits for this request (review_timeout; the message says how long): no Retry-After, the same request is likely as slow again'),
};

interface Op {
  summary: string;
  params?: Param[];
  body?: Schema;
  ok?: { status?: string; schema?: Schema; type?: string; description?: string };
  extra?: Record<string, unknown>;
}

function op(tag: string, o: Op) {
  const open = tag === 'health' || tag === 'meta';
  const status = o.ok?.status ?? '200';
  const content = o.ok?.schema ? { [o.ok.type ?? 'application/json']: { schema: o.ok.schema } } : undefined;
  return {
    tags: [tag],
    summary: o.summary,
    ...(o.params?.length ? { parameters: o.params } : {}),
    ...(o.body ? { requestBody: { required: true, content: { 'application/json': { schema: o.body } } } } : {}),
    // /healthz and this document take no key, no parameter and no body: they answer 200.
    responses: { [status]: { description: o.ok?.description ?? 'OK', ...(content ? { content } : {}) }, ...(open ? {} : errors), ...(o.extra ?? {}) },
    ...(open ? { security: [] } : {}),
  };
}

/** A check given as a check file's text ({yaml}) or as the same fields in JSON ({check}). */
const checkBody: Schema = { type: 'object', properties: { yaml: str, check: { type: 'object' }, by: oneOf(['app', 'cli']) } };

const P = '/v1/projects/{project}';
const W = '/v1/workspaces/{ws}';

const paths: Record<string, Record<string, unknown>> = {
  '/healthz': { get: op('health', { summary: 'Liveness', ok: { schema: object({ status: oneOf(['ok']) }) } }) },
  '/openapi.json': { get: op('meta', { summary: 'This document', ok: { schema: { type: 'object' } } }) },
  // MCP's streamable HTTP transport (JSON-RPC messages; GET and DELETE answer 405: stateless).
  '/v1/mcp': {
    post: op('mcp', { summary: 'The MCP tools for coding agents (create_check, preview_check, list_checks, list_findings, get_run), in the key\'s project', body: { type: 'object', description: 'A JSON-RPC message' }, ok: { schema: { type: 'object' } } }),
    // Streamable HTTP's GET (a stream) and DELETE (a session's end): this server is stateless.
    get: op('mcp', { summary: 'No stream to open: the MCP server is stateless (405, Allow: POST)', ok: { status: '405', description: 'Method not allowed: POST JSON-RPC messages', schema: { type: 'object' } } }),
    delete: op('mcp', { summary: 'No session to end: the MCP server is stateless (405, Allow: POST)', ok: { status: '405', description: 'Method not allowed: POST JSON-RPC messages', schema: { type: 'object' } } }),
  },

  [`${P}/runs`]: {
    get: op('runs', {
      summary: 'Runs, newest first by start (a run whose start moved earlier between two page reads comes again on a later page: key runs by run_id)',
      params: [project, p('workflow', 'query'), p('session_id', 'query'), p('end_status', 'query', oneOf(['ok', 'error', 'no_output', 'interrupted', 'running'])), p('has_open_findings', 'query', bool), p('from', 'query'), p('to', 'query'), ...page],
      ok: { schema: object({ runs: arr(ref('Run')), next_cursor: nullable(str) }) },
    }),
  },
  [`${P}/runs/{run_id}`]: {
    get: op('runs', {
      summary: 'A run with its first page of spans and its newest 500 findings (findings_total counts them all: the rest through GET findings?run_id=)',
      params: [project, p('run_id', 'path'), bodies, p('since', 'query', str, "spans_since of an earlier answer: the spans stored since (in the order they were stored) instead of the first page, the run as it is now, and only the findings written since (findings_scope changed; newest when more than 500 were) (a page following a run still going)")],
      ok: { schema: ref('RunDetail') },
    }),
  },
  [`${P}/runs/{run_id}/spans`]: {
    get: op('runs', {
      summary: "A run's spans, page by page",
      params: [project, p('run_id', 'path'), ...pageOf(500, 2000), bodies],
      ok: { schema: object({ spans: arr(ref('Span')), next_cursor: nullable(str), cut_at_bytes: int, since: str }, { optional: ['cut_at_bytes', 'since'] }) },
    }),
  },
  [`${P}/runs/{run_id}/spans/{span_id}`]: { get: op('runs', { summary: 'One span of the run, whole (404 when the run has no such span)', params: [project, p('run_id', 'path'), p('span_id', 'path')], ok: { schema: object({ span: ref('Span') }) } }) },
  [`${P}/findings`]: {
    get: op('findings', {
      summary: 'Findings as problems (grouped incidents)',
      params: [project, p('state', 'query'), p('run_id', 'query'), p('include_quiet', 'query', bool), ...page],
      ok: { schema: object({ findings: arr(ref('Problem')), next_cursor: nullable(str) }) },
    }),
  },
  [`${P}/findings/{id}/dismiss`]: { post: op('findings', { summary: 'Dismiss a finding', params: [project, id('A finding id')], body: object({ by: str, note: str }, { optional: ['by', 'note'], closed: true }), ok: { schema: object({ finding: ref('Finding') }) } }) },
  [`${P}/findings/{id}/reopen`]: { post: op('findings', { summary: 'Reopen a dismissed finding', params: [project, id('A finding id')], ok: { schema: object({ finding: ref('Finding') }) } }) },
  [`${P}/checks/stats`]: { get: op('checks', { summary: 'Per check: findings, dismissals, precision', params: [project], ok: { schema: object({ checks: arr(object({ check_id: str })) }) } }) },
  [`${P}/checks/disabled`]: { get: op('checks', { summary: 'Checks disabled for a slow pattern', params: [project], ok: { schema: object({ checks: arr(object({ check_id: str })) }) } }) },
  [`${P}/models/agreement`]: { get: op('models', { summary: "Per question: LLM answers and the fast classifier's agreement", params: [project, p('check_id', 'query')], ok: { schema: object({ questions: arr(object({ check_id: str, question_key: str, ask: str })) }) } }) },
  [`${P}/checks`]: {
    get: op('checks', { summary: 'Every check in effect in the project, and database checks that are not', params: [project], ok: { schema: object({ checks: arr(object({ id: str, kind: str, source: str, overrides: arr(object({ source: str, file: str }, { optional: ['file'] })) }, { optional: ['overrides'] })) }) } }),
    post: op('checks', { summary: 'Save a database check (created or replaced); 400 invalid_check with each problem', params: [project], body: checkBody, ok: { schema: object({ check: any, created: bool, warnings: arr(any) }) } }),
  },
  [`${P}/checks/draft`]: { post: op('checks', { summary: 'Draft a check from a plain-language concern (not saved)', params: [project], body: object({ concern: str, workflow: str }, { optional: ['workflow'] }), ok: { schema: object({ kind: str, check: any, yaml: str, warnings: arr(any) }) } }) },
  [`${P}/checks/preview`]: { post: op('checks', { summary: "What a check would flag on the project's recent runs (nothing saved)", params: [project], body: { ...checkBody, properties: { ...(checkBody.properties as object), runs: int, model_calls: int, time_ms: int } }, ok: { schema: object({ check: any, runs: any, model_calls: any, flagged: arr(any), not_checked: arr(any), bounds: str }) }, extra: { '429': json(ref('Error'), 'Two previews are already running on this server (too_many_previews): retry when one has finished') } }) },
  [`${P}/checks/validate`]: { post: op('checks', { summary: 'Validate a check as save would (400 invalid_check with problems; nothing saved or run)', params: [project], body: checkBody, ok: { schema: object({ check_id: str, warnings: arr(str) }) } }) },
  [`${P}/checks/{id}`]: {
    get: op('checks', { summary: 'One database check', params: [project, id('A check id')], ok: { schema: object({ check: any }) } }),
    put: op('checks', { summary: "Replace the project's database check", params: [project, id('A check id')], body: checkBody, ok: { schema: object({ check: any }) } }),
    delete: op('checks', { summary: 'Delete a database check (409 for one from a file or the library)', params: [project, id('A check id')], ok: { schema: object({ deleted: str }) } }),
  },
  [`${P}/checks/{id}/halt`]: { post: op('checks', { summary: 'Switch a rule of yours to action: halt', params: [project, id('A check id')], body: object({ by: str }, { optional: ['by'] }), ok: { schema: object({ check: any }) } }) },
  [`${P}/dead-letters`]: { get: op('operations', { summary: 'Messages set aside', params: [project, ...page], ok: { schema: { type: 'object' } } }) },

  [`${W}/head`]: {
    get: op('procedures', { summary: "Head's files and the unpublished changes", params: [ws], ok: { schema: ref('Head') } }),
    put: op('procedures', { summary: 'Replace head with a whole procedures folder (422 with sopc issues)', params: [ws], body: object({ files: arr(object({ path: str, text: str })) }, { closed: true }), ok: { schema: object({ files: arr(object({ path: str, version: str })) }) } }),
  },
  [`${W}/head/{path}`]: {
    get: op('procedures', { summary: 'One file at head: its text and version (404 when head has no such file)', params: [ws, p('path', 'path')], ok: { schema: object({ path: str, text: str, version: str, updated_at: time }) } }),
    put: op('procedures', { summary: 'Save one file at head (the body is the file)', params: [ws, p('path', 'path')], ok: { schema: object({ path: str, version: str }) } }),
    delete: op('procedures', { summary: 'Remove one file from head', params: [ws, p('path', 'path')], ok: { schema: object({ path: str, deleted: bool }) } }),
  },
  [`${W}/releases`]: {
    post: op('procedures', { summary: 'Publish head as a release', params: [ws], ok: { status: '201', schema: ref('Release') } }),
    get: op('procedures', {
      summary: 'Releases, newest first: whole, or with fields=summary each without its rules and agents (counted); every one, or pages of limit (1 to 500) after cursor',
      params: [
        ws,
        p('fields', 'query', oneOf(['summary']), 'summary: each procedure as procedure_id, name, version and rule_count, and agent_count, without the rules and agents themselves'),
        p('limit', 'query', { type: 'integer', minimum: 1, maximum: 500 }, 'A page of this many (none: every release).'),
        p('cursor', 'query', str, 'next_cursor of the previous page of this list (another list\'s is 400 invalid_cursor)'),
      ],
      ok: { schema: object({ items: arr({ anyOf: [ref('Release'), ref('ReleaseSummary')] }), next_cursor: nullable(str) }) },
    }),
  },
  [`${W}/releases/{id}`]: { get: op('procedures', { summary: 'A release by id, number or "live"', params: [ws, id('A release id, number, or live')], ok: { schema: ref('Release') } }) },
  [`${W}/sessions`]: {
    post: op('sessions', { summary: 'Send a session to be checked', params: [ws], body: { type: 'object' }, ok: { status: '202', schema: object({ id: str, external_id: str, status: oneOf(['queued', 'unchanged']) }) } }),
    get: op('sessions', {
      summary: 'Sessions, newest received first',
      params: [ws, p('agent', 'query'), p('procedure', 'query'), p('result', 'query', oneOf(RESULTS)), p('release', 'query'), p('rule', 'query'), p('from', 'query'), p('to', 'query'), ...page],
      ok: { schema: object({ items: arr(ref('SessionRow')), next_cursor: nullable(str) }) },
    }),
  },
  [`${W}/sessions/{id}`]: { get: op('sessions', { summary: 'A session with its checks', params: [ws, id('A session id')], ok: { schema: ref('Session') } }) },
  [`${W}/sessions/{id}/recheck`]: {
    post: op('sessions', {
      summary: 'Check a session again as stored, its results replaced (one still queued: its check queued again)',
      params: [ws, id('A session id')],
      ok: { status: '202', schema: object({ id: str, external_id: str, status: oneOf(['queued']) }) },
      extra: { '409': json(ref('Error'), 'Its transcript was let go (transcript_expired): send the session again') },
    }),
  },
  [`${W}/sessions/{id}/transcript`]: {
    get: op('sessions', { summary: 'A session as received: its turns (numbered from 0) and tool calls', params: [ws, id('A session id')], ok: { schema: ref('SessionTranscript') } }),
  },

  [`${W}/review`]: {
    get: op('review', {
      summary: 'The review queue',
      params: [ws, { ...p('state', 'query', arr(oneOf(STATES)), 'Repeatable; default needs_review and regressed.'), explode: true }, p('limit', 'query', { type: 'integer', minimum: 1, maximum: 500 })],
      ok: { schema: ref('ReviewQueue') },
    }),
  },
  [`${W}/patterns`]: { get: op('review', { summary: 'Rule patterns with their failure modes, counted in the window, most findings first, a page at a time', params: [ws, ...window, ...pageOf(100, 500)], ok: { schema: ref('PatternsList') } }) },
  [`${W}/patterns/rename`]: { post: op('review', { summary: 'Name rule patterns with the reasoning model', params: [ws], body: object({ all: bool }, { optional: ['all'], closed: true }), ok: { schema: ref('Renamed') } }) },
  [`${W}/patterns/{id}`]: { get: op('review', { summary: 'One pattern', params: [ws, id('A pattern id'), ...window], ok: { schema: ref('Pattern') } }) },
  [`${W}/patterns/{id}/verdict`]: {
    post: op('review', {
      summary: "Give a pattern a verdict (appended; the latest is the pattern's)",
      params: [ws, id('A pattern id')],
      body: object({ verdict: oneOf(VERDICTS), note: str, reviewer: str, suggest: bool }, { optional: ['note', 'reviewer', 'suggest'], closed: true }),
      ok: { status: '201', schema: ref('VerdictGiven') },
    }),
  },
  [`${W}/patterns/{id}/regression`]: {
    get: op('review', {
      summary: 'A regression set: one JSON line per finding in the pattern (409 without a verdict)',
      params: [ws, id('A pattern id')],
      ok: { type: 'application/x-ndjson', schema: ref('RegressionLine'), description: 'One RegressionLine per line' },
      extra: { '409': json(ref('Error'), 'The pattern has no verdict') },
    }),
  },
  [`${W}/findings/{id}/override`]: {
    post: op('review', {
      summary: 'Say whether the checker got one finding right',
      params: [ws, id('A finding id')],
      body: object({ correct: bool, note: str, reviewer: str }, { optional: ['note', 'reviewer'], closed: true }),
      ok: { status: '201', schema: ref('OverrideGiven') },
    }),
  },
  [`${W}/patterns/recluster`]: {
    post: op('review', {
      summary: 'Assign waiting findings, split due rules into failure modes, regroup themes (waits for the models)',
      params: [ws],
      body: object({ procedure: str, rule: str, force: bool }, { optional: ['procedure', 'rule', 'force'], closed: true }),
      ok: { schema: object({ assigned: int, reclustered: int, themed: int, reason: nullable(str) }) },
      extra: { '504': json(ref('Error'), 'Still running after 10 minutes (still_running): the run goes on') },
    }),
  },

  [`${W}/calibrate`]: {
    post: op('review', {
      summary: "Fit the check thresholds to the reviewers' labels (verdicts and overrides)",
      params: [ws],
      body: object({ procedure: str, dry_run: bool }, { optional: ['procedure', 'dry_run'], closed: true }),
      ok: { schema: object({ workspace: str, dry_run: bool, procedures: arr(object({ procedure_id: str })) }) },
      extra: { '504': json(ref('Error'), 'Still running after 25 seconds, or no process took the job (still_running): the fit goes on') },
    }),
  },

  [`${W}/patterns/{id}/suggest`]: {
    post: op('suggestions', { summary: "(Re)generate a suggestion for the pattern's verdict (409 unless real, acceptable or sop_wrong)", params: [ws, id('A pattern id')], body: object({ reviewer: str }, { optional: ['reviewer'] }), ok: { status: '202', schema: ref('Suggestion') } }),
  },
  [`${W}/suggestions`]: {
    get: op('suggestions', {
      summary: 'Suggestions, newest first',
      params: [ws, { ...p('status', 'query', arr(str), 'Repeatable.'), explode: true }, p('pattern', 'query'), p('limit', 'query', { type: 'integer', minimum: 1, maximum: 500, default: 500 }), p('before', 'query', str, 'The next page: the suggestions after this one (the last of the page before).')],
      ok: { schema: object({ items: arr(ref('Suggestion')) }) },
    }),
  },
  [`${W}/suggestions/{id}`]: { get: op('suggestions', { summary: 'One suggestion, with its texts, plan and freshness', params: [ws, id('A suggestion id')], ok: { schema: ref('Suggestion') } }) },
  [`${W}/suggestions/{id}/apply`]: { post: op('suggestions', { summary: 'Apply: a pull request with a GitHub connection, else a draft at head (409 unless proposed and not in conflict)', params: [ws, id('A suggestion id')], body: object({ reviewer: str }, { optional: ['reviewer'] }), ok: { schema: ref('Suggestion') } }) },
  [`${W}/suggestions/{id}/rewrite`]: { post: op('suggestions', { summary: 'A new suggestion against the file as it is now; the old one dismissed (409 unless proposed)', params: [ws, id('A suggestion id')], body: object({ reviewer: str }, { optional: ['reviewer'] }), ok: { status: '202', schema: ref('Suggestion') } }) },
  [`${W}/suggestions/{id}/dismiss`]: { post: op('suggestions', { summary: 'Dismiss a suggestion', params: [ws, id('A suggestion id')], body: object({ note: str, reviewer: str }, { optional: ['note', 'reviewer'] }), ok: { schema: ref('Suggestion') } }) },
  [`${W}/github`]: {
    put: op('suggestions', { summary: "Connect the workspace's GitHub repository (the token is never answered back)", params: [ws], body: { type: 'object' }, ok: { schema: { type: 'object' } } }),
    get: op('suggestions', { summary: 'The GitHub connection', params: [ws], ok: { schema: { type: 'object' } } }),
    delete: op('suggestions', { summary: 'Remove the GitHub connection', params: [ws], ok: { schema: { type: 'object' } } }),
  },

  [`${W}/rules/{rule_id}/lineage`]: {
    get: op('lineage', { summary: "A rule's wordings by release (one that came back, again at that release)", params: [ws, p('rule_id', 'path'), p('procedure', 'query', str, 'Only when the id is in more than one procedure.')], ok: { schema: object({ procedure_id: str, rule_id: str, lineage_id: str, rules: arr(object({ rule_id: str, text: str })) }) } }),
    post: op('lineage', { summary: 'Link the rule to the one it replaced, by hand (409 for a cycle)', params: [ws, p('rule_id', 'path')], body: object({ previous_rule_id: str, procedure_id: str }, { optional: ['procedure_id'] }), ok: { schema: { type: 'object' } } }),
    delete: op('lineage', { summary: 'The rule is a new rule (its findings move to a pattern of their own)', params: [ws, p('rule_id', 'path'), p('procedure', 'query')], ok: { schema: { type: 'object' } } }),
  },
  [`${W}/rules/lineage/rebuild`]: { post: op('lineage', { summary: "Recompute every release's matched and suggestion links (manual rows stay)", params: [ws], ok: { schema: object({ workspace: str, links: int, procedures: int }) } }) },

  [`${W}/insights`]: { get: op('review', { summary: 'How well procedures are followed in the window', params: [ws, ...window], ok: { schema: ref('Insights') } }) },
  [`${W}/insights/compare`]: {
    get: op('review', {
      summary: 'Two releases side by side: each procedure\'s sessions and follow rate, each rule pattern\'s findings and their rate (409 no_earlier_release without from on the first release)',
      params: [ws, p('from', 'query', str, 'A release id, number or live; default: the release before `to`'), p('to', 'query', str, 'A release id, number or live; default: live'), p('procedure', 'query')],
      ok: { schema: ref('ReleaseCompare') },
      extra: { '409': json(ref('Error'), 'Without from, `to` is the first release (no_earlier_release)') },
    }),
  },
};

export type OpenApiDocument = ReturnType<typeof openApiDocument>;

export function openApiDocument() {
  return {
    openapi: '3.1.0',
    info: {
      title: 'neatroots API',
      version: '1',
      description: 'The REST API of neatroots (live checks of agent runs) and sopops (sessions checked against procedures, review, Insights). Every call but /healthz and this document takes an API key in x-api-key.',
    },
    servers: [{ url: '/' }],
    security: [{ apiKey: [] }],
    paths,
    components: { schemas, securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' } } },
  };
}
