import { Metadata, Server, ServerCredentials, status, type ServerUnaryCall, type ServerWritableStream, type sendUnaryData } from '@grpc/grpc-js';
import { v1 } from '@neatroots/proto';
import { NeatrootsClient, PrecheckUnansweredError, RunHaltedError } from './index';

/**
 * The SDK's side of the pre-call check, against a stand-in ingest whose engine answers as
 * scripted, hangs (a slow engine) or is absent: a halted call never runs, and without an
 * answer in time the project's fail mode decides.
 */
class FakeIngest {
  readonly server = new Server();
  port = 0;
  events: v1.Event[] = [];
  prechecks: v1.PreCheckRequest[] = [];
  // 5 s: an answer is never late on a loaded machine; the slow-engine tests set their own.
  policy: v1.PreCheckPolicyResponse = { tools: ['issue_refund'], fail_closed: false, timeout_ms: 5_000 };
  policyCalls = 0;
  policyFails = false;
  policyFailures = 0;
  /** The policy is never answered (a stuck server) while set. */
  policyHangs = false;
  /** Every export is refused UNAVAILABLE (the bus down) while set. */
  exportDown = false;
  /** undefined: never answer (the engine is slow). */
  answer: v1.PreCheckResponse | undefined = { decision: 'allow', check_id: '', finding_id: '', title: '', text: '' };

  async start(): Promise<void> {
    this.server.addService(v1.IngestService, {
      export: (call: ServerUnaryCall<v1.ExportRequest, v1.ExportResponse>, cb: sendUnaryData<v1.ExportResponse>) => {
        if (this.exportDown) return cb({ code: status.UNAVAILABLE, details: 'bus down' });
        this.events.push(...call.request.events);
        cb(null, { accepted: call.request.events.length, rejected: [], notes: [] });
      },
      subscribe: (call: ServerWritableStream<v1.SubscribeRequest, v1.Note>) => call.sendMetadata(new Metadata()),
      preCheck: (call: ServerUnaryCall<v1.PreCheckRequest, v1.PreCheckResponse>, cb: sendUnaryData<v1.PreCheckResponse>) => {
        this.prechecks.push(call.request);
        if (this.answer) cb(null, this.answer);
      },
      preCheckPolicy: (_call: ServerUnaryCall<v1.PreCheckPolicyRequest, v1.PreCheckPolicyResponse>, cb: sendUnaryData<v1.PreCheckPolicyResponse>) => {
        this.policyCalls++;
        if (this.policyHangs) return;
        if (!this.policyFails) return cb(null, this.policy);
        this.policyFailures++;
        cb({ code: status.UNAVAILABLE, details: 'rule engine unreachable' });
      },
    });
    this.port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
    );
  }

  spans(): v1.Span[] {
    return this.events.flatMap((e) => (e.kind?.$case === 'span' ? [e.kind.value] : []));
  }
}

describe('pre-call checks in the SDK', () => {
  let fake: FakeIngest;
  let client: NeatrootsClient;
  beforeEach(async () => {
    fake = new FakeIngest();
    await fake.start();
    client = new NeatrootsClient({ address: `127.0.0.1:${fake.port}`, apiKey: 'k', subscribe: false, flushIntervalMs: 10_000, onError: () => undefined });
  });
  afterEach(async () => {
    await client.close();
    fake.server.forceShutdown();
  });

  it('asks before a tool a halting rule names, after exporting what ran before, and runs it when allowed', async () => {
    const run = client.startRun({ workflow: 'refunds' });
    await run.toolCall('lookup_order', { id: 7 }, () => 'order 7');
    expect(fake.prechecks).toHaveLength(0);
    let ran = false;
    await run.toolCall('issue_refund', { id: 7 }, () => (ran = true));
    expect(ran).toBe(true);
    expect(fake.prechecks).toHaveLength(1);
    expect(fake.prechecks[0]).toMatchObject({ known_spans: 1, span: { tool: 'issue_refund', run_id: run.id } });
    // What is left of the policy's 5 s after exporting the lookup.
    expect(fake.prechecks[0].timeout_ms).toBeGreaterThan(4_000);
    expect(fake.prechecks[0].timeout_ms).toBeLessThanOrEqual(5_000);
    // The lookup was exported before the question.
    expect(fake.spans().map((s) => s.tool)).toEqual(['lookup_order']);
    await run.end();
    // The checked call is exported with the span id it was asked about.
    expect(fake.spans().find((s) => s.tool === 'issue_refund')?.span_id).toBe(fake.prechecks[0].span!.span_id);
  });

  it('never runs a call the check halts: RunHaltedError, the run halted, the refusal recorded', async () => {
    fake.answer = { decision: 'halt', check_id: 'refund-without-lookup', finding_id: 'f1', title: 'Refund without lookup', text: 'Look the order up first.' };
    const run = client.startRun({ workflow: 'refunds' });
    let ran = false;
    await expect(run.toolCall('issue_refund', { id: 7 }, () => (ran = true))).rejects.toBeInstanceOf(RunHaltedError);
    expect(ran).toBe(false);
    expect(run.halted).toBe(true);
    expect(run.haltNote).toMatchObject({ check_id: 'refund-without-lookup', text: 'Look the order up first.' });
    expect(run.signal.aborted).toBe(true);
    await run.end();
    expect(fake.spans()).toEqual([expect.objectContaining({ tool: 'issue_refund', status: 'error' })]);
  });

  it('a slow engine: fail-open runs the call, fail-closed does not', async () => {
    fake.answer = undefined;
    fake.policy = { ...fake.policy, timeout_ms: 50 };
    const open = client.startRun({ workflow: 'refunds' });
    let ran = 0;
    await open.toolCall('issue_refund', {}, () => ran++);
    expect(ran).toBe(1);

    fake.policy = { ...fake.policy, fail_closed: true };
    const closedClient = new NeatrootsClient({ address: `127.0.0.1:${fake.port}`, apiKey: 'k', subscribe: false, onError: () => undefined });
    const closed = closedClient.startRun({ workflow: 'refunds' });
    await expect(closed.toolCall('issue_refund', {}, () => ran++)).rejects.toBeInstanceOf(PrecheckUnansweredError);
    expect(ran).toBe(1);
    await closedClient.close();
  });

  it('one deadline, the policy timeout, covers exporting what ran before and the asking: ingest refusing exports decides the call then (fail closed: not run)', async () => {
    fake.policy = { tools: ['issue_refund'], fail_closed: true, timeout_ms: 200 };
    fake.exportDown = true;
    const run = client.startRun({ workflow: 'refunds' });
    await run.whenSubscribed();
    run.span({ type: 'llm', name: 'chat' });
    let ran = 0;
    const t = Date.now();
    await expect(run.toolCall('issue_refund', {}, () => ran++)).rejects.toBeInstanceOf(PrecheckUnansweredError);
    expect(Date.now() - t).toBeLessThan(1000);
    expect(ran).toBe(0);
    expect(fake.prechecks).toHaveLength(0);
    fake.exportDown = false;
  });

  it('a policy that is not answered holds a tool call up for precheckPolicyTimeoutMs at most', async () => {
    fake.policyHangs = true;
    const quick = new NeatrootsClient({ address: `127.0.0.1:${fake.port}`, apiKey: 'k', subscribe: false, precheckPolicyTimeoutMs: 200, onError: () => undefined });
    try {
      const run = quick.startRun({ workflow: 'refunds' });
      const t = Date.now();
      expect(await run.toolCall('lookup_order', {}, () => 'ran')).toBe('ran');
      expect(Date.now() - t).toBeLessThan(1500); // not the 10 s export deadline
      expect(Date.now() - t).toBeGreaterThanOrEqual(150);
    } finally {
      await quick.close(100);
    }
  });

  it("with precheck 'on' and no policy received, every call is checked, with the client's fail mode", async () => {
    fake.policyFails = true;
    fake.answer = { decision: 'halt', check_id: 'no-refunds', finding_id: 'f9', title: 'No refunds', text: 'stop' };
    let ran = 0;
    const halted = client.startRun({ workflow: 'refunds', precheck: 'on' });
    await halted.whenSubscribed();
    await expect(halted.toolCall('search', {}, () => ran++)).rejects.toBeInstanceOf(RunHaltedError);
    expect(ran).toBe(0);

    fake.answer = undefined; // the engine gives no answer
    const closedClient = new NeatrootsClient({ address: `127.0.0.1:${fake.port}`, apiKey: 'k', subscribe: false, precheckFailClosed: true, precheckTimeoutMs: 100, onError: () => undefined });
    try {
      const run = closedClient.startRun({ workflow: 'refunds', precheck: 'on' });
      await run.whenSubscribed();
      await expect(run.toolCall('search', {}, () => ran++)).rejects.toBeInstanceOf(PrecheckUnansweredError);
      expect(ran).toBe(0);
      // 'auto' knows no rule naming the tool: it runs unchecked.
      expect(await closedClient.startRun({ workflow: 'refunds' }).toolCall('search', {}, () => 'ran')).toBe('ran');
    } finally {
      await closedClient.close(100);
    }
  });

  it('asks for no other tool, and for none with precheck off or no policy served', async () => {
    const run = client.startRun({ workflow: 'refunds', precheck: 'off' });
    await run.toolCall('issue_refund', {}, () => 1);
    await client.startRun({ workflow: 'refunds' }).toolCall('search', {}, () => 1);
    expect(fake.prechecks).toHaveLength(0);
    await client.startRun({ workflow: 'refunds', precheck: 'on' }).toolCall('search', {}, () => 1);
    expect(fake.prechecks).toHaveLength(1);
  });

  it('a tool a rule starts halting is checked in a running run once the policy is asked again; a failed asking keeps the last policy', async () => {
    const fast = new NeatrootsClient({ address: `127.0.0.1:${fake.port}`, apiKey: 'k', subscribe: false, precheckPolicyTtlMs: 100, onError: () => undefined });
    const policyCalls = () => fake.policyCalls;
    try {
      const run = fast.startRun({ workflow: 'refunds' });
      await run.toolCall('cancel_order', {}, () => 1);
      expect(fake.prechecks).toHaveLength(0);
      // `neatroots checks halt` on a rule about cancel_order.
      // (2 s to answer: the allowed call below is answered in time on a loaded machine; the unanswered one waits that long)
      fake.policy = { ...fake.policy, tools: ['issue_refund', 'cancel_order'], fail_closed: true, timeout_ms: 2_000 };
      await new Promise((r) => setTimeout(r, 150));
      const before = policyCalls();
      // The stale policy is used for this call (nothing waits) and asked again meanwhile.
      await run.toolCall('cancel_order', {}, () => 1);
      await until(() => policyCalls() > before && fast.knownPolicy('refunds')?.tools.includes('cancel_order') === true);
      await run.toolCall('cancel_order', {}, () => 1);
      expect(fake.prechecks.map((p) => p.span?.tool)).toEqual(['cancel_order']);
      // The server stops answering policies: the last one (fail closed) still holds.
      fake.policyFails = true;
      fake.answer = undefined;
      await new Promise((r) => setTimeout(r, 150));
      await expect(run.toolCall('cancel_order', {}, () => 1)).rejects.toBeInstanceOf(PrecheckUnansweredError);
      // Asked again only once the failed asking was handled: two failures, the first one handled.
      await until(() => {
        fast.knownPolicy('refunds');
        return fake.policyFailures >= 2;
      });
      await expect(run.toolCall('cancel_order', {}, () => 1)).rejects.toBeInstanceOf(PrecheckUnansweredError);
    } finally {
      await fast.close();
    }
  });
});

describe('pre-call checks after client.close()', () => {
  it('a tool call past the policy TTL after close asks nothing on the closed channel: it resolves with the last policy known, no unhandled rejection', async () => {
    const fake = new FakeIngest();
    await fake.start();
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => unhandled.push(e);
    process.on('unhandledRejection', onUnhandled);
    try {
      const reported: string[] = [];
      const client = new NeatrootsClient({ address: `127.0.0.1:${fake.port}`, apiKey: 'k', subscribe: false, precheckPolicyTtlMs: 100, onError: (e) => reported.push(e.message) });
      const run = client.startRun({ workflow: 'refunds' });
      const open = client.startRun({ workflow: 'refunds', precheck: 'on' });
      await run.whenSubscribed(); // the policy is known: issue_refund is checked
      await client.close();
      const closedAt = Date.now();
      const asked = fake.policyCalls;
      await until(() => Date.now() - closedAt > 150); // the policy is stale now
      // It re-asked the stale policy on the closed channel: "Channel has been shut down", unhandled.
      expect(await run.toolCall('lookup_order', {}, () => 'ran')).toBe('ran');
      await run.whenSubscribed();
      // A tool the last policy names gets no answer once closed: fail-open (the policy's) runs it.
      expect(await run.toolCall('issue_refund', {}, () => 'ran')).toBe('ran');
      expect(await open.toolCall('search', {}, () => 'ran')).toBe('ran');
      expect(fake.policyCalls).toBe(asked);
      expect(fake.prechecks).toHaveLength(0);
      // What they recorded is dropped and said, as for any event recorded after close().
      expect(client.stats().dropped).toBe(3);
      expect(reported.at(-1)).toMatch(/recorded after the client was closed/);
      // A rejection would be reported on a later turn: let one pass (the assertion holds on any machine).
      await new Promise((r) => setImmediate(r));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      fake.server.forceShutdown();
    }
  });
});

async function until(cond: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** An ingest with no pre-call RPCs at all (an older server): tool calls run unchecked. */
describe('pre-call checks against a server without them', () => {
  it('runs the call', async () => {
    const server = new Server();
    server.addService(v1.IngestService, {
      export: (_c: unknown, cb: sendUnaryData<v1.ExportResponse>) => cb(null, { accepted: 0, rejected: [], notes: [] }),
      subscribe: () => undefined,
      preCheck: (_c: unknown, cb: sendUnaryData<v1.PreCheckResponse>) => cb({ code: status.UNIMPLEMENTED }),
      preCheckPolicy: (_c: unknown, cb: sendUnaryData<v1.PreCheckPolicyResponse>) => cb({ code: status.UNIMPLEMENTED }),
    });
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    const client = new NeatrootsClient({ address: `127.0.0.1:${port}`, apiKey: 'k', subscribe: false, onError: () => undefined });
    expect(await client.startRun().toolCall('issue_refund', {}, () => 'ran')).toBe('ran');
    await client.close();
    server.forceShutdown();
  });
});
