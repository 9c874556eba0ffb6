import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { FINDING_STATE_FILTERS, MAX_PAGE, type ReviewQueries } from '@neatroots/store';
import { AuthoringError, type Authoring, type CheckSubmission } from '../authoring';
import { MAX_PREVIEW_MODEL_CALLS, MAX_PREVIEW_RUNS } from '../limits';

/**
 * The MCP tools coding agents write checks with (the seed: "Coding agents: create_check and
 * preview_check over MCP"), scoped to the one project the API key opens. They call the same
 * Authoring as the REST endpoints, as author `agent`: an agent saves flag rules and
 * questions, never a halt rule (it cannot create one, turn a check into one, or change a
 * person's check). Every refusal is a tool error (isError) whose text says what is wrong and
 * where, so the agent can fix its call.
 */

const CHECK_INPUT = {
  yaml: { type: 'string', description: 'The check as YAML (one check: id, kind, title, rule or ask, ...). Give yaml or check.' },
  check: { type: 'object', description: 'The check as a JSON object, the same fields as the YAML. Give yaml or check.' },
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
      'Bounded in runs and model calls; the answer says what it covered. Preview on a run that has the problem and one that does not.',
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
    description: 'Lists the checks in effect in this project (library, files, database), with kind, action, source and who wrote database checks.',
    inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  },
  {
    name: 'list_findings',
    description: "Lists this project's findings (problems), newest first.",
    inputSchema: {
      type: 'object',
      properties: {
        state: { type: 'string', enum: [...FINDING_STATE_FILTERS], description: 'Default open; with run_id, all.' },
        run_id: { type: 'string', description: 'Only the findings of this run.' },
        limit: { type: 'integer', minimum: 1, maximum: MAX_PAGE },
        cursor: { type: 'string', description: 'next_cursor of the page before.' },
      },
      additionalProperties: false,
    },
  },
  {
    name: 'get_run',
    description: 'One run of this project: the run, its first spans, its findings and problems.',
    inputSchema: { type: 'object', properties: { run_id: { type: 'string' } }, required: ['run_id'], additionalProperties: false },
  },
] as const;

/** A call the tool refuses: its message goes back to the agent as the tool's error. */
class ToolInputError extends Error {}

type Args = Record<string, unknown>;

function only(args: Args, allowed: readonly string[]): void {
  const unknown = Object.keys(args).filter((k) => !allowed.includes(k));
  if (unknown.length) throw new ToolInputError(`unknown argument ${unknown.join(', ')}; this tool takes ${allowed.join(', ') || 'none'}`);
}

function submission(args: Args): CheckSubmission {
  if (args.yaml !== undefined && args.check !== undefined) throw new ToolInputError('give the check once: yaml or check, not both');
  if (typeof args.yaml === 'string' && args.yaml.trim()) return { yaml: args.yaml };
  if (args.check && typeof args.check === 'object' && !Array.isArray(args.check)) return { check: args.check as Record<string, unknown> };
  throw new ToolInputError('the check is missing: give yaml (a string holding one check) or check (an object)');
}

function int(args: Args, name: string, max: number): number | undefined {
  const v = args[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max) throw new ToolInputError(`${name} must be an integer from 1 to ${max}`);
  return v;
}

function text(args: Args, name: string, required: boolean): string | undefined {
  const v = args[name];
  if (v === undefined && !required) return undefined;
  if (typeof v !== 'string' || !v) throw new ToolInputError(`${name} must be a non-empty string`);
  return v;
}

function result(value: unknown): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value, null, 2) }] };
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

async function call(scope: McpScope, name: string, args: Args): Promise<unknown> {
  const { project, queries } = scope;
  const authoring = () => {
    if (!scope.authoring) throw new ToolInputError('checks are not written through this server (no authoring side configured)');
    return scope.authoring;
  };
  switch (name) {
    case 'create_check':
      only(args, ['yaml', 'check']);
      return authoring().save(project, submission(args), { by: 'agent' });
    case 'preview_check':
      only(args, ['yaml', 'check', 'runs', 'model_calls']);
      return authoring().preview(project, submission(args), { runs: int(args, 'runs', MAX_PREVIEW_RUNS), model_calls: int(args, 'model_calls', MAX_PREVIEW_MODEL_CALLS), by: 'agent' });
    case 'list_checks':
      only(args, []);
      return { checks: await authoring().list(project) };
    case 'list_findings': {
      only(args, ['state', 'run_id', 'limit', 'cursor']);
      const state = text(args, 'state', false);
      if (state !== undefined && !(FINDING_STATE_FILTERS as readonly string[]).includes(state)) throw new ToolInputError(`state must be one of ${FINDING_STATE_FILTERS.join(', ')}`);
      const page = await queries.listFindings(project, {
        ...(state ? { state: state as (typeof FINDING_STATE_FILTERS)[number] } : {}),
        ...(args.run_id !== undefined ? { run_id: text(args, 'run_id', true) } : {}),
        ...(args.limit !== undefined ? { limit: int(args, 'limit', MAX_PAGE) } : {}),
        ...(args.cursor !== undefined ? { cursor: text(args, 'cursor', true) } : {}),
      });
      return { findings: page.items, next_cursor: page.next_cursor };
    }
    case 'get_run': {
      only(args, ['run_id']);
      const runId = text(args, 'run_id', true)!;
      const run = await queries.getRun(project, runId);
      if (!run) throw new ToolInputError(`no run ${runId} in project ${project}`);
      return run;
    }
    default:
      throw new ToolInputError(`unknown tool ${name}; the tools are ${MCP_TOOLS.map((t) => t.name).join(', ')}`);
  }
}

/** An MCP server with the tools, for one project (one per request over stateless HTTP). */
export function createMcpServer(scope: McpScope, version: string): Server {
  const server = new Server({ name: 'neatroots', version }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: MCP_TOOLS.map((t) => ({ ...t, inputSchema: t.inputSchema as never })) }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    try {
      return result(await call(scope, req.params.name, (req.params.arguments ?? {}) as Args));
    } catch (err) {
      if (err instanceof ToolInputError) return toolError(err.message);
      if (err instanceof AuthoringError) {
        const lines = (err.problems ?? []).map((p) => p.message);
        return toolError(`${err.code}: ${lines.length ? lines.join('\n') : err.message}`);
      }
      // The store's bad-argument errors (a bad cursor) are the caller's to fix too.
      if ((err as { name?: string }).name === 'StoreInputError') return toolError((err as Error).message);
      scope.log?.(`mcp tool ${req.params.name} failed`, err);
      return toolError('internal error in neatroots (logged)');
    }
  });
  return server;
}
