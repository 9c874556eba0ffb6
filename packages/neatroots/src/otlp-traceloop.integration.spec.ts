import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { context, trace, SpanStatusCode, type Span as OtelSpan, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createLogger } from '@neatroots/platform';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { testConfig } from './test-app.test';

/**
 * An OpenLLMetry (Traceloop) agent run, as its decorators and its OpenAI instrumentation record
 * it, sent by the OpenTelemetry JS SDK to the embedded deployment: its spans come back typed,
 * with their tools, inputs and outputs, the run ends from its workflow span, and the built-in
 * repeated-tool-call check sees the three identical order lookups.
 */
const KEY = 'traceloop-key';
const PROJECT = 'shop';
const J = JSON.stringify;

interface RunPage {
  run: { end_status: string | null; session_id: string | null; final_output: unknown; span_count: number };
  spans: { name: string; type: string; tool?: string; status: string; input?: unknown; output?: unknown }[];
  findings: { check_id: string }[];
}

describe('embedded: OpenLLMetry (Traceloop) spans over OTLP', () => {
  let home: string;
  let app: EmbeddedApp;

  beforeAll(async () => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-traceloop-'));
    app = await startEmbedded({ config: testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` }), inMemoryDb: true, log: createLogger({ level: 'error' }) });
  });

  afterAll(async () => {
    await app?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  async function traceloopRun(): Promise<string> {
    const exporter = new OTLPTraceExporter({ url: `http://127.0.0.1:${app.ingest.otlpHttpPort}/v1/traces`, headers: { 'x-api-key': KEY } });
    const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': 'tl-svc' }), spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const tracer: Tracer = provider.getTracer('traceloop.tracer');
    const child = (parent: OtelSpan, name: string, attributes: Record<string, string | number>) =>
      tracer.startSpan(name, { attributes }, trace.setSpan(context.active(), parent));
    const wf = tracer.startSpan('refund_workflow.workflow', {
      attributes: {
        'traceloop.span.kind': 'workflow',
        'traceloop.entity.name': 'refund_workflow',
        'traceloop.entity.input': J({ args: ['Refund order 7 please'], kwargs: {} }),
        'traceloop.association.properties.session_id': 'tl-sess-1',
      },
    });
    const agent = child(wf, 'refund_agent.agent', { 'traceloop.span.kind': 'agent', 'traceloop.entity.name': 'refund_agent', 'gen_ai.agent.name': 'refund_agent' });
    child(agent, 'openai.chat', {
      'llm.request.type': 'chat',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.prompt.0.role': 'user',
      'gen_ai.prompt.0.content': 'Refund order 7 please',
      'gen_ai.completion.0.role': 'assistant',
      'gen_ai.completion.0.tool_calls.0.name': 'lookup_order',
      'gen_ai.completion.0.tool_calls.0.arguments': J({ id: 7 }),
      'gen_ai.usage.prompt_tokens': 100,
      'gen_ai.usage.completion_tokens': 20,
      'llm.usage.total_tokens': 120,
    }).end();
    for (let i = 0; i < 3; i++) {
      child(agent, 'lookup_order.tool', {
        'traceloop.span.kind': 'tool',
        'traceloop.entity.name': 'lookup_order',
        'traceloop.entity.input': J({ args: [], kwargs: { id: 7 } }),
        'traceloop.entity.output': J({ status: 'shipped' }),
      }).end();
    }
    const refund = child(agent, 'refund.tool', { 'traceloop.span.kind': 'tool', 'traceloop.entity.name': 'refund', 'traceloop.entity.input': J({ args: [], kwargs: { id: 7, amount: 50 } }) });
    refund.setStatus({ code: SpanStatusCode.ERROR, message: 'Payment gateway timed out' });
    refund.end();
    agent.setAttribute('traceloop.entity.output', J('Your refund of $50 is done.'));
    agent.end();
    wf.setAttribute('traceloop.entity.output', J('Your refund of $50 is done.'));
    wf.end();
    await provider.forceFlush();
    await provider.shutdown();
    return wf.spanContext().traceId;
  }

  /** The run once it has ended and its findings are in (the checks run after the spans are stored). */
  async function ended(runId: string): Promise<RunPage> {
    const url = `http://127.0.0.1:${app.httpPort}/v1/projects/${PROJECT}/runs/${runId}`;
    for (;;) {
      const res = await fetch(url, { headers: { 'x-api-key': KEY } });
      if (res.ok) {
        const page = (await res.json()) as RunPage;
        if (page.run.end_status && page.run.span_count === 7 && page.findings.some((f) => f.check_id === 'repeated-tool-call')) return page;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('types the spans, reads their tools and content, ends the run and raises repeated-tool-call', async () => {
    const page = await ended(await traceloopRun());
    expect(page.run).toMatchObject({ end_status: 'ok', session_id: 'tl-sess-1', final_output: 'Your refund of $50 is done.' });
    const spans = page.spans.map((s) => ({ name: s.name, type: s.type, tool: s.tool, status: s.status })).sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
    expect(spans).toEqual([
      { name: 'lookup_order.tool', type: 'tool', tool: 'lookup_order', status: 'ok' },
      { name: 'lookup_order.tool', type: 'tool', tool: 'lookup_order', status: 'ok' },
      { name: 'lookup_order.tool', type: 'tool', tool: 'lookup_order', status: 'ok' },
      { name: 'openai.chat', type: 'llm', tool: undefined, status: 'ok' },
      { name: 'refund.tool', type: 'tool', tool: 'refund', status: 'error' },
      { name: 'refund_agent.agent', type: 'agent', tool: undefined, status: 'ok' },
      { name: 'refund_workflow.workflow', type: 'agent', tool: undefined, status: 'ok' },
    ]);
    expect(page.spans.find((s) => s.name === 'lookup_order.tool')).toMatchObject({ input: { args: [], kwargs: { id: 7 } }, output: { status: 'shipped' } });
    expect(page.spans.find((s) => s.name === 'openai.chat')).toMatchObject({
      input: [{ role: 'user', content: 'Refund order 7 please' }],
      output: [{ role: 'assistant', tool_calls: [{ name: 'lookup_order', arguments: { id: 7 } }] }],
    });
  });
});
