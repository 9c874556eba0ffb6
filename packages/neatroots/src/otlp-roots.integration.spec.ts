import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { context, trace, SpanKind, SpanStatusCode, ROOT_CONTEXT, type Span as OtelSpan } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createLogger } from '@neatroots/platform';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { testConfig } from './test-app.test';

/**
 * A run whose agent span has a parent ends: the audit's t6 trace (an invoke_agent span whose
 * refund tool failed, answering "Refunded!") sent by the OpenTelemetry JS SDK under an HTTP
 * server span `POST /chat`, as an instrumented web server records it, and under a caller's
 * traceparent that the exporter marks remote. The run ends with the agent's answer and the
 * shipped unrecovered-tool-error check, evaluated at run end, raises.
 */
const KEY = 'roots-key';
const PROJECT = 'shop';
const J = JSON.stringify;

interface RunPage {
  run: { end_status: string | null; final_output: unknown; workflow: string | null; span_count: number; run_start: { user_message?: string } | null };
  findings: { check_id: string }[];
}

describe('embedded: a run ends from its agent span under an HTTP server span or a remote parent', () => {
  let home: string;
  let app: EmbeddedApp;

  beforeAll(async () => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-roots-'));
    app = await startEmbedded({ config: testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` }), inMemoryDb: true, log: createLogger({ level: 'error' }) });
  });

  afterAll(async () => {
    await app?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  /** The run once it has ended and unrecovered-tool-error (a check at run end) is in. */
  async function ended(runId: string, spans: number): Promise<RunPage> {
    const url = `http://127.0.0.1:${app.httpPort}/v1/projects/${PROJECT}/runs/${runId}`;
    for (;;) {
      const res = await fetch(url, { headers: { 'x-api-key': KEY } });
      if (res.ok) {
        const page = (await res.json()) as RunPage;
        if (page.run.end_status && page.run.span_count === spans && page.findings.some((f) => f.check_id === 'unrecovered-tool-error')) return page;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('ends the t6 run under POST /chat and raises unrecovered-tool-error', async () => {
    const exporter = new OTLPTraceExporter({ url: `http://127.0.0.1:${app.ingest.otlpHttpPort}/v1/traces`, headers: { 'x-api-key': KEY } });
    // As the audit sent it: a batch processor, which exports the request's spans together.
    const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': 'web-svc' }), spanProcessors: [new BatchSpanProcessor(exporter)] });
    const tracer = provider.getTracer('x');
    const under = (parent: OtelSpan) => trace.setSpan(context.active(), parent);
    const http = tracer.startSpan('POST /chat', { kind: SpanKind.SERVER, attributes: { 'http.request.method': 'POST', 'url.path': '/chat', 'http.route': '/chat' } }, ROOT_CONTEXT);
    const agent = tracer.startSpan('invoke_agent support-agent', {
      attributes: {
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.agent.name': 'support-agent',
        'gen_ai.input.messages': J([{ role: 'user', parts: [{ type: 'text', content: 'Refund order 7' }] }]),
      },
    }, under(http));
    const tool = tracer.startSpan('execute_tool refund', { attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'refund', 'gen_ai.tool.call.arguments': J({ id: 7 }) } }, under(agent));
    tool.setStatus({ code: SpanStatusCode.ERROR, message: 'gateway down' });
    tool.end();
    agent.setAttribute('gen_ai.output.messages', J([{ role: 'assistant', parts: [{ type: 'text', content: 'Refunded!' }] }]));
    agent.end();
    http.end();
    await provider.forceFlush();
    await provider.shutdown();

    const page = await ended(agent.spanContext().traceId, 3);
    expect(page.run).toMatchObject({ end_status: 'ok', final_output: 'Refunded!', workflow: 'support-agent', run_start: { user_message: 'Refund order 7' } });
  });

  it('ends the t6 run under an invoke_workflow span that records no answer with its agent\'s answer, and raises unrecovered-tool-error', async () => {
    const exporter = new OTLPTraceExporter({ url: `http://127.0.0.1:${app.ingest.otlpHttpPort}/v1/traces`, headers: { 'x-api-key': KEY } });
    const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': 'web-svc' }), spanProcessors: [new BatchSpanProcessor(exporter)] });
    const tracer = provider.getTracer('x');
    const under = (parent: OtelSpan) => trace.setSpan(context.active(), parent);
    const workflow = tracer.startSpan('invoke_workflow support-pipeline', { attributes: { 'gen_ai.operation.name': 'invoke_workflow', 'gen_ai.workflow.name': 'support-pipeline' } }, ROOT_CONTEXT);
    const agent = tracer.startSpan('invoke_agent support-agent', {
      attributes: {
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.agent.name': 'support-agent',
        'gen_ai.input.messages': J([{ role: 'user', parts: [{ type: 'text', content: 'Refund order 7' }] }]),
      },
    }, under(workflow));
    const tool = tracer.startSpan('execute_tool refund', { attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'refund', 'gen_ai.tool.call.arguments': J({ id: 7 }) } }, under(agent));
    tool.setStatus({ code: SpanStatusCode.ERROR, message: 'gateway down' });
    tool.end();
    agent.setAttribute('gen_ai.output.messages', J([{ role: 'assistant', parts: [{ type: 'text', content: 'Refunded!' }] }]));
    agent.end();
    workflow.end();
    await provider.forceFlush();
    await provider.shutdown();

    const page = await ended(workflow.spanContext().traceId, 3);
    expect(page.run).toMatchObject({ end_status: 'ok', final_output: 'Refunded!', workflow: 'support-pipeline', run_start: { user_message: 'Refund order 7' } });
  });

  it('ends a run whose agent span is under a remote parent the exporter marks so (OTLP/JSON, span flags)', async () => {
    const traceId = '5b8efff798038103d269b633813fc60c';
    const at = (s: number) => `${1764500000 + s}000000000`;
    const attr = (key: string, value: string) => ({ key, value: { stringValue: value } });
    const body = {
      resourceSpans: [{
        resource: { attributes: [attr('service.name', 'support-svc')] },
        scopeSpans: [{
          scope: { name: 'curl' },
          spans: [
            {
              traceId, spanId: 'eee19b7ec3c1b174', parentSpanId: 'aaaaaaaaaaaaaaaa', flags: 0x300, kind: 1,
              name: 'invoke_agent support-agent', startTimeUnixNano: at(0), endTimeUnixNano: at(3),
              attributes: [
                attr('gen_ai.operation.name', 'invoke_agent'), attr('gen_ai.agent.name', 'support-agent'),
                attr('gen_ai.output.messages', J([{ role: 'assistant', parts: [{ type: 'text', content: 'Refunded!' }] }])),
              ],
            },
            {
              traceId, spanId: '00f067aa0ba902b7', parentSpanId: 'eee19b7ec3c1b174', flags: 0x100, kind: 1,
              name: 'execute_tool refund', startTimeUnixNano: at(1), endTimeUnixNano: at(2),
              attributes: [attr('gen_ai.operation.name', 'execute_tool'), attr('gen_ai.tool.name', 'refund'), attr('gen_ai.tool.call.arguments', J({ id: 7 }))],
              status: { code: 2, message: 'gateway down' },
            },
          ],
        }],
      }],
    };
    const res = await fetch(`http://127.0.0.1:${app.ingest.otlpHttpPort}/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: J(body),
    });
    expect(res.status).toBe(200);
    const page = await ended(traceId, 2);
    expect(page.run).toMatchObject({ end_status: 'ok', final_output: 'Refunded!' });
  });
});
