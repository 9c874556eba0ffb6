import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { gzipSync } from 'node:zlib';
import { Metadata, credentials, status, type ServiceError } from '@grpc/grpc-js';
import { LogBus, MemoryBus, until } from '@neatroots/platform';
import { otlp, v1 } from '@neatroots/proto';
import { EVENTS_TOPIC } from '@neatroots/messages';
import { itemToEvent, type Envelope } from '@neatroots/spans';
import { startIngest, type IngestHandle } from './ingest';
import { Pressure, v8Collect } from './pressure';

/**
 * Back-pressure on a real ingest over the durable bus: while the events consumer is stalled
 * past the backlog bound, exports are refused with RESOURCE_EXHAUSTED (and RetryInfo), counted
 * by reason; once it catches up they are taken again.
 */
describe('ingest back-pressure', () => {
  let dir: string;
  let bus: LogBus;
  let ingest: IngestHandle;
  let client: v1.IngestClient;
  let release!: () => void;
  let stalled: Promise<void>;
  const seen: Envelope[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-pressure-'));
    bus = new LogBus({ dir });
    stalled = new Promise((r) => (release = r));
    await bus.subscribe(EVENTS_TOPIC, { group: 'slow-consumer' }, async (b) => {
      await stalled;
      for (const r of b.records) seen.push(r.value);
    });
    ingest = await startIngest({
      bus,
      resolveKey: async (k) => (k === 'key' ? 'shop' : undefined),
      otlpPort: 0,
      grpcPort: 0,
      pressure: { backlog: () => bus.backlog(EVENTS_TOPIC.name), maxBacklog: 50 },
      logger: { warn: () => undefined, error: () => undefined },
    });
    client = new v1.IngestClient(`127.0.0.1:${ingest.grpcPort}`, credentials.createInsecure());
  });

  afterAll(async () => {
    release();
    client.close();
    await ingest.close();
    await bus.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const md = () => {
    const m = new Metadata();
    m.set('x-api-key', 'key');
    return m;
  };
  const events = (n: number, run: string) =>
    Array.from({ length: n }, (_, i) => itemToEvent({ kind: 'span', span: { run_id: run, span_id: `s${i}`, type: 'tool', name: 'search', status: 'ok' } }));
  const exportV1 = (n: number, run: string) =>
    new Promise<ServiceError | null>((resolve) => client.export({ events: events(n, run), note_runs: [] }, md(), (err) => resolve(err)));

  it('refuses exports with RESOURCE_EXHAUSTED and RetryInfo once the backlog passes its bound, and takes them again after', async () => {
    expect(await exportV1(60, 'r1')).toBeNull(); // taken: the backlog was 0
    const err = await exportV1(10, 'r2');
    expect(err?.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(err?.details).toMatch(/60 records wait to be processed \(bound 50, NEATROOTS_MAX_BACKLOG\)/);
    const details = err?.metadata.get('grpc-status-details-bin')[0] as Buffer;
    expect(details.toString('latin1')).toContain('type.googleapis.com/google.rpc.RetryInfo');
    expect(ingest.metrics.exports_refused).toEqual({ backlog: 1 });
    expect(ingest.metrics.calls_failed.RESOURCE_EXHAUSTED).toBe(1);

    // What an OTLP client reads to know it may retry, and when: google.rpc.Status with RetryInfo.
    const st = fields(details);
    expect(st.get(1)).toEqual([status.RESOURCE_EXHAUSTED]);
    const any = fields(st.get(3)![0] as Buffer);
    expect((any.get(1)![0] as Buffer).toString()).toBe('type.googleapis.com/google.rpc.RetryInfo');
    const delay = fields(fields(any.get(2)![0] as Buffer).get(1)![0] as Buffer);
    expect(delay.get(1)).toEqual([1]); // retry_delay: 1 s

    release(); // the consumer catches up
    await bus.idle();
    expect(await exportV1(5, 'r3')).toBeNull();
    await bus.idle();
    const runs = new Set(seen.map((e) => (e.item.kind === 'span' ? e.item.span.run_id : '')));
    expect([...runs].sort()).toEqual(['r1', 'r3']); // r2 was refused: nothing of it was taken
  }, 30_000);
});

/**
 * Under a flood, clients that retry at once send 15 to 30 exports for each one taken. Each used
 * to be decoded in full (grpc-js's deserializer, OTLP/HTTP's body read, unpacked and decoded)
 * before back-pressure refused it: garbage that took the embedded server's resident memory past
 * the ceiling meant to bound it. A refused export is now not decoded at all.
 */
describe('ingest near its memory ceiling', () => {
  const MiB = 1048576;
  let bus: MemoryBus;
  let ingest: IngestHandle;
  let client: v1.IngestClient;
  let otlpClient: otlp.TraceServiceClient;
  let rss = 2000 * MiB; // over the 1000 MB ceiling
  let v1Decode: jest.SpyInstance;
  let otlpDecode: jest.SpyInstance;

  beforeAll(async () => {
    bus = new MemoryBus();
    ingest = await startIngest({
      bus,
      resolveKey: async (k) => (k === 'key' ? 'shop' : undefined),
      otlpPort: 0,
      grpcPort: 0,
      otlpHttpPort: 0,
      pressure: { memoryCeilingBytes: 1000 * MiB, rss: () => rss, collect: null, sampleMs: 10 },
      logger: { warn: () => undefined, error: () => undefined },
    });
    client = new v1.IngestClient(`127.0.0.1:${ingest.grpcPort}`, credentials.createInsecure());
    otlpClient = new otlp.TraceServiceClient(`127.0.0.1:${ingest.otlpPort}`, credentials.createInsecure());
    v1Decode = jest.spyOn(v1.ExportRequest, 'decode');
    otlpDecode = jest.spyOn(otlp.ExportTraceServiceRequest, 'decode');
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    client.close();
    otlpClient.close();
    await ingest.close();
    await bus.close();
  });

  const md = () => {
    const m = new Metadata();
    m.set('x-api-key', 'key');
    return m;
  };
  const events = (n: number, run: string) =>
    Array.from({ length: n }, (_, i) => itemToEvent({ kind: 'span', span: { run_id: run, span_id: `s${i}`, type: 'tool', name: 'search', status: 'ok', input: { q: 'x'.repeat(200) } } }));
  const exportV1 = (run: string) => new Promise<ServiceError | null>((resolve) => client.export({ events: events(500, run), note_runs: [] }, md(), (err) => resolve(err)));
  const otlpRequest = (run: string): otlp.ExportTraceServiceRequest => ({
    resource_spans: [
      {
        schema_url: '',
        scope_spans: [
          {
            schema_url: '',
            spans: Array.from({ length: 500 }, (_, i) =>
              otlp.Span.fromPartial({
                trace_id: Buffer.from(run.padEnd(32, '0').slice(0, 32), 'hex'),
                span_id: Buffer.from(String(i + 1).padStart(16, '0'), 'hex'),
                name: 'execute_tool',
                start_time_unix_nano: '1700000000000000000',
                end_time_unix_nano: '1700000000500000000',
                attributes: [{ key: 'gen_ai.tool.name', value: { value: { $case: 'string_value', value: 'search' } } }],
              }),
            ),
          },
        ],
      },
    ],
  });
  const exportOtlp = (run: string) => new Promise<ServiceError | null>((resolve) => otlpClient.export(otlpRequest(run), md(), (err) => resolve(err)));
  const post = (body: Buffer | string, type: string, extra: Record<string, string> = {}) =>
    fetch(`http://127.0.0.1:${ingest.otlpHttpPort}/v1/traces`, { method: 'POST', headers: { 'x-api-key': 'key', 'content-type': type, ...extra }, body });
  const otlpBytes = (run: string) => Buffer.from(otlp.ExportTraceServiceRequest.encode(otlpRequest(run)).finish());
  const otlpJson = JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), name: 'execute_tool', startTimeUnixNano: '1', endTimeUnixNano: '2' }] }] }] });
  const malformed = Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x0f]); // a length past the end

  it('refuses every export, over gRPC and OTLP/HTTP, without decoding any; once under it, decodes again and answers a malformed body as before', async () => {
    // 50 neatroots.v1 exports and 25 OTLP/gRPC exports of 500 spans at once, and a malformed one of each.
    const grpcAnswers = await Promise.all([
      ...Array.from({ length: 50 }, (_, i) => exportV1(`r${i}`)),
      ...Array.from({ length: 25 }, (_, i) => exportOtlp(`${i + 1}`)),
      new Promise<ServiceError | null>((resolve) => client.makeUnaryRequest('/neatroots.v1.Ingest/Export', (b: Buffer) => b, (b: Buffer) => b, malformed, md(), (err) => resolve(err))),
    ]);
    // OTLP/HTTP: protobuf, gzip-compressed protobuf, JSON, and bodies that neither inflate nor decode.
    const httpAnswers = await Promise.all([
      post(otlpBytes('a1'), 'application/x-protobuf'),
      post(gzipSync(otlpBytes('a2')), 'application/x-protobuf', { 'content-encoding': 'gzip' }),
      post(otlpJson, 'application/json'),
      post(malformed, 'application/x-protobuf'),
      post(Buffer.from('not gzip at all'), 'application/x-protobuf', { 'content-encoding': 'gzip' }),
    ]);
    expect(v1Decode).toHaveBeenCalledTimes(0);
    expect(otlpDecode).toHaveBeenCalledTimes(0);
    for (const err of grpcAnswers) {
      expect(err?.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(err?.details).toMatch(/near its memory ceiling \(2000 MB of 1000 MB, NEATROOTS_MEMORY_CEILING_MB\)/);
      expect((err?.metadata.get('grpc-status-details-bin')[0] as Buffer).toString('latin1')).toContain('google.rpc.RetryInfo');
    }
    for (const r of httpAnswers) {
      expect(r.status).toBe(429);
      expect(r.headers.get('retry-after')).toBe('1');
      await r.arrayBuffer();
    }
    expect(ingest.metrics.exports_refused).toEqual({ memory: 81 });
    expect(ingest.metrics.calls_failed).toEqual({ RESOURCE_EXHAUSTED: 81 });
    expect(ingest.metrics.items_received).toBe(0);

    // Under the ceiling: the same exports are decoded and taken, a malformed body answered as before.
    rss = 100 * MiB;
    await until('the memory reading under the ceiling', async () => (await exportV1('after')) === null, 10_000, 20);
    expect(v1Decode).toHaveBeenCalled();
    expect(await exportOtlp('ff')).toBeNull();
    expect(otlpDecode).toHaveBeenCalled();
    expect((await post(otlpBytes('a3'), 'application/x-protobuf')).status).toBe(200);
    const bad = await new Promise<ServiceError | null>((resolve) =>
      client.makeUnaryRequest('/neatroots.v1.Ingest/Export', (b: Buffer) => b, (b: Buffer) => b, malformed, md(), (err) => resolve(err)),
    );
    expect(bad?.code).toBe(status.INVALID_ARGUMENT);
    expect(bad?.details).toMatch(/^malformed protobuf request: /);
    const badHttp = await post(malformed, 'application/json');
    expect(badHttp.status).toBe(400);
    expect(await badHttp.text()).toMatch(/malformed OTLP\/JSON request: /);
  }, 60_000);
});

/** A protobuf message's fields: number -> values (varints as numbers, length-delimited as bytes). */
function fields(buf: Buffer): Map<number, (number | Buffer)[]> {
  const out = new Map<number, (number | Buffer)[]>();
  let at = 0;
  const varint = () => {
    let n = 0;
    let mul = 1;
    for (;;) {
      const b = buf[at++];
      n += (b & 127) * mul;
      if (b < 128) return n;
      mul *= 128;
    }
  };
  while (at < buf.length) {
    const tag = varint();
    const v = (tag & 7) === 2 ? (() => { const len = varint(); const b = buf.subarray(at, at + len); at += len; return b; })() : varint();
    out.set(tag >> 3, [...(out.get(tag >> 3) ?? []), v]);
  }
  return out;
}

describe('Pressure', () => {
  const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('past 80% of the ceiling has the garbage collected first, and refuses only for memory still in use after it', async () => {
    let rss = 500 * 1048576;
    let garbage = 0;
    const collected: number[] = [];
    const p = new Pressure({
      memoryCeilingBytes: 1000 * 1048576,
      rss: () => rss + garbage,
      sampleMs: 5,
      collectEveryMs: 200,
      collect: async () => {
        collected.push(garbage);
        garbage = 0;
      },
    });
    try {
      // 450 MB of garbage: 950 MB resident, but a collection takes it back: nothing is refused.
      garbage = 450 * 1048576;
      await wait(40);
      expect(collected).toEqual([450 * 1048576]);
      expect(p.check()).toBeUndefined();
      // 950 MB in use: the collection does not help, and exports are refused.
      rss = 950 * 1048576;
      await wait(250);
      expect(collected.length).toBeGreaterThanOrEqual(2);
      expect(p.check()).toMatchObject({ reason: 'memory' });
      // At most one collection per collectEveryMs however long the memory stays high.
      const n = collected.length;
      await wait(100);
      expect(collected.length - n).toBeLessThanOrEqual(1);
      expect(p.collections).toBe(collected.length);
    } finally {
      p.close();
    }
  });

  it('under 80% of the ceiling asks for no collection', async () => {
    let n = 0;
    const p = new Pressure({ memoryCeilingBytes: 1000 * 1048576, rss: () => 790 * 1048576, sampleMs: 5, collect: async () => void n++ });
    await wait(40);
    p.close();
    expect(n).toBe(0);
    expect(p.check()).toBeUndefined();
  });

  it('can ask V8 itself for a full collection', async () => {
    const collect = v8Collect();
    expect(collect).toBeDefined();
    let junk: unknown[] | undefined = Array.from({ length: 300_000 }, (_, i) => ({ i, s: `garbage ${i}` }));
    const before = process.memoryUsage().heapUsed;
    junk = undefined;
    await expect(collect!()).resolves.toBeUndefined();
    expect(junk).toBeUndefined();
    expect(process.memoryUsage().heapUsed).toBeLessThan(before - 10 * 1048576);
  });

  it('refuses past 90% of the memory ceiling, naming the figures and the variable', () => {
    let rss = 500 * 1048576;
    const p = new Pressure({ memoryCeilingBytes: 1000 * 1048576, rss: () => rss, sampleMs: 5 });
    try {
      expect(p.check()).toBeUndefined();
      rss = 950 * 1048576;
      return new Promise<void>((resolve) =>
        setTimeout(() => {
          expect(p.check()).toEqual({ reason: 'memory', message: expect.stringContaining('950 MB of 1000 MB, NEATROOTS_MEMORY_CEILING_MB') });
          resolve();
        }, 30),
      );
    } finally {
      setTimeout(() => p.close(), 50);
    }
  });
});
