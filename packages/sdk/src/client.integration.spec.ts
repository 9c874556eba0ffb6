import { Metadata, Server, ServerCredentials, status, type ServerUnaryCall, type ServerWritableStream, type sendUnaryData } from '@grpc/grpc-js';
import { v1 } from '@neatroots/proto';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { NeatrootsClient, RunHaltedError, type Note } from './index';

/** A google.rpc.Status carrying a google.rpc.RetryInfo of `ms` (as ingest's back-pressure sends it). */
function retryInfoStatus(code: number, ms: number): Buffer {
  const field = (no: number, bytes: Buffer) => Buffer.concat([Buffer.from([(no << 3) | 2, bytes.length]), bytes]);
  const varint = (no: number, n: number) => {
    const out = [no << 3];
    while (n > 127) {
      out.push((n & 127) | 128);
      n = Math.floor(n / 128);
    }
    out.push(n);
    return Buffer.from(out);
  };
  const duration = Buffer.concat([varint(1, Math.floor(ms / 1000)), varint(2, (ms % 1000) * 1e6)]);
  const any = Buffer.concat([field(1, Buffer.from('type.googleapis.com/google.rpc.RetryInfo')), field(2, field(1, duration))]);
  return Buffer.concat([varint(1, code), field(3, any)]);
}

/** A stand-in for ingest's neatroots.v1 API that records what it gets and plays back scripted answers. */
class FakeIngest {
  readonly server = new Server();
  port = 0;
  calls: v1.ExportRequest[] = [];
  keys: string[] = [];
  /** The next export calls fail with these codes, in order (with google.rpc.RetryInfo of retryInfo ms, as ingest's back-pressure sends it, when asked). */
  failures: (number | { code: number; retryInfo: number })[] = [];
  /** Every export call is refused UNAVAILABLE (ingest down) while set. */
  down = false;
  /** Export calls made, refused ones included, and when. */
  attempts: number[] = [];
  /** Subscribe streams opened; ended at once after their headers when endStreams is set. */
  opens = 0;
  endStreams = false;
  /** Subscribe streams are refused with this code (a wrong or revoked key: UNAUTHENTICATED) while set. */
  refuseStreams: number | undefined;
  /** Subscribe streams send no headers (never counted open) while set. */
  silentStreams = false;
  /** Notes put on the next successful export response. */
  piggyback: v1.Note[] = [];
  /** Items the next successful export response says it rejected. */
  rejectNext: v1.Rejected[] = [];
  /** Exports over `bytes` are refused as too large ("Received message larger than max (X vs. named)") while set. */
  tooLarge: { bytes: number; named: number } | undefined;
  streams = new Map<string, ServerWritableStream<v1.SubscribeRequest, v1.Note>>();

  async start(): Promise<void> {
    this.server.addService(v1.IngestService, {
      export: (call: ServerUnaryCall<v1.ExportRequest, v1.ExportResponse>, cb: sendUnaryData<v1.ExportResponse>) => {
        this.keys.push(String(call.metadata.get('x-api-key')[0]));
        this.attempts.push(Date.now());
        if (this.down) return cb({ code: status.UNAVAILABLE, details: 'ingest down' });
        const size = v1.ExportRequest.encode(call.request).finish().length;
        if (this.tooLarge && size > this.tooLarge.bytes) return cb({ code: status.RESOURCE_EXHAUSTED, details: `Received message larger than max (${size} vs. ${this.tooLarge.named})` });
        const failure = this.failures.shift();
        if (typeof failure === 'number') return cb({ code: failure, details: 'scripted failure' });
        if (failure !== undefined) {
          const metadata = new Metadata();
          metadata.set('grpc-status-details-bin', retryInfoStatus(failure.code, failure.retryInfo));
          return cb({ code: failure.code, details: 'scripted failure', metadata });
        }
        this.calls.push(call.request);
        const notes = this.piggyback.splice(0);
        const rejected = this.rejectNext.splice(0);
        cb(null, { accepted: call.request.events.length - rejected.length, rejected, notes });
      },
      subscribe: (call: ServerWritableStream<v1.SubscribeRequest, v1.Note>) => {
        this.streams.set(call.request.run_id, call);
        call.on('cancelled', () => this.streams.delete(call.request.run_id));
        this.opens++;
        if (this.refuseStreams !== undefined) return call.emit('error', { code: this.refuseStreams, details: 'unknown API key' });
        if (this.silentStreams) return;
        call.sendMetadata(new Metadata()); // as ingest does: the subscription is in place
        if (this.endStreams) setImmediate(() => call.end());
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

/** Waits for what a test needs: milliseconds here, seconds on a loaded machine. */
async function waitFor(cond: () => boolean, ms = 30_000): Promise<void> {
  const until = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Runs `body`, collecting the unhandled rejections meanwhile (each would end a Node 20 process): what it returns. */
async function unhandledDuring(body: () => Promise<void>): Promise<unknown[]> {
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  try {
    await body();
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
  return unhandled;
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
    expect(errors.map((e) => e.message)).toEqual(['export of 2 event(s) failed: 14 UNAVAILABLE: scripted failure; retrying until ingest takes it']);

    fake.failures = [status.INVALID_ARGUMENT];
    const refused = run.span({ type: 'other' });
    await run.flush();
    expect(fake.calls).toHaveLength(1);
    // Refused for good: lost, so counted, and named.
    expect(errors[1].message).toMatch(new RegExp(`^export of 1 event\\(s\\) failed: 3 INVALID_ARGUMENT: scripted failure \\(dropped: span ${refused} of run ${run.id} \\(\\d+ bytes\\)\\)$`));
    expect(client.stats().dropped).toBe(1);
  });

  it('says once per outage that exports are being retried (a wrong address, ingest down), again after one succeeded', async () => {
    const retrying = () => errors.filter((e) => /retrying until ingest takes it/.test(e.message));
    fake.down = true;
    const run = client.startRun({ precheck: 'off' });
    run.span({ type: 'other', name: 'first' });
    // Nothing was said until events were dropped at close.
    await waitFor(() => retrying().length > 0);
    const tries = fake.attempts.length;
    await waitFor(() => fake.attempts.length >= tries + 5); // retried, not said again
    expect(retrying().map((e) => e.message)).toEqual(['export of 2 event(s) failed: 14 UNAVAILABLE: ingest down; retrying until ingest takes it']);
    fake.down = false;
    await client.flush();
    expect(fake.events().map((e) => (e.kind?.$case === 'span' ? e.kind.value.name : e.kind?.$case))).toEqual(['run_start', 'first']);

    fake.down = true; // a second outage is said once more
    run.span({ type: 'other', name: 'second' });
    await waitFor(() => retrying().length > 1);
    const again = fake.attempts.length;
    await waitFor(() => fake.attempts.length >= again + 5);
    expect(retrying()).toHaveLength(2);
    fake.down = false;
    await client.flush();
    expect(fake.events()).toHaveLength(3);
    expect(errors).toHaveLength(2);
  });

  it('retries ABORTED and DEADLINE_EXCEEDED, then delivers', async () => {
    fake.failures = [status.ABORTED, status.DEADLINE_EXCEEDED];
    const run = client.startRun({ precheck: 'off' });
    run.span({ type: 'other', name: 'kept' });
    await client.flush();
    expect(fake.attempts).toHaveLength(3);
    expect(fake.events().map((e) => (e.kind?.$case === 'span' ? e.kind.value.name : e.kind?.$case))).toEqual(['run_start', 'kept']);
    expect(errors.map((e) => e.message)).toEqual(['export of 2 event(s) failed: 10 ABORTED: scripted failure; retrying until ingest takes it']);
  });

  it('retries RESOURCE_EXHAUSTED that says when (back-pressure), not one that does not (a message over the size bound)', async () => {
    fake.failures = [{ code: status.RESOURCE_EXHAUSTED, retryInfo: 300 }];
    const run = client.startRun();
    run.span({ type: 'other' });
    await run.flush();
    expect(fake.calls).toHaveLength(1);
    expect(errors.map((e) => e.message)).toEqual(['export of 2 event(s) failed: 8 RESOURCE_EXHAUSTED: scripted failure; retrying until ingest takes it']);
    // Not sooner than ingest asked (the client's own backoff here is at most 20 ms).
    expect(fake.attempts[1] - fake.attempts[0]).toBeGreaterThanOrEqual(290);

    fake.failures = [status.RESOURCE_EXHAUSTED, status.RESOURCE_EXHAUSTED];
    const refused = run.span({ type: 'other' });
    await run.flush();
    expect(fake.calls).toHaveLength(1); // not sent again
    expect(fake.failures).toHaveLength(1); // one try
    // Lost: counted and named (it was neither).
    expect(client.stats().dropped).toBe(1);
    expect(errors[1].message).toMatch(
      new RegExp(`^dropped 1 event\\(s\\) \\(span ${refused} of run ${run.id} \\(\\d+ bytes\\): over what ingest takes in one message \\(8 RESOURCE_EXHAUSTED: scripted failure\\); not sent again\\); 1 dropped in all$`),
    );
  });

  it('lowers its export size to half a batch refused as too large naming a bound the batch was not over, so the next batches are not refused and split again', async () => {
    await client.close();
    client = new NeatrootsClient({ address: `127.0.0.1:${fake.port}`, apiKey: 'key-shop', flushIntervalMs: 60_000, subscribe: false, onError: (e) => errors.push(e) });
    // A hop in front of ingest counting other bytes, or naming another bound than its own.
    fake.tooLarge = { bytes: 2000, named: 4 * 1024 * 1024 };
    for (let b = 0; b < 4; b++) {
      const run = client.startRun({ workflow: 'w', precheck: 'off' });
      for (let i = 0; i < 20; i++) run.span({ type: 'other', output: 'x'.repeat(300) });
      await client.flush();
    }
    expect(fake.events()).toHaveLength(84);
    expect(client.stats().dropped).toBe(0);
    // Before: every batch refused and split again (4 reports, "at most 4194304 bytes from now on").
    expect(errors.map((e) => e.message)).toEqual([expect.stringMatching(/^export of 21 event\(s\) \(\d+ bytes\) is over .*: sent in halves; exports hold at most \d+ bytes from now on$/)]);
    const [, bytes, kept] = /\((\d+) bytes\) is over .* at most (\d+) bytes/.exec(errors[0].message)!;
    expect(Number(kept)).toBe(Math.floor(Number(bytes) / 2));
  });

  it('while ingest refuses, retries the batch being sent until it is accepted and keeps at most maxQueueEvents, dropping the oldest waiting (counted, reported once)', async () => {
    await client.close();
    client = new NeatrootsClient({
      address: `127.0.0.1:${fake.port}`,
      apiKey: 'key-shop',
      maxBatch: 5,
      maxQueueEvents: 20,
      flushIntervalMs: 50,
      retry: { initialDelayMs: 5, maxDelayMs: 20, maxAttempts: 2 }, // maxAttempts is ignored now
      onError: (e) => errors.push(e),
    });
    fake.down = true;
    const run = client.startRun({ workflow: 'w', precheck: 'off' });
    for (let i = 0; i < 50; i++) run.span({ type: 'other', name: `s${i}` });
    // run_start + 4 spans went out as the first batch; of the 46 after, the newest 20 wait.
    expect(client.stats()).toMatchObject({ queued: 25, dropped: 26 });
    await waitFor(() => fake.attempts.length >= 12); // well past the old 6 tries
    expect(client.stats()).toMatchObject({ queued: 25, dropped: 26 });
    expect(errors.map((e) => e.message)).toEqual([expect.stringMatching(/^dropped 1 event\(s\) \(the export queue is full\)/), expect.stringMatching(/^export of \d+ event\(s\) failed: 14 UNAVAILABLE: .*; retrying until ingest takes it$/)]);
    fake.down = false;
    await run.flush();
    const names = fake.events().map((e) => (e.kind?.$case === 'span' ? e.kind.value.name : e.kind?.$case));
    expect(names).toEqual(['run_start', 's0', 's1', 's2', 's3', ...Array.from({ length: 20 }, (_, i) => `s${30 + i}`)]);
    expect(client.stats()).toMatchObject({ queued: 0, dropped: 26 });
    await client.close();
    // The rest of the count is reported at close: 1 + 25, nothing lost unsaid.
    expect(errors.map((e) => e.message)[2]).toMatch(/^dropped 25 event\(s\)/);
  });

  it('bounds the queue by bytes too', async () => {
    await client.close();
    client = new NeatrootsClient({ address: `127.0.0.1:${fake.port}`, apiKey: 'key-shop', maxBatch: 100, maxQueueBytes: 100_000, flushIntervalMs: 50, onError: (e) => errors.push(e) });
    fake.down = true;
    const run = client.startRun({ precheck: 'off' });
    for (let i = 0; i < 50; i++) run.span({ type: 'other', name: `s${i}`, input: 'x'.repeat(10_000) });
    const { queuedBytes, dropped } = client.stats();
    expect(queuedBytes).toBeLessThanOrEqual(100_000);
    expect(dropped).toBeGreaterThanOrEqual(40);
    await client.close(50);
  });

  it('drops an event larger than maxQueueBytes on its own, naming its size, and keeps the events queued before and after it', async () => {
    await client.close();
    // It used to evict every event queued before it (the run's run_start), keeping only itself.
    client = new NeatrootsClient({ address: `127.0.0.1:${fake.port}`, apiKey: 'key-shop', maxBatch: 100, maxQueueBytes: 10_000, flushIntervalMs: 3_600_000, onError: (e) => errors.push(e) });
    const run = client.startRun({ workflow: 'w', precheck: 'off' });
    run.span({ type: 'tool', name: 'before' });
    run.span({ type: 'tool', name: 'big', attributes: { blob: 'x'.repeat(10_000) } });
    run.span({ type: 'tool', name: 'after' });
    await client.flush();
    expect(fake.events().map((e) => (e.kind?.$case === 'span' ? e.kind.value.name : e.kind?.$case))).toEqual(['run_start', 'before', 'after']);
    expect(client.stats().dropped).toBe(1);
    expect(errors).toHaveLength(1);
    const m = /^dropped 1 event\(s\) \(event of (\d+) bytes is larger than the queue bound of 10000 bytes \(maxQueueBytes\)\)/.exec(errors[0].message);
    expect(m).not.toBeNull();
    expect(Number(m![1])).toBeGreaterThan(10_000);
    expect(Number(m![1])).toBeLessThan(10_200);
  });

  it('close(timeout) flushes for at most its timeout while ingest refuses, then drops the rest, counted and reported', async () => {
    fake.down = true;
    const run = client.startRun({ precheck: 'off' });
    for (let i = 0; i < 12; i++) run.span({ type: 'other' });
    // Refused and tried again before close: how many tries fit in its 400 ms depends on the machine's load.
    await waitFor(() => fake.attempts.length >= 2);
    const t = Date.now();
    await client.close(400);
    const took = Date.now() - t;
    expect(took).toBeGreaterThanOrEqual(390);
    expect(took).toBeLessThan(10_000); // its 400 ms, not a flush that waits for ingest to come back
    expect(fake.attempts.length).toBeGreaterThan(1); // retried, not given up after the first refusal
    expect(client.stats()).toEqual({ queued: 0, queuedBytes: 0, dropped: 13 });
    expect(errors.map((e) => e.message)).toEqual([expect.stringMatching(/^export of \d+ event\(s\) failed: 14 UNAVAILABLE: .*; retrying until ingest takes it$/), expect.stringMatching(/^dropped 13 event\(s\) \(not exported before close\(\) timed out\)/)]);
  });

  it('run.end() while ingest is down returns within its timeout (default closeTimeoutMs), closes the notes stream first, and leaves run_end queued and retried', async () => {
    await client.close();
    client = new NeatrootsClient({
      address: `127.0.0.1:${fake.port}`,
      apiKey: 'key-shop',
      flushIntervalMs: 50,
      closeTimeoutMs: 300,
      retry: { initialDelayMs: 5, maxDelayMs: 20 },
      onError: (e) => errors.push(e),
    });
    const byDefault = client.startRun({ precheck: 'off' });
    const byOption = client.startRun({ precheck: 'off' });
    await Promise.all([byDefault.whenSubscribed(), byOption.whenSubscribed()]);
    fake.down = true;
    // They waited for ingest to come back, their notes streams open all along.
    await byDefault.end({ final_output: 'a' });
    await byOption.end({ final_output: 'b', timeoutMs: 50 });
    await waitFor(() => fake.streams.size === 0);
    expect(client.stats().queued).toBeGreaterThanOrEqual(2);
    expect(client.stats().dropped).toBe(0);
    fake.down = false;
    await client.flush();
    const ends = fake.events().flatMap((e) => (e.kind?.$case === 'run_end' ? [e.kind.value] : []));
    expect(ends.map((e) => [e.run_id, e.final_output_json])).toEqual([
      [byDefault.id, '"a"'],
      [byOption.id, '"b"'],
    ]);
  });

  it('exports what is queued when the process is about to exit without close() (beforeExit), and says so', async () => {
    const sdk = join(__dirname, '..', 'dist', 'index.js');
    const script = `
      const { NeatrootsClient } = require(${JSON.stringify(sdk)});
      const c = new NeatrootsClient({ address: '127.0.0.1:${fake.port}', apiKey: 'key-shop', subscribe: false, flushIntervalMs: 60000, onError: (e) => console.log(e.message) });
      const run = c.startRun({ precheck: 'off' });
      for (let i = 0; i < 3; i++) run.span({ type: 'other', name: 'exit' + i });
    `;
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    const code = await new Promise((r) => child.on('exit', r));
    expect(code).toBe(0);
    expect(out).toContain('4 event(s) still queued at exit and the client was not closed');
    expect(fake.events().map((e) => (e.kind?.$case === 'span' ? e.kind.value.name : e.kind?.$case))).toEqual(['run_start', 'exit0', 'exit1', 'exit2']);
  });

  it('ignores what a throwing onError throws: a batch refused for good is settled, later events go, the notes of an answer that rejected items arrive, close() ends the streams', async () => {
    await client.close();
    const unhandled = await unhandledDuring(async () => {
      const reported: string[] = [];
      client = new NeatrootsClient({
        address: `127.0.0.1:${fake.port}`,
        apiKey: 'key-shop',
        flushIntervalMs: 50,
        retry: { initialDelayMs: 5, maxDelayMs: 20 },
        onError: (e) => {
          reported.push(e.message);
          throw new Error('the logger failed');
        },
      });
      const run = client.startRun({ precheck: 'off' });
      const notes: Note[] = [];
      run.onNote((n) => notes.push(n));
      await run.whenSubscribed();
      await client.flush(); // run_start
      fake.failures = [status.INVALID_ARGUMENT];
      run.span({ type: 'other', name: 'refused' });
      // It waited for ever: the throw left the batch in flight (and crashed the flusher).
      await client.flush();
      expect(reported).toEqual([expect.stringMatching(/^export of 1 event\(s\) failed: 3 INVALID_ARGUMENT: scripted failure/)]);
      expect(client.stats()).toMatchObject({ queued: 0 });

      // An answer that rejects an item and carries a halt: the report throws, the halt still arrives.
      fake.rejectNext = [{ index: 0, run_id: run.id, span_id: 'x', field: 'name', reason: 'scripted' }];
      fake.piggyback = [halt(run.id, 'h5'), { ...halt(run.id, 'n6'), kind: 'note' }];
      run.span({ type: 'other', name: 'later' });
      await client.flush();
      expect(fake.events().map((e) => (e.kind?.$case === 'span' ? e.kind.value.name : e.kind?.$case))).toEqual(['run_start', 'later']);
      expect(reported[1]).toMatch(new RegExp(`^neatroots rejected 1 item\\(s\\): span x of run ${run.id}: name: scripted \\(dropped, not sent again; 2 dropped in all\\)$`));
      expect(notes.map((n) => n.id)).toEqual(['h5', 'n6']);
      expect(run.halted).toBe(true);

      // close() reports what it drops (the report throws) and still ends the notes stream.
      fake.down = true;
      run.span({ type: 'other', name: 'lost' });
      await client.close(200);
      expect(reported.at(-1)).toMatch(/^dropped 1 event\(s\) \(not exported before close\(\) timed out\)/);
      await waitFor(() => fake.streams.size === 0);
    });
    expect(unhandled).toEqual([]);
  });

  it('an async onError that rejects is ignored as a throw is, and an async onNote callback that rejects is reported through onError: no unhandled rejection', async () => {
    await client.close();
    const unhandled = await unhandledDuring(async () => {
      const reported: string[] = [];
      client = new NeatrootsClient({
        address: `127.0.0.1:${fake.port}`,
        apiKey: 'key-shop',
        flushIntervalMs: 50,
        onError: async (e) => {
          reported.push(e.message);
          throw new Error('the async logger failed');
        },
      });
      const run = client.startRun({ precheck: 'off' });
      run.onNote(async (n) => {
        throw new Error(`the note handler failed on ${n.id}`);
      });
      const seen: string[] = [];
      run.onNote((n) => seen.push(n.id));
      await run.whenSubscribed();
      fake.streams.get(run.id)?.write(halt(run.id, 'h7'));
      await waitFor(() => reported.length === 1);
      expect(reported).toEqual(['the note handler failed on h7']);
      expect(seen).toEqual(['h7']);
      expect(run.halted).toBe(true);
      // Rejections surface as unhandled after the microtask queue drains.
      await new Promise((r) => setTimeout(r, 50));
    });
    expect(unhandled).toEqual([]);
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

  it('takes an export answer larger than gRPC\'s default 4 MiB (its runs\' notes) whole: its events are not sent again, its notes arrive, nothing is dropped or reported', async () => {
    // Up to 32 notes a run, each with its check's guidance: 64 of 100 KB here. The client's own
    // 4 MiB receive bound refused it as 'Received message larger than max (X vs. 4194304)', the
    // text of ingest refusing a request as too large: the batch ingest had taken was sent again
    // in halves, the notes lost, and the export size lowered for good.
    const run = client.startRun();
    const notes: Note[] = [];
    run.onNote((n) => notes.push(n));
    await run.flush();
    fake.piggyback = Array.from({ length: 64 }, (_, i) => ({ ...halt(run.id, `n${i}`), kind: 'note', text: 'g'.repeat(100_000) }));
    run.span({ type: 'tool', name: 'a' });
    run.span({ type: 'tool', name: 'b' });
    await run.flush();
    await waitFor(() => notes.length === 64 || errors.length > 0);
    expect(errors.map((e) => e.message)).toEqual([]);
    expect(fake.events().map((e) => e.kind?.$case)).toEqual(['run_start', 'span', 'span']);
    expect(notes).toHaveLength(64);
    expect(client.stats().dropped).toBe(0);
  });

  it('does not reopen a notes stream ingest refuses for good (UNAUTHENTICATED: a revoked key): one open, one report, whenSubscribed rejects with it', async () => {
    fake.refuseStreams = status.UNAUTHENTICATED;
    const run = client.startRun({ precheck: 'off' });
    await expect(run.whenSubscribed()).rejects.toThrow(`notes for run ${run.id} unavailable: 16 UNAUTHENTICATED: unknown API key`);
    // It was reopened every 250 ms doubling to 30 s for the run's life, each refusal reported:
    // a reopen is due within 250 ms, so give it 2 s (this passes however slow the machine).
    const t = Date.now();
    await waitFor(() => fake.opens > 1 || Date.now() - t > 2000);
    expect(fake.opens).toBe(1);
    expect(errors.map((e) => e.message)).toEqual([`notes for run ${run.id} unavailable: 16 UNAUTHENTICATED: unknown API key`]);
    await run.end(); // the run goes on: its events are still exported
    expect(fake.events().map((e) => e.kind?.$case)).toEqual(['run_start', 'run_end']);
  });

  it('whenSubscribed rejects when the run ends before its notes stream opened', async () => {
    fake.silentStreams = true;
    const run = client.startRun({ precheck: 'off' });
    const subscribed = expect(run.whenSubscribed()).rejects.toThrow(/before its notes stream opened/);
    await waitFor(() => fake.opens === 1);
    await run.end();
    await subscribed;
  });

  it('refuses an empty apiKey or address at construction, naming the option', () => {
    expect(() => new NeatrootsClient({ address: '127.0.0.1:1', apiKey: '' })).toThrow('NeatrootsClient: options.apiKey is required');
    expect(() => new NeatrootsClient({ address: '127.0.0.1:1', apiKey: process.env.NEATROOTS_NO_SUCH_KEY! })).toThrow('options.apiKey is required');
    expect(() => new NeatrootsClient({ address: '', apiKey: 'key-shop' })).toThrow('NeatrootsClient: options.address is required');
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

  it('reopens a notes stream the server ends, backing off from 250 ms (open headers do not reset it), and whenSubscribed resolves at once without subscribing', async () => {
    fake.endStreams = true;
    const run = client.startRun({ precheck: 'off' });
    await new Promise((r) => setTimeout(r, 2000));
    // 250, 500, 1000 ms (each with jitter down to half): at most 5 opens in 2 s, not one per 250 ms.
    expect(fake.opens).toBeGreaterThanOrEqual(3);
    expect(fake.opens).toBeLessThanOrEqual(5);
    await run.end();
    const opens = fake.opens;
    await new Promise((r) => setTimeout(r, 600));
    expect(fake.opens).toBe(opens);

    const quiet = new NeatrootsClient({ address: `127.0.0.1:${fake.port}`, apiKey: 'key-shop', subscribe: false });
    const r2 = quiet.startRun({ precheck: 'off' });
    await expect(Promise.race([r2.whenSubscribed().then(() => 'resolved'), new Promise((r) => setTimeout(() => r('pending'), 500))])).resolves.toBe('resolved');
    await quiet.close();
  });
});
