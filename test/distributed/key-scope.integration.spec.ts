import * as fs from 'node:fs';
import * as path from 'node:path';
import { credentials, Metadata, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { context, trace, SpanStatusCode } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { requireService, until } from '@neatroots/platform';
import { v1 } from '@neatroots/proto';
import { Cluster } from './cluster';

/**
 * Key scopes in the distributed deployment, where no process holds the keys: ingest and the api
 * each ask the review service over gRPC (ResolveKey) which project a key opens and its scope.
 * The agents' key (`project=key:ingest`) exports over OTLP and hears its run's halt on Subscribe;
 * the REST API and MCP answer it 403, and ingest refuses it the whole project's notes; a full
 * key (`project=key`) does all of it. (key-scope.integration.spec.ts in packages/neatroots covers
 * the embedded default, where the scope is read in-process.)
 */
const SUITE = 'distributed: key scopes';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redis && pg ? describe : describe.skip;

const PROJECT = `scope-${Date.now().toString(36)}`;
const FULL = `full-key-${PROJECT}`;
const AGENT = `agent-key-${PROJECT}`;
const RULE_ID = 'refund-without-lookup';
const REFUSED = { error: { code: 'forbidden', message: 'this key may only send spans (scope ingest); use a full key for the API' } };

interface Finding {
  id: string;
  check_id: string;
  run_id: string;
  action: string;
}

maybe(SUITE, () => {
  let cluster: Cluster;
  let ingest: v1.IngestClient;

  beforeAll(async () => {
    cluster = new Cluster(
      { kafka: kafka!, redis: redis!, pg: pg! },
      { NEATROOTS_API_KEYS: `${PROJECT}=${FULL},${PROJECT}=${AGENT}:ingest`, NEATROOTS_STEERING: PROJECT },
    );
    await cluster.init();
    fs.mkdirSync(path.join(cluster.home, 'checks'));
    fs.writeFileSync(
      path.join(cluster.home, 'checks', 'refunds.yaml'),
      `id: ${RULE_ID}\nkind: rule\ntitle: Refund without lookup\nrule: { type: requires_before, call: { tool: issue_refund }, requires: { tool: lookup_order } }\nguidance: Call {requires} first.\naction: halt\n`,
    );
    // review first: it migrates the database and stores the keys the others look up
    await cluster.start('review');
    await Promise.all([cluster.start('rule-engine'), cluster.start('ingest'), cluster.start('api')]);
    ingest = new v1.IngestClient(`127.0.0.1:${cluster.ports.grpc}`, credentials.createInsecure());
  }, 180_000);

  afterAll(async () => {
    ingest?.close();
    await cluster?.close();
  }, 60_000);

  /** A Subscribe stream with `key`: its notes, and whether ingest put it in place or refused it. */
  function subscribe(key: string, runId: string) {
    const md = new Metadata();
    md.set('x-api-key', key);
    const stream: ClientReadableStream<v1.Note> = ingest.subscribe({ run_id: runId }, md);
    const notes: v1.Note[] = [];
    stream.on('data', (n: v1.Note) => notes.push(n));
    const outcome = new Promise<{ code: number; details: string } | 'subscribed'>((resolve) => {
      stream.on('error', (e: ServiceError) => resolve({ code: e.code, details: e.details }));
      stream.on('metadata', (m: Metadata) => m.get('x-neatroots-subscribed').length && resolve('subscribed'));
    });
    return { stream, notes, outcome };
  }

  const api = async (method: string, url: string, key: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${cluster.ports.http}${url}`, {
      method,
      headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as unknown };
  };

  let runId: string;

  it("an ingest key exports over OTLP/gRPC and gets its run's halt on Subscribe", async () => {
    const md = new Metadata();
    md.set('x-api-key', AGENT);
    const provider = new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: `http://127.0.0.1:${cluster.ports.otlp}`, metadata: md }))],
    });
    const tracer = provider.getTracer('agent');
    const root = tracer.startSpan('invoke_agent', { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'refunds' } });
    runId = root.spanContext().traceId;
    const run = subscribe(AGENT, runId);
    try {
      expect(await run.outcome).toBe('subscribed');
      const s = tracer.startSpan('execute_tool issue_refund', {
        attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'issue_refund', 'gen_ai.tool.call.arguments': '{"order":7}' },
      }, trace.setSpan(context.active(), root));
      s.setStatus({ code: SpanStatusCode.OK });
      s.end();
      const halt = await until('the halt on the agent key\'s stream', () => run.notes.find((n) => n.kind === 'halt'), 60_000, 50);
      expect(halt).toMatchObject({ run_id: runId, check_id: RULE_ID, project: PROJECT });
      root.end();
    } finally {
      run.stream.cancel();
      await provider.shutdown();
    }
  });

  it('the REST API and MCP answer the ingest key 403 naming its scope; a full key reads and dismisses', async () => {
    // The full key: the halt's finding, through the review service.
    const finding = await until('the halt finding, read with the full key', async () => {
      const r = await api('GET', `/v1/projects/${PROJECT}/findings?run_id=${runId}`, FULL);
      return r.status === 200 ? (r.body as { findings: Finding[] }).findings.find((f) => f.check_id === RULE_ID) : undefined;
    }, 60_000);
    expect(finding).toMatchObject({ run_id: runId, action: 'halt' });

    expect(await api('GET', `/v1/projects/${PROJECT}/findings`, AGENT)).toEqual({ status: 403, body: REFUSED });
    expect(await api('GET', `/v1/projects/${PROJECT}/runs/${runId}`, AGENT)).toEqual({ status: 403, body: REFUSED });
    // A body too: refused from its headers, before the body is read.
    expect(await api('POST', `/v1/projects/${PROJECT}/findings/${finding.id}/dismiss`, AGENT, { note: 'not a problem' })).toEqual({ status: 403, body: REFUSED });
    const mcp = await fetch(`http://127.0.0.1:${cluster.ports.http}/v1/mcp`, {
      method: 'POST',
      headers: { 'x-api-key': AGENT, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    expect({ status: mcp.status, body: await mcp.json() }).toEqual({ status: 403, body: REFUSED });

    expect(await api('POST', `/v1/projects/${PROJECT}/findings/${finding.id}/dismiss`, FULL, { note: 'checked by hand' })).toMatchObject({
      status: 200,
      body: { finding: { id: finding.id, state: 'dismissed' } },
    });
  });

  it("a Subscribe of the whole project with the ingest key is refused PERMISSION_DENIED; a full key's is put in place", async () => {
    const agentWide = subscribe(AGENT, '');
    const fullWide = subscribe(FULL, '');
    try {
      expect(await agentWide.outcome).toEqual({
        code: 7, // PERMISSION_DENIED
        details: "a key of scope ingest may subscribe to one run's notes, not the whole project's; use a full key",
      });
      expect(await fullWide.outcome).toBe('subscribed');
      expect(agentWide.notes).toEqual([]);
    } finally {
      for (const s of [agentWide, fullWide]) s.stream.cancel();
    }
  });

  // Last: it stops the review service.
  it('with the review service stopped, MCP still answers a full key used before: tools/list, and a tool that needs review as a tool error naming it', async () => {
    const mcp = async () => {
      const client = new Client({ name: 'review-away', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${cluster.ports.http}/v1/mcp`), { requestInit: { headers: { 'x-api-key': FULL } } }));
      return client;
    };
    // Used while review answers.
    const before = await mcp();
    expect((await before.listTools()).tools.length).toBeGreaterThan(0);
    await before.close();

    await cluster.stop(cluster.procs.find((p) => p.target === 'review')!);
    const client = await mcp();
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(['list_findings', 'create_check']));
      const r = (await client.callTool({ name: 'list_findings', arguments: {} })) as { isError?: boolean; content: { text: string }[] };
      expect(r.isError).toBe(true);
      expect(r.content.map((c) => c.text).join('\n')).toMatch(/^the review service cannot answer right now \((UNAVAILABLE|DEADLINE_EXCEEDED): .*\); retry shortly$/);
    } finally {
      await client.close();
    }
    // A key the api never resolved cannot be checked without review: 503, not 401.
    const never = await fetch(`http://127.0.0.1:${cluster.ports.http}/v1/mcp`, {
      method: 'POST',
      headers: { 'x-api-key': `never-seen-${PROJECT}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    expect({ status: never.status, body: await never.json() }).toMatchObject({ status: 503, body: { error: { code: 'unavailable', message: expect.stringMatching(/^the review service cannot answer right now/) } } });
  }, 120_000);
});
