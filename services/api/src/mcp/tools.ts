import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { ErrorCode, ListToolsRequestSchema, type CallToolResult, type JSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import { cursorJson, FINDING_STATE_FILTERS, MAX_PAGE, type FindingRecord, type Problem, type ReviewQueries, type SpanPage } from '@neatroots/store';
import { AuthoringError, type Authoring, type CheckSubmission, type ListedCheck } from '../authoring';
import { AnswerTooLargeError, ApiError, NOT_SERVED, UnavailableError, unavailableOf } from '../errors';
import { MAX_BODY_BYTES } from '../body';
import { MAX_PREVIEW_MODEL_CALLS, MAX_PREVIEW_RUNS, MCP_PREVIEW_MS } from '../limits';

/**
 * The MCP tools coding agents write checks with (the seed: "Coding agents: create_check and
 * preview_check over MCP"), scoped to the one project the API key opens. They call the same
 * Authoring as the REST endpoints, as author `agent`: an agent saves flag rules and
 * questions, never a halt rule (it cannot create one, turn a check into one, or change a
 * person's check). Every refusal is a tool error (isError) whose text says what is wrong and
 * where, so the agent can fix its call.
 *
 * Answers are bounded: MCP clients cap what a tool may answer (Claude Code at 25,000 tokens,
 * and it sets one over 50,000 characters aside in a file), so a run's spans come a page at a
 * time (SPANS_PAGE by default; get_run asks the review service for those only, and a page
 * stops at the store's SPAN_PAGE_BYTES, `cut_at_bytes`), a long field is cut to its first
 * FIELD_CHARS characters (the record's `truncated` says how long it was), a run's findings
 * come RUN_FINDINGS of each list with their totals, a problem's related RELATED, checks are
 * listed without their YAML, and answers are compact JSON. A null argument is one left out (models send null for the
 * optional ones they do not use).
 */

/** Spans in a page of get_run and list_spans by default, and at most. */
export const SPANS_PAGE = 20;
export const MAX_SPANS_PAGE = 500;
/** Findings in a page of list_findings by default (GET .../findings: 50). */
export const FINDINGS_PAGE = 20;
/**
 * A run's findings, problems and questions not checked get_run gives (the first, oldest
 * first, of the run page's newest 500 findings), with how many there are: a run of 2,000 slow
 * tool calls has 2,000 findings (list_findings with run_id pages through them).
 */
export const RUN_FINDINGS = 10;
/**
 * A problem's related findings an answer gives (the first): a group's problem holds every
 * finding of the group's checks in the run, one a span for a check like slow-tool-call.
 */
export const RELATED = 5;
/**
 * A preview's flagged runs an answer lists (the newest; runs.flagged counts them all), and the
 * findings it gives of each (the first, with findings_total): a slow rule previewed on 20 runs
 * was 572,923 characters, one finding on every slow call. 20 runs of 3 findings of about 450
 * characters stay under about 30,000.
 */
export const PREVIEW_RUNS = 20;
export const PREVIEW_FINDINGS = 3;
/** Checks in a page of list_checks by default, and at most (1,000 checks were 502,474 characters in one answer). */
export const CHECKS_PAGE = 50;
export const MAX_CHECKS_PAGE = 200;
/** Where a check comes from: list_checks' `source` filter. */
const CHECK_SOURCES = ['library', 'user', 'project', 'database'] as const;
/** Characters a long field keeps by default (max_chars), and the most a call may ask for. */
export const FIELD_CHARS = 500;
export const MAX_FIELD_CHARS = 100_000;

/** The fields of each record that can be long, cut to max_chars. */
const SPAN_TEXT = ['name', 'tool', 'model', 'input', 'output', 'error', 'attributes'] as const;
const RUN_TEXT = ['final_output', 'run_start'] as const;
const FINDING_TEXT = ['title', 'guidance', 'quote', 'dismiss_note'] as const;
const CHECK_TEXT = ['title', 'error'] as const;

const CHECK_INPUT = {
  yaml: { type: 'string', description: 'The check as YAML (one check: id, kind, title, rule or ask, ...). Give yaml or check.' },
  check: { type: 'object', description: 'The check as a JSON object, the same fields as the YAML. Give yaml or check.' },
} as const;

const MAX_CHARS_INPUT = {
  type: 'integer',
  minimum: 1,
  maximum: MAX_FIELD_CHARS,
  description: `Characters each long field (a span's name, tool, model, input, output, error, attributes; the run's final_output; a finding's guidance, quote) keeps (default ${FIELD_CHARS}); a longer one is cut and the record's truncated names it with its full length.`,
} as const;

export const MCP_TOOLS = [
  {
    name: 'create_check',
    description:
      'Saves a check in this neatroots project: a rule (kind: rule; code, every span) or a question (kind: yes_no, choice or score; answered by a model). ' +
      'It takes effect at once. Agents may save flag rules and questions, not halt rules (action: halt is refused; a person switches a rule to halt). ' +
      'Saving an id you saved before replaces it; a check a person wrote cannot be changed. Preview it first with preview_check. ' +
      'The answer has the saved check and warnings (a question about the answer that cannot see it: use scope: trace and evidence: { final_output: true }).',
    inputSchema: { type: 'object', properties: CHECK_INPUT, additionalProperties: false },
  },
  {
    name: 'preview_check',
    description:
      "Shows which of this project's recent runs a check would flag, with the findings it would raise, without saving it: the runs are replayed through the real rule engine and question path. " +
      `Bounded in runs and model calls, and answers within ${MCP_PREVIEW_MS / 1000} s (runs it did not reach are listed as not checked); the answer says what it covered. ` +
      `It lists the ${PREVIEW_RUNS} newest flagged runs (runs.flagged counts them all), each with its first ${PREVIEW_FINDINGS} findings (findings_total: how many), long fields cut. ` +
      'Preview on a run that has the problem and one that does not.',
    inputSchema: {
      type: 'object',
      properties: {
        ...CHECK_INPUT,
        runs: { type: 'integer', minimum: 1, maximum: MAX_PREVIEW_RUNS, description: 'How many recent runs (default 20).' },
        model_calls: { type: 'integer', minimum: 1, maximum: MAX_PREVIEW_MODEL_CALLS, description: 'Model calls a question may make (default 20).' },
      },
      additionalProperties: false,
    },
  },
  {
    name: 'list_checks',
    description:
      'Lists the checks in effect in this project (library, files, database), with kind, action, source and who wrote database checks; without their YAML (get_check has it). ' +
      `By id, ${CHECKS_PAGE} a page by default; next_cursor goes on, total counts them all.`,
    inputSchema: {
      type: 'object',
      properties: {
        source: { type: 'string', enum: [...CHECK_SOURCES], description: 'Only the checks from here: library, user (~/.neatroots/checks), project (.neatroots/checks) or database (saved through the API, MCP or the app).' },
        limit: { type: 'integer', minimum: 1, maximum: MAX_CHECKS_PAGE, description: `Checks in the page (default ${CHECKS_PAGE}).` },
        cursor: { type: 'string', description: 'next_cursor of the page before.' },
      },
      additionalProperties: false,
    },
  },
  {
    name: 'get_check',
    description: 'One check of this project by id, with its YAML when it is a database check.',
    inputSchema: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'], additionalProperties: false },
  },
  {
    name: 'list_findings',
    description: `Lists this project's findings (problems), newest first, ${FINDINGS_PAGE} a page by default; next_cursor goes on. A problem lists its first ${RELATED} related findings (truncated.related: how many).`,
    inputSchema: {
      type: 'object',
      properties: {
        state: { type: 'string', enum: [...FINDING_STATE_FILTERS], description: 'Default open; with run_id, all.' },
        run_id: { type: 'string', description: 'Only the findings of this run.' },
        include_quiet: { type: 'boolean', description: 'Also findings raised while their check was quiet (left out by default).' },
        limit: { type: 'integer', minimum: 1, maximum: MAX_PAGE, description: `Findings in the page (default ${FINDINGS_PAGE}).` },
        cursor: { type: 'string', description: 'next_cursor of the page before.' },
      },
      additionalProperties: false,
    },
  },
  {
    name: 'get_run',
    description:
      `One run of this project: the run, its first ${SPANS_PAGE} spans (spans_limit), and its first ${RUN_FINDINGS} findings, problems and questions not checked ` +
      `(findings_total, problems_total, not_checked_total count them all; list_findings with run_id pages through the problems; a problem lists its first ${RELATED} related findings). ` +
      'Long fields are cut (max_chars; truncated says how long they were). spans_next_cursor, when not null, goes to list_spans for the next spans ' +
      '(spans_cut_at_bytes: fewer spans than asked, their full text being that many bytes).',
    inputSchema: {
      type: 'object',
      properties: {
        run_id: { type: 'string' },
        spans_limit: { type: 'integer', minimum: 1, maximum: MAX_SPANS_PAGE, description: `Spans in the answer (default ${SPANS_PAGE}).` },
        max_chars: MAX_CHARS_INPUT,
      },
      required: ['run_id'],
      additionalProperties: false,
    },
  },
  {
    name: 'list_spans',
    description: `A page of a run's spans, in the order get_run gives them: pass get_run's spans_next_cursor, then each page's next_cursor (null on the last page). ${SPANS_PAGE} a page by default; long fields cut as in get_run; cut_at_bytes: the page holds fewer spans than asked, their full text being that many bytes.`,
    inputSchema: {
      type: 'object',
      properties: {
        run_id: { type: 'string' },
        limit: { type: 'integer', minimum: 1, maximum: MAX_SPANS_PAGE, description: `Spans in the page (default ${SPANS_PAGE}).` },
        cursor: { type: 'string', description: "get_run's spans_next_cursor, or next_cursor of the page before; none: the first page." },
        max_chars: MAX_CHARS_INPUT,
      },
      required: ['run_id'],
      additionalProperties: false,
    },
  },
] as const;

/** A call the tool refuses: its message goes back to the agent as the tool's error. */
class ToolInputError extends Error {}

type Args = Record<string, unknown>;

/** What a value is, for a message about a wrong one: "a number", "an array", ... */
function what(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'nothing';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return v ? 'a string' : 'an empty string';
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`;
}

function only(args: Args, allowed: readonly string[]): void {
  const unknown = Object.keys(args).filter((k) => !allowed.includes(k));
  if (unknown.length) throw new ToolInputError(`unknown argument ${unknown.join(', ')}; this tool takes ${allowed.join(', ') || 'none'}`);
}

/**
 * The most an argument of a tool call may have, in bytes (a string as UTF-8, anything else as
 * its JSON): the REST API's body bound, so a check's YAML saved over MCP is bounded as one saved
 * through the API. The request itself may be larger (MCP_BODY_BYTES, body.ts), so that an
 * argument past this bound is refused naming it, rather than the whole call as too large a body.
 */
export const MAX_ARGUMENT_BYTES = MAX_BODY_BYTES;

function bounded(args: Args): void {
  for (const [name, v] of Object.entries(args)) {
    if (v === null || v === undefined) continue;
    const bytes = Buffer.byteLength(typeof v === 'string' ? v : JSON.stringify(v) ?? '', 'utf8');
    if (bytes > MAX_ARGUMENT_BYTES) {
      throw new ToolInputError(`argument ${name} is ${bytes.toLocaleString('en-US')} bytes, over the limit of ${MAX_ARGUMENT_BYTES.toLocaleString('en-US')} bytes an argument may have; make it shorter`);
    }
  }
}

/**
 * The arguments without the null ones: a model's tool call often sends null for an optional
 * argument it does not use, which means the same as leaving it out.
 */
function given(args: Args): Args {
  return Object.fromEntries(Object.entries(args).filter(([, v]) => v !== null));
}

function submission(args: Args): CheckSubmission {
  const { yaml, check } = args;
  if (yaml !== undefined && check !== undefined) throw new ToolInputError('give the check once: yaml or check, not both');
  if (yaml !== undefined) {
    if (typeof yaml !== 'string' || !yaml.trim()) throw new ToolInputError(`yaml must be the text of one check (a non-empty string), got ${what(yaml)}`);
    return { yaml };
  }
  if (check !== undefined) {
    if (typeof check !== 'object' || Array.isArray(check)) {
      const hint = typeof check === 'string' ? '; give YAML text as yaml' : '';
      throw new ToolInputError(`check must be an object (the check's fields), got ${what(check)}${hint}`);
    }
    return { check: check as Record<string, unknown> };
  }
  throw new ToolInputError('the check is missing: give yaml (a string holding one check) or check (an object)');
}

function int(args: Args, name: string, max: number): number | undefined {
  const v = args[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'number') throw new ToolInputError(`${name} must be an integer from 1 to ${max}, got ${what(v)}`);
  if (!Number.isInteger(v) || v < 1 || v > max) throw new ToolInputError(`${name} must be an integer from 1 to ${max}`);
  return v;
}

function text(args: Args, name: string, required: boolean): string | undefined {
  const v = args[name];
  if (v === undefined && !required) return undefined;
  if (typeof v !== 'string' || !v) throw new ToolInputError(`${name} must be a non-empty string, got ${what(v)}`);
  return v;
}

function bool(args: Args, name: string): boolean | undefined {
  const v = args[name];
  if (v === undefined || typeof v === 'boolean') return v;
  throw new ToolInputError(`${name} must be true or false, got ${what(v)}`);
}

function oneOf<T extends string>(args: Args, name: string, values: readonly T[]): T | undefined {
  const v = args[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !(values as readonly string[]).includes(v)) {
    throw new ToolInputError(`${name} must be one of ${values.join(', ')}, got ${typeof v === 'string' && v ? JSON.stringify(v) : what(v)}`);
  }
  return v as T;
}

/** list_checks' order: by id, then source (code units, the same on every call). */
function byCheckKey(a: Pick<ListedCheck, 'id' | 'source'>, b: Pick<ListedCheck, 'id' | 'source'>): number {
  if (a.id !== b.id) return a.id < b.id ? -1 : 1;
  return a.source === b.source ? 0 : a.source < b.source ? -1 : 1;
}

/** The check a list_checks cursor goes on after; a cursor it did not give is the caller's error. */
function checksCursor(cursor: string): Pick<ListedCheck, 'id' | 'source'> {
  const v = cursorJson(cursor);
  if (!Array.isArray(v) || v.length !== 3 || v[0] !== 'checks' || typeof v[1] !== 'string' || typeof v[2] !== 'string') {
    throw new ToolInputError('cursor is not one list_checks returned');
  }
  return { id: v[1], source: v[2] };
}

/**
 * The record with each of `fields` longer than `max` characters (a string's, else its JSON
 * text's) cut to its first `max`, as a string; `truncated` names each field cut with its full
 * length. A record with nothing cut is returned as it is.
 */
function cut<T extends object>(record: T, fields: readonly string[], max: number): T & { truncated?: Record<string, number> } {
  let truncated: Record<string, number> | undefined;
  const out = { ...record } as Record<string, unknown>;
  for (const field of fields) {
    const v = out[field];
    if (v === undefined || v === null) continue;
    const s = typeof v === 'string' ? v : JSON.stringify(v);
    if (s === undefined || s.length <= max) continue;
    // Not between the two halves of a surrogate pair.
    const end = /[\uD800-\uDBFF]/.test(s.charAt(max - 1)) ? max - 1 : max;
    out[field] = s.slice(0, end);
    (truncated ??= {})[field] = s.length;
  }
  return truncated ? ({ ...out, truncated } as T & { truncated: Record<string, number> }) : record;
}

/**
 * The record with its list `field` cut to its first `keep` entries when longer, `truncated`
 * naming it with how many it had (as a text field cut names its length).
 */
function cutList<T extends object>(record: T, field: string, keep: number): T & { truncated?: Record<string, number> } {
  const v = (record as Record<string, unknown>)[field];
  if (!Array.isArray(v) || v.length <= keep) return record;
  const truncated = (record as { truncated?: Record<string, number> }).truncated;
  return { ...record, [field]: v.slice(0, keep), truncated: { ...truncated, [field]: v.length } };
}

function cutFinding(f: FindingRecord, max: number): FindingRecord {
  return cut(f, FINDING_TEXT, max);
}

/** The problem with its text cut, and its first RELATED related findings (`truncated.related`: how many it has). */
function cutProblem(p: Problem, max: number): Problem {
  const head = cutList({ ...cutFinding(p, max), related: p.related }, 'related', RELATED);
  return { ...head, related: head.related.map((f) => cutFinding(f, max)) };
}

function result(value: unknown): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value) }] };
}

function toolError(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}

export interface McpScope {
  /** The project the API key opens: every tool acts in it only. */
  project: string;
  authoring: Authoring | null;
  queries: ReviewQueries;
  /** Faults of neatroots (not the caller's): logged, answered as an internal error. */
  log?: (msg: string, err: unknown) => void;
}

async function call(scope: McpScope, name: string, raw: Args): Promise<unknown> {
  const { project, queries } = scope;
  const authoring = () => {
    if (!scope.authoring) throw ApiError.notServed('checks are not written through this server (no authoring side configured)');
    return scope.authoring;
  };
  const tool = MCP_TOOLS.find((t) => t.name === name);
  if (!tool) throw new ToolInputError(`unknown tool ${name}; the tools are ${MCP_TOOLS.map((t) => t.name).join(', ')}`);
  only(raw, Object.keys(tool.inputSchema.properties));
  bounded(raw);
  const args = given(raw);
  switch (tool.name) {
    case 'create_check':
      return authoring().save(project, submission(args), { by: 'agent' });
    case 'preview_check': {
      const preview = await authoring().preview(project, submission(args), { runs: int(args, 'runs', MAX_PREVIEW_RUNS), model_calls: int(args, 'model_calls', MAX_PREVIEW_MODEL_CALLS), by: 'agent' });
      return {
        ...preview,
        flagged: preview.flagged.slice(0, PREVIEW_RUNS).map((r) => ({
          ...r,
          findings: r.findings.slice(0, PREVIEW_FINDINGS).map((f) => cut(f, FINDING_TEXT, FIELD_CHARS)),
          findings_total: r.findings.length,
        })),
        not_checked: preview.not_checked.map((n) => cut(n, ['reason'], FIELD_CHARS)),
      };
    }
    case 'list_checks': {
      const source = oneOf(args, 'source', CHECK_SOURCES);
      const limit = int(args, 'limit', MAX_CHECKS_PAGE) ?? CHECKS_PAGE;
      const after = args.cursor !== undefined ? checksCursor(text(args, 'cursor', true)!) : undefined;
      // By id, then source (a database check not in effect can share its id with one in effect):
      // a page goes on after the last one listed, whatever was saved or removed in between.
      const all = (await authoring().list(project)).filter((c) => !source || c.source === source).sort(byCheckKey);
      const rest = after ? all.filter((c) => byCheckKey(c, after) > 0) : all;
      const page = rest.slice(0, limit);
      const last = page[page.length - 1];
      return {
        checks: page.map(({ yaml: _yaml, ...c }) => cut(c as ListedCheck, CHECK_TEXT, FIELD_CHARS)),
        next_cursor: rest.length > limit && last ? Buffer.from(JSON.stringify(['checks', last.id, last.source]), 'utf8').toString('base64url') : null,
        total: all.length,
      };
    }
    case 'get_check': {
      const id = text(args, 'id', true)!;
      const check = await authoring().get(project, id);
      if (!check) throw new ToolInputError(`no check ${id} in project ${project}`);
      return { check };
    }
    case 'list_findings': {
      const state = oneOf(args, 'state', FINDING_STATE_FILTERS);
      const includeQuiet = bool(args, 'include_quiet');
      const page = await queries.listFindings(project, {
        ...(state ? { state } : {}),
        ...(args.run_id !== undefined ? { run_id: text(args, 'run_id', true) } : {}),
        ...(includeQuiet !== undefined ? { include_quiet: includeQuiet } : {}),
        limit: int(args, 'limit', MAX_PAGE) ?? FINDINGS_PAGE,
        ...(args.cursor !== undefined ? { cursor: text(args, 'cursor', true) } : {}),
      });
      return { findings: page.items.map((p) => cutProblem(p, FIELD_CHARS)), next_cursor: page.next_cursor };
    }
    case 'get_run': {
      const runId = text(args, 'run_id', true)!;
      const limit = int(args, 'spans_limit', MAX_SPANS_PAGE) ?? SPANS_PAGE;
      const max = int(args, 'max_chars', MAX_FIELD_CHARS) ?? FIELD_CHARS;
      // The run page with the spans shown only (not 500 read to be thrown away).
      const run = await queries.getRun(project, runId, { spans_limit: limit });
      if (!run) throw new ToolInputError(`no run ${runId} in project ${project}`);
      // A review service older than spans_limit gives its 500: the first `limit` are read again.
      const spans: SpanPage | null =
        run.spans.length > limit
          ? await queries.listSpans(project, runId, { limit })
          : { items: run.spans, next_cursor: run.spans_next_cursor, ...(run.spans_cut_at_bytes !== undefined ? { cut_at_bytes: run.spans_cut_at_bytes } : {}) };
      if (!spans) throw new ToolInputError(`no run ${runId} in project ${project}`);
      // The run page carries the run's newest 500 findings and how many there are (findings_total).
      const { spans_cut_at_bytes: _cut, findings_scope: _scope, ...rest } = run;
      const findingsTotal = run.findings_total ?? run.findings.length;
      return {
        ...rest,
        run: cut(run.run, RUN_TEXT, max),
        spans: spans.items.map((s) => cut(s, SPAN_TEXT, max)),
        spans_next_cursor: spans.next_cursor,
        ...(spans.cut_at_bytes !== undefined ? { spans_cut_at_bytes: spans.cut_at_bytes } : {}),
        findings: run.findings.slice(0, RUN_FINDINGS).map((f) => cutFinding(f, max)),
        problems: run.problems.slice(0, RUN_FINDINGS).map((p) => cutProblem(p, max)),
        not_checked: run.not_checked.slice(0, RUN_FINDINGS).map((n) => cut(n, ['reason'], max)),
        findings_total: findingsTotal,
        // of the newest 500 findings when the run has more
        problems_total: run.problems.length,
        not_checked_total: run.not_checked.length,
        ...(findingsTotal > RUN_FINDINGS || run.problems.length > RUN_FINDINGS
          ? { findings_more: `the first ${RUN_FINDINGS} are here: list_findings with run_id ${JSON.stringify(runId)} pages through the run's problems (include_quiet: true for quiet findings too)` }
          : {}),
      };
    }
    case 'list_spans': {
      const runId = text(args, 'run_id', true)!;
      const max = int(args, 'max_chars', MAX_FIELD_CHARS) ?? FIELD_CHARS;
      const page = await queries.listSpans(project, runId, {
        limit: int(args, 'limit', MAX_SPANS_PAGE) ?? SPANS_PAGE,
        ...(args.cursor !== undefined ? { cursor: text(args, 'cursor', true) } : {}),
      });
      if (!page) throw new ToolInputError(`no run ${runId} in project ${project}`);
      return { spans: page.items.map((s) => cut(s, SPAN_TEXT, max)), next_cursor: page.next_cursor, ...(page.cut_at_bytes !== undefined ? { cut_at_bytes: page.cut_at_bytes } : {}) };
    }
  }
}

/** A JSON-RPC error with its code (the SDK answers error.code and error.message as they are). */
function rpcError(code: ErrorCode, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/**
 * The tool name and arguments of a tools/call, or -32602 Invalid params saying in one line
 * what is wrong (the SDK's own schema answered -32603 Internal error with the schema's dump).
 */
function toolCall(params: unknown): { name: string; args: Args } {
  const names = MCP_TOOLS.map((t) => t.name).join(', ');
  if (typeof params !== 'object' || params === null || Array.isArray(params)) {
    throw rpcError(ErrorCode.InvalidParams, `tools/call params must be an object { name, arguments }, got ${what(params)}`);
  }
  const { name, arguments: args } = params as { name?: unknown; arguments?: unknown };
  if (typeof name !== 'string' || !name) throw rpcError(ErrorCode.InvalidParams, `tools/call params.name must be the name of a tool (${names}), got ${what(name)}`);
  if (args !== undefined && args !== null && (typeof args !== 'object' || Array.isArray(args))) {
    throw rpcError(ErrorCode.InvalidParams, `tools/call params.arguments must be an object of the tool's arguments by name, got ${what(args)}`);
  }
  return { name, args: (args ?? {}) as Args };
}

/** An MCP server with the tools, for one project (one per request over stateless HTTP). */
export function createMcpServer(scope: McpScope, version: string): Server {
  const server = new Server({ name: 'neatroots', version }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: MCP_TOOLS.map((t) => ({ ...t, inputSchema: t.inputSchema as never })) }));
  // tools/call is taken as it comes, not through setRequestHandler: the SDK parses the
  // request with its schema first and answers a malformed one -32603 with the parser's dump.
  server.fallbackRequestHandler = async (req: JSONRPCRequest) => {
    if (req.method !== 'tools/call') throw rpcError(ErrorCode.MethodNotFound, 'Method not found');
    const { name, args } = toolCall(req.params);
    try {
      return result(await call(scope, name, args));
    } catch (err) {
      if (err instanceof ToolInputError) return toolError(err.message);
      if (err instanceof AuthoringError) {
        const lines = (err.problems ?? []).map((p) => p.message);
        return toolError(`${err.code}: ${lines.length ? lines.join('\n') : err.message}`);
      }
      // A part this server is not set up to serve (as REST answers 503 not_served): said with
      // its code, so the agent knows asking again gets the same (no "retry shortly").
      if (err instanceof ApiError && err.code === NOT_SERVED) return toolError(`${NOT_SERVED}: ${err.detail}`);
      // The store's bad-argument errors (a bad cursor) are the caller's to fix too.
      if ((err as { name?: string }).name === 'StoreInputError') return toolError((err as Error).message);
      // Another service of the deployment away or refusing this process (as REST answers 503),
      // or its answer too large to pass (502): said as it is, so the agent knows whether to try
      // again or ask for less, rather than that neatroots broke.
      const down = err instanceof UnavailableError || err instanceof AnswerTooLargeError ? err : unavailableOf(err);
      if (down) return toolError(down.message);
      scope.log?.(`mcp tool ${name} failed`, err);
      return toolError('internal error in neatroots (logged)');
    }
  };
  return server;
}
