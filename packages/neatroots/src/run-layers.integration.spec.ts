import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { context, trace, SpanStatusCode, ROOT_CONTEXT, type Span as OtelSpan } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createLogger } from '@neatroots/platform';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { testConfig } from './test-app.test';

/**
 * One failed MCP tool call traced at its three layers, as the OpenTelemetry conventions define
 * them and the JS SDK exports them: the agent framework's `execute_tool search_docs`, the MCP
 * client's `tools/call search_docs` under it, and the MCP server's `tools/call search_docs`
 * under that, exported by the server's own process (another provider). The run's REST counts
 * count the call once, as the checks do; every layer is still one of its stored spans.
 */
const KEY = 'layers-key';
const PROJECT = 'docs';

interface RunRow { run_id: string; end_status: string | null; span_count: number; error_count: number; stored_span_count: number }

describe('embedded: a tool call traced at several layers counts once in the run\'s counts', () => {
  let home: string;
  let app: EmbeddedApp;

  beforeAll(async () => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-layers-'));
    app = await startEmbedded({ config: testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` }), inMemoryDb: true, log: createLogger({ level: 'error' }) });
  });

  afterAll(async () => {
    await app?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  const get = async <T>(rest: string): Promise<T> => {
    const res = await fetch(`http://127.0.0.1:${app.httpPort}/v1/projects/${PROJECT}/${rest}`, { headers: { 'x-api-key': KEY } });
    expect(res.status).toBe(200);
    return (await res.json()) as T;
  };

  /** A process exporting its spans as each ends. */
  function process(service: string): { provider: BasicTracerProvider; tracer: ReturnType<BasicTracerProvider['getTracer']> } {
    const exporter = new OTLPTraceExporter({ url: `http://127.0.0.1:${app.ingest.otlpHttpPort}/v1/traces`, headers: { 'x-api-key': KEY } });
    const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': service }), spanProcessors: [new SimpleSpanProcessor(exporter)] });
    return { provider, tracer: provider.getTracer('x') };
  }

  it('one failed MCP call is one span and one error of the run, in its page and the runs list', async () => {
    const agentSide = process('docs-agent');
    const serverSide = process('docs-mcp-server');
    const under = (parent: OtelSpan) => trace.setSpan(context.active(), parent);
    const tool = { 'gen_ai.tool.name': 'search_docs', 'gen_ai.tool.call.arguments': JSON.stringify({ q: 'retention' }) };
    const agent = agentSide.tracer.startSpan('invoke_agent docs-agent', { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'docs-agent' } }, ROOT_CONTEXT);
    const framework = agentSide.tracer.startSpan('execute_tool search_docs', { attributes: { 'gen_ai.operation.name': 'execute_tool', ...tool } }, under(agent));
    const client = agentSide.tracer.startSpan('tools/call search_docs', { attributes: { 'gen_ai.operation.name': 'execute_tool', 'mcp.method.name': 'tools/call', ...tool } }, under(framework));
    // The server's span, parented through the request's _meta, in another process: exported first.
    const server = serverSide.tracer.startSpan('tools/call search_docs', { attributes: { 'gen_ai.operation.name': 'execute_tool', 'mcp.method.name': 'tools/call', ...tool } }, under(client));
    for (const s of [server, client, framework]) {
      s.setStatus({ code: SpanStatusCode.ERROR, message: 'search index unavailable' });
      s.end();
    }
    await serverSide.provider.forceFlush();
    agent.end();
    await agentSide.provider.forceFlush();
    await Promise.all([serverSide.provider.shutdown(), agentSide.provider.shutdown()]);

    const runId = agent.spanContext().traceId;
    let run: RunRow;
    // Until the run ended and all four spans are stored (each export is its own batch).
    for (;;) {
      const res = await fetch(`http://127.0.0.1:${app.httpPort}/v1/projects/${PROJECT}/runs/${runId}`, { headers: { 'x-api-key': KEY } });
      if (res.ok) {
        run = ((await res.json()) as { run: RunRow }).run;
        if (run.end_status && run.stored_span_count === 4) break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    // The agent's span and one call, which failed.
    expect(run).toMatchObject({ span_count: 2, error_count: 1, stored_span_count: 4 });
    const list = await get<{ runs: RunRow[] }>('runs');
    expect(list.runs.find((r) => r.run_id === runId)).toMatchObject({ span_count: 2, error_count: 1, stored_span_count: 4 });
    // Every layer is still one of the run's spans.
    const page = await get<{ spans: { type: string }[] }>(`runs/${runId}`);
    expect(page.spans.map((s) => s.type).sort()).toEqual(['agent', 'mcp_tool', 'mcp_tool', 'tool']);
  });
});
