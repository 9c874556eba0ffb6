import { once } from 'node:events';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import { Client, Metadata, credentials, status, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import { context, trace, SpanStatusCode } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { MemoryBus, until, within } from '@neatroots/platform';
import type { Bus, BusBatch, BusRecord, LogFields, SubscribeOptions, Subscription, Topic } from '@neatroots/ports';
import { otlp, v1 } from '@neatroots/proto';
import { DELIVERIES_TOPIC, EVENTS_TOPIC, NOTES_TOPIC, type Note, type NoteDelivered } from '@neatroots/messages';
import { itemToEvent, type Envelope, type RunEnd, type RunStart, type Span } from '@neatroots/spans';
import type { KeyGrant } from './auth';
import { startIngest, type IngestHandle } from './ingest';

// ---- harness ---------------------------------------------------------------------------

/** The in-process bus, with a switch that makes publishing to the events topic fail. */
class FlakyBus implements Bus {
  failEvents = false;
  constructor(readonly inner: MemoryBus) {}
  publish<T>(topic: Topic<T>, records: BusRecord<T>[]): Promise<void> {
    if (this.failEvents && topic.name === EVENTS_TOPIC.name) return Promise.reject(new Error('broker down'));
    return this.inner.publish(topic, records);
  }
  subscribe<T>(topic: Topic<T>, opts: SubscribeOptions, handler: (batch: BusBatch<T>) => Promise<void>): Promise<Subscription> {
    return this.inner.subscribe(topic, opts, handler);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

/** The projects keys open: a bare name is a full key (as a resolver older than scopes says); key-agent is an agent's. */
const KEYS: Record<string, string | KeyGrant> = { 'key-shop': 'shop', 'key-bank': 'bank', 'key-agent': { project: 'shop', scope: 'ingest' } };

interface Harness {
  bus: FlakyBus;
  memory: MemoryBus;
  ingest: IngestHandle;
  events: Envelope[];
  deliveries: NoteDelivered[];
  /** What ingest logged: the message and the fields. */
  logged: { msg: string; fields?: LogFields }[];
  neatroots: v1.IngestClient;
  otlpClient: otlp.TraceServiceClient;
  close(): Promise<void>;
}

async function harness(maxReceiveMessageBytes?: number): Promise<Harness> {
  const memory = new MemoryBus();
  const bus = new FlakyBus(memory);
  const events: Envelope[] = [];
  const deliveries: NoteDelivered[] = [];
  const logged: Harness['logged'] = [];
  // Every record goes through its topic's codec, as it would through Kafka.
  const subs = [
    await bus.subscribe(EVENTS_TOPIC, { group: 'test-events' }, async (b) => {
      for (const r of b.records) events.push(EVENTS_TOPIC.decode(EVENTS_TOPIC.encode(r.value)));
    }),
    await bus.subscribe(DELIVERIES_TOPIC, { group: 'test-deliveries' }, async (b) => {
      for (const r of b.records) deliveries.push(DELIVERIES_TOPIC.decode(DELIVERIES_TOPIC.encode(r.value)));
    }),
  ];
  const ingest = await startIngest({
    bus,
    resolveKey: async (k) => KEYS[k],
    otlpPort: 0,
    grpcPort: 0,
    maxReceiveMessageBytes,
    logger: {
      warn: (msg, fields) => logged.push({ msg, fields }),
      error: (msg, _err, fields) => logged.push({ msg, fields }),
    },
  });
  const neatroots = new v1.IngestClient(`127.0.0.1:${ingest.grpcPort}`, credentials.createInsecure());
  const otlpClient = new otlp.TraceServiceClient(`127.0.0.1:${ingest.otlpPort}`, credentials.createInsecure());
  return {
    bus, memory, ingest, events, deliveries, logged, neatroots, otlpClient,
    async close() {
      neatroots.close();
      otlpClient.close();
      await ingest.close();
      for (const s of subs) await s.close();
      await bus.close();
    },
  };
}

function md(key?: string, header = 'x-api-key'): Metadata {
  const m = new Metadata();
  if (key !== undefined) m.set(header, header === 'authorization' ? `Bearer ${key}` : key);
  return m;
}

function exportV1(h: Harness, req: Partial<v1.ExportRequest>, meta = md('key-shop')): Promise<v1.ExportResponse> {
  return new Promise((resolve, reject) =>
    h.neatroots.export(v1.ExportRequest.fromPartial(req), meta, (err, res) => (err ? reject(err) : resolve(res))),
  );
}

function exportOtlp(h: Harness, req: otlp.ExportTraceServiceRequest, meta = md('key-shop')): Promise<otlp.ExportTraceServiceResponse> {
  return new Promise((resolve, reject) => h.otlpClient.export(req, meta, (err, res) => (err ? reject(err) : resolve(res))));
}

/** Sends raw bytes as the request of a unary method. */
function rawUnary(port: number, path: string, body: Buffer, meta = md('key-shop')): Promise<Buffer> {
  const client = new Client(`127.0.0.1:${port}`, credentials.createInsecure());
  const identity = (b: Buffer) => b;
  return new Promise<Buffer>((resolve, reject) => {
    client.makeUnaryRequest(path, identity, identity, body, meta, (err: ServiceError | null, res?: Buffer) =>
      err ? reject(err) : resolve(res as Buffer),
    );
  }).finally(() => client.close());
}

function spanEvent(span: Partial<Span> & { run_id?: string; span_id?: string }): v1.Event {
  const full: Span = { run_id: 'r1', span_id: 's1', type: 'tool', name: 'search', status: 'ok', ...span };
  const ev = itemToEvent({ kind: 'span', span: full });
  return ev;
}

const spansOf = (events: Envelope[]): Span[] => events.flatMap((e) => (e.item.kind === 'span' ? [e.item.span] : []));

/** Waits for `cond`: milliseconds here, seconds on a loaded machine; 30 s before it fails. */
async function waitFor(cond: () => boolean, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 5));
  }
}

function openSubscribe(h: Harness, runId: string, key = 'key-shop'): { stream: ClientReadableStream<v1.Note>; notes: v1.Note[] } {
  const stream = h.neatroots.subscribe({ run_id: runId }, md(key));
  const notes: v1.Note[] = [];
  stream.on('data', (n: v1.Note) => notes.push(n));
  stream.on('error', () => undefined); // CANCELLED when the test cancels it
  return { stream, notes };
}

function note(over: Partial<Note>): Note {
  return { id: 'n1', project: 'shop', run_id: 'r1', check_id: 'c1', finding_id: 'f1', kind: 'note', title: 'Repeated call', text: 'Stop repeating', at_ms: 1, ...over };
}

const TRACE = '5b8efff798038103d269b633813fc60c';

function otlpSpan(id: string, attrs: Record<string, string>, trace_id = TRACE): otlp.Span {
  return otlp.Span.fromPartial({
    trace_id: Buffer.from(trace_id, 'hex'),
    span_id: Buffer.from(id, 'hex'),
    name: 'execute_tool',
    start_time_unix_nano: '1700000000000000000',
    end_time_unix_nano: '1700000000500000000',
    attributes: Object.entries(attrs).map(([key, value]) => ({ key, value: { value: { $case: 'string_value', value } } })),
  });
}

function otlpRequest(spans: otlp.Span[]): otlp.ExportTraceServiceRequest {
  return { resource_spans: [{ resource: { attributes: [], dropped_attributes_count: 0 }, schema_url: '', scope_spans: [{ spans, schema_url: '' }] }] };
}

// ---- tests -----------------------------------------------------------------------------

describe('ingest over gRPC', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness();
  });
  afterAll(async () => {
    await h.close();
  });
  beforeEach(async () => {
    await h.memory.idle();
    h.events.length = 0;
    h.deliveries.length = 0;
    h.bus.failEvents = false;
  });

  describe('neatroots.v1 Export', () => {
    it('accepts good items, rejects a span without run_id with its reason, and publishes before answering', async () => {
      const before = Date.now();
      const res = await exportV1(h, {
        events: [
          spanEvent({ span_id: 'a' }),
          spanEvent({ run_id: '', span_id: 'b' }),
          itemToEvent({ kind: 'run_end', run: { event: 'run_end', run_id: 'r1', status: 'ok', final_output: 'done' } }),
        ],
      });
      expect(res.accepted).toBe(2);
      expect(res.rejected).toEqual([{ index: 1, run_id: '', span_id: '', field: 'run_id', reason: 'is required' }]);
      // Published before the response: already on the bus.
      await h.memory.idle();
      expect(h.events.map((e) => e.item.kind)).toEqual(['span', 'run_end']);
      const [env] = h.events;
      expect(env.project).toBe('shop');
      expect(env.received_ms).toBeGreaterThanOrEqual(before);
      expect(spansOf(h.events)[0]).toMatchObject({ run_id: 'r1', span_id: 'a', project: 'shop', tool: 'search' });
      expect(h.ingest.metrics.items_rejected.run_id).toBeGreaterThanOrEqual(1);
    });

    it('counts refusals by field without the indexes of lists (a bounded label set): tools[].name', async () => {
      const start = (run_id: string, tools: { name: string; description: string }[]) =>
        itemToEvent({ kind: 'run_start', run: { event: 'run_start', run_id, tools } as RunStart });
      const res = await exportV1(h, {
        events: [
          start('r-t1', [{ name: '', description: '' }]),
          start('r-t2', [{ name: 'ok', description: '' }, { name: '', description: '' }]),
          start('r-t3', [{ name: 'ok', description: '' }, { name: 'ok', description: '' }, { name: '', description: '' }]),
          spanEvent({ span_id: 'a' }),
        ],
      });
      expect(res.rejected.map((r) => r.field)).toEqual(['tools[0].name', 'tools[1].name', 'tools[2].name']);
      expect(h.ingest.metrics.items_rejected['tools[].name']).toBe(3);
      expect(Object.keys(h.ingest.metrics.items_rejected).filter((k) => /\[\d/.test(k))).toEqual([]);
    });

    it('answers INVALID_ARGUMENT with the reasons when nothing is acceptable', async () => {
      const err = await exportV1(h, { events: [spanEvent({ run_id: '' }), spanEvent({ type: 'banana' as Span['type'] })] }).catch((e: ServiceError) => e);
      expect(err).toMatchObject({ code: status.INVALID_ARGUMENT });
      expect((err as ServiceError).details).toContain('#0: run_id: is required');
      expect((err as ServiceError).details).toContain('#1 run r1 span s1: type: must be one of');
      await h.memory.idle();
      expect(h.events).toEqual([]);
    });

    it('rejects a span that names another project', async () => {
      const res = await exportV1(h, { events: [spanEvent({ span_id: 'a', project: 'bank' }), spanEvent({ span_id: 'b', project: 'shop' })] });
      expect(res.accepted).toBe(1);
      expect(res.rejected[0]).toMatchObject({ index: 0, field: 'project', reason: 'names project "bank", but the API key is for "shop"' });
    });

    it('answers INVALID_ARGUMENT (not INTERNAL) to bytes that are not protobuf', async () => {
      const err = await rawUnary(h.ingest.grpcPort, '/neatroots.v1.Ingest/Export', Buffer.from([0x0a, 0x05, 0x01])).catch((e: ServiceError) => e);
      expect(err).toMatchObject({ code: status.INVALID_ARGUMENT, details: 'malformed protobuf request: premature EOF' });
    });

    it('answers UNAUTHENTICATED without a key or with a wrong one, and takes a Bearer token', async () => {
      const ev = { events: [spanEvent({})] };
      await expect(exportV1(h, ev, md())).rejects.toMatchObject({ code: status.UNAUTHENTICATED, details: expect.stringContaining('missing API key') });
      await expect(exportV1(h, ev, md('nope'))).rejects.toMatchObject({ code: status.UNAUTHENTICATED, details: 'unknown API key' });
      await expect(exportV1(h, ev, md('key-shop', 'authorization'))).resolves.toMatchObject({ accepted: 1 });
    });

    it('answers UNAVAILABLE and acknowledges nothing when the bus fails', async () => {
      h.bus.failEvents = true;
      const err = await exportV1(h, { events: [spanEvent({})] }).catch((e: ServiceError) => e);
      expect(err).toMatchObject({ code: status.UNAVAILABLE });
      expect((err as ServiceError).details).toContain('not acknowledged, send it again (a span sent twice is stored once)');
      // the operator's line names the project and the run, for a log pipeline to filter on
      expect(h.logged).toContainEqual({ msg: 'ingest: publishing 1 items failed', fields: { project: 'shop', run_id: 'r1' } });
      h.bus.failEvents = false;
      await h.memory.idle();
      expect(h.events).toEqual([]);
    });
  });

  describe('OTLP Export', () => {
    it('keeps the good spans of a partly malformed export and reports partial_success', async () => {
      const bad = otlpSpan('0000000000000002', {}, 'abcd');
      const res = await exportOtlp(h, otlpRequest([
        otlpSpan('0000000000000001', { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'lookup' }),
        bad,
        otlpSpan('0000000000000003', { 'gen_ai.operation.name': 'chat' }),
      ]));
      expect(res.partial_success?.rejected_spans).toBe('1');
      expect(res.partial_success?.error_message).toContain('trace_id: must be 16 bytes, got 2');
      await h.memory.idle();
      expect(spansOf(h.events).map((s) => [s.span_id, s.type, s.project])).toEqual([
        ['0000000000000001', 'tool', 'shop'],
        ['0000000000000003', 'llm', 'shop'],
      ]);
    });

    it('leaves partial_success unset when everything was accepted', async () => {
      const res = await exportOtlp(h, otlpRequest([otlpSpan('0000000000000004', {})]));
      expect(res.partial_success).toBeUndefined();
    });

    it('answers INVALID_ARGUMENT when no span is acceptable, and to malformed protobuf', async () => {
      await expect(exportOtlp(h, otlpRequest([otlpSpan('00', {})]))).rejects.toMatchObject({
        code: status.INVALID_ARGUMENT, details: expect.stringContaining('span_id: must be 8 bytes, got 1'),
      });
      const err = await rawUnary(h.ingest.otlpPort, '/opentelemetry.proto.collector.trace.v1.TraceService/Export', Buffer.from([0xff, 0xff])).catch(
        (e: ServiceError) => e,
      );
      expect(err).toMatchObject({ code: status.INVALID_ARGUMENT, details: expect.stringContaining('malformed protobuf request') });
    });

    it('answers UNAUTHENTICATED without a key', async () => {
      await expect(exportOtlp(h, otlpRequest([otlpSpan('0000000000000001', {})]), md())).rejects.toMatchObject({ code: status.UNAUTHENTICATED });
    });

    /** A span whose attribute `deep` is `levels` arrayValues or kvlistValues within each other. */
    function deepSpan(id: string, levels: number, container: 'array' | 'kvlist'): otlp.Span {
      let v: otlp.AnyValue = { value: { $case: 'string_value', value: 'bottom' } };
      for (let i = 0; i < levels; i++) {
        v = container === 'array'
          ? { value: { $case: 'array_value', value: { values: [v] } } }
          : { value: { $case: 'kvlist_value', value: { values: [{ key: 'k', value: v }] } } };
      }
      return { ...otlpSpan(id, {}), attributes: [{ key: 'deep', value: v }] };
    }

    it('refuses alone a span whose attribute is nested past NEATROOTS_MAX_JSON_DEPTH, as over OTLP/JSON, past the generated decoder’s 100 messages', async () => {
      // 64 kvlists are 192 messages, 65 arrays 130: the generated decoder stops at 100
      const res = await exportOtlp(h, otlpRequest([
        otlpSpan('0000000000000001', {}),
        deepSpan('0000000000000002', 64, 'kvlist'),
        deepSpan('0000000000000003', 65, 'array'),
      ]));
      expect(res.partial_success).toEqual({
        rejected_spans: '1',
        error_message: `1 of 3 spans rejected: #2 run ${TRACE} span 0000000000000003: attributes.deep: is JSON nested more than 64 levels deep (NEATROOTS_MAX_JSON_DEPTH)`,
      });
      await h.memory.idle();
      expect(spansOf(h.events).map((s) => s.span_id)).toEqual(['0000000000000001', '0000000000000002']);
    });

    it('answers INVALID_ARGUMENT naming the bound to a value nested past what any NEATROOTS_MAX_JSON_DEPTH takes', async () => {
      await expect(exportOtlp(h, otlpRequest([otlpSpan('0000000000000001', {}), deepSpan('0000000000000002', 1002, 'kvlist')]))).rejects.toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: 'malformed protobuf request: messages are nested more than 3010 deep: an attribute value nested past what any NEATROOTS_MAX_JSON_DEPTH accepts (at most 1000)',
      });
      await h.memory.idle();
      expect(h.events).toEqual([]);
    });

    it('answers UNAVAILABLE when the bus fails', async () => {
      h.bus.failEvents = true;
      await expect(exportOtlp(h, otlpRequest([otlpSpan('0000000000000001', {})]))).rejects.toMatchObject({ code: status.UNAVAILABLE });
    });
  });

  describe('notes', () => {
    it('delivers a note to the run stream and to a project-wide stream, not to another project, and records the delivery', async () => {
      const run = openSubscribe(h, 'run-a');
      const project = openSubscribe(h, '');
      const other = openSubscribe(h, '', 'key-bank');
      await Promise.all([once(run.stream, 'metadata'), once(project.stream, 'metadata'), once(other.stream, 'metadata')]);
      await h.bus.publish(NOTES_TOPIC, [{ key: 'run-a', value: note({ id: 'n-a', run_id: 'run-a', kind: 'halt' }) }]);
      await waitFor(() => run.notes.length === 1 && project.notes.length === 1);
      expect(run.notes[0]).toMatchObject({ id: 'n-a', kind: 'halt', run_id: 'run-a', text: 'Stop repeating' });
      await h.memory.idle();
      expect(other.notes).toEqual([]);
      expect(h.deliveries).toEqual([{ note_id: 'n-a', finding_id: 'f1', project: 'shop', at_ms: expect.any(Number) }]);
      for (const s of [run, project, other]) s.stream.cancel();
    });

    it('keeps a note for a run without a stream and piggybacks it on the next export of that run, once', async () => {
      await h.bus.publish(NOTES_TOPIC, [{ key: 'run-b', value: note({ id: 'n-b', run_id: 'run-b' }) }]);
      await h.memory.idle();
      const other = await exportV1(h, { events: [spanEvent({ run_id: 'run-c' })] });
      expect(other.notes).toEqual([]);
      const first = await exportV1(h, { events: [spanEvent({ run_id: 'run-b' })] });
      expect(first.notes.map((n) => n.id)).toEqual(['n-b']);
      const again = await exportV1(h, { events: [spanEvent({ run_id: 'run-b', span_id: 's2' })] });
      expect(again.notes).toEqual([]);
      await h.memory.idle();
      expect(h.deliveries.map((d) => d.note_id)).toEqual(['n-b']);
      expect(h.ingest.metrics.notes_delivered.piggyback).toBeGreaterThanOrEqual(1);
    });

    it("piggybacks a run's halt on its next export while only a project-wide stream took it (an agent without a stream of its own, another process watching the project)", async () => {
      const project = openSubscribe(h, '');
      await once(project.stream, 'metadata');
      await h.bus.publish(NOTES_TOPIC, [{ key: 'run-g', value: note({ id: 'n-g', run_id: 'run-g', kind: 'halt' }) }]);
      await waitFor(() => project.notes.length === 1);
      expect(project.notes[0]).toMatchObject({ id: 'n-g', kind: 'halt' });
      const first = await exportV1(h, { events: [spanEvent({ run_id: 'run-g' })] });
      expect(first.notes).toEqual([expect.objectContaining({ id: 'n-g', kind: 'halt', run_id: 'run-g' })]);
      expect((await exportV1(h, { events: [spanEvent({ run_id: 'run-g', span_id: 's2' })] })).notes).toEqual([]);
      // A stream of the run itself did take it: nothing is kept for its exports.
      const run = openSubscribe(h, 'run-h');
      await once(run.stream, 'metadata');
      await h.bus.publish(NOTES_TOPIC, [{ key: 'run-h', value: note({ id: 'n-h', run_id: 'run-h', kind: 'halt' }) }]);
      await waitFor(() => run.notes.length === 1 && project.notes.length === 2);
      expect((await exportV1(h, { events: [spanEvent({ run_id: 'run-h' })] })).notes).toEqual([]);
      for (const s of [project, run]) s.stream.cancel();
    });

    it('hands kept notes to a stream that opens later, and polls with note_runs and no events', async () => {
      await h.bus.publish(NOTES_TOPIC, [
        { key: 'run-d', value: note({ id: 'n-d', run_id: 'run-d' }) },
        { key: 'run-e', value: note({ id: 'n-e', run_id: 'run-e' }) },
      ]);
      await h.memory.idle();
      const late = openSubscribe(h, 'run-d');
      await waitFor(() => late.notes.length === 1);
      expect(late.notes[0].id).toBe('n-d');
      late.stream.cancel();
      const polled = await exportV1(h, { events: [], note_runs: ['run-e'] });
      expect(polled).toMatchObject({ accepted: 0, rejected: [], notes: [expect.objectContaining({ id: 'n-e' })] });
      // Another project's key cannot read them.
      await h.bus.publish(NOTES_TOPIC, [{ key: 'run-f', value: note({ id: 'n-f', run_id: 'run-f' }) }]);
      await h.memory.idle();
      expect((await exportV1(h, { note_runs: ['run-f'] }, md('key-bank'))).notes).toEqual([]);
    });

    it('refuses a Subscribe without a valid key', async () => {
      const stream = h.neatroots.subscribe({ run_id: 'r' }, md('nope'));
      const [err] = (await once(stream, 'error')) as [ServiceError];
      expect(err.code).toBe(status.UNAUTHENTICATED);
    });

    it("refuses an ingest key the whole project's notes (PERMISSION_DENIED), gives it its run's, and a full key the whole project's still", async () => {
      const refused = h.neatroots.subscribe({ run_id: '' }, md('key-agent'));
      const seen: v1.Note[] = [];
      refused.on('data', (n: v1.Note) => seen.push(n));
      // Refused, or in place (ingest's headers say so), whichever comes first.
      const outcome = await new Promise<{ code: number; details: string } | 'subscribed'>((resolve) => {
        refused.on('error', (e: ServiceError) => resolve({ code: e.code, details: e.details }));
        refused.on('metadata', (m: Metadata) => m.get('x-neatroots-subscribed').length && resolve('subscribed'));
      });
      expect(outcome).toEqual({
        code: status.PERMISSION_DENIED,
        details: "a key of scope ingest may subscribe to one run's notes, not the whole project's; use a full key",
      });
      const run = openSubscribe(h, 'run-scoped', 'key-agent');
      const project = openSubscribe(h, '', 'key-shop');
      await Promise.all([once(run.stream, 'metadata'), once(project.stream, 'metadata')]);
      expect(h.ingest.metrics.subscribers).toBe(2);
      await h.bus.publish(NOTES_TOPIC, [
        { key: 'run-other', value: note({ id: 'n-other', run_id: 'run-other', kind: 'halt' }) },
        { key: 'run-scoped', value: note({ id: 'n-scoped', run_id: 'run-scoped', kind: 'halt' }) },
      ]);
      await waitFor(() => run.notes.length === 1 && project.notes.length === 2);
      expect(run.notes.map((n) => n.id)).toEqual(['n-scoped']);
      expect(project.notes.map((n) => n.id)).toEqual(['n-other', 'n-scoped']);
      expect(seen).toEqual([]);
      // The other run's halt, which only the project-wide stream took, still waits for that run's export.
      expect((await exportV1(h, { events: [spanEvent({ run_id: 'run-other' })] }, md('key-agent'))).notes.map((n) => n.id)).toEqual(['n-other']);
      for (const s of [run, project]) s.stream.cancel();
    });
  });

  describe('an OpenTelemetry JS SDK exporting GenAI spans', () => {
    it('arrives on the bus mapped to spans and run events', async () => {
      const meta = new Metadata();
      meta.set('x-api-key', 'key-shop');
      const exporter = new OTLPTraceExporter({ url: `http://127.0.0.1:${h.ingest.otlpPort}`, metadata: meta });
      const provider = new BasicTracerProvider({
        resource: resourceFromAttributes({ 'service.name': 'weather-svc' }),
        spanProcessors: [new BatchSpanProcessor(exporter)],
      });
      const tracer = provider.getTracer('test');
      const root = tracer.startSpan('invoke_agent weather-agent', {
        attributes: {
          'gen_ai.operation.name': 'invoke_agent',
          'gen_ai.agent.name': 'weather-agent',
          'gen_ai.conversation.id': 'conv-7',
          'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: 'Weather in Oslo?' }] }]),
        },
      });
      const ctx = trace.setSpan(context.active(), root);
      const chat = tracer.startSpan('chat gpt-4o', {
        attributes: {
          'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.usage.input_tokens': 100, 'gen_ai.usage.output_tokens': 20,
        },
      }, ctx);
      chat.end();
      const tool = tracer.startSpan('execute_tool get_weather', {
        attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'get_weather', 'gen_ai.tool.call.arguments': '{"city":"Oslo"}' },
      }, ctx);
      tool.setStatus({ code: SpanStatusCode.ERROR, message: 'weather API down' });
      tool.end();
      const mcp = tracer.startSpan('tools/call search', {
        attributes: { 'gen_ai.operation.name': 'execute_tool', 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'search' },
      }, ctx);
      mcp.end();
      root.setAttribute('gen_ai.output.messages', JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'Sorry, no data.' }] }]));
      root.end();
      await provider.forceFlush();
      await provider.shutdown();
      await h.memory.idle();

      const traceId = root.spanContext().traceId;
      expect(h.events.map((e) => e.item.kind)).toEqual(['run_start', 'span', 'span', 'span', 'span', 'run_end']);
      expect(h.events.every((e) => e.project === 'shop')).toBe(true);
      const start = h.events[0].item as { kind: 'run_start'; run: RunStart };
      expect(start.run).toMatchObject({ run_id: traceId, workflow: 'weather-agent', session_id: 'conv-7', user_message: 'Weather in Oslo?' });
      const [c, t, m, r] = spansOf(h.events);
      expect(c).toMatchObject({
        run_id: traceId, span_id: chat.spanContext().spanId, parent_id: root.spanContext().spanId, type: 'llm', model: 'gpt-4o',
        usage: { input_tokens: 100, output_tokens: 20, total_tokens: 120 }, workflow: 'weather-agent',
      });
      expect(t).toMatchObject({ type: 'tool', tool: 'get_weather', input: { city: 'Oslo' }, status: 'error', error: 'weather API down' });
      expect(m).toMatchObject({ type: 'mcp_tool', tool: 'search' });
      expect(r).toMatchObject({ type: 'agent', span_id: root.spanContext().spanId });
      expect(r.end_ms! - r.start_ms!).toBeGreaterThanOrEqual(0);
      const end = h.events[5].item as { kind: 'run_end'; run: RunEnd };
      expect(end.run).toMatchObject({ run_id: traceId, status: 'ok', final_output: 'Sorry, no data.' });
    });
  });
});

describe('a call without a known key', () => {
  it('is refused UNAUTHENTICATED before its message is read: no handler runs, and the headers alone are answered', async () => {
    const h = await harness();
    try {
      // A large OTLP export (about 1.5 MB) without a key, and neatroots.v1 calls with an unknown one.
      const many = Array.from({ length: 10_000 }, (_, i) => otlpSpan(i.toString(16).padStart(16, '0'), { a: 'x'.repeat(64) }));
      await expect(exportOtlp(h, otlpRequest(many), md())).rejects.toMatchObject({ code: status.UNAUTHENTICATED, details: expect.stringContaining('missing API key') });
      await expect(exportV1(h, { events: [spanEvent({})] }, md('nope'))).rejects.toMatchObject({ code: status.UNAUTHENTICATED, details: 'unknown API key' });
      const sub = h.neatroots.subscribe({ run_id: 'r1' }, md('nope'));
      const [subErr] = (await once(sub, 'error')) as [ServiceError];
      expect(subErr.code).toBe(status.UNAUTHENTICATED);
      // No handler ran: the exports are counted by their handlers once they start.
      expect({ exports: h.ingest.metrics.exports, failed: h.ingest.metrics.calls_failed }).toEqual({ exports: { otlp: 0, neatroots: 0 }, failed: { UNAUTHENTICATED: 3 } });

      // The headers of a call, and no message at all: answered at once, from them alone.
      const headersOnly = async (port: number, path: string, key?: string) => {
        const session = http2.connect(`http://127.0.0.1:${port}`);
        session.on('error', () => undefined);
        try {
          const req = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...(key ? { 'x-api-key': key } : {}) }, { endStream: false });
          req.on('error', () => undefined);
          const [headers] = (await once(req, 'response')) as [http2.IncomingHttpHeaders];
          return { status: headers['grpc-status'], message: decodeURIComponent(String(headers['grpc-message'])) };
        } finally {
          session.destroy();
        }
      };
      expect(await headersOnly(h.ingest.otlpPort, '/opentelemetry.proto.collector.trace.v1.TraceService/Export')).toEqual({ status: '16', message: expect.stringContaining('missing API key') });
      expect(await headersOnly(h.ingest.grpcPort, '/neatroots.v1.Ingest/Export', 'nope')).toEqual({ status: '16', message: 'unknown API key' });
      expect(await headersOnly(h.ingest.grpcPort, '/neatroots.v1.Ingest/PreCheck', 'nope')).toEqual({ status: '16', message: 'unknown API key' });
      // With the key, a call goes on to its handler as before.
      await expect(exportOtlp(h, otlpRequest([otlpSpan('0000000000000001', {})]))).resolves.toEqual({});
      expect(h.ingest.metrics.exports.otlp).toBe(1);
    } finally {
      await h.close();
    }
  });
});

describe("an open Subscribe stream's key", () => {
  it('ends the stream with UNAUTHENTICATED once its key is revoked or opens another project, and sends it no later note; keeps a stream whose key holds', async () => {
    const keys: Record<string, string> = { 'key-revoked': 'shop', 'key-moved': 'shop', 'key-kept': 'shop' };
    const asked: string[] = [];
    const memory = new MemoryBus();
    // Keys looked up again every 20 ms: the test waits on what the lookups lead to, not on time.
    const ingest = await startIngest({ bus: memory, resolveKey: async (k) => (asked.push(k), keys[k]), otlpPort: 0, grpcPort: 0, keyRecheckMs: 20 });
    const client = new v1.IngestClient(`127.0.0.1:${ingest.grpcPort}`, credentials.createInsecure());
    const open = (key: string) => {
      const stream = client.subscribe({ run_id: '' }, md(key));
      const notes: string[] = [];
      stream.on('data', (n: v1.Note) => notes.push(n.id));
      const ended = new Promise<ServiceError>((resolve) => stream.on('error', resolve));
      return { stream, notes, ended };
    };
    try {
      const revoked = open('key-revoked');
      const moved = open('key-moved');
      const kept = open('key-kept');
      await Promise.all([revoked, moved, kept].map((s) => once(s.stream, 'metadata')));
      expect(ingest.metrics.subscribers).toBe(3);
      delete keys['key-revoked'];
      keys['key-moved'] = 'bank';
      const [r, m] = await Promise.all([revoked.ended, moved.ended]);
      expect({ code: r.code, details: r.details }).toEqual({ code: status.UNAUTHENTICATED, details: 'the API key is no longer known (revoked)' });
      expect({ code: m.code, details: m.details }).toEqual({ code: status.UNAUTHENTICATED, details: 'the API key now opens another project than shop; subscribe again' });
      expect(ingest.metrics.subscribers).toBe(1);
      // The kept stream's key was looked up again after the others ended, and it stays.
      const keptAsked = asked.filter((k) => k === 'key-kept').length;
      await waitFor(() => asked.filter((k) => k === 'key-kept').length > keptAsked);
      // A note of the project from now on goes to the kept stream alone.
      await memory.publish(NOTES_TOPIC, [{ key: 'r1', value: note({ id: 'n-after' }) }]);
      await waitFor(() => kept.notes.length === 1);
      await memory.idle();
      expect({ revoked: revoked.notes, moved: moved.notes, kept: kept.notes, delivered: ingest.metrics.notes_delivered.stream }).toEqual({ revoked: [], moved: [], kept: ['n-after'], delivered: 1 });
      expect(ingest.metrics.calls_failed).toEqual({ UNAUTHENTICATED: 2 });
      kept.stream.cancel();
    } finally {
      client.close();
      await ingest.close();
      await memory.close();
    }
  });

  it("ends a stream of the whole project with PERMISSION_DENIED once its key is of scope ingest, and keeps that key's stream of one run", async () => {
    const keys: Record<string, KeyGrant> = { 'key-narrowed': { project: 'shop', scope: 'api' } };
    const asked: string[] = [];
    const memory = new MemoryBus();
    const ingest = await startIngest({ bus: memory, resolveKey: async (k) => (asked.push(k), keys[k]), otlpPort: 0, grpcPort: 0, keyRecheckMs: 20 });
    const client = new v1.IngestClient(`127.0.0.1:${ingest.grpcPort}`, credentials.createInsecure());
    const open = (runId: string) => {
      const stream = client.subscribe({ run_id: runId }, md('key-narrowed'));
      const notes: string[] = [];
      stream.on('data', (n: v1.Note) => notes.push(n.id));
      const ended = new Promise<ServiceError>((resolve) => stream.on('error', resolve));
      return { stream, notes, ended };
    };
    try {
      const project = open('');
      const run = open('r1');
      await Promise.all([project, run].map((s) => once(s.stream, 'metadata')));
      keys['key-narrowed'] = { project: 'shop', scope: 'ingest' };
      const err = await within(project.ended, 20_000, "the whole project's stream ended");
      expect({ code: err.code, details: err.details }).toEqual({ code: status.PERMISSION_DENIED, details: "a key of scope ingest may subscribe to one run's notes, not the whole project's; use a full key" });
      // The run's stream was looked up again since, and stays.
      const before = asked.length;
      await waitFor(() => asked.length > before);
      await memory.publish(NOTES_TOPIC, [{ key: 'r1', value: note({ id: 'n-after' }) }]);
      await waitFor(() => run.notes.length === 1);
      expect({ project: project.notes, run: run.notes, subscribers: ingest.metrics.subscribers }).toEqual({ project: [], run: ['n-after'], subscribers: 1 });
      expect(ingest.metrics.calls_failed).toEqual({ PERMISSION_DENIED: 1 });
      run.stream.cancel();
    } finally {
      client.close();
      await ingest.close();
      await memory.close();
    }
  });

  it("ends a revoked key's stream while another key's lookup hangs (the review service unreachable for it): the keys are looked up side by side", async () => {
    const keys: Record<string, string> = { 'key-hangs': 'shop', 'key-revoked': 'shop' };
    let rechecking = false;
    let release!: () => void;
    const hanging = new Promise<void>((r) => (release = r));
    const memory = new MemoryBus();
    const ingest = await startIngest({
      bus: memory,
      // Once the streams are open, key-hangs's lookups answer only when the test lets them.
      resolveKey: async (k) => {
        if (rechecking && k === 'key-hangs') await hanging;
        return keys[k];
      },
      otlpPort: 0,
      grpcPort: 0,
      keyRecheckMs: 20,
    });
    const client = new v1.IngestClient(`127.0.0.1:${ingest.grpcPort}`, credentials.createInsecure());
    const open = (key: string) => {
      const stream = client.subscribe({ run_id: '' }, md(key));
      const ended = new Promise<ServiceError>((resolve) => stream.on('error', resolve));
      return { stream, ended };
    };
    try {
      // The stream whose key hangs first: a round that looked keys up one at a time would wait on it.
      const hangs = open('key-hangs');
      await once(hangs.stream, 'metadata');
      const revoked = open('key-revoked');
      await once(revoked.stream, 'metadata');
      rechecking = true;
      delete keys['key-revoked'];
      const err = await within(revoked.ended, 20_000, "the revoked key's stream ended");
      expect({ code: err.code, details: err.details }).toEqual({ code: status.UNAUTHENTICATED, details: 'the API key is no longer known (revoked)' });
      expect(ingest.metrics.subscribers).toBe(1);
      hangs.stream.cancel();
    } finally {
      release();
      client.close();
      await ingest.close();
      await memory.close();
    }
  });
});

describe('ingest limits and shutdown', () => {
  it('answers RESOURCE_EXHAUSTED to a 20 MB export and publishes nothing', async () => {
    const h = await harness();
    try {
      const big = 'x'.repeat(20 * 1024 * 1024);
      const err = await exportV1(h, { events: [spanEvent({ input: big })] }).catch((e: ServiceError) => e);
      expect(err).toMatchObject({ code: status.RESOURCE_EXHAUSTED });
      expect((err as ServiceError).details).toMatch(/larger than max \(\d+ vs 8388608\)/);
      const otlpErr = await exportOtlp(h, otlpRequest([otlpSpan('0000000000000001', { 'input.value': big })])).catch((e: ServiceError) => e);
      expect(otlpErr).toMatchObject({ code: status.RESOURCE_EXHAUSTED });
      await h.memory.idle();
      expect(h.events).toEqual([]);
    } finally {
      await h.close();
    }
  });

  it('takes a configurable size cap', async () => {
    const h = await harness(1024);
    try {
      await expect(exportV1(h, { events: [spanEvent({ input: 'y'.repeat(2048) })] })).rejects.toMatchObject({ code: status.RESOURCE_EXHAUSTED });
      await expect(exportV1(h, { events: [spanEvent({ input: 'small' })] })).resolves.toMatchObject({ accepted: 1 });
    } finally {
      await h.close();
    }
  });

  it('ends Subscribe streams on close and stops accepting calls', async () => {
    const h = await harness();
    const sub = openSubscribe(h, 'r1');
    // The headers say the subscription is in place (a client cannot tell empty ones from a failed call's).
    const [headers] = (await once(sub.stream, 'metadata')) as [Metadata];
    expect(headers.get('x-neatroots-subscribed')).toEqual(['1']);
    const ended = new Promise<void>((resolve) => sub.stream.on('status', (s: { code: number }) => s.code === status.OK && resolve()));
    await h.ingest.close();
    await ended;
    await expect(exportV1(h, { events: [spanEvent({})] })).rejects.toMatchObject({ code: status.UNAVAILABLE });
    await h.close();
  });

  it('tells the rule engine when the caller of a pre-call check gave up (its call cancelled, no deadline), and logs no error for it', async () => {
    let aborted: (() => void) | undefined;
    const gaveUp = new Promise<void>((r) => (aborted = r));
    let asked = false;
    const errors: string[] = [];
    const ingest = await startIngest({
      logger: { warn: () => undefined, error: (msg: string) => void errors.push(msg) },
      bus: new MemoryBus(),
      resolveKey: async (k) => KEYS[k],
      otlpPort: 0,
      grpcPort: 0,
      precheck: {
        // The engine waits for spans that never come, until told the caller is gone.
        precheck: (req) => {
          asked = true;
          return new Promise((_, reject) => req.signal?.addEventListener('abort', () => (aborted!(), reject(new Error('cancelled')))));
        },
        haltingTools: () => [],
        failClosed: () => false,
        timeoutMs: 60_000,
        isTimeout: () => false,
      },
    });
    const client = new v1.IngestClient(`127.0.0.1:${ingest.grpcPort}`, credentials.createInsecure());
    try {
      const span: v1.Span = { run_id: 'r1', span_id: 'call', parent_id: '', type: 'tool', name: 'issue_refund', tool: 'issue_refund', status: '', model: '', project: '', workflow: '', session_id: '' };
      const call = client.preCheck({ span, known_spans: 5, timeout_ms: 60_000 }, md('key-shop'), () => undefined);
      await until('the engine asked', () => asked, 30_000, 5);
      call.cancel();
      await within(gaveUp, 30_000, 'the engine told that the caller gave up');
      await new Promise((r) => setTimeout(r, 50));
      expect(errors).toEqual([]);
    } finally {
      client.close();
      await ingest.close();
    }
  });

  it("drops a Subscribe stream whose client went away without closing its connection (pings go unanswered)", async () => {
    const ingest = await startIngest({ bus: new MemoryBus(), resolveKey: async (k) => KEYS[k], otlpPort: 0, grpcPort: 0, keepalive: { everyMs: 200, timeoutMs: 2_000 } });
    // Pings every 200 ms, each given 2 s for its answer: a client in this (loaded) process that
    // answers late is not taken for one gone; the silent link below misses every answer.
    // A link that goes silent both ways without closing: a client's host gone, a NAT that forgot it.
    const sockets: net.Socket[] = [];
    let silent = false;
    const link = net.createServer((client) => {
      const upstream = net.connect(ingest.grpcPort, '127.0.0.1');
      sockets.push(client, upstream);
      client.on('data', (d) => silent || upstream.write(d));
      upstream.on('data', (d) => silent || client.write(d));
      client.on('error', () => undefined);
      upstream.on('error', () => undefined);
    });
    await new Promise<void>((r) => link.listen(0, '127.0.0.1', r));
    const client = new v1.IngestClient(`127.0.0.1:${(link.address() as net.AddressInfo).port}`, credentials.createInsecure());
    try {
      const stream = client.subscribe({ run_id: 'r1' }, md('key-shop'));
      stream.on('error', () => undefined);
      await once(stream, 'metadata');
      expect(ingest.metrics.subscribers).toBe(1);
      silent = true;
      const end = Date.now() + 20_000;
      while (ingest.metrics.subscribers > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      expect(ingest.metrics.subscribers).toBe(0);
    } finally {
      client.close();
      for (const x of sockets) x.destroy();
      link.close();
      await ingest.close();
    }
  });
});
