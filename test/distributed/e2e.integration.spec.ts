import * as fs from 'node:fs';
import * as path from 'node:path';
import { credentials, Metadata, status } from '@grpc/grpc-js';
import { context, trace, SpanStatusCode, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { openPostgres, requireService, until } from '@neatroots/platform';
import { health, v1 } from '@neatroots/proto';
import { NeatrootsClient, PrecheckUnansweredError, RunHaltedError, type Note } from '@neatroots/sdk';
import { Cluster, type ServiceProc } from './cluster';

/**
 * The distributed deployment end to end, each service its own process on the real Kafka,
 * Redis and Postgres: OTLP spans in, findings stored in Postgres, a note and a halt back to
 * the agent, the REST API answering through the review service over gRPC, and pre-call checks
 * answered by the rule engine's process through ingest (stopped last, for the fail modes).
 */
const SUITE = 'distributed end to end';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redis && pg ? describe : describe.skip;

const PROJECT = `shop-${Date.now().toString(36)}`;
const KEY = `key-${PROJECT}`;
/** A project whose pre-call checks fail closed (PROJECT's fail open). */
const CLOSED = `vault-${Date.now().toString(36)}`;
const CLOSED_KEY = `key-${CLOSED}`;

maybe(SUITE, () => {
  let cluster: Cluster;
  let provider: BasicTracerProvider;
  let tracer: Tracer;
  let client: NeatrootsClient;
  let engine: ServiceProc;

  beforeAll(async () => {
    cluster = new Cluster(
      { kafka: kafka!, redis: redis!, pg: pg! },
      {
        NEATROOTS_API_KEYS: `${PROJECT}=${KEY},${CLOSED}=${CLOSED_KEY}`,
        NEATROOTS_STEERING: `${PROJECT},${CLOSED}`,
        NEATROOTS_PRECHECK_FAIL_CLOSED: CLOSED,
        // A loaded test machine: the answer's bound here is not the benchmark's.
        NEATROOTS_PRECHECK_TIMEOUT_MS: '5000',
      },
    );
    await cluster.init();
    fs.mkdirSync(path.join(cluster.home, 'checks'));
    fs.writeFileSync(
      path.join(cluster.home, 'checks', 'refunds.yaml'),
      'id: refund-without-lookup\nkind: rule\ntitle: Refund without lookup\nrule: { type: requires_before, call: { tool: issue_refund }, requires: { tool: lookup_order } }\nguidance: Call {requires} first.\naction: halt\n',
    );
    // review first: it migrates the database and answers the others' key lookups
    await cluster.start('review');
    [engine] = await Promise.all([cluster.start('rule-engine'), cluster.start('ingest'), cluster.start('api')]);
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
    await until('the repeated-call note', () => notes.some((n) => n.check_id === 'repeated-tool-call'), 30_000, 50);
    tool('issue_refund', { order: 1 });
    await until('the halt', () => run.halted, 30_000, 50);
    expect(run.haltNote?.check_id).toBe('refund-without-lookup');
    root.end();
    await run.end();

    const db = await openPostgres({ url: cluster.pgUrl });
    try {
      const rows = await until('both findings stored and active', async () => {
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
    // The rule engine's process counts each finding's receipt-to-publish delay (a histogram on /metrics).
    const metrics = await (await fetch(`http://127.0.0.1:${engine.adminPort}/metrics`)).text();
    expect(metrics).toMatch(/neatroots_finding_delay_seconds_count\{service="rule-engine",kind="rule",action="halt"\} [1-9]/);
    // Longer than its waits together (30 s, 30 s, 90 s): a slow step fails naming the wait, not jest's 60 s.
  }, 180_000);

  /** Ingest's PreCheck or PreCheckPolicy, asked as the SDK asks it: the answer or the gRPC error. */
  function askIngest<Req, Res>(method: 'preCheck' | 'preCheckPolicy', req: Req, key = KEY, timeoutMs = 10_000): Promise<{ err?: { code: number; details: string }; res?: Res }> {
    const raw = new v1.IngestClient(`127.0.0.1:${cluster.ports.grpc}`, credentials.createInsecure());
    const md = new Metadata();
    md.set('x-api-key', key);
    return new Promise((resolve) =>
      (raw[method] as unknown as (r: Req, m: Metadata, o: { deadline: number }, cb: (e: { code: number; details: string } | null, r: Res) => void) => void).call(
        raw, req, md, { deadline: Date.now() + timeoutMs }, (e, r) => {
          raw.close();
          resolve(e ? { err: e } : { res: r });
        },
      ),
    );
  }

  describe('pre-call checks, answered by the rule engine process', () => {
    let closedClient: NeatrootsClient;

    afterAll(async () => {
      await closedClient?.close();
    });

    it('serves each project its policy from the rule engine: the tools its halting rules name, its fail mode', async () => {
      // Ingest has no checks of its own: the tools come from the rule engine over gRPC.
      expect((await askIngest<v1.PreCheckPolicyRequest, v1.PreCheckPolicyResponse>('preCheckPolicy', { workflow: 'refunds' })).res)
        .toEqual({ tools: ['issue_refund'], fail_closed: false, timeout_ms: 5000 });
      expect((await askIngest<v1.PreCheckPolicyRequest, v1.PreCheckPolicyResponse>('preCheckPolicy', { workflow: 'refunds' }, CLOSED_KEY)).res)
        .toEqual({ tools: ['issue_refund'], fail_closed: true, timeout_ms: 5000 });
    });

    it('never executes a refund without a lookup, and executes one after an exported lookup', async () => {
      const halted = client.startRun({ workflow: 'refunds' });
      await halted.toolCall('search_kb', { q: 'refund policy' }, () => 'refunds within 30 days');
      const refunded: string[] = [];
      await expect(halted.toolCall('issue_refund', { order: 7 }, () => refunded.push(halted.id))).rejects.toBeInstanceOf(RunHaltedError);
      expect(halted.haltNote).toMatchObject({ check_id: 'refund-without-lookup', text: 'Call lookup_order first.' });
      await halted.end();
      // The lookup goes through Kafka to the rule engine, which writes the window to Redis; the
      // check waits for the window to have seen it (known_spans), or it would halt the refund.
      for (let i = 0; i < 3; i++) {
        const allowed = client.startRun({ workflow: 'refunds' });
        await allowed.toolCall('lookup_order', { order: i }, () => ({ owner: 'c1' }));
        await allowed.toolCall('issue_refund', { order: i }, () => refunded.push(allowed.id));
        expect(allowed.halted).toBe(false);
        await allowed.end();
      }
      expect(refunded).toHaveLength(3);
      expect(refunded).not.toContain(halted.id);
    });

    it('answers DEADLINE_EXCEEDED when the window does not see the exported spans in time', async () => {
      const span = v1.Span.fromPartial({ run_id: `never-${Date.now()}`, span_id: 'r1', type: 'tool', tool: 'issue_refund', name: 'issue_refund' });
      const started = Date.now();
      const r = await askIngest<v1.PreCheckRequest, v1.PreCheckResponse>('preCheck', { span, known_spans: 3, timeout_ms: 200 });
      expect(r.err?.code).toBe(status.DEADLINE_EXCEEDED);
      expect(r.err?.details).toContain('saw 0 of its 3 exported spans within 200 ms');
      expect(Date.now() - started).toBeLessThan(5_000);
    });

    it('stops halting in a project taken out of NEATROOTS_STEERING once review starts without it, whatever the other services\' environment says', async () => {
      // Review restarted with PROJECT taken out of the setting; the rule engine, ingest and the
      // api keep the environment that lists it (as pods not restarted, or a stale replica's).
      await cluster.stop(cluster.procs.find((p) => p.target === 'review')!);
      await cluster.start('review', { NEATROOTS_STEERING: CLOSED });
      // The rule engine's steering is the database's: once it has looked again (its cache holds
      // an answer a few seconds), PROJECT's policy names no tool, and CLOSED's still does.
      await until('the rule engine to see steering off in the project', async () =>
        (await askIngest<v1.PreCheckPolicyRequest, v1.PreCheckPolicyResponse>('preCheckPolicy', { workflow: 'refunds' })).res?.tools.length === 0, 60_000, 200);
      expect((await askIngest<v1.PreCheckPolicyRequest, v1.PreCheckPolicyResponse>('preCheckPolicy', { workflow: 'refunds' }, CLOSED_KEY)).res?.tools).toEqual(['issue_refund']);

      // A refund without a lookup runs, and its finding says the halt was not sent (it only flags).
      const fresh = new NeatrootsClient({ address: `127.0.0.1:${cluster.ports.grpc}`, apiKey: KEY, flushIntervalMs: 20 });
      const refunded: string[] = [];
      const run = fresh.startRun({ workflow: 'refunds' });
      try {
        await run.whenSubscribed();
        await run.toolCall('issue_refund', { order: 11 }, () => refunded.push(run.id));
        await run.end();
      } finally {
        await fresh.close();
      }
      expect(refunded).toEqual([run.id]);
      const db = await openPostgres({ url: cluster.pgUrl });
      try {
        const finding = await until('the refund\'s finding', async () =>
          (await db.query<{ action: string; halt_suppressed: boolean }>('SELECT action, halt_suppressed FROM findings WHERE project = $1 AND run_id = $2 AND check_id = $3', [PROJECT, run.id, 'refund-without-lookup'])).rows[0], 60_000, 100);
        expect(finding).toEqual({ action: 'flag', halt_suppressed: true }); // a halt not sent is stored as a flag
        const steering = await db.query<{ name: string; steering: boolean }>('SELECT name, steering FROM projects WHERE name = ANY($1::text[]) ORDER BY name', [[PROJECT, CLOSED]]);
        expect(steering.rows.map((r) => [r.name, r.steering])).toEqual([[PROJECT, false], [CLOSED, true]]); // shop-... before vault-...
      } finally {
        await db.close();
      }
      expect(run.halted).toBe(false);
    }, 180_000);

    it('with the rule engine stopped, answers UNAVAILABLE and the SDK follows the fail mode: open runs the call, closed does not', async () => {
      // A client of the fail-closed project that learnt its policy while the engine ran.
      closedClient = new NeatrootsClient({ address: `127.0.0.1:${cluster.ports.grpc}`, apiKey: CLOSED_KEY, flushIntervalMs: 20, onError: () => undefined });
      const before = closedClient.startRun({ workflow: 'refunds' });
      await before.whenSubscribed();
      await cluster.stop(engine);

      const span = v1.Span.fromPartial({ run_id: before.id, span_id: 'r1', type: 'tool', tool: 'issue_refund', name: 'issue_refund' });
      const raw = await askIngest<v1.PreCheckRequest, v1.PreCheckResponse>('preCheck', { span, known_spans: 0, timeout_ms: 1000 });
      expect(raw.err?.code).toBe(status.UNAVAILABLE);
      expect(raw.err?.details).toContain(`127.0.0.1:${cluster.ports.ruleEngine}`);

      const ran: string[] = [];
      // Fail-open: the refund runs unchecked (the check of a call a halting rule names gets no answer).
      const open = client.startRun({ workflow: 'refunds' });
      await open.toolCall('issue_refund', { order: 9 }, () => ran.push('open refund'));
      await open.end();
      // Fail-closed: the refund is not run; a call no halting rule names still is.
      await expect(before.toolCall('issue_refund', { order: 9 }, () => ran.push('closed refund'))).rejects.toBeInstanceOf(PrecheckUnansweredError);
      await before.toolCall('lookup_order', { order: 9 }, () => ran.push('closed lookup'));
      await before.end();
      // A fail-closed client that asks its policy now: with no engine to name the tools, every
      // call is checked, and none runs.
      const fresh = new NeatrootsClient({ address: `127.0.0.1:${cluster.ports.grpc}`, apiKey: CLOSED_KEY, onError: () => undefined });
      try {
        const run = fresh.startRun({ workflow: 'refunds' });
        await expect(run.toolCall('lookup_order', { order: 10 }, () => ran.push('fresh lookup'))).rejects.toBeInstanceOf(PrecheckUnansweredError);
        await run.end();
      } finally {
        await fresh.close();
      }
      expect(ran).toEqual(['open refund', 'closed lookup']);
    });
  });
});
