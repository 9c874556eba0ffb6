import { randomBytes } from 'node:crypto';
import { Metadata, credentials, type ServiceError } from '@grpc/grpc-js';
import { Kafka, logLevel } from 'kafkajs';
import { KafkaBus, serviceOrSkip, uniqueName, type KafkaBusOptions } from '@neatroots/platform';
import type { Subscription } from '@neatroots/ports';
import { otlp, v1 } from '@neatroots/proto';
import { makeTopics } from '@neatroots/messages';
import type { Envelope } from '@neatroots/spans';
import { startIngest, type IngestHandle } from './ingest';

/**
 * Spans past the broker's default 1 MiB (message.max.bytes) and within ingest's documented
 * limits (NEATROOTS_MAX_ITEM_CHARS, 4 Mi characters), through ingest and a real Kafka: taken and
 * consumed as the rule engine consumes them; and, when the bus cannot take a record, that span
 * alone refused (never UNAVAILABLE, which every exporter retries forever).
 */
const kafka = serviceOrSkip('kafka', 'ingest through Kafka');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

(kafka ? describe : describe.skip)('ingest through Kafka: spans larger than 1 MiB', () => {
  const brokers = kafka?.brokers ?? [];
  const prefix = uniqueName('it_ingest_big');
  const topics = makeTopics(prefix);
  const buses: KafkaBus[] = [];
  const ingests: IngestHandle[] = [];
  const subs: Subscription[] = [];
  const newBus = (o: Partial<KafkaBusOptions> = {}) => {
    const b = new KafkaBus({ brokers, clientId: 'it-ingest', logLevel: 'error', maxWaitTimeInMs: 100, sessionTimeout: 6_000, rebalanceTimeout: 6_000, heartbeatInterval: 300, ...o });
    buses.push(b);
    return b;
  };
  const md = () => {
    const m = new Metadata();
    m.set('x-api-key', 'k1');
    return m;
  };
  const now = BigInt(Date.now()) * 1_000_000n;
  const trace = randomBytes(16);
  // Tool results of random bytes (base64): nothing for gzip to shrink.
  const span = (id: number, resultBytes: number): otlp.Span => ({
    trace_id: trace,
    span_id: Buffer.from(id.toString(16).padStart(16, '0'), 'hex'),
    parent_span_id: Buffer.alloc(0),
    trace_state: '',
    flags: 0,
    name: 'execute_tool lookup',
    kind: 1,
    start_time_unix_nano: String(now),
    end_time_unix_nano: String(now + 1_000_000n),
    attributes: [
      { key: 'gen_ai.operation.name', value: { value: { $case: 'string_value', value: 'execute_tool' } } },
      { key: 'gen_ai.tool.name', value: { value: { $case: 'string_value', value: 'lookup' } } },
      { key: 'gen_ai.tool.call.result', value: { value: { $case: 'string_value', value: randomBytes(resultBytes).toString('base64') } } },
    ],
    dropped_attributes_count: 0,
    events: [],
    dropped_events_count: 0,
    links: [],
    dropped_links_count: 0,
    status: { message: '', code: 0 },
  });
  const request = (spans: otlp.Span[]): otlp.ExportTraceServiceRequest => ({
    resource_spans: [{ resource: { attributes: [], dropped_attributes_count: 0 }, schema_url: '', scope_spans: [{ scope: undefined, schema_url: '', spans }] }],
  });
  const exportOtlp = (port: number, req: otlp.ExportTraceServiceRequest) =>
    new Promise<{ err?: ServiceError; res?: otlp.ExportTraceServiceResponse }>((resolve) => {
      const c = new otlp.TraceServiceClient(`127.0.0.1:${port}`, credentials.createInsecure(), { 'grpc.max_send_message_length': 16 * 1024 * 1024 });
      c.export(req, md(), (err, res) => {
        c.close();
        resolve({ err: err ?? undefined, res });
      });
    });
  const start = async (bus: KafkaBus) => {
    const ing = await startIngest({
      bus,
      topics,
      resolveKey: async (k) => (k === 'k1' ? 'p1' : undefined),
      otlpPort: 0,
      grpcPort: 0,
      otlpHttpPort: 0,
      logger: { warn: () => undefined, error: () => undefined },
    });
    ingests.push(ing);
    return ing;
  };
  /** The span ids of the events topic, read through a consumer group as the rule engine reads it. */
  const consume = async () => {
    const seen = new Map<string, number>();
    subs.push(
      await newBus().subscribe(topics.events, { group: uniqueName(`${prefix}-engine`) }, async (b) => {
        for (const r of b.records) {
          const e: Envelope = r.value;
          if (e.item.kind === 'span') seen.set(e.item.span.span_id, JSON.stringify(e.item.span.output ?? '').length);
        }
      }),
    );
    return seen;
  };
  const until = async (cond: () => boolean, what: () => string) => {
    for (const end = Date.now() + 30_000; !cond(); await sleep(50)) if (Date.now() > end) throw new Error(`timed out: ${what()}`);
  };

  afterAll(async () => {
    await Promise.all(subs.map((s) => s.close()));
    await Promise.all(ingests.map((i) => i.close()));
    await Promise.all(buses.map((b) => b.close()));
    const admin = new Kafka({ brokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    const mine = (await admin.listTopics()).filter((t) => t.startsWith(prefix));
    await admin.deleteTopics({ topics: mine }).catch(() => undefined);
    await admin.disconnect();
  }, 60_000);

  it('takes a 3 MB span with the small ones of its export, and the consumers of the events topic get all of them', async () => {
    const ing = await start(newBus());
    const seen = await consume();
    const { err, res } = await exportOtlp(ing.otlpPort, request([span(1, 10), span(2, 2_250_000), span(3, 10)]));
    expect(err).toBeUndefined();
    expect(res?.partial_success).toBeUndefined();
    await until(() => seen.size >= 3, () => `${[...seen.keys()]}`);
    expect(seen.get('0000000000000002')).toBeGreaterThan(3_000_000);
  }, 90_000);

  describe('a span the bus cannot take (larger than its record limit)', () => {
    let ing: IngestHandle;
    let seen: Map<string, number>;
    beforeAll(async () => {
      // A deployment whose bus takes less than the item limit (NEATROOTS_MAX_ITEM_CHARS raised past it).
      ing = await start(newBus({ maxRecordBytes: 2 * 1024 * 1024 }));
      seen = await consume();
    }, 60_000);

    it('OTLP/gRPC: refuses that span alone (partial_success, naming its size and the limit), takes the others', async () => {
      const { err, res } = await exportOtlp(ing.otlpPort, request([span(0x11, 10), span(0x12, 2_250_000), span(0x13, 10)]));
      expect(err).toBeUndefined();
      expect(res?.partial_success?.rejected_spans).toBe('1');
      expect(res?.partial_success?.error_message).toMatch(/#1 run \S+ span 0000000000000012: span: is \d{7} bytes as a bus record, more than the 2097152 bytes/);
      await until(() => seen.has('0000000000000011') && seen.has('0000000000000013'), () => `${[...seen.keys()]}`);
      expect(seen.has('0000000000000012')).toBe(false);
      expect(ing.metrics.items_rejected.span).toBe(1);
    }, 60_000);

    it('OTLP/gRPC: INVALID_ARGUMENT (not UNAVAILABLE) when that span is all the export holds', async () => {
      const { err } = await exportOtlp(ing.otlpPort, request([span(0x21, 2_250_000)]));
      expect(err?.code).toBe(3);
      expect(err?.details).toMatch(/no span was acceptable.*more than the 2097152 bytes/);
    }, 60_000);

    it('OTLP/HTTP: 200 with partial_success, 400 when nothing is left (never 503)', async () => {
      const post = (spans: otlp.Span[]) =>
        fetch(`http://127.0.0.1:${ing.otlpHttpPort}/v1/traces`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-protobuf', 'x-api-key': 'k1' },
          body: Buffer.from(otlp.ExportTraceServiceRequest.encode(request(spans)).finish()),
        });
      const partial = await post([span(0x31, 10), span(0x32, 2_250_000)]);
      expect(partial.status).toBe(200);
      const body = otlp.ExportTraceServiceResponse.decode(new Uint8Array(await partial.arrayBuffer()));
      expect(body.partial_success?.rejected_spans).toBe('1');
      const none = await post([span(0x33, 2_250_000)]);
      expect(none.status).toBe(400);
      await until(() => seen.has('0000000000000031'), () => `${[...seen.keys()]}`);
    }, 60_000);

    it('neatroots.v1: the item in rejected[], the others accepted', async () => {
      const c = new v1.IngestClient(`127.0.0.1:${ing.grpcPort}`, credentials.createInsecure(), { 'grpc.max_send_message_length': 16 * 1024 * 1024 });
      const ev = (id: string, bytes: number): v1.Event => ({
        kind: {
          $case: 'span',
          value: {
            run_id: 'r-v1', span_id: id, parent_id: '', type: 'tool', name: 'lookup', tool: 'lookup', status: 'ok', model: '', project: '', workflow: '', session_id: '',
            start_ms: Date.now(), end_ms: Date.now() + 1, output_json: JSON.stringify(randomBytes(bytes).toString('base64')),
          },
        },
      });
      const res = await new Promise<v1.ExportResponse>((resolve, reject) =>
        c.export({ events: [ev('v1-a', 10), ev('v1-b', 2_250_000)], note_runs: [] }, md(), (e, r) => (e ? reject(e) : resolve(r!))),
      );
      c.close();
      expect(res.accepted).toBe(1);
      expect(res.rejected).toEqual([expect.objectContaining({ index: 1, span_id: 'v1-b', field: 'span', reason: expect.stringMatching(/more than the 2097152 bytes/) })]);
    }, 60_000);
  });
});
