'use strict';
// The receive ceiling every end-to-end row is a share of: a Node.js OTLP/gRPC receiver that
// decodes each export (the same generated decoder ingest uses) and counts its spans, nothing
// else. The OTel JS SDK's spans, 500 a request, 8 requests in flight, as bench/otlp.js sends them.
//   node bench/ceiling.js [spans]
const grpc = require('@grpc/grpc-js');
const { ProtobufTraceSerializer } = require('@opentelemetry/otlp-transformer');
const { otlp } = require('@neatroots/proto');
const { agentSpans, pump, grpcCaller } = require('./otlp');

/** Starts the null receiver; resolves to its port, its span count and close(). */
async function nullReceiver() {
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 64 << 20 });
  const state = { spans: 0 };
  server.addService(otlp.TraceServiceService, {
    export: (call, callback) => {
      for (const rs of call.request.resource_spans) for (const ss of rs.scope_spans) state.spans += ss.spans.length;
      callback(null, {});
    },
  });
  const port = await new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  return { port, state, close: () => new Promise((r) => server.tryShutdown(() => r())) };
}

async function benchCeiling({ spans = 100_000, perRun = 50, batch = 500, inflight = 8, rounds = 3 } = {}) {
  const all = agentSpans({ spans, perRun });
  const bodies = [];
  for (let i = 0; i < all.length; i += batch) bodies.push(Buffer.from(ProtobufTraceSerializer.serializeRequest(all.slice(i, i + batch))));
  const rx = await nullReceiver();
  let best = Infinity;
  // best of `rounds`: the machine is shared, and the ceiling is what it can do at best
  for (let r = 0; r < rounds; r++) {
    const c = grpcCaller(rx.port);
    best = Math.min(best, await pump(bodies, c.call, inflight));
    c.close();
  }
  await rx.close();
  if (rx.state.spans !== all.length * rounds) throw new Error(`null receiver counted ${rx.state.spans} spans of ${all.length * rounds}`);
  return { spans: all.length, batch, exports_in_flight: inflight, spans_per_s: Math.round(all.length / (best / 1000)) };
}

module.exports = { benchCeiling, nullReceiver };

if (require.main === module) {
  benchCeiling({ spans: Number(process.argv[2] ?? 100_000) }).then((r) => console.log(JSON.stringify(r, null, 2)), (e) => {
    console.error(e);
    process.exit(1);
  });
}
