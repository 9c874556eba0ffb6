import * as fs from 'node:fs';
import * as path from 'node:path';
import { MemoryWindowStore } from '@neatroots/platform';
import { normalizeItem, type Envelope } from '@neatroots/spans';
import { parseCheckFile } from '../schema';
import type { FindingEvent, RuleCheck, RuleSpec } from '../types';
import { RuleEngine } from './engine';
import { MAX_TOOL_SPANS, toolSpansKept } from './layers';
import { compileRuleSet } from './ruleset';
import { windowKey, type RunMetrics, type RunWindow } from './window';

/**
 * One MCP tool call traced at the layers the OpenTelemetry conventions define: the agent
 * framework's execute_tool span, the MCP client's tools/call span under it, and the MCP
 * server's under that (another process, exported on its own, parented through `_meta`): the
 * audit's t5_mcp.js. One call, whatever order its layers arrive in.
 */

const LIBRARY = path.resolve(__dirname, '../../../../packages/neatroots/library');

const regexMatcher = (_c: RuleCheck, pattern: string) => {
  const re = new RegExp(pattern);
  return { test: (s: string) => re.test(s) };
};

/** The shipped loop checks (repeated-tool-call, tool-error-streak, runaway-loop), and thresholds on the run's counts. */
const loop = parseCheckFile(fs.readFileSync(path.join(LIBRARY, 'loop.yaml'), 'utf8'), 'loop.yaml', 'library').checks as RuleCheck[];
const threshold = (id: string, spec: RuleSpec): RuleCheck => ({ id, kind: 'rule', title: id, rule: spec, action: 'flag', source: 'user', guidance: '{metric} {value}' });
const CHECKS: RuleCheck[] = [
  ...loop,
  threshold('two-tool-calls', { type: 'threshold', metric: 'tool_calls', at_least: 2 }),
  threshold('two-errors', { type: 'threshold', metric: 'errors', at_least: 2 }),
  { id: 'two-calls', kind: 'rule', title: 'two-calls', rule: { type: 'count', span: { type: ['tool', 'mcp_tool'] }, at_least: 2 }, action: 'flag', source: 'user' },
  { id: 'two-failures', kind: 'rule', title: 'two-failures', rule: { type: 'errors', span: { tool: ['search_docs'] }, at_least: 2 }, action: 'flag', source: 'user' },
  { id: 'index-down', kind: 'rule', title: 'index-down', rule: { type: 'match', span: {}, pattern: 'index unavailable', in: ['error'] }, action: 'flag', source: 'user' },
];

class Run {
  readonly windows = new MemoryWindowStore<RunWindow>();
  readonly engine = new RuleEngine({ windows: this.windows, rules: () => this.set });
  readonly findings: FindingEvent[] = [];
  private readonly set = compileRuleSet(CHECKS, regexMatcher);

  /** One export: its spans in one batch. */
  async send(...spans: Record<string, unknown>[]): Promise<void> {
    const envs: Envelope[] = spans.map((raw) => ({ project: 'p', received_ms: 1_000_000, item: normalizeItem({ run_id: 'r', ...raw }) }));
    const out = await this.engine.process(envs);
    this.findings.push(...out.findings);
    await out.commit();
  }

  async metrics(): Promise<RunMetrics> {
    const key = windowKey('p', 'r');
    return (await this.windows.load([key])).get(key)!.metrics;
  }

  raised(): string[] {
    return this.findings.filter((f) => f.status === 'raised').map((f) => f.check_id);
  }
}

const root = { span_id: 'root', type: 'agent', name: 'invoke_agent docs-agent' };
/** The framework's span of the call, the MCP client's under it, the MCP server's under that: all three failed. */
const framework = (id = 'et', parent = 'root', tool = 'search_docs') => ({
  span_id: id, parent_id: parent, type: 'tool', name: `execute_tool ${tool}`, tool, status: 'error', error: 'search index unavailable',
});
const client = (id = 'cl', parent = 'et', tool = 'search_docs') => ({
  span_id: id, parent_id: parent, type: 'mcp_tool', name: `tools/call ${tool}`, tool, status: 'error', error: 'tool_error',
});
const server = (id = 'sv', parent = 'cl', tool = 'search_docs') => ({
  span_id: id, parent_id: parent, type: 'mcp_tool', name: `tools/call ${tool}`, tool, status: 'error', error: 'tool_error',
});

describe('the layers of one tool call', () => {
  it('the t5 trace (server exported first, then client, framework and root) is one failed call', async () => {
    const run = new Run();
    await run.send(server());
    await run.send(client(), framework(), root);
    expect(await run.metrics()).toMatchObject({ spans: 4, tool_calls: 1, errors: 1 });
    // No loop note for one failure, no second call or error counted; the error's text is still read.
    expect(run.raised()).toEqual(['index-down']);
  });

  it.each([
    ['framework, client, server', [framework(), client(), server()]],
    ['client, framework, server', [client(), framework(), server()]],
    ['server, client, framework', [server(), client(), framework()]],
    ['client, server, framework', [client(), server(), framework()]],
    // The middle layer last: the framework's and the server's spans were each taken as a call until it came.
    ['framework, server, client', [framework(), server(), client()]],
    ['server, framework, client', [server(), framework(), client()]],
  ])('is one call whichever order its layers arrive in (%s)', async (order, spans) => {
    const run = new Run();
    for (const s of spans) await run.send(s);
    expect(await run.metrics()).toMatchObject({ spans: 3, tool_calls: 1, errors: 1 });
    // With the middle layer last, the two-of checks saw two calls before it came: those findings stay.
    if (!order.endsWith('client')) expect(run.raised()).toEqual(['index-down']);
  });

  it.each([
    ['framework, server, client', [framework(), server(), client()]],
    ['server, framework, client', [server(), framework(), client()]],
  ])('takes back the call it made of a layer once the middle layer comes last (%s): the counts and streaks of the checks go on from one call', async (_order, spans) => {
    const run = new Run();
    for (const s of spans) await run.send(s);
    // Two more failed calls of the tool, each one span: the second and third failures in a row,
    // and the third call (with the layer taken as a call, the fourth: a loop note on the third).
    await run.send(framework('et2'));
    expect(run.raised()).not.toContain('tool-error-streak');
    await run.send(framework('et3'));
    expect(await run.metrics()).toMatchObject({ spans: 5, tool_calls: 3, errors: 3 });
    expect(run.findings.filter((f) => f.check_id === 'tool-error-streak').map((f) => [f.status, f.count])).toEqual([['raised', 3]]);
    const key = windowKey('p', 'r');
    const w = (await run.windows.load([key])).get(key)!;
    expect(w.checks['two-calls']).toMatchObject({ n: 3 });
  });

  it('two real calls, each traced at two layers, are two calls', async () => {
    const run = new Run();
    await run.send(client('cl1', 'et1'), framework('et1'), client('cl2', 'et2'), framework('et2'));
    expect(await run.metrics()).toMatchObject({ spans: 4, tool_calls: 2, errors: 2 });
    expect(run.raised().sort()).toEqual(['index-down', 'two-calls', 'two-errors', 'two-failures', 'two-tool-calls']);
  });

  it('two sibling calls of one tool, and a tool that calls another tool inside it, are calls each', async () => {
    const run = new Run();
    // Siblings under the root, same tool: two calls. A `research` tool whose span holds a search_docs call: two calls.
    await run.send(framework('a'), framework('b'), framework('c', 'outer'), framework('outer', 'root', 'research'));
    expect((await run.metrics()).tool_calls).toBe(4);
    expect(run.raised()).toContain('tool-error-streak');
  });

  it(`keeps its run's last ${MAX_TOOL_SPANS} tool spans to tell layers by`, async () => {
    const run = new Run();
    const ok = (id: string, parent: string) => ({ span_id: id, parent_id: parent, type: 'tool', name: 't', tool: 'read_file', input: { id } });
    for (let i = 0; i < MAX_TOOL_SPANS + 10; i++) await run.send(ok(`s${i}`, 'root'));
    const key = windowKey('p', 'r');
    const w = (await run.windows.load([key])).get(key)!;
    expect(toolSpansKept(w)).toBe(MAX_TOOL_SPANS);
    // A layer of a recent call is a layer, of a forgotten one a call.
    await run.send(ok('late-recent', `s${MAX_TOOL_SPANS + 9}`), ok('late-old', 's0'));
    expect((await run.metrics()).tool_calls).toBe(MAX_TOOL_SPANS + 11);
  });
});
