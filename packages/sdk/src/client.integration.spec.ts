import { Metadata, Server, ServerCredentials, status, type ServerUnaryCall, type ServerWritableStream, type sendUnaryData } from '@grpc/grpc-js';
import { v1 } from '@neatroots/proto';
import { NeatrootsClient, RunHaltedError, type Note } from './index';

/** A stand-in for ingest's neatroots.v1 API that records what it gets and plays back scripted answers. */
class FakeIngest {
  readonly server = new Server();
  port = 0;
  calls: v1.ExportRequest[] = [];
  keys: string[] = [];
  /** The next export calls fail with these codes, in order (with google.rpc.RetryInfo, as ingest's back-pressure sends it, when asked). */
  failures: (number | { code: number; retryInfo: true })[] = [];
  /** Notes put on the next successful export response. */
  piggyback: v1.Note[] = [];
  streams = new Map<string, ServerWritableStream<v1.SubscribeRequest, v1.Note>>();

  async start(): Promise<void> {
    this.server.addService(v1.IngestService, {
      export: (call: ServerUnaryCall<v1.ExportRequest, v1.ExportResponse>, cb: sendUnaryData<v1.ExportResponse>) => {
        this.keys.push(String(call.metadata.get('x-api-key')[0]));
        const failure = this.failures.shift();
        if (typeof failure === 'number') return cb({ code: failure, details: 'scripted failure' });
        if (failure !== undefined) {
          const metadata = new Metadata();
          metadata.set('grpc-status-details-bin', Buffer.from([8, failure.code])); // a google.rpc.Status, its details left out
          return cb({ code: failure.code, details: 'scripted failure', metadata });
        }
        this.calls.push(call.request);
        const notes = this.piggyback.splice(0);
        cb(null, { accepted: call.request.events.length, rejected: [], notes });
      },
      subscribe: (call: ServerWritableStream<v1.SubscribeRequest, v1.Note>) => {
        this.streams.set(call.request.run_id, call);
        call.on('cancelled', () => this.streams.delete(call.request.run_id));
        call.sendMetadata(new Metadata()); // as ingest does: the subscription is in place
      },
    });
    this.port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
    );
  }

  events(): v1.Event[] {
    return this.calls.flatMap((c) => c.events);
  }

  stop(): void {
    this.server.forceShutdown();
  }
}

function halt(runId: string, id = 'h1'): v1.Note {
  return { id, project: 'shop', run_id: runId, check_id: 'stop-loop', finding_id: 'f1', kind: 'halt', title: 'Loop', text: 'Stop calling search', at_ms: 1 };
}

async function waitFor(cond: () => boolean, ms = 3000): Promise<void> {
  const until = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('NeatrootsClient', () => {
  let fake: FakeIngest;
  let client: NeatrootsClient;
  let errors: Error[];

  beforeEach(async () => {
    fake = new FakeIngest();
    await fake.start();
    errors = [];
    client = new NeatrootsClient({
      address: `127.0.0.1:${fake.port}`,
      apiKey: 'key-shop',
      maxBatch: 5,
      flushIntervalMs: 50,
      retry: { initialDelayMs: 5, maxDelayMs: 20 },
      onError: (e) => errors.push(e),
    });
  });

  afterEach(async () => {
    await client.close();
    fake.stop();
  });

  it('records a run: run_start, timed spans, run_end, in order, with the API key', async () => {
    const run = client.startRun({ workflow: 'refund-agent', user_message: 'refund order 7', tools: [{ name: 'lookup_order' }] });
    const order = await run.toolCall('lookup_order', { id: 7 }, async (args) => ({ id: args.id, owner: 'bob' }));
    expect(order).toEqual({ id: 7, owner: 'bob' });
    await expect(run.toolCall('issue_refund', { id: 7 }, () => Promise.reject(new Error('card declined')))).rejects.toThrow('card declined');
    const llmId = run.span({ type: 'llm', name: 'chat', model: 'm', usage: { input_tokens: 3, output_tokens: 4 } });
    const answer = await run.span({ type: 'agent', name: 'summarize' }, () => 'done');
    expect(answer).toBe('done');
    await run.end({ final_output: 'Refund failed: card declined' });

    const evs = fake.events();
    expect(evs.map((e) => e.kind?.$case)).toEqual(['run_start', 'span', 'span', 'span', 'span', 'run_end']);
    expect(evs[0].kind).toMatchObject({ value: { run_id: run.id, workflow: 'refund-agent', user_message: 'refund order 7', tools: [{ name: 'lookup_order', description: '' }] } });
    const spans = evs.flatMap((e) => (e.kind?.$case === 'span' ? [e.kind.value] : []));
    expect(spans[0]).toMatchObject({ type: 'tool', tool: 'lookup_order', input_json: '{"id":7}', output_json: '{"id":7,"owner":"bob"}' });
    expect(spans[0].end_ms).toBeGreaterThanOrEqual(spans[0].start_ms as number);
    expect(spans[1]).toMatchObject({ tool: 'issue_refund', status: 'error', error: 'card declined' });
    expect(spans[2]).toMatchObject({ span_id: llmId, type: 'llm', usage: { input_tokens: 3, output_tokens: 4 } });
    expect(spans[3]).toMatchObject({ type: 'agent', output_json: '"done"' });
    expect(evs[5].kind).toMatchObject({ $case: 'run_end', value: { run_id: run.id, status: 'ok', final_output_json: '"Refund failed: card declined"' } });
    expect(new Set(fake.keys)).toEqual(new Set(['key-shop']));
  });

  it('batches by size and by time', async () => {
    const run = client.startRun();
    for (let i = 0; i < 4; i++) run.span({ type: 'other', name: `s${i}` });
    // run_start + 4 spans = maxBatch: sent at once.
    await waitFor(() => fake.calls.length === 1);
    expect(fake.calls[0].events).toHaveLength(5);
    run.span({ type: 'other', name: 'late' });
    await waitFor(() => fake.calls.length === 2); // the 50 ms timer
    expect(fake.calls[1].events).toHaveLength(1);
  });

  it('retries an export on UNAVAILABLE and does not on INVALID_ARGUMENT', async () => {
    fake.failures = [status.UNAVAILABLE, status.UNAVAILABLE];
    const run = client.startRun();
    run.span({ type: 'other' });
    await run.flush();
    expect(fake.calls).toHaveLength(1);
    expect(fake.calls[0].events).toHaveLength(2);
    expect(errors).toEqual([]);

    fake.failures = [status.INVALID_ARGUMENT];
    run.span({ type: 'other' });
    await run.flush();
    expect(fake.calls).toHaveLength(1);
    expect(errors[0].message).toContain('scripted failure');
  });

  it('retries RESOURCE_EXHAUSTED that says when (back-pressure), not one that does not (a message over the size bound)', async () => {
    fake.failures = [{ code: status.RESOURCE_EXHAUSTED, retryInfo: true }];
    const run = client.startRun();
    run.span({ type: 'other' });
    await run.flush();
    expect(fake.calls).toHaveLength(1);
    expect(errors).toEqual([]);

    fake.failures = [status.RESOURCE_EXHAUSTED, status.RESOURCE_EXHAUSTED];
    run.span({ type: 'other' });
    await run.flush();
    expect(fake.calls).toHaveLength(1); // not sent again
    expect(fake.failures).toHaveLength(1); // one try
    expect(errors[0].message).toContain('scripted failure');
  });

  it('halts on a note from the Subscribe stream: halted, signal aborted, toolCall throws', async () => {
    const run = client.startRun();
    await run.whenSubscribed();
    const seen: Note[] = [];
    run.onNote((n) => seen.push(n));
    let toolSignal: AbortSignal | undefined;
    const slow = run.toolCall('search', { q: 'x' }, (_i, signal) => {
      toolSignal = signal;
      return new Promise((resolve) => setTimeout(() => resolve('result'), 50));
    });
    fake.streams.get(run.id)?.write(halt(run.id));
    await waitFor(() => run.halted);
    expect(run.signal.aborted).toBe(true);
    expect(run.signal.reason).toBeInstanceOf(RunHaltedError);
    expect(toolSignal?.aborted).toBe(true);
    await expect(slow).resolves.toBe('result'); // a call in flight is the tool's to stop
    await expect(run.toolCall('search', {}, () => 'never')).rejects.toBeInstanceOf(RunHaltedError);
    expect(run.haltNote?.text).toBe('Stop calling search');
    // The same note again (another replica, or piggybacked too) is not seen twice.
    fake.streams.get(run.id)?.write(halt(run.id));
    await new Promise((r) => setTimeout(r, 20));
    expect(seen.map((n) => n.id)).toEqual(['h1']);
    await run.end();
    const last = fake.events().at(-1);
    expect(last?.kind).toMatchObject({ $case: 'run_end', value: { status: 'interrupted' } });
  });

  it('halts on a note piggybacked on an export response', async () => {
    const run = client.startRun();
    const notes: Note[] = [];
    run.onNote((n) => notes.push(n));
    fake.piggyback = [{ ...halt(run.id, 'h2'), kind: 'halt' }, { ...halt(run.id, 'n3'), kind: 'note' }];
    run.span({ type: 'other' });
    await run.flush();
    expect(run.halted).toBe(true);
    expect(notes.map((n) => [n.id, n.kind])).toEqual([['h2', 'halt'], ['n3', 'note']]);
    await expect(run.toolCall('x', null, () => 1)).rejects.toThrow(/run halted by neatroots: Loop: Stop calling search/);
  });

  it('reconnects the notes stream when the server ends it', async () => {
    const run = client.startRun();
    await run.whenSubscribed();
    const first = fake.streams.get(run.id);
    first?.end();
    await waitFor(() => fake.streams.get(run.id) !== undefined && fake.streams.get(run.id) !== first);
    fake.streams.get(run.id)?.write(halt(run.id, 'h9'));
    await waitFor(() => run.halted);
  });
});
