import * as fs from 'node:fs';
import * as path from 'node:path';
import { Metadata } from '@grpc/grpc-js';
import { context, trace, SpanStatusCode, type Span as OtelSpan, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createLogger } from '@neatroots/platform';
import { NeatrootsClient, RunHaltedError, type Note } from '@neatroots/sdk';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { testConfig, tempHome, REFUND_HALT_CHECK } from './test-app.test';

/**
 * End to end, in the embedded deployment: an agent instrumented with the OpenTelemetry JS SDK
 * exports its spans over OTLP/gRPC; the rule engine raises findings; their notes come back
 * through the agent SDK's stream; a halt rule of the user's own stops the run; the findings
 * are stored and served by the HTTP API.
 */
const KEY = 'e2e-key';
const PROJECT = 'shop';

function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const tick = () => (cond() ? resolve() : Date.now() > end ? reject(new Error('timed out')) : setTimeout(tick, 10));
    tick();
  });
}

describe('embedded end to end: OpenTelemetry in, notes and halts out', () => {
  let home: string;
  let app: EmbeddedApp;
  let provider: BasicTracerProvider;
  let tracer: Tracer;
  let client: NeatrootsClient;

  beforeAll(async () => {
    home = tempHome('neatroots-e2e', { 'refunds.yaml': REFUND_HALT_CHECK });
    const config = testConfig(home, {
      NEATROOTS_API_KEYS: `${PROJECT}=${KEY}`,
      NEATROOTS_STEERING: PROJECT,
    });
    app = await startEmbedded({ config, inMemoryDb: true, watch: true, log: createLogger({ level: 'error' }) });
    const metadata = new Metadata();
    metadata.set('x-api-key', KEY);
    provider = new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: `http://127.0.0.1:${app.ingest.otlpPort}`, metadata }))],
    });
    tracer = provider.getTracer('support-agent');
    client = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: KEY, flushIntervalMs: 20 });
  });

  afterAll(async () => {
    await client?.close();
    await provider?.shutdown();
    await app?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  function toolSpan(parent: OtelSpan, tool: string, args: unknown, result: unknown): void {
    const ctx = trace.setSpan(context.active(), parent);
    const s = tracer.startSpan(`execute_tool ${tool}`, {
      attributes: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': tool,
        'gen_ai.tool.call.arguments': JSON.stringify(args),
        'gen_ai.tool.call.result': JSON.stringify(result),
      },
    }, ctx);
    s.setStatus({ code: SpanStatusCode.OK });
    s.end();
  }

  it('sends a note for a repeated call and halts a refund without a lookup', async () => {
    const root = tracer.startSpan('invoke_agent support-agent', {
      attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'support-agent' },
    });
    const runId = root.spanContext().traceId;
    // The agent listens for notes and halts of its run (the run id is the trace id).
    const run = client.startRun({ run_id: runId, workflow: 'support-agent' });
    const notes: Note[] = [];
    run.onNote((n) => notes.push(n));
    await run.whenSubscribed();

    for (let i = 0; i < 3; i++) toolSpan(root, 'search_kb', { query: 'reset password' }, { results: [] });
    await until(() => notes.some((n) => n.check_id === 'repeated-tool-call'));
    const note = notes.find((n) => n.check_id === 'repeated-tool-call')!;
    expect(note.kind).toBe('note');
    expect(note.text).toContain('search_kb');
    expect(run.halted).toBe(false);

    toolSpan(root, 'issue_refund', { order_id: 'A1', amount: 80 }, { ok: true });
    // requires_before waits 250 ms for a late lookup, then halts.
    await until(() => run.halted);
    expect(run.haltNote?.check_id).toBe('refund-without-lookup');
    expect(run.haltNote?.text).toBe('Stop. Call lookup_order before issue_refund.');
    expect(run.signal.aborted).toBe(true);
    await expect(run.toolCall('issue_refund', { order_id: 'A2' }, () => 'refunded')).rejects.toBeInstanceOf(RunHaltedError);
    root.end();
    await run.end();

    // Stored, and served by the HTTP API with the key of the project.
    const url = `http://127.0.0.1:${app.httpPort}/v1/projects/${PROJECT}/runs/${runId}`;
    let body: { findings: { check_id: string; action: string; active_at: string | null }[] } | undefined;
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline) {
      const res = await fetch(url, { headers: { 'x-api-key': KEY } });
      if (res.ok) {
        body = (await res.json()) as typeof body;
        if (body && body.findings.some((f) => f.check_id === 'refund-without-lookup' && f.active_at)) break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const byCheck = Object.fromEntries(body!.findings.map((f) => [f.check_id, f]));
    expect(byCheck['repeated-tool-call']).toMatchObject({ action: 'flag' });
    expect(byCheck['refund-without-lookup']).toMatchObject({ action: 'halt' });
    // A finding is active once its note reached the agent.
    expect(byCheck['refund-without-lookup'].active_at).not.toBeNull();
    const other = await fetch(url, { headers: { 'x-api-key': 'wrong' } });
    expect(other.status).toBe(401);
    // Settings -> Models: agreement between the LLM and the fast classifier, per question.
    const models = await fetch(`http://127.0.0.1:${app.httpPort}/v1/projects/${PROJECT}/models/agreement`, { headers: { 'x-api-key': KEY } });
    expect(models.status).toBe(200);
    expect(Array.isArray(((await models.json()) as { questions: unknown[] }).questions)).toBe(true);
  });

  it('serves /healthz, /readyz and /metrics on its admin port, as every process of the distributed deployment does', async () => {
    const admin = `http://127.0.0.1:${app.adminPort}`;
    expect(await (await fetch(`${admin}/healthz`)).json()).toEqual({ status: 'ok' });
    const ready = await fetch(`${admin}/readyz`);
    expect([ready.status, await ready.json()]).toEqual([200, { status: 'ready' }]);
    // The spans and findings of the test above (synced into the registry every second).
    const counted = (t: string) => /neatroots_spans_accepted_total\{[^}]*\} [1-9]/.test(t) && /neatroots_findings_total\{[^}]*\} [1-9]/.test(t);
    let text = '';
    for (let i = 0; i < 50 && !counted(text); i++) {
      text = await (await fetch(`${admin}/metrics`)).text();
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(text).toMatch(/neatroots_spans_accepted_total\{[^}]*service="all"[^}]*\} [1-9]/);
    expect(text).toMatch(/neatroots_findings_total\{[^}]*\} [1-9]/);
    // Receipt to finding: the halt and the flag of the test above, each counted once published.
    expect(text).toMatch(/neatroots_finding_delay_seconds_count\{[^}]*kind="rule"[^}]*action="halt"[^}]*\} [1-9]/);
    expect(text).toMatch(/neatroots_finding_delay_seconds_count\{[^}]*kind="rule"[^}]*action="flag"[^}]*\} [1-9]/);
  });

  it('reloads checks without a restart when a file changes, and keeps the last good version of a broken one', async () => {
    const file = path.join(home, 'checks', 'hot.yaml');
    fs.writeFileSync(file, 'id: hot-reloaded\nkind: rule\ntitle: Hot\nrule: { type: count, span: { tool: hot_tool }, at_least: 1 }\n');
    await until(() => app.checks().checks.some((c) => c.id === 'hot-reloaded'), 10_000);
    // A save that breaks the file: the error is reported and the check stays in effect.
    fs.writeFileSync(file, 'id: hot-reloaded\nkind: rule\nrule: [unclosed\n');
    await until(() => app.checks().errors.some((e) => e.message.includes('hot.yaml')), 10_000);
    expect(app.checks().checks.some((c) => c.id === 'hot-reloaded')).toBe(true);

    const run = client.startRun({ workflow: 'support-agent' });
    const notes: Note[] = [];
    run.onNote((n) => notes.push(n));
    await run.whenSubscribed();
    await run.toolCall('hot_tool', {}, () => 'ok');
    await run.flush();
    await until(() => notes.some((n) => n.check_id === 'hot-reloaded'));
    await run.end();
  });
});
