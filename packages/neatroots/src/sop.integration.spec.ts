import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createLogger } from '@neatroots/platform';
import { NeatrootsClient } from '@neatroots/sdk';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { testConfig } from './test-app.test';

/**
 * SOP checks in the embedded default, end to end: a workspace's procedures pushed and
 * published over the REST API, then one span stream feeding both halves (an agent's run
 * ends, and becomes a session of its agent, checked against the live release), beside a
 * session sent in directly.
 */
const KEY = 'sop-e2e-key';
const WS = 'shop';

const REFUND = `# Refund an order
Goal: The customer gets the refund they are owed.

## Steps
1. Look up the order. [tool: lookup_order, required]
2. Issue the refund. [tool: issue_refund, required]
3. Tell the customer when the money arrives.

## Never
- Promise a refund before the order is looked up.
`;
const AGENT = 'instructions: You handle refunds for the shop.\nprocedures: [refund]\n';

describe('SOP checks in the embedded default', () => {
  let home: string;
  let app: EmbeddedApp;
  let base: string;
  let client: NeatrootsClient;

  const api = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { 'x-api-key': KEY, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    // JSON.parse: the answers are checked field by field below
    return { status: res.status, body: JSON.parse(await res.text()) };
  };
  const checked = async (id: string) => {
    for (let i = 0; i < 300; i++) {
      const s = await api('GET', `/sessions/${id}`);
      if (s.body.status !== 'queued') return s.body;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`session ${id} was not checked`);
  };

  beforeAll(async () => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-sop-e2e-'));
    const config = testConfig(home, {
      NEATROOTS_API_KEYS: `${WS}=${KEY}`,
    });
    app = await startEmbedded({ config, inMemoryDb: true, watch: false, log: createLogger({ level: 'error' }) });
    base = `http://127.0.0.1:${app.httpPort}/v1/workspaces/${WS}`;
    client = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: KEY, flushIntervalMs: 20 });
    const pushed = await api('PUT', '/head', { files: [{ path: 'procedures/refund.md', text: REFUND }, { path: 'agents/refund-agent.yaml', text: AGENT }] });
    expect(pushed.status).toBe(200);
    expect((await api('POST', '/releases')).status).toBe(201);
  });

  afterAll(async () => {
    await client?.close();
    await app?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  it("makes a session of an agent's run when it ends, and checks it against the live release", async () => {
    const run = client.startRun({ workflow: 'refund-agent', user_message: 'Refund my order 42 please' });
    await run.toolCall('issue_refund', { order: 42 }, () => ({ ok: true }));
    run.span({ type: 'llm', name: 'chat', output: 'Done, your refund is issued.' });
    await run.end({ final_output: 'Done, your refund is issued.' });

    let listed: { items: { id: string; external_id: string }[] } = { items: [] };
    for (let i = 0; i < 300 && !listed.items.length; i++) {
      listed = (await api('GET', '/sessions?agent=refund-agent')).body;
      if (!listed.items.length) await new Promise((r) => setTimeout(r, 20));
    }
    expect(listed.items.map((s) => s.external_id)).toEqual([`run:${run.id}`]);
    const s = await checked(listed.items[0].id);
    expect(s).toMatchObject({ status: 'checked', agent: 'refund-agent', result: 'deviated' });
    const rules = s.checks[0].rules.map((r: { index: number; kind: string; status: string }) => [r.kind, r.index, r.status]);
    // the refund was issued (its tool call), the lookup never was, though it comes first and is required
    expect(rules.slice(0, 2)).toEqual([['step', 1, 'skipped'], ['step', 2, 'done']]);
    expect(s.checks[0].rules[1].evidence[0]).toMatchObject({ source: 'tool_calls' });
    // no model is configured: what only a model can decide says so, and is never a pass
    expect(s.checks[0].rules[2]).toMatchObject({ status: 'not_checked', reason: expect.stringContaining('needs a model') });
  });

  it('leaves runs of workflows that are no agent of the workspace alone', async () => {
    const run = client.startRun({ workflow: 'search-agent', user_message: 'find shoes' });
    await run.toolCall('search', { q: 'shoes' }, () => []);
    await run.end({ final_output: 'none found' });
    await new Promise((r) => setTimeout(r, 500));
    const all = (await api('GET', '/sessions')).body.items.map((x: { external_id: string }) => x.external_id);
    expect(all).not.toContain(`run:${run.id}`);
  });

  it('checks a session sent in over the API the same way', async () => {
    const sent = await api('POST', '/sessions', {
      external_id: 'call-7',
      agent: 'refund-agent',
      turns: [{ role: 'user', text: 'refund 7' }, { role: 'agent', text: 'Let me look that up.' }],
      tool_calls: [{ turn: 1, tool: 'lookup_order', input: { id: 7 }, output: { id: 7 } }, { turn: 1, tool: 'issue_refund', input: { id: 7 }, output: { ok: true } }],
    });
    expect(sent.status).toBe(202);
    const s = await checked(sent.body.id);
    expect(s.checks[0].rules.slice(0, 2).map((r: { status: string }) => r.status)).toEqual(['done', 'done']);
  });
});
