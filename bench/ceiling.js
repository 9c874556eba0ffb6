'use strict';
// The receive ceilings the end-to-end rows are shares of: a Node.js gRPC receiver that decodes
// each export (the same generated decoders ingest uses) and counts its spans, nothing else.
// A share compares like with like: the same protocol, the same exports, the same concurrency.
// - OTLP/gRPC (this file's benchCeiling): the OTel JS SDK's spans, 500 a request, 8 requests in
//   flight over 2 connections, as bench/otlp.js sends them. workload() builds those exports once;
//   the same bodies drive OTLP ingest (bench/otlp.js) and the OTLP end-to-end rows (bench/e2e.js,
//   bench/distributed.js), so each is a share of this ceiling.
// - neatroots.v1 (v1Ceiling in bench/e2e.js): the same null receiver taking the rows' own
//   ExportRequests at the row's own connections and exports in flight.
//   node bench/ceiling.js [spans]
const grpc = require('@grpc/grpc-js');
const { ProtobufTraceSerializer } = require('@opentelemetry/otlp-transformer');
const { otlp, v1 } = require('@neatroots/proto');
const { agentSpans, pump, grpcCaller } = require('./otlp');

/**
 * The OTLP workload of the ceiling: the OTel JS SDK's spans of runs of `perRun` spans, serialised
 * once, `batch` spans an export, sent `inflight` at once (over grpcCaller's 2 connections).
 */
function workload({ spans = 100_000, perRun = 50, batch = 500, inflight = 8 } = {}) {
  const all = agentSpans({ spans, perRun });
  const batches = [];
  for (let i = 0; i < all.length; i += batch) batches.push(all.slice(i, i + batch));
  const bodies = batches.map((b) => Buffer.from(ProtobufTraceSerializer.serializeRequest(b)));
  return { protocol: 'OTLP/gRPC', spans: all.length, perRun, batch, inflight, connections: 2, batches, bodies };
}

/**
 * The records the workload puts on the events topic (each span, and the run events ingest derives
 * from the root agent spans), counted by the same mapping ingest applies: what a consumer has
 * consumed once everything sent reached it.
 */
function busItems(work) {
  const { mapOtlpExport } = require('@neatroots/spans');
  let n = 0;
  for (const b of work.bodies) n += mapOtlpExport(otlp.ExportTraceServiceRequest.decode(b)).items.length;
  return n;
}

/**
 * Starts the null receiver (OTLP TraceService/Export and neatroots.v1 Ingest/Export); resolves to
 * its port, its span counts (`spans` OTLP, `v1Spans` neatroots.v1) and close().
 */
async function nullReceiver() {
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 64 << 20 });
  const state = { spans: 0, v1Spans: 0 };
  server.addService(otlp.TraceServiceService, {
    export: (call, callback) => {
      for (const rs of call.request.resource_spans) for (const ss of rs.scope_spans) state.spans += ss.spans.length;
      callback(null, {});
    },
  });
  server.addService(v1.IngestService, {
    export: (call, callback) => {
      for (const e of call.request.events) if (e.kind?.$case === 'span') state.v1Spans++;
      callback(null, { accepted: call.request.events.length, rejected: [], notes: [] });
    },
  });
  const port = await new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  return { port, state, close: () => new Promise((r) => server.tryShutdown(() => r())) };
}

/** The OTLP/gRPC ceiling: `work` (workload()) into the null receiver, best of `rounds`. */
async function benchCeiling({ spans = 100_000, work = workload({ spans }), rounds = 3 } = {}) {
  const rx = await nullReceiver();
  let best = Infinity;
  // a failed export still closes the connections and the receiver (nothing left listening)
  try {
    // best of `rounds`: the machine is shared, and the ceiling is what it can do at best
    for (let r = 0; r < rounds; r++) {
      const c = grpcCaller(rx.port);
      try {
        best = Math.min(best, await pump(work.bodies, c.call, work.inflight));
      } finally {
        c.close();
      }
    }
  } finally {
    await rx.close();
  }
  if (rx.state.spans !== work.spans * rounds) throw new Error(`null receiver counted ${rx.state.spans} spans of ${work.spans * rounds}`);
  return {
    protocol: work.protocol, spans: work.spans, batch: work.batch, connections: work.connections, exports_in_flight: work.inflight,
    spans_per_s: Math.round(work.spans / (best / 1000)),
  };
}

module.exports = { benchCeiling, nullReceiver, workload, busItems };

if (require.main === module) {
  const args = require('./args').cli({
    usage: `
usage: node bench/ceiling.js [SPANS]
  SPANS   spans sent (default 100000)
  --help  this text`,
    positionals: [{ name: 'spans', count: true }],
  });
  benchCeiling({ spans: args.spans ?? 100_000 }).then((r) => console.log(JSON.stringify(r, null, 2)), (e) => {
    console.error(e);
    process.exit(1);
  });
}
