import * as fs from 'node:fs';
import * as path from 'node:path';
import { credentials, Metadata } from '@grpc/grpc-js';
import { context, trace, SpanStatusCode, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { openPostgres, requireService } from '@neatroots/platform';
import { health } from '@neatroots/proto';
import { NeatrootsClient, type Note } from '@neatroots/sdk';
import { Cluster } from './cluster';

/**
 * The distributed deployment end to end, each service its own process on the real Kafka,
 * Redis and Postgres: OTLP spans in, findings stored in Postgres, a note and a halt back to
 * the agent, the REST API answering through the review service over gRPC.
 */
const SUITE = 'distributed end to end';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redis && pg ? describe : describe.skip;

const PROJECT = `shop-${Date.now().toString(36)}`;
const KEY = `key-${PROJECT}`;

async function until<T>(fn: () => Promise<T | undefined> | T | undefined, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v as T;
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

maybe(SUITE, () => {
  let cluster: Cluster;
  let provider: BasicTracerProvider;
  let tracer: Tracer;
  let client: NeatrootsClient;

  beforeAll(async () => {
    cluster = new Cluster({ kafka: kafka!, redis: redis!, pg: pg! }, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}`, NEATROOTS_STEERING: PROJECT });
    await cluster.init();
    fs.mkdirSync(path.join(cluster.home, 'checks'));
    fs.writeFileSync(
      path.join(cluster.home, 'checks', 'refunds.yaml'),
      'id: refund-without-lookup\nkind: rule\ntitle: Refund without lookup\nrule: { type: requires_before, call: { tool: issue_refund }, requires: { tool: lookup_order } }\nguidance: Call {requires} first.\naction: halt\n',
    );
    // review first: it migrates the database and answers the others' key lookups
    await cluster.start('review');
    await Promise.all([cluster.start('rule-engine'), cluster.start('ingest'), cluster.start('api')]);
    const md = new Metadata();
    md.set('x-api-key', KEY);
    provider = new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: `http://127.0.0.1:${cluster.ports.otlp}`, metadata: md }))],
    });
    tracer = provider.getTracer('agent');
    client = new NeatrootsClient({ address: `127.0.0.1:${cluster.ports.grpc}`, apiKey: KEY, flushIntervalMs: 20 });
  }, 180_000);

  afterAll(async () => {
    await client?.close();
    await provider?.shutdown();
    await cluster?.close();
  }, 60_000);

  it('serves grpc.health.v1 on every service', async () => {
    for (const sp of cluster.procs) {
      const c = new health.HealthClient(`127.0.0.1:${sp.servicePort}`, credentials.createInsecure());
      const res = await new Promise<health.HealthCheckResponse>((resolve, reject) =>
        c.check({ service: '' }, (err, r) => (err ? reject(err) : resolve(r))),
      );
      c.close();
      expect([sp.target, res.status]).toEqual([sp.target, health.HealthCheckResponse_ServingStatus.SERVING]);
    }
    const metrics = await (await fetch(`http://127.0.0.1:${cluster.procs[0].adminPort}/metrics`)).text();
    expect(metrics).toContain('neatroots_bus_consumed_total');
  });

  it('checks OTLP spans live: a note and a halt reach the agent, findings land in Postgres and the API', async () => {
    const root = tracer.startSpan('invoke_agent', { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'support' } });
    const runId = root.spanContext().traceId;
    const run = client.startRun({ run_id: runId, workflow: 'support' });
    const notes: Note[] = [];
    run.onNote((n) => notes.push(n));
    await run.whenSubscribed();
    const ctx = trace.setSpan(context.active(), root);
    const tool = (name: string, args: unknown) => {
      const s = tracer.startSpan(`execute_tool ${name}`, {
        attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': name, 'gen_ai.tool.call.arguments': JSON.stringify(args) },
      }, ctx);
      s.setStatus({ code: SpanStatusCode.OK });
      s.end();
    };
    for (let i = 0; i < 3; i++) tool('search_kb', { q: 'same' });
    await until(() => notes.some((n) => n.check_id === 'repeated-tool-call'));
    tool('issue_refund', { order: 1 });
    await until(() => run.halted, 30_000);
    expect(run.haltNote?.check_id).toBe('refund-without-lookup');
    root.end();
    await run.end();

    const db = await openPostgres({ url: pg! });
    try {
      const rows = await until(async () => {
        const r = await db.query<{ check_id: string; action: string; active_at: unknown }>(
          'SELECT check_id, action, active_at FROM findings WHERE project = $1 AND run_id = $2 ORDER BY check_id',
          [PROJECT, runId],
        );
        return r.rows.length >= 2 && r.rows.every((x) => x.active_at) ? r.rows : undefined;
      });
      expect(rows.map((r) => [r.check_id, r.action])).toEqual([
        ['refund-without-lookup', 'halt'],
        ['repeated-tool-call', 'flag'],
      ]);
    } finally {
      await db.close();
    }
    const res = await fetch(`http://127.0.0.1:${cluster.ports.http}/v1/projects/${PROJECT}/runs/${runId}`, { headers: { 'x-api-key': KEY } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { run: { run_id: string }; spans: unknown[] };
    expect(body.run.run_id).toBe(runId);
    expect(body.spans.length).toBeGreaterThanOrEqual(4);
  });
});
