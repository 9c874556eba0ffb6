'use strict';
// OTLP/HTTP beside OTLP/gRPC, in the same run: the same spans, serialised once by the
// OpenTelemetry JS SDK's own serializers (what its exporters send), exported into one ingest
// whose bus nobody reads (transport, decoding, mapping and validation only), over
// OTLP/gRPC (the baseline), OTLP/HTTP protobuf, OTLP/HTTP JSON, and both HTTP encodings gzipped.
//   node bench/otlp.js [spans]
const http = require('node:http');
const { gzipSync } = require('node:zlib');
const { performance } = require('node:perf_hooks');
const grpc = require('@grpc/grpc-js');
const { context, trace } = require('@opentelemetry/api');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { JsonTraceSerializer } = require('@opentelemetry/otlp-transformer');
const { startIngest } = require('@neatroots/ingest');
const { MemoryBus } = require('@neatroots/platform');

const KEY = 'bench-key';

/** Runs of an agent: an invoke_agent span and its tool and model calls, as GenAI instrumentation records them. */
function agentSpans({ spans, perRun }) {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
  const tracer = provider.getTracer('bench');
  for (let r = 0; r * perRun < spans; r++) {
    const root = tracer.startSpan('invoke_agent support-agent', { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'support-agent' } });
    const ctx = trace.setSpan(context.active(), root);
    for (let i = 1; i < perRun; i++) {
      const attributes = i % 3 === 0
        ? { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.usage.input_tokens': 100 + i, 'gen_ai.usage.output_tokens': 20 }
        : { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': `tool_${i % 7}`, 'gen_ai.tool.call.arguments': JSON.stringify({ q: `query ${r} ${i}` }), 'gen_ai.tool.call.result': '{"ok":true}' };
      tracer.startSpan(attributes['gen_ai.operation.name'] === 'chat' ? 'chat gpt-4o' : `execute_tool tool_${i % 7}`, { attributes }, ctx).end();
    }
    root.end();
  }
  return memory.getFinishedSpans();
}

/** Exports in flight at once over `conns` connections; resolves when every body was answered 200 / OK. */
async function pump(bodies, call, inflight) {
  let next = 0;
  const worker = async () => {
    while (next < bodies.length) await call(bodies[next++]);
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: inflight }, worker));
  return performance.now() - t0;
}

function grpcCaller(port) {
  const clients = [0, 1].map(() => new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.max_send_message_length': 64 << 20 }));
  const md = new grpc.Metadata();
  md.set('x-api-key', KEY);
  let n = 0;
  return {
    call: (buf) => new Promise((resolve, reject) =>
      // a deadline (generous: an export may wait behind the pipeline) so a stalled receiver ends the bench
      clients[n++ % 2].makeUnaryRequest('/opentelemetry.proto.collector.trace.v1.TraceService/Export', (b) => b, (b) => b, buf, md, { deadline: Date.now() + 120_000 }, (e) => (e ? reject(e) : resolve()))),
    close: () => clients.forEach((c) => c.close()),
  };
}

function httpCaller(port, contentType, gzip) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  const headers = { 'content-type': contentType, 'x-api-key': KEY, ...(gzip ? { 'content-encoding': 'gzip' } : {}) };
  return {
    call: (body) => new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: '/v1/traces', method: 'POST', agent, headers: { ...headers, 'content-length': body.length }, signal: AbortSignal.timeout(120_000) }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end(body);
    }),
    close: () => agent.destroy(),
  };
}

/**
 * `work`: the OTLP ceiling's workload (bench/ceiling.js workload()): the same exports, the same
 * number in flight, so OTLP/gRPC ingest here is a share of that ceiling like for like.
 */
async function benchOtlp({ spans = 100_000, work, rounds = 2 } = {}) {
  // required here: ceiling.js requires this file
  work ??= require('./ceiling').workload({ spans });
  const { batch, inflight } = work;
  const proto = work.bodies;
  const json = work.batches.map((b) => Buffer.from(JsonTraceSerializer.serializeRequest(b)));
  const bus = new MemoryBus({ maxLag: Number.MAX_SAFE_INTEGER });
  const ingest = await startIngest({ bus, resolveKey: async () => 'bench', otlpPort: 0, grpcPort: 0, otlpHttpPort: 0, maxReceiveMessageBytes: 64 << 20 });
  const ways = {
    otlp_grpc: { bodies: proto, caller: () => grpcCaller(ingest.otlpPort) },
    otlp_http_protobuf: { bodies: proto, caller: () => httpCaller(ingest.otlpHttpPort, 'application/x-protobuf', false) },
    otlp_http_json: { bodies: json, caller: () => httpCaller(ingest.otlpHttpPort, 'application/json', false) },
    otlp_http_protobuf_gzip: { bodies: proto.map((b) => gzipSync(b)), caller: () => httpCaller(ingest.otlpHttpPort, 'application/x-protobuf', true) },
    otlp_http_json_gzip: { bodies: json.map((b) => gzipSync(b)), caller: () => httpCaller(ingest.otlpHttpPort, 'application/json', true) },
  };
  const best = {};
  // interleaved, best of `rounds` each: the machine is shared
  for (let r = 0; r < rounds; r++) {
    for (const [name, w] of Object.entries(ways)) {
      const c = w.caller();
      const ms = await pump(w.bodies, c.call, inflight);
      c.close();
      await bus.idle?.();
      best[name] = Math.min(best[name] ?? Infinity, ms);
    }
  }
  await ingest.close();
  await bus.close();
  const rate = (ms) => Math.round(work.spans / (ms / 1000));
  const mb = (bodies) => +(bodies.reduce((n, b) => n + b.length, 0) / 1048576).toFixed(1);
  const out = { spans: work.spans, batch, exports_in_flight: inflight };
  for (const [name, ms] of Object.entries(best)) out[`${name}_spans_per_s`] = rate(ms);
  for (const [name, w] of Object.entries(ways)) out[`${name}_mb_sent`] = mb(w.bodies);
  for (const name of Object.keys(ways).filter((n) => n !== 'otlp_grpc')) out[`${name}_over_grpc`] = +(rate(best[name]) / rate(best.otlp_grpc)).toFixed(2);
  return out;
}

module.exports = { benchOtlp, agentSpans, pump, grpcCaller };

if (require.main === module) {
  const args = require('./args').cli({
    usage: `
usage: node bench/otlp.js [SPANS]
  SPANS   spans sent (default 100000)
  --help  this text`,
    positionals: [{ name: 'spans', count: true }],
  });
  benchOtlp({ spans: args.spans ?? 100_000 }).then((r) => console.log(JSON.stringify(r, null, 2)), (e) => {
    console.error(e);
    process.exit(1);
  });
}
