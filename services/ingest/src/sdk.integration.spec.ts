import { MemoryBus } from '@neatroots/platform';
import { NOTES_TOPIC, EVENTS_TOPIC, DELIVERIES_TOPIC, type NoteDelivered } from '@neatroots/messages';
import { type Envelope } from '@neatroots/spans';
import { NeatrootsClient, RunHaltedError } from '@neatroots/sdk';
import { startIngest, type IngestHandle } from './ingest';

/** The agent SDK against the real ingest service and the in-process bus. */
describe('the SDK against ingest', () => {
  let bus: MemoryBus;
  let ingest: IngestHandle;
  let client: NeatrootsClient;
  const events: Envelope[] = [];
  const deliveries: NoteDelivered[] = [];

  beforeAll(async () => {
    bus = new MemoryBus();
    await bus.subscribe(EVENTS_TOPIC, { group: 'test' }, async (b) => void events.push(...b.records.map((r) => r.value)));
    await bus.subscribe(DELIVERIES_TOPIC, { group: 'test' }, async (b) => void deliveries.push(...b.records.map((r) => r.value)));
    ingest = await startIngest({ bus, resolveKey: async (k) => (k === 'key-shop' ? 'shop' : undefined), otlpPort: 0, grpcPort: 0 });
    client = new NeatrootsClient({ address: `127.0.0.1:${ingest.grpcPort}`, apiKey: 'key-shop', flushIntervalMs: 20 });
  });

  afterAll(async () => {
    await client.close();
    await ingest.close();
    await bus.close();
  });

  it('exports a run that arrives on the bus under the key’s project', async () => {
    const run = client.startRun({ workflow: 'refund-agent', user_message: 'refund 7' });
    await run.toolCall('lookup_order', { id: 7 }, () => ({ owner: 'bob' }));
    await run.end({ final_output: 'refunded' });
    await bus.idle();
    const mine = events.filter((e) => (e.item.kind === 'span' ? e.item.span.run_id : e.item.run.run_id) === run.id);
    expect(mine.map((e) => e.item.kind)).toEqual(['run_start', 'span', 'run_end']);
    expect(mine.every((e) => e.project === 'shop')).toBe(true);
    expect(mine[1].item).toMatchObject({ kind: 'span', span: { type: 'tool', tool: 'lookup_order', input: { id: 7 }, output: { owner: 'bob' } } });
  });

  it('receives a halt published by the engine: halted, aborted, further tool calls refused, delivery recorded', async () => {
    const run = client.startRun({ workflow: 'search-agent' });
    await run.whenSubscribed();
    await bus.publish(NOTES_TOPIC, [{
      key: run.id,
      value: { id: 'note-1', project: 'shop', run_id: run.id, check_id: 'repeated-tool-call', finding_id: 'f-1', kind: 'halt', title: 'Loop', text: 'Stop', at_ms: Date.now() },
    }]);
    const until = Date.now() + 30_000; // the halt comes in milliseconds; a loaded machine may take seconds
    while (!run.halted && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    expect(run.halted).toBe(true);
    expect(run.signal.aborted).toBe(true);
    await expect(run.toolCall('search', { q: 'again' }, () => 'x')).rejects.toBeInstanceOf(RunHaltedError);
    await run.end();
    await bus.idle();
    expect(deliveries).toContainEqual({ note_id: 'note-1', finding_id: 'f-1', project: 'shop', at_ms: expect.any(Number) });
    const end = events.find((e) => e.item.kind === 'run_end' && e.item.run.run_id === run.id);
    expect(end?.item).toMatchObject({ run: { status: 'interrupted' } });
  });

  it('gets a halt piggybacked on an export when its stream was not open', async () => {
    const quiet = new NeatrootsClient({ address: `127.0.0.1:${ingest.grpcPort}`, apiKey: 'key-shop', subscribe: false, flushIntervalMs: 20 });
    try {
      const run = quiet.startRun();
      await run.flush();
      await bus.publish(NOTES_TOPIC, [{
        key: run.id,
        value: { id: 'note-2', project: 'shop', run_id: run.id, check_id: 'c', finding_id: 'f-2', kind: 'halt', title: 'Stop', text: '', at_ms: Date.now() },
      }]);
      await bus.idle();
      expect(run.halted).toBe(false);
      run.span({ type: 'llm', name: 'chat' });
      await run.flush();
      expect(run.halted).toBe(true);
    } finally {
      await quiet.close();
    }
  });

  it('exports spans of 3 MiB in messages of at most 4 MiB, and sends a span over ingest’s bound alone: only it is refused, counted as dropped and named with its size and the bound', async () => {
    const errors: Error[] = [];
    const big = new NeatrootsClient({ address: `127.0.0.1:${ingest.grpcPort}`, apiKey: 'key-shop', subscribe: false, flushIntervalMs: 20, onError: (e) => errors.push(e) });
    try {
      const run = big.startRun({ workflow: 'big-agent', precheck: 'off' });
      for (let i = 0; i < 3; i++) run.span({ type: 'tool', tool: `t${i}`, output: 'x'.repeat(3 * 1024 * 1024) });
      const huge = run.span({ type: 'tool', tool: 'huge', output: 'x'.repeat(9 * 1024 * 1024) }); // over ingest's 8 MiB on its own
      run.span({ type: 'tool', tool: 'small' });
      await run.end();
      await bus.idle();
      const mine = events.filter((e) => (e.item.kind === 'span' ? e.item.span.run_id : e.item.run.run_id) === run.id);
      expect(mine.map((e) => (e.item.kind === 'span' ? e.item.span.tool : e.item.kind))).toEqual(['run_start', 't0', 't1', 't2', 'small', 'run_end']);
      // It was neither counted nor named: 'export of 1 event(s) failed: 8 RESOURCE_EXHAUSTED: Received message larger than max (...)'.
      expect(big.stats().dropped).toBe(1);
      expect(errors.map((e) => e.message)).toEqual([
        expect.stringMatching(
          new RegExp(`^dropped 1 event\\(s\\) \\(span ${huge} of run ${run.id} \\(94\\d{5} bytes\\): over the 8388608 bytes ingest takes in one message \\(8 RESOURCE_EXHAUSTED: Received message larger than max \\(\\d+ vs\\.? 8388608\\)\\); not sent again\\); 1 dropped in all$`),
        ),
      ]);
    } finally {
      await big.close();
    }
  });

  it('counts a span ingest rejects on its own inside an accepted export as dropped and names it; the rest of the export is kept', async () => {
    const errors: Error[] = [];
    const c = new NeatrootsClient({ address: `127.0.0.1:${ingest.grpcPort}`, apiKey: 'key-shop', subscribe: false, flushIntervalMs: 60_000, onError: (e) => errors.push(e) });
    try {
      const run = c.startRun({ workflow: 'partial-agent', precheck: 'off' });
      const now = Date.now();
      run.span({ type: 'tool', tool: 'fine' });
      const bad = run.span({ type: 'tool', tool: 'backwards', start_ms: now, end_ms: now - 1000 }); // end before start: rejected alone
      await run.end();
      await bus.idle();
      const mine = events.filter((e) => (e.item.kind === 'span' ? e.item.span.run_id : e.item.run.run_id) === run.id);
      expect(mine.map((e) => (e.item.kind === 'span' ? e.item.span.tool : e.item.kind))).toEqual(['run_start', 'fine', 'run_end']);
      // Counted as dropped (before, as sent: dropped 0), and the report names the span and the count.
      expect(c.stats().dropped).toBe(1);
      expect(errors.map((e) => e.message)).toEqual([
        `neatroots rejected 1 item(s): span ${bad} of run ${run.id}: end_ms: is before start_ms (${now - 1000} < ${now}) (dropped, not sent again; 1 dropped in all)`,
      ]);
    } finally {
      await c.close();
    }
  });

  it('sends a batch over a lower message bound of ingest in halves, down to the one span over it (dropped), and keeps the bound for the next batches', async () => {
    const small = await startIngest({ bus, resolveKey: async (k) => (k === 'key-shop' ? 'shop' : undefined), otlpPort: 0, grpcPort: 0, maxReceiveMessageBytes: 64 * 1024 });
    const errors: Error[] = [];
    const c = new NeatrootsClient({ address: `127.0.0.1:${small.grpcPort}`, apiKey: 'key-shop', subscribe: false, flushIntervalMs: 60_000, onError: (e) => errors.push(e) });
    const tools = (runId: string) =>
      events.filter((e) => (e.item.kind === 'span' ? e.item.span.run_id : e.item.run.run_id) === runId).map((e) => (e.item.kind === 'span' ? e.item.span.tool : e.item.kind));
    try {
      // One batch of about 250 KB: 30 spans of 8 KB and one of 100 KB, over the 64 KiB ingest takes.
      const run = c.startRun({ workflow: 'small-bound-agent', precheck: 'off' });
      const names = Array.from({ length: 30 }, (_, i) => `t${i}`);
      for (const [i, tool] of names.entries()) {
        run.span({ type: 'tool', tool, output: 'x'.repeat(8000) });
        if (i === 20) run.span({ type: 'tool', tool: 'huge', output: 'x'.repeat(100_000) });
      }
      await run.end();
      await bus.idle();
      // Without the split the whole batch was dropped: dropped 33, none of its spans on the bus.
      expect(tools(run.id)).toEqual(['run_start', ...names, 'run_end']);
      expect(c.stats().dropped).toBe(1);
      expect(errors.map((e) => e.message)).toEqual([
        expect.stringMatching(/^export of 33 event\(s\) \(\d+ bytes\) is over what ingest takes in one message \(8 RESOURCE_EXHAUSTED: Received message larger than max \(\d+ vs\.? 65536\)\): sent in halves; exports hold at most 65536 bytes from now on$/),
        expect.stringMatching(/^dropped 1 event\(s\) \(span \w+ of run \S+ \(100\d{3} bytes\): over the 65536 bytes ingest takes in one message .*; 1 dropped in all$/),
      ]);

      // The bound is kept: the next batches are within it, none refused.
      const next = c.startRun({ workflow: 'small-bound-agent', precheck: 'off' });
      for (const tool of names) next.span({ type: 'tool', tool, output: 'x'.repeat(8000) });
      await next.end();
      await bus.idle();
      expect(tools(next.id)).toEqual(['run_start', ...names, 'run_end']);
      expect(c.stats().dropped).toBe(1);
      expect(errors).toHaveLength(2);
    } finally {
      await c.close();
      await small.close();
    }
  });

  it('counts a span over ingest’s bound for one item (NEATROOTS_MAX_ITEM_CHARS) as dropped and names it with its size', async () => {
    const errors: Error[] = [];
    const big = new NeatrootsClient({ address: `127.0.0.1:${ingest.grpcPort}`, apiKey: 'key-shop', subscribe: false, flushIntervalMs: 20, onError: (e) => errors.push(e) });
    try {
      const run = big.startRun({ workflow: 'big-agent', precheck: 'off' });
      await run.flush();
      const large = run.span({ type: 'tool', tool: 'large', output: 'x'.repeat(5 * 1024 * 1024) }); // within 8 MiB, over 4 Mi characters
      await run.flush();
      expect(big.stats().dropped).toBe(1);
      expect(errors).toHaveLength(1);
      expect(errors[0].message).toMatch(/^export of 1 event\(s\) failed: 3 INVALID_ARGUMENT: .*4194304/);
      expect(errors[0].message).toContain(`(dropped: span ${large} of run ${run.id} (`);
    } finally {
      await big.close();
    }
  });
});
