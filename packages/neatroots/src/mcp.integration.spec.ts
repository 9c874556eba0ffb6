import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createLogger } from '@neatroots/platform';
import { NeatrootsClient } from '@neatroots/sdk';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { tempHome, testConfig } from './test-app.test';

/**
 * The MCP tools coding agents write checks with, through the MCP SDK's own client over both
 * transports: streamable HTTP on the api (POST /v1/mcp) and stdio (`neatroots mcp`, started
 * as a command the way an agent starts it), against a real embedded neatroots. The API key
 * scopes every tool to its project; an agent's halt rule is refused.
 */
const KEY = 'mcp-key';
const OTHER_KEY = 'mcp-other-key';
const PROJECT = 'shop';
const RULE = `id: agent-refund-rule
kind: rule
title: Refund without an order lookup
rule:
  type: requires_before
  call: { tool: [issue_refund] }
  requires: { tool: [lookup_order] }
`;

let home: string;
let app: EmbeddedApp;
let base: string;

interface ToolText {
  isError?: boolean;
  content: { type: string; text: string }[];
}

async function httpClient(key: string): Promise<Client> {
  const client = new Client({ name: 'mcp-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { 'x-api-key': key } } }));
  return client;
}

async function tool(client: Client, name: string, args: Record<string, unknown> = {}): Promise<{ error?: string; value?: Record<string, unknown> }> {
  const r = (await client.callTool({ name, arguments: args })) as ToolText;
  const text = r.content.map((c) => c.text).join('\n');
  return r.isError ? { error: text } : { value: JSON.parse(text) as Record<string, unknown> };
}

beforeAll(async () => {
  home = tempHome('neatroots-mcp');
  const config = testConfig(home, {
    NEATROOTS_API_KEYS: `${PROJECT}=${KEY},other=${OTHER_KEY}`,
  });
  app = await startEmbedded({ config, inMemoryDb: true, watch: false, log: createLogger({ level: 'error' }) });
  base = `http://127.0.0.1:${app.httpPort}`;
  const agent = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: KEY, flushIntervalMs: 20 });
  const run = agent.startRun({ run_id: 'mcp-run', workflow: 'refunds' });
  run.span({ type: 'tool', tool: 'issue_refund', input: { order: 7 }, output: 'queued' });
  await run.end({ final_output: 'done' });
  await agent.flush();
  await agent.close();
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const res = await fetch(`${base}/v1/projects/${PROJECT}/runs/mcp-run`, { headers: { 'x-api-key': KEY } });
    if (res.ok && ((await res.json()) as { run: { end_status: string | null } }).run.end_status) break;
    await new Promise((r) => setTimeout(r, 50));
  }
}, 120_000);

afterAll(async () => {
  await app?.close();
  fs.rmSync(home, { recursive: true, force: true });
});

describe('MCP tools over streamable HTTP', () => {
  it('lists the seven tools with their input schemas', async () => {
    const client = await httpClient(KEY);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['create_check', 'get_check', 'get_run', 'list_checks', 'list_findings', 'list_spans', 'preview_check']);
    // an agent is told the preview's time bound before it waits on one
    expect(tools.find((t) => t.name === 'preview_check')?.description).toContain('answers within 45 s');
    expect(tools.find((t) => t.name === 'get_run')!.inputSchema).toMatchObject({ type: 'object', required: ['run_id'] });
    await client.close();
  });

  it('previews and creates a flag rule as the agent, in effect at once in its project only', async () => {
    const client = await httpClient(KEY);
    const preview = await tool(client, 'preview_check', { yaml: RULE, runs: 5 });
    expect(preview.value).toMatchObject({ runs: { checked: 1, flagged: 1 }, flagged: [{ run_id: 'mcp-run' }] });
    const created = await tool(client, 'create_check', { yaml: RULE });
    expect(created.value).toMatchObject({ created: true, check: { id: 'agent-refund-rule', origin: 'agent', action: 'flag', in_effect: true } });
    expect(app.checks().checks.find((c) => c.id === 'agent-refund-rule')).toMatchObject({ source: 'database', applies_to: { project: [PROJECT] } });
    const listed = await tool(client, 'list_checks');
    expect(listed.value!.checks).toEqual(expect.arrayContaining([expect.objectContaining({ id: 'agent-refund-rule', origin: 'agent' })]));
    await client.close();

    const other = await httpClient(OTHER_KEY);
    expect(((await tool(other, 'list_checks')).value!.checks as { id: string }[]).map((c) => c.id)).not.toContain('agent-refund-rule');
    expect((await tool(other, 'get_run', { run_id: 'mcp-run' })).error).toBe('no run mcp-run in project other');
    await other.close();
  });

  it('refuses an agent a halt rule, a person\'s check, and bad arguments, as tool errors saying why', async () => {
    const client = await httpClient(KEY);
    const halt = await tool(client, 'create_check', { yaml: RULE.replace('agent-refund-rule', 'agent-halt') + 'action: halt\n' });
    expect(halt.error).toMatch(/^invalid_check: line 8: check: check agent-halt: action: a library or agent-written check cannot halt/);
    expect(app.checks().checks.map((c) => c.id)).not.toContain('agent-halt');

    // A person's check (saved through the REST API by the CLI) is not the agent's to change.
    await fetch(`${base}/v1/projects/${PROJECT}/checks`, {
      method: 'POST',
      headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ yaml: RULE.replace('agent-refund-rule', 'persons-rule'), by: 'cli' }),
    });
    const change = await tool(client, 'create_check', { yaml: RULE.replace('agent-refund-rule', 'persons-rule').replace('title: Refund', 'title: Changed') });
    expect(change.error).toBe('forbidden: check persons-rule was written by a person (the CLI); a coding agent cannot change it');

    expect((await tool(client, 'create_check', {})).error).toMatch(/the check is missing/);
    expect((await tool(client, 'preview_check', { yaml: RULE, runs: 0 })).error).toBe('runs must be an integer from 1 to 100');
    expect((await tool(client, 'list_findings', { state: 'bogus' })).error).toMatch(/^state must be one of open, /);
    await client.close();
  });

  it('refuses an argument over the size bound as a tool error naming it, its size and the bound; nothing saved', async () => {
    const client = await httpClient(KEY);
    // A check of 150,000 bytes: a comment line padding a rule (past the 102,400 bytes an argument may have).
    const padded = (bytes: number, id: string) => {
      const rule = RULE.replace('agent-refund-rule', id);
      return `# ${'p'.repeat(bytes - rule.length - 3)}\n${rule}`;
    };
    const big = padded(150_000, 'agent-big');
    expect(Buffer.byteLength(big)).toBe(150_000);
    for (const name of ['create_check', 'preview_check']) {
      expect([name, (await tool(client, name, { yaml: big })).error]).toEqual([
        name,
        'argument yaml is 150,000 bytes, over the limit of 102,400 bytes an argument may have; make it shorter',
      ]);
    }
    // An object argument is measured as its JSON.
    const check = { id: 'agent-big', kind: 'rule', title: 't'.repeat(110_000), rule: { type: 'count', at_least: 2 } };
    const size = Buffer.byteLength(JSON.stringify(check)).toLocaleString('en-US');
    expect((await tool(client, 'create_check', { check })).error).toBe(`argument check is ${size} bytes, over the limit of 102,400 bytes an argument may have; make it shorter`);
    expect(app.checks().checks.map((c) => c.id)).not.toContain('agent-big');
    // At the bound, the argument is taken (and the check saved).
    const atBound = padded(102_400, 'agent-at-bound');
    expect(Buffer.byteLength(atBound)).toBe(102_400);
    expect((await tool(client, 'create_check', { yaml: atBound })).error).toBeUndefined();
    expect(app.checks().checks.map((c) => c.id)).toContain('agent-at-bound');
    await client.close();
  });

  it('serves findings and runs of the project', async () => {
    const client = await httpClient(KEY);
    const run = await tool(client, 'get_run', { run_id: 'mcp-run' });
    expect(run.value).toMatchObject({ run: { run_id: 'mcp-run', workflow: 'refunds' } });
    const findings = await tool(client, 'list_findings', { run_id: 'mcp-run' });
    expect(Array.isArray(findings.value!.findings)).toBe(true);
    await client.close();
  });

  it('answers 401 without a key and 405 to GET', async () => {
    const client = new Client({ name: 'no-key', version: '1.0.0' });
    await expect(client.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`)))).rejects.toThrow(/an API key is required/);
    const res = await fetch(`${base}/v1/mcp`, { headers: { 'x-api-key': KEY } });
    expect(res.status).toBe(405);
  });
});

describe('MCP tools over stdio (neatroots mcp)', () => {
  it('relays the tools to the server, scoped by the key, refusing an agent\'s halt rule', async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [path.join(__dirname, 'cli-from-source.test.js'), 'mcp'],
      env: { PATH: process.env.PATH ?? '', NEATROOTS_URL: base, NEATROOTS_API_KEY: KEY },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const client = new Client({ name: 'stdio-test', version: '1.0.0' });
    await client.connect(transport);
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('create_check');
      const created = await tool(client, 'create_check', { yaml: RULE.replace('agent-refund-rule', 'stdio-rule') });
      expect(created.value).toMatchObject({ check: { id: 'stdio-rule', origin: 'agent' } });
      expect(app.checks().checks.find((c) => c.id === 'stdio-rule')).toMatchObject({ applies_to: { project: [PROJECT] } });
      const halt = await tool(client, 'create_check', { yaml: RULE.replace('agent-refund-rule', 'stdio-halt') + 'action: halt\n' });
      expect(halt.error).toMatch(/cannot halt/);
      expect((await tool(client, 'get_run', { run_id: 'mcp-run' })).value).toMatchObject({ run: { run_id: 'mcp-run' } });
    } finally {
      await client.close();
    }
    expect(stderr).toBe('');
  }, 60_000);

  it("takes --url as the MCP endpoint's URL (ending in /v1/mcp, as the HTTP configuration has it) as well as the server's", async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [path.join(__dirname, 'cli-from-source.test.js'), 'mcp', '--url', `${base}/v1/mcp/`],
      env: { PATH: process.env.PATH ?? '', NEATROOTS_API_KEY: KEY },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const client = new Client({ name: 'stdio-url-test', version: '1.0.0' });
    await client.connect(transport);
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('list_findings');
    } finally {
      await client.close();
    }
    expect(stderr).toBe('');
  }, 60_000);
});
