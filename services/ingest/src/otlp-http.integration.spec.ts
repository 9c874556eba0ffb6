import { execFile } from 'node:child_process';
import { once } from 'node:events';
import * as http from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { Metadata, credentials, status as GrpcStatus } from '@grpc/grpc-js';
import { context, trace, SpanStatusCode } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { MemoryBus, pythonOrSkip } from '@neatroots/platform';
import { otlp } from '@neatroots/proto';
import { EVENTS_TOPIC } from '@neatroots/messages';
import { DEFAULT_SPAN_LIMITS, type Envelope, type StreamItem } from '@neatroots/spans';
import { startIngest, type IngestHandle } from './ingest';
import { decodeOtlpJson } from './otlp-json';

/**
 * OTLP/HTTP against the real ingest service: the OpenTelemetry JS SDK's own HTTP exporters
 * (JSON and protobuf, gzip or not) beside its gRPC exporter, sending the same spans.
 */

const KEY = 'key-shop';
let bus: MemoryBus;
let ingest: IngestHandle;
let backlog = 0;
/** Exports still to refuse as behind (5,000 records wait), whatever `backlog` says. */
let refuse = 0;
const events: Envelope[] = [];
let url: string;

beforeAll(async () => {
  bus = new MemoryBus();
  await bus.subscribe(EVENTS_TOPIC, { group: 'test' }, async (b) => {
    for (const r of b.records) events.push(EVENTS_TOPIC.decode(EVENTS_TOPIC.encode(r.value)));
  });
  ingest = await startIngest({
    bus,
    resolveKey: async (k) => (k === KEY ? 'shop' : undefined),
    otlpPort: 0,
    grpcPort: 0,
    otlpHttpPort: 0,
    otlpHttpCorsOrigins: ['https://agent.example'],
    maxReceiveMessageBytes: 256 * 1024,
    pressure: { backlog: () => (refuse > 0 ? (refuse--, 5000) : backlog), maxBacklog: 1000, retryAfterMs: 1000 },
    logger: { warn: () => undefined, error: () => undefined },
  });
  url = `http://127.0.0.1:${ingest.otlpHttpPort}/v1/traces`;
});

afterAll(async () => {
  await ingest.close();
  await bus.close();
});

beforeEach(async () => {
  await bus.idle();
  events.length = 0;
  backlog = 0;
  refuse = 0;
});

/** One agent run as an instrumented app records it: an agent span with a model call and a failing tool call. */
function agentRun(): ReadableSpan[] {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'weather-svc' }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
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
  tracer.startSpan('chat gpt-4o', {
    attributes: { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.usage.input_tokens': 100, 'gen_ai.usage.output_tokens': 20, 'x.ratio': 0.5, 'x.flags': [true, false] },
  }, ctx).end();
  const tool = tracer.startSpan('execute_tool get_weather', {
    attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'get_weather', 'gen_ai.tool.call.arguments': '{"city":"Oslo"}' },
  }, ctx);
  tool.addEvent('retry', { attempt: 2 });
  tool.setStatus({ code: SpanStatusCode.ERROR, message: 'weather API down' });
  tool.end();
  root.setAttribute('gen_ai.output.messages', JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'Sorry, no data.' }] }]));
  root.end();
  return memory.getFinishedSpans();
}

function send(exporter: SpanExporter, spans: ReadableSpan[]): Promise<ExportResult> {
  return new Promise((resolve) => exporter.export(spans, resolve));
}

/** What arrived on the bus for one trace, in order, with the receive time left out. */
async function itemsOf(traceId: string): Promise<StreamItem[]> {
  await bus.idle();
  return events
    .filter((e) => (e.item.kind === 'span' ? e.item.span.run_id : e.item.run.run_id) === traceId)
    .map((e) => e.item);
}

const headers = { 'x-api-key': KEY };

describe('OTLP/HTTP with the OpenTelemetry JS exporters', () => {
  it('stores the same items from the JSON and protobuf HTTP exporters (gzip or not) as from the gRPC exporter', async () => {
    const grpcMd = new Metadata();
    grpcMd.set('x-api-key', KEY);
    const exporters: Record<string, SpanExporter> = {
      grpc: new GrpcExporter({ url: `http://127.0.0.1:${ingest.otlpPort}`, metadata: grpcMd }),
      json: new JsonExporter({ url, headers }),
      'json+gzip': new JsonExporter({ url, headers, compression: 'gzip' as never }),
      protobuf: new ProtoExporter({ url, headers }),
      'protobuf+gzip': new ProtoExporter({ url, headers, compression: 'gzip' as never }),
    };
    const got: Record<string, StreamItem[]> = {};
    const spans = agentRun();
    const traceId = spans[0].spanContext().traceId;
    for (const [name, exporter] of Object.entries(exporters)) {
      const result = await send(exporter, spans);
      expect({ name, code: result.code, error: result.error?.message }).toEqual({ name, code: ExportResultCode.SUCCESS, error: undefined });
      got[name] = await itemsOf(traceId);
      events.length = 0;
      await exporter.shutdown();
    }
    expect(got.grpc.map((i) => i.kind)).toEqual(['run_start', 'span', 'span', 'span', 'run_end']);
    expect(got.grpc[2]).toMatchObject({ span: { type: 'tool', tool: 'get_weather', input: { city: 'Oslo' }, status: 'error', error: 'weather API down' } });
    for (const name of ['json', 'json+gzip', 'protobuf', 'protobuf+gzip']) expect({ name, items: got[name] }).toEqual({ name, items: got.grpc });
  });

  it('decodes the JSON exporter’s body to the same request as its protobuf body', () => {
    const spans = agentRun();
    const json = Buffer.from(JsonTraceSerializer.serializeRequest(spans)!).toString('utf8');
    // The OTLP/JSON rules the decoder must follow, as the exporter really writes them:
    expect(json).toMatch(/"traceId":"[0-9a-f]{32}"/);
    expect(json).toMatch(/"kind":\d/);
    // Through the codec both ways, so empty and absent fields compare alike.
    const fromJson = otlp.ExportTraceServiceRequest.decode(otlp.ExportTraceServiceRequest.encode(decodeOtlpJson(json)).finish());
    const fromProto = otlp.ExportTraceServiceRequest.decode(ProtobufTraceSerializer.serializeRequest(spans)!);
    expect(fromJson).toEqual(fromProto);
  });

  it('answers 429 with Retry-After under back-pressure, and the exporter retries after it', async () => {
    backlog = 5000;
    const spans = agentRun();
    const raw = await fetch(url, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JsonTraceSerializer.serializeRequest(spans) });
    expect(raw.status).toBe(429);
    expect(raw.headers.get('retry-after')).toBe('1');
    expect(await raw.json()).toEqual({ code: 8, message: expect.stringContaining('ingest is behind: 5000 records wait') });
    expect(await itemsOf(spans[0].spanContext().traceId)).toEqual([]);

    const exporter = new ProtoExporter({ url, headers });
    // The exporter's first try is refused, the next taken (not a timer: a loaded machine may
    // send the first try late).
    backlog = 0;
    refuse = 1;
    const started = Date.now();
    const result = await send(exporter, spans);
    await exporter.shutdown();
    expect(result.code).toBe(ExportResultCode.SUCCESS);
    // It waited for Retry-After (1 s) rather than its own sub-second backoff.
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(await itemsOf(spans[0].spanContext().traceId)).toHaveLength(5);
  });
});

/** What a user sees of a stored item: everything but ids and times, which differ from run to run. */
function shape(items: StreamItem[]): unknown[] {
  return items.map((i) => {
    if (i.kind !== 'span') return { kind: i.kind, ...i.run, run_id: undefined, ts_ms: undefined };
    const { run_id: _r, span_id: _s, parent_id: _p, start_ms: _a, end_ms: _b, ...rest } = i.span;
    return { kind: i.kind, ...rest };
  });
}

const python = pythonOrSkip('the OpenTelemetry Python SDK over OTLP/HTTP', ['opentelemetry.exporter.otlp.proto.http.trace_exporter']);

(python ? describe : describe.skip)('OTLP/HTTP with the OpenTelemetry Python SDK', () => {
  it('stores the same items from the Python protobuf exporter (gzip or not) as from the JS gRPC exporter', async () => {
    const grpcMd = new Metadata();
    grpcMd.set('x-api-key', KEY);
    const grpc = new GrpcExporter({ url: `http://127.0.0.1:${ingest.otlpPort}`, metadata: grpcMd });
    const spans = agentRun();
    expect((await send(grpc, spans)).code).toBe(ExportResultCode.SUCCESS);
    await grpc.shutdown();
    const expected = shape(await itemsOf(spans[0].spanContext().traceId));
    expect(expected.map((i) => (i as { kind: string }).kind)).toEqual(['run_start', 'span', 'span', 'span', 'run_end']);
    for (const compression of ['none', 'gzip']) {
      const { stdout } = await promisify(execFile)(python!, [join(__dirname, 'fixtures', 'otel_python_agent.py'), url, KEY, compression], { timeout: 60_000 });
      const { trace_id } = JSON.parse(stdout) as { trace_id: string };
      expect({ compression, items: shape(await itemsOf(trace_id)) }).toEqual({ compression, items: expected });
    }
  });
});

/** An OTLP/JSON answer: partialSuccess on a 200, google.rpc.Status's code and message otherwise. */
interface JsonAnswer {
  partialSuccess?: { rejectedSpans: string; errorMessage: string };
  code?: number;
  message?: string;
}
const answerOf = async (res: Response): Promise<JsonAnswer> => (await res.json()) as JsonAnswer;

/** The message of a google.rpc.Status in protobuf: code (field 1, a varint), then the message (field 2). */
function statusMessage(bytes: Buffer): string {
  let pos = 0;
  const varint = () => {
    let n = 0;
    for (let shift = 0; ; shift += 7) {
      const b = bytes[pos++];
      n += (b & 127) * 2 ** shift;
      if (b < 128) return n;
    }
  };
  expect(bytes[pos++]).toBe(0x08);
  varint();
  expect(bytes[pos++]).toBe(0x12);
  const len = varint();
  return bytes.subarray(pos, pos + len).toString('utf8');
}

function post(body: string | Buffer, type = 'application/json', extra: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { ...headers, 'content-type': type, ...extra }, body });
}

const T = '5b8efff798038103d269b633813fc60c';
function jsonSpan(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    traceId: T, spanId: '0000000000000001', name: 'execute_tool lookup', kind: 1,
    startTimeUnixNano: '1700000000000000000', endTimeUnixNano: 1700000000500000000,
    attributes: [{ key: 'gen_ai.operation.name', value: { stringValue: 'execute_tool' } }, { key: 'gen_ai.tool.name', value: { stringValue: 'lookup' } }],
    status: { code: 2, message: 'boom' },
    ...over,
  };
}
const body = (spans: unknown[]) => JSON.stringify({ resourceSpans: [{ resource: { attributes: [] }, scopeSpans: [{ scope: { name: 'curl' }, spans }] }] });

describe('OTLP/HTTP by hand (what curl sends)', () => {
  it('takes hand-written OTLP/JSON and answers {} when all was accepted', async () => {
    const res = await post(body([jsonSpan()]));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(await res.json()).toEqual({});
    const [span] = (await itemsOf(T)).flatMap((i) => (i.kind === 'span' ? [i.span] : []));
    expect(span).toMatchObject({ span_id: '0000000000000001', type: 'tool', tool: 'lookup', status: 'error', error: 'boom', start_ms: 1700000000000, end_ms: 1700000000500 });
  });

  it('holds intValue to 64 bits as a number as it does as a string, and takes doubleValue as a string (proto3 JSON)', async () => {
    const attr = (key: string, value: unknown) => jsonSpan({ spanId: '00000000000000d1', traceId: 'd1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1', attributes: [{ key, value }] });
    for (const intValue of [1e30, -1e30, 2 ** 63, 1.5, '1000000000000000000000000000000']) {
      const res = await post(body([attr('n', { intValue })]));
      expect({ intValue, status: res.status }).toEqual({ intValue, status: 400 });
      expect((await answerOf(res)).message).toMatch(/attributes\[0\]\.value\.intValue: expected a 64-bit integer/);
    }
    const ok = await post(
      body([
        jsonSpan({
          spanId: '00000000000000d2',
          traceId: 'd2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2',
          attributes: [
            { key: 'big', value: { intValue: -(2 ** 53 - 1) } },
            { key: 'half', value: { doubleValue: '1.5' } },
            { key: 'exp', value: { doubleValue: '-2.5e3' } },
            { key: 'nan', value: { doubleValue: 'NaN' } },
            { key: 'inf', value: { doubleValue: '-Infinity' } },
          ],
        }),
      ]),
    );
    expect(ok.status).toBe(200);
    const [span] = (await itemsOf('d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2')).flatMap((i) => (i.kind === 'span' ? [i.span] : []));
    // NaN and the infinities have no JSON number: stored as null
    expect(span.attributes).toEqual({ big: -(2 ** 53 - 1), half: 1.5, exp: -2500, nan: null, inf: null });
    for (const doubleValue of ['1.5x', '', '0x10', '1e400', 'nan']) {
      expect({ doubleValue, status: (await post(body([attr('d', { doubleValue })]))).status }).toEqual({ doubleValue, status: 400 });
    }
  });

  it('takes an empty body as an empty request, in JSON as in protobuf', async () => {
    for (const [type, empty] of [['application/json', ''], ['application/json', ' \n'], ['application/x-protobuf', '']]) {
      const res = await post(empty, type);
      expect({ type, empty, status: res.status }).toEqual({ type, empty, status: 200 });
    }
    const gz = await post(gzipSync(Buffer.alloc(0)), 'application/json', { 'content-encoding': 'gzip' });
    expect(gz.status).toBe(200);
    expect(await gz.json()).toEqual({});
  });

  it('answers partialSuccess with the reasons when some spans are rejected', async () => {
    const res = await post(body([jsonSpan({ spanId: '0000000000000002' }), jsonSpan({ spanId: '' })]));
    expect(res.status).toBe(200);
    const answer = await answerOf(res);
    expect(answer.partialSuccess?.rejectedSpans).toBe('1');
    expect(answer.partialSuccess?.errorMessage).toContain('#1 run 5b8efff798038103d269b633813fc60c: span_id: is required');
    expect((await itemsOf(T)).length).toBe(1);
  });

  it('answers 400 with the reason and its path to a malformed body, in the request’s encoding, saying which encoding once', async () => {
    const badName = await post(body([jsonSpan({ name: 5 })]));
    expect(badName.status).toBe(400);
    expect(await badName.json()).toEqual({
      code: 3,
      message: 'malformed OTLP/JSON request: body.resourceSpans[0].scopeSpans[0].spans[0].name: expected a string, got number 5',
    });
    const notJson = await post('{"resourceSpans": [');
    expect(notJson.status).toBe(400);
    expect((await answerOf(notJson)).message).toMatch(/^malformed OTLP\/JSON request: body: not JSON/);
    const notProto = await post(Buffer.from([0x0a, 0xff, 0xff, 0xff]), 'application/x-protobuf');
    expect(notProto.status).toBe(400);
    expect(notProto.headers.get('content-type')).toBe('application/x-protobuf');
    // google.rpc.Status: code 3 (field 1), then the message (field 2)
    const status = Buffer.from(await notProto.arrayBuffer());
    expect(status.subarray(0, 2)).toEqual(Buffer.from([0x08, 3]));
    expect(statusMessage(status)).toMatch(/^malformed protobuf request: (?!malformed)/);
    const gzipBroken = await post('not gzip', 'application/json', { 'content-encoding': 'gzip' });
    expect(gzipBroken.status).toBe(400);
    expect((await answerOf(gzipBroken)).message).toContain('gzip body does not decompress');
    expect(events).toEqual([]);
  });

  it('refuses alone a span whose id is not hex, as protobuf does an id of the wrong length, saying what was sent', async () => {
    const res = await post(body([
      jsonSpan({ spanId: '0000000000000001' }),
      jsonSpan({ traceId: 'W47/95gDgQPSabYzgT/GDA==', spanId: '0000000000000002' }),
      jsonSpan({ spanId: 'span-003' }),
      jsonSpan({ spanId: '0000000000000004', parentSpanId: 'abcd' }),
    ]));
    expect(res.status).toBe(200);
    const hexOnly = '(OTLP/JSON ids are hex, not base64)';
    expect((await answerOf(res)).partialSuccess).toEqual({
      rejectedSpans: '3',
      errorMessage:
        `3 of 4 spans rejected: #1 span 0000000000000002: trace_id: expected 32 hex digits ${hexOnly}, got "W47/95gDgQPSabYzgT/GDA=="; ` +
        `#2 run ${T}: span_id: expected 16 hex digits ${hexOnly}, got "span-003"; ` +
        `#3 run ${T} span 0000000000000004: parent_span_id: expected 16 hex digits ${hexOnly}, got "abcd"`,
    });
    expect((await itemsOf(T)).map((i) => i.kind === 'span' && i.span.span_id)).toEqual(['0000000000000001']);
    // none acceptable: 400 with the reasons, not a malformed body
    const none = await post(body([jsonSpan({ traceId: 'W47/95gDgQPSabYzgT/GDA==' })]));
    expect(none.status).toBe(400);
    expect((await answerOf(none)).message).toBe(
      `no span was acceptable (1 rejected): #0 span 0000000000000001: trace_id: expected 32 hex digits ${hexOnly}, got "W47/95gDgQPSabYzgT/GDA=="`,
    );
  });

  it('takes a gzip body, and refuses one over the size bound, packed or unpacked, with 413', async () => {
    expect((await post(gzipSync(body([jsonSpan()])), 'application/json', { 'content-encoding': 'gzip' })).status).toBe(200);
    const huge = body([jsonSpan({ name: 'x'.repeat(300 * 1024) })]);
    const tooBig = await post(huge);
    expect(tooBig.status).toBe(413);
    // the Status in the body says what the gRPC receiver says of the same request: RESOURCE_EXHAUSTED
    expect((await answerOf(tooBig)).code).toBe(8);
    const bomb = await post(gzipSync(huge), 'application/json', { 'content-encoding': 'gzip' });
    expect(bomb.status).toBe(413);
    const bombAnswer = await answerOf(bomb);
    expect(bombAnswer.message).toContain('gzip body unpacks to more than the bound of 262144 bytes');
    expect(bombAnswer.code).toBe(8);
  });

  it('answers 401 without a key or with an unknown one, 415 to another content type, 404 elsewhere', async () => {
    const none = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body([jsonSpan()]) });
    expect(none.status).toBe(401);
    expect((await answerOf(none)).message).toContain('missing API key');
    expect((await post(body([jsonSpan()]), 'application/json', { 'x-api-key': 'nope' })).status).toBe(401);
    const bearer = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` }, body: body([jsonSpan()]) });
    expect(bearer.status).toBe(200);
    expect((await post('x', 'text/plain')).status).toBe(415);
    expect((await fetch(url.replace('traces', 'metrics'), { method: 'POST', body: '{}' })).status).toBe(404);
  });

  it('refuses a request without a known key before reading its body: 401 once the headers are in, the connection closed', async () => {
    // A keyless gzip body that does not unpack: 401, not the 400 its reading would give.
    const packed = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: Buffer.from('not gzip') });
    expect({ status: packed.status, message: (await answerOf(packed)).message }).toEqual({ status: 401, message: expect.stringContaining('missing API key') });
    // Headers that announce a large body (under the bound), and not one byte of it: answered.
    const headersOnly = async (extra: Record<string, string>) => {
      const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip', 'content-length': String(200 * 1024), ...extra } });
      req.on('error', () => undefined); // the connection closed under the unsent body
      req.flushHeaders();
      const [res] = (await once(req, 'response')) as [http.IncomingMessage];
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      req.destroy();
      return { status: res.statusCode, connection: res.headers.connection, message: statusMessage(Buffer.concat(chunks)) };
    };
    expect(await headersOnly({})).toEqual({ status: 401, connection: 'close', message: expect.stringContaining('missing API key') });
    expect(await headersOnly({ 'x-api-key': 'nope' })).toEqual({ status: 401, connection: 'close', message: 'unknown API key' });
  });

  it('answers 503 with Retry-After, taking nothing, when the bus is down; and stops listening on close', async () => {
    const down = new MemoryBus();
    const failing = Object.assign(Object.create(down) as MemoryBus, {
      publish: () => Promise.reject(new Error('broker down')),
    });
    const other = await startIngest({
      bus: failing, resolveKey: async () => 'shop', otlpPort: 0, grpcPort: 0, otlpHttpPort: 0,
      logger: { warn: () => undefined, error: () => undefined },
    });
    const otherUrl = `http://127.0.0.1:${other.otlpHttpPort}/v1/traces`;
    try {
      const res = await fetch(otherUrl, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: body([jsonSpan()]) });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect((await answerOf(res)).message).toContain('the bus is unavailable (broker down); not acknowledged, send it again');
    } finally {
      await other.close();
      await down.close();
    }
    await expect(fetch(otherUrl, { method: 'POST', body: '{}' })).rejects.toThrow();
  });

  it('lets a configured browser origin export (CORS), and no other', async () => {
    const pre = await fetch(url, { method: 'OPTIONS', headers: { origin: 'https://agent.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-api-key' } });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('https://agent.example');
    expect(pre.headers.get('access-control-allow-headers')).toContain('x-api-key');
    const res = await post(body([jsonSpan()]), 'application/json', { origin: 'https://agent.example' });
    expect(res.headers.get('access-control-allow-origin')).toBe('https://agent.example');
    const other = await post(body([jsonSpan()]), 'application/json', { origin: 'https://evil.example' });
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
  });
});

/**
 * Attribute values nested deep, at NEATROOTS_MAX_JSON_DEPTH's highest setting (1000): one level
 * past it must refuse its span alone over every transport; deeper than any setting, the export is
 * malformed (400 naming it, never a 500, which exporters do not retry).
 */
describe('OTLP attribute values nested deep', () => {
  let deepBus: MemoryBus;
  let deepIngest: IngestHandle;
  let deepUrl: string;
  let grpcClient: otlp.TraceServiceClient;
  const stored: Envelope[] = [];
  const errors: unknown[] = [];

  beforeAll(async () => {
    deepBus = new MemoryBus();
    await deepBus.subscribe(EVENTS_TOPIC, { group: 'test' }, async (b) => {
      for (const r of b.records) stored.push(r.value);
    });
    deepIngest = await startIngest({
      bus: deepBus,
      resolveKey: async (k) => (k === KEY ? 'shop' : undefined),
      otlpPort: 0,
      grpcPort: 0,
      otlpHttpPort: 0,
      limits: { ...DEFAULT_SPAN_LIMITS, maxJsonDepth: 1000 },
      logger: { warn: () => undefined, error: (...args: unknown[]) => void errors.push(args) },
    });
    deepUrl = `http://127.0.0.1:${deepIngest.otlpHttpPort}/v1/traces`;
    grpcClient = new otlp.TraceServiceClient(`127.0.0.1:${deepIngest.otlpPort}`, credentials.createInsecure());
  });

  afterAll(async () => {
    grpcClient.close();
    await deepIngest.close();
    await deepBus.close();
  });

  /** `levels` arrayValues or kvlistValues within each other, a string at the bottom. */
  function deepValue(levels: number, container: 'array' | 'kvlist'): otlp.AnyValue {
    let v: otlp.AnyValue = { value: { $case: 'string_value', value: 'bottom' } };
    for (let i = 0; i < levels; i++) {
      v = container === 'array'
        ? { value: { $case: 'array_value', value: { values: [v] } } }
        : { value: { $case: 'kvlist_value', value: { values: [{ key: 'k', value: v }] } } };
    }
    return v;
  }

  /** A tool span with one attribute `deep` (absent for 0 levels). */
  function deepSpan(id: string, levels: number, container: 'array' | 'kvlist' = 'kvlist'): otlp.Span {
    const span = otlp.Span.fromPartial({
      trace_id: Buffer.from(T, 'hex'),
      span_id: Buffer.from(id, 'hex'),
      name: 'execute_tool lookup',
      start_time_unix_nano: '1700000000000000000',
      end_time_unix_nano: '1700000000500000000',
    });
    // Set after fromPartial, which copies a value recursively: 2,000 levels of it ran out of
    // the stack in the test itself whenever the test started on a deep enough stack.
    span.attributes = levels ? [{ key: 'deep', value: deepValue(levels, container) }] : [];
    return span;
  }

  const request = (spans: otlp.Span[]): otlp.ExportTraceServiceRequest => ({ resource_spans: [{ schema_url: '', scope_spans: [{ schema_url: '', spans }] }] });

  /**
   * The request in OTLP/JSON, written by hand: JSON.stringify recurses and runs out of stack on
   * the values these tests send.
   */
  function toJson(req: otlp.ExportTraceServiceRequest): string {
    const value = (v: otlp.AnyValue): string => {
      let open = '';
      let close = '';
      let x = v.value;
      for (; x?.$case === 'array_value' || x?.$case === 'kvlist_value'; ) {
        if (x.$case === 'array_value') {
          open += '{"arrayValue":{"values":[';
          close = ']}}' + close;
          x = x.value.values[0].value;
        } else {
          open += '{"kvlistValue":{"values":[{"key":"k","value":';
          close = '}]}}' + close;
          x = x.value.values[0].value?.value;
        }
      }
      return open + JSON.stringify({ stringValue: x?.$case === 'string_value' ? x.value : '' }) + close;
    };
    const spans = req.resource_spans[0].scope_spans[0].spans.map((s) => {
      const head = JSON.stringify({ traceId: s.trace_id.toString('hex'), spanId: s.span_id.toString('hex'), name: s.name, startTimeUnixNano: s.start_time_unix_nano, endTimeUnixNano: s.end_time_unix_nano });
      const attrs = s.attributes.map((a) => `{"key":${JSON.stringify(a.key)},"value":${value(a.value as otlp.AnyValue)}}`);
      return `${head.slice(0, -1)},"attributes":[${attrs.join(',')}]}`;
    });
    return `{"resourceSpans":[{"scopeSpans":[{"spans":[${spans.join(',')}]}]}]}`;
  }

  type Answer = { ok: true; rejected: string; message: string } | { ok: false; status: number; message: string };

  /** One export over a transport, the answer in one shape: partial success's count and message, or the refusal. */
  async function exportOver(transport: 'json' | 'protobuf' | 'grpc', req: otlp.ExportTraceServiceRequest): Promise<Answer> {
    if (transport === 'grpc') {
      const meta = new Metadata();
      meta.set('x-api-key', KEY);
      return new Promise((resolve) =>
        grpcClient.export(req, meta, (err, res) =>
          resolve(err ? { ok: false, status: err.code, message: err.details } : { ok: true, rejected: res?.partial_success?.rejected_spans ?? '0', message: res?.partial_success?.error_message ?? '' }),
        ),
      );
    }
    const json = transport === 'json';
    const res = await fetch(deepUrl, {
      method: 'POST',
      headers: { ...headers, 'content-type': json ? 'application/json' : 'application/x-protobuf' },
      body: json ? toJson(req) : Buffer.from(otlp.ExportTraceServiceRequest.encode(req).finish()),
    });
    if (json) {
      const a = await answerOf(res);
      return res.status === 200
        ? { ok: true, rejected: a.partialSuccess?.rejectedSpans ?? '0', message: a.partialSuccess?.errorMessage ?? '' }
        : { ok: false, status: res.status, message: a.message ?? '' };
    }
    const bytes = Buffer.from(await res.arrayBuffer());
    if (res.status !== 200) return { ok: false, status: res.status, message: statusMessage(bytes) };
    const p = otlp.ExportTraceServiceResponse.decode(bytes).partial_success;
    return { ok: true, rejected: p?.rejected_spans ?? '0', message: p?.error_message ?? '' };
  }

  const TRANSPORTS = ['json', 'protobuf', 'grpc'] as const;

  it('takes a value 1000 levels deep and refuses alone one 1001 deep, over OTLP/JSON, OTLP/HTTP protobuf and OTLP/gRPC alike', async () => {
    for (const [n, transport] of TRANSPORTS.entries()) {
      const id = (k: number) => `00000000000000${n}${k}`;
      stored.length = 0;
      const answer = await exportOver(transport, request([
        deepSpan(id(1), 0),
        deepSpan(id(2), 1000, 'kvlist'),
        deepSpan(id(3), 1001, 'kvlist'),
        deepSpan(id(4), 1000, 'array'),
        deepSpan(id(5), 1001, 'array'),
      ]));
      expect({ transport, answer }).toEqual({
        transport,
        answer: {
          ok: true,
          rejected: '2',
          message: `2 of 5 spans rejected: #2 run ${T} span ${id(3)}: attributes.deep: is JSON nested more than 1000 levels deep (NEATROOTS_MAX_JSON_DEPTH); ` +
            `#4 run ${T} span ${id(5)}: attributes.deep: is JSON nested more than 1000 levels deep (NEATROOTS_MAX_JSON_DEPTH)`,
        },
      });
      await deepBus.idle();
      expect({ transport, stored: stored.map((e) => e.item.kind === 'span' && e.item.span.span_id) }).toEqual({ transport, stored: [id(1), id(2), id(4)] });
    }
    expect(errors).toEqual([]);
  });

  it('answers 400 naming the value, never 500, to one nested past every setting (the audit’s 2,000 levels)', async () => {
    const past = 'is nested more than 1001 levels deep (arrayValue and kvlistValue within each other), past what any NEATROOTS_MAX_JSON_DEPTH accepts (at most 1000)';
    for (const [levels, container] of [[1002, 'kvlist'], [2000, 'array'], [2000, 'kvlist']] as const) {
      const answer = await exportOver('json', request([deepSpan('0000000000000001', 0), deepSpan('0000000000000002', levels, container)]));
      expect({ levels, container, answer }).toEqual({
        levels, container,
        answer: { ok: false, status: 400, message: `malformed OTLP/JSON request: body.resourceSpans[0].scopeSpans[0].spans[1].attributes[0].value: ${past}` },
      });
    }
    // protobuf: past the messages a value MAX_VALUE_DEPTH kvlists deep takes
    for (const transport of ['protobuf', 'grpc'] as const) {
      const answer = await exportOver(transport, request([deepSpan('0000000000000001', 0), deepSpan('0000000000000002', 1002, 'kvlist')]));
      expect({ transport, answer }).toEqual({
        transport,
        answer: {
          ok: false,
          status: transport === 'grpc' ? GrpcStatus.INVALID_ARGUMENT : 400,
          message: 'malformed protobuf request: messages are nested more than 3010 deep: an attribute value nested past what any NEATROOTS_MAX_JSON_DEPTH accepts (at most 1000)',
        },
      });
    }
    expect(errors).toEqual([]);
    await deepBus.idle();
  });
});
