import { once } from 'node:events';
import * as fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { createLogger } from '@neatroots/platform';
import { v1 } from '@neatroots/proto';
import { NeatrootsClient, RunHaltedError } from '@neatroots/sdk';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { jsonApi, REFUND_LOOKUP_RULE, tempHome, testConfig } from './test-app.test';

/**
 * Key scopes: the key an agent is given (`project=key:ingest`) sends spans, hears its runs' notes
 * and halts and asks its pre-call checks, and nothing else; it cannot dismiss the findings of the
 * halt rule that watches it, delete that rule or use MCP (a prompt-injected agent would
 * otherwise quiet its own guard), nor watch every run's notes (other users' tool arguments, run
 * ids). A key configured as before (`project=key`) does everything.
 */
const PROJECT = 'shop';
const FULL = 'scope-full-key';
const AGENT = 'scope-agent-key';
const RULE_ID = 'refund-needs-lookup';
const REFUSED = { error: { code: 'forbidden', message: 'this key may only send spans (scope ingest); use a full key for the API' } };

let home: string;
let app: EmbeddedApp;
let base: string;
let api: ReturnType<typeof jsonApi>;
let agent: NeatrootsClient;

interface Finding {
  id: string;
  check_id: string;
  run_id: string;
  state: string;
  action: string;
  dismissed_at: string | null;
}

/** The findings of a run once the store has them (the full key reads them). */
async function findingsOf(runId: string): Promise<Finding[]> {
  const deadline = Date.now() + 20_000;
  let findings: Finding[] = [];
  while (Date.now() < deadline) {
    const r = await api<{ findings: Finding[] }>('GET', `/v1/projects/${PROJECT}/findings?run_id=${runId}&state=all`);
    findings = r.body.findings ?? [];
    if (findings.some((f) => f.check_id === RULE_ID)) break;
    await new Promise((res) => setTimeout(res, 50));
  }
  return findings;
}

/** A refund without an order lookup, as an agent with `client` runs it: halted before the refund runs. */
async function refundWithoutLookup(client: NeatrootsClient): Promise<{ runId: string; refunded: number[]; error: unknown; halt?: { check_id: string } }> {
  const run = client.startRun({ workflow: 'refunds' });
  await run.whenSubscribed();
  const refunded: number[] = [];
  const error = await run.toolCall('issue_refund', { order: 7 }, () => refunded.push(7)).then(() => undefined, (e: unknown) => e);
  await run.end();
  return { runId: run.id, refunded, error, ...(run.haltNote ? { halt: run.haltNote } : {}) };
}

beforeAll(async () => {
  home = tempHome('neatroots-key-scope');
  app = await startEmbedded({
    config: testConfig(home, {
      // The full key as every key was configured before scopes; the agents' key scoped to ingest.
      NEATROOTS_API_KEYS: `${PROJECT}=${FULL},${PROJECT}=${AGENT}:ingest`,
      NEATROOTS_STEERING: PROJECT,
      // The pre-call check's wait: a loaded machine's first export must not run out of it.
      NEATROOTS_PRECHECK_TIMEOUT_MS: '10000',
    }),
    inMemoryDb: true,
    watch: false,
    log: createLogger({ level: 'error' }),
  });
  base = `http://127.0.0.1:${app.httpPort}`;
  api = jsonApi(() => base, FULL);
  // A person's halt rule, saved and switched with the full key.
  expect((await api('POST', `/v1/projects/${PROJECT}/checks`, { yaml: REFUND_LOOKUP_RULE, by: 'cli' })).status).toBe(200);
  expect((await api('POST', `/v1/projects/${PROJECT}/checks/${RULE_ID}/halt`, { by: 'cli' })).status).toBe(200);
  agent = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: AGENT, flushIntervalMs: 20, precheckPolicyTimeoutMs: 10_000 });
}, 120_000);

afterAll(async () => {
  await agent?.close();
  await app?.close();
  if (home) fs.rmSync(home, { recursive: true, force: true });
});

describe('an ingest key (the agents\')', () => {
  it("sends spans, subscribes to its run's notes and halts, and is halted before the harm by its pre-call check", async () => {
    // A stream of the whole project's notes, a person's (the full key): the agent's run is halted
    // over the agent's own stream of its run (the SDK's).
    const raw = new v1.IngestClient(`127.0.0.1:${app.ingest.grpcPort}`, credentials.createInsecure());
    const md = new Metadata();
    md.set('x-api-key', FULL);
    const watched: v1.Note[] = [];
    const watch = raw.subscribe({ run_id: '' }, md);
    watch.on('data', (n: v1.Note) => watched.push(n));
    watch.on('error', () => undefined);
    try {
      await once(watch, 'metadata');
      const r = await refundWithoutLookup(agent);
      expect(r.error).toBeInstanceOf(RunHaltedError);
      expect(r.refunded).toEqual([]);
      expect(r.halt).toMatchObject({ check_id: RULE_ID });
      // The run's spans were taken: its finding is stored, and the live halt reaches the stream.
      expect(await findingsOf(r.runId)).toEqual(expect.arrayContaining([expect.objectContaining({ check_id: RULE_ID, action: 'halt', dismissed_at: null })]));
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline && !watched.some((n) => n.run_id === r.runId && n.kind === 'halt')) await new Promise((res) => setTimeout(res, 50));
      expect(watched.find((n) => n.run_id === r.runId && n.kind === 'halt')).toMatchObject({ check_id: RULE_ID });
    } finally {
      watch.cancel();
      raw.close();
    }
  });

  it("may not subscribe to the whole project's notes (PERMISSION_DENIED, nothing sent), where a full key may", async () => {
    const raw = new v1.IngestClient(`127.0.0.1:${app.ingest.grpcPort}`, credentials.createInsecure());
    const subscribe = (key: string) => {
      const md = new Metadata();
      md.set('x-api-key', key);
      const stream = raw.subscribe({ run_id: '' }, md);
      const notes: v1.Note[] = [];
      stream.on('data', (n: v1.Note) => notes.push(n));
      // Refused, or in place (ingest's headers say so), whichever comes first.
      const outcome = new Promise<{ code: number; details: string } | 'subscribed'>((resolve) => {
        stream.on('error', (e: ServiceError) => resolve({ code: e.code, details: e.details }));
        stream.on('metadata', (m: Metadata) => m.get('x-neatroots-subscribed').length && resolve('subscribed'));
      });
      return { stream, notes, outcome };
    };
    const agentWide = subscribe(AGENT);
    const fullWide = subscribe(FULL);
    try {
      expect(await agentWide.outcome).toEqual({
        code: 7, // PERMISSION_DENIED
        details: "a key of scope ingest may subscribe to one run's notes, not the whole project's; use a full key",
      });
      expect(await fullWide.outcome).toBe('subscribed');
      // The agent's run is halted; the full key's stream hears it, the agent key's refused one heard nothing.
      const r = await refundWithoutLookup(agent);
      expect(r.error).toBeInstanceOf(RunHaltedError);
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline && !fullWide.notes.some((n) => n.run_id === r.runId && n.kind === 'halt')) await new Promise((res) => setTimeout(res, 50));
      expect(fullWide.notes.find((n) => n.run_id === r.runId && n.kind === 'halt')).toMatchObject({ check_id: RULE_ID });
      expect(agentWide.notes).toEqual([]);
    } finally {
      for (const s of [agentWide, fullWide]) s.stream.cancel();
      raw.close();
    }
  });

  it('sends spans over OTLP/HTTP', async () => {
    const traceId = randomBytes(16).toString('hex');
    const now = BigInt(Date.now()) * 1_000_000n;
    const body = {
      resourceSpans: [{
        resource: { attributes: [{ key: 'service.name', value: { stringValue: 'refunds' } }] },
        scopeSpans: [{ spans: [{
          traceId, spanId: randomBytes(8).toString('hex'), name: 'lookup_order', kind: 1,
          startTimeUnixNano: String(now), endTimeUnixNano: String(now + 1_000_000n),
          attributes: [{ key: 'gen_ai.operation.name', value: { stringValue: 'execute_tool' } }, { key: 'gen_ai.tool.name', value: { stringValue: 'lookup_order' } }],
        }] }],
      }],
    };
    const res = await fetch(`http://127.0.0.1:${app.ingest.otlpHttpPort}/v1/traces`, { method: 'POST', headers: { 'x-api-key': AGENT, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(res.status).toBe(200);
    const deadline = Date.now() + 20_000;
    let status = 0;
    while (Date.now() < deadline && status !== 200) {
      status = (await api('GET', `/v1/projects/${PROJECT}/runs/${traceId}`)).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(200);
  });

  it('cannot dismiss the halt rule\'s findings, delete the rule, or read or write anything else of the API: 403, and the rule still halts', async () => {
    const { runId } = await refundWithoutLookup(agent);
    const finding = (await findingsOf(runId)).find((f) => f.check_id === RULE_ID)!;
    expect(finding).toBeDefined();
    // What the audit's agent did: dismiss its guard's findings until the rule went quiet.
    for (let i = 0; i < 3; i++) expect(await api('POST', `/v1/projects/${PROJECT}/findings/${finding.id}/dismiss`, { note: 'not a problem' }, AGENT)).toEqual({ status: 403, body: REFUSED });
    expect(await api('DELETE', `/v1/projects/${PROJECT}/checks/${RULE_ID}`, undefined, AGENT)).toEqual({ status: 403, body: REFUSED });
    expect(await api('PUT', `/v1/projects/${PROJECT}/checks/${RULE_ID}`, { yaml: REFUND_LOOKUP_RULE }, AGENT)).toEqual({ status: 403, body: REFUSED });
    expect(await api('GET', `/v1/projects/${PROJECT}/findings`, undefined, AGENT)).toEqual({ status: 403, body: REFUSED });
    expect(await api('PUT', `/v1/workspaces/${PROJECT}/github`, { owner: 'o', repo: 'r', token: 't' }, AGENT)).toEqual({ status: 403, body: REFUSED });
    // As a bearer token too.
    const bearer = await fetch(`${base}/v1/projects/${PROJECT}/findings/${finding.id}/dismiss`, { method: 'POST', headers: { authorization: `Bearer ${AGENT}`, 'content-type': 'application/json' }, body: '{}' });
    expect({ status: bearer.status, body: await bearer.json() }).toEqual({ status: 403, body: REFUSED });
    // MCP: the coding agents' tools are the API's too.
    const mcp = await fetch(`${base}/v1/mcp`, {
      method: 'POST',
      headers: { 'x-api-key': AGENT, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    expect({ status: mcp.status, body: await mcp.json() }).toEqual({ status: 403, body: REFUSED });

    // Nothing changed: the finding is open, the rule in effect, and the next bad refund is halted.
    const after = (await api<{ findings: Finding[] }>('GET', `/v1/projects/${PROJECT}/findings?run_id=${runId}`)).body.findings.find((f) => f.id === finding.id);
    expect(after).toMatchObject({ dismissed_at: null });
    expect(['open', 'active']).toContain(after?.state);
    expect(app.checks().checks.find((c) => c.id === RULE_ID)).toMatchObject({ action: 'halt' });
    const next = await refundWithoutLookup(agent);
    expect(next.error).toBeInstanceOf(RunHaltedError);
    expect(next.refunded).toEqual([]);
  });
});

describe('a key configured as before scopes (project=key)', () => {
  it('sends spans and is halted like the agent key, and does everything of the API and MCP', async () => {
    const full = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: FULL, flushIntervalMs: 20, precheckPolicyTimeoutMs: 10_000 });
    try {
      const r = await refundWithoutLookup(full);
      expect(r.error).toBeInstanceOf(RunHaltedError);
      const finding = (await findingsOf(r.runId)).find((f) => f.check_id === RULE_ID)!;
      const dismissed = await api<{ finding: Finding }>('POST', `/v1/projects/${PROJECT}/findings/${finding.id}/dismiss`, { note: 'checked by hand' });
      expect(dismissed).toMatchObject({ status: 200, body: { finding: { id: finding.id, state: 'dismissed' } } });
    } finally {
      await full.close();
    }
    const mcp = await fetch(`${base}/v1/mcp`, {
      method: 'POST',
      headers: { 'x-api-key': FULL, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    expect(mcp.status).toBe(200);
    expect(((await mcp.json()) as { result: { tools: { name: string }[] } }).result.tools.map((t) => t.name)).toContain('list_findings');
    expect(await api('DELETE', `/v1/projects/${PROJECT}/checks/${RULE_ID}`)).toEqual({ status: 200, body: { deleted: RULE_ID } });
    expect(app.checks().checks.map((c) => c.id)).not.toContain(RULE_ID);
  });
});
