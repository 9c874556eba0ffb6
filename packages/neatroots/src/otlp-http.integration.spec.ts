import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Metadata } from '@grpc/grpc-js';
import { context, trace, type Span as OtelSpan, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BasicTracerProvider, SimpleSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { createLogger, pythonOrSkip } from '@neatroots/platform';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { testConfig } from './test-app.test';

/**
 * OTLP/HTTP in the embedded deployment, from the configuration on: the same agent run sent
 * by the OpenTelemetry JS SDK over gRPC, over HTTP as JSON and over HTTP as protobuf, and by
 * the OpenTelemetry Python SDK over HTTP, is stored alike and raises the same findings, served
 * by the HTTP API.
 */
const python = pythonOrSkip('the OpenTelemetry Python SDK into the embedded deployment', ['opentelemetry.exporter.otlp.proto.http.trace_exporter']);
const pythonAgent = path.resolve(__dirname, '../../../services/ingest/src/fixtures/otel_python_agent.py');
const KEY = 'otlp-http-key';
const PROJECT = 'shop';

interface RunPage {
  run: { workflow: string; span_count: number };
  spans: { type: string; tool?: string; name: string; status: string; input?: unknown }[];
  findings: { check_id: string; action: string }[];
}

describe('embedded: OTLP/HTTP beside OTLP/gRPC', () => {
  let home: string;
  let app: EmbeddedApp;

  beforeAll(async () => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-otlp-http-'));
    const config = testConfig(home, {
      NEATROOTS_API_KEYS: `${PROJECT}=${KEY}`,
    });
    app = await startEmbedded({ config, inMemoryDb: true, log: createLogger({ level: 'error' }) });
  });

  afterAll(async () => {
    await app?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  /** An agent that searches the same thing three times (the built-in repeated-tool-call check). */
  async function agentRun(exporter: SpanExporter): Promise<string> {
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const tracer: Tracer = provider.getTracer('support-agent');
    const root: OtelSpan = tracer.startSpan('invoke_agent support-agent', {
      attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'support-agent' },
    });
    const ctx = trace.setSpan(context.active(), root);
    for (let i = 0; i < 3; i++) {
      tracer.startSpan('execute_tool search_kb', {
        attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'search_kb', 'gen_ai.tool.call.arguments': '{"query":"reset password"}' },
      }, ctx).end();
    }
    root.end();
    await provider.forceFlush();
    await provider.shutdown();
    return root.spanContext().traceId;
  }

  async function stored(runId: string): Promise<RunPage> {
    const url = `http://127.0.0.1:${app.httpPort}/v1/projects/${PROJECT}/runs/${runId}`;
    const deadline = Date.now() + 10_000;
    let page: RunPage | undefined;
    while (Date.now() < deadline) {
      const res = await fetch(url, { headers: { 'x-api-key': KEY } });
      if (res.ok) {
        page = (await res.json()) as RunPage;
        if (page.run.span_count === 4 && page.findings.length) break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    if (!page) throw new Error(`run ${runId} was not stored`);
    return page;
  }

  const what = (p: RunPage) => ({
    run: { workflow: p.run.workflow, span_count: p.run.span_count },
    // Spans of the same millisecond are ordered by their (random) ids: compared as a set.
    spans: p.spans.map((s) => ({ type: s.type, tool: s.tool, name: s.name, status: s.status, input: s.input })).sort((x, y) => x.type.localeCompare(y.type)),
    findings: p.findings.map((f) => `${f.check_id}:${f.action}`).sort(),
  });

  it('stores the same run and raises the same findings over gRPC, HTTP/JSON and HTTP/protobuf', async () => {
    const metadata = new Metadata();
    metadata.set('x-api-key', KEY);
    const url = `http://127.0.0.1:${app.ingest.otlpHttpPort}/v1/traces`;
    const headers = { 'x-api-key': KEY };
    const grpc = what(await stored(await agentRun(new GrpcExporter({ url: `http://127.0.0.1:${app.ingest.otlpPort}`, metadata }))));
    expect(grpc.run).toEqual({ workflow: 'support-agent', span_count: 4 });
    expect(grpc.findings).toContain('repeated-tool-call:flag');
    expect(what(await stored(await agentRun(new JsonExporter({ url, headers }))))).toEqual(grpc);
    expect(what(await stored(await agentRun(new ProtoExporter({ url, headers, compression: 'gzip' as never }))))).toEqual(grpc);
  });

  (python ? it : it.skip)('stores the same run and raises the same findings from the OpenTelemetry Python SDK over OTLP/HTTP', async () => {
    const metadata = new Metadata();
    metadata.set('x-api-key', KEY);
    const grpc = what(await stored(await agentRun(new GrpcExporter({ url: `http://127.0.0.1:${app.ingest.otlpPort}`, metadata }))));
    const url = `http://127.0.0.1:${app.ingest.otlpHttpPort}/v1/traces`;
    const { stdout } = await promisify(execFile)(python!, [pythonAgent, url, KEY, 'gzip', 'support'], { timeout: 60_000 });
    const { trace_id } = JSON.parse(stdout) as { trace_id: string };
    expect(what(await stored(trace_id))).toEqual(grpc);
  });
});
