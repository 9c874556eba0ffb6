'use strict';
// The bus alone, records sized for the log: ingest's spans (Envelope protobuf, 500 to a
// publish as one export carries them, 100 spans a run, 8 publishes in flight) published to
// Kafka and to the embedded durable log, then read back by a consumer group, with packs (the
// records of a run in one publish as one physical record) and without (one record per span),
// and on Kafka with gzip. Every variant in the same run, so the ratios hold on a noisy machine.
//   node bench/bus.js [spans]   (the Kafka rows need NEATROOTS_KAFKA_BROKERS)
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const { KafkaBus, LogBus, deleteKafkaTopics } = require('@neatroots/platform');
const { makeTopics } = require('@neatroots/messages');
const { itemRunId } = require('@neatroots/spans');
const { fleet } = require('./checks');

function exportsOf({ spans, perRun = 100, batch = 500 }) {
  const out = [];
  let cur = [];
  const received_ms = Date.now();
  for (const item of fleet({ runs: Math.ceil(spans / perRun), perRun })) {
    cur.push({ key: itemRunId(item), value: { project: 'bench', received_ms, item } });
    if (cur.length >= batch) {
      out.push(cur);
      cur = [];
    }
  }
  if (cur.length) out.push(cur);
  return out;
}

async function publishAll(bus, topic, exports, inflight = 8) {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: inflight }, async () => {
    while (next < exports.length) await bus.publish(topic, exports[next++]);
  }));
  return performance.now() - t0;
}

async function consumeAll(bus, topic, group, total) {
  let n = 0;
  const t0 = performance.now();
  let done;
  const all = new Promise((r) => (done = r));
  const sub = await bus.subscribe(topic, { group }, async (b) => {
    n += b.records.length;
    if (n >= total) done();
  });
  await all;
  const ms = performance.now() - t0;
  await sub.close();
  return ms;
}

const rate = (n, ms) => Math.round(n / (ms / 1000));

async function kafkaVariant(name, exports, total, opts) {
  const prefix = `benchbus${Date.now().toString(36)}${name}`;
  const topic = makeTopics(prefix).events;
  const bus = new KafkaBus({ brokers: process.env.NEATROOTS_KAFKA_BROKERS.split(','), clientId: 'bench-bus', logLevel: 'error', lingerMs: 1, ...opts });
  await bus.ensureTopic(topic.name);
  const pubMs = await publishAll(bus, topic, exports);
  const reader = new KafkaBus({ brokers: process.env.NEATROOTS_KAFKA_BROKERS.split(','), clientId: 'bench-bus-reader', logLevel: 'error', partitionsConsumedConcurrently: 4 });
  const conMs = await consumeAll(reader, topic, `${prefix}.reader`, total);
  const messages = bus.stats.messages;
  await reader.close();
  await bus.close();
  await deleteKafkaTopics(process.env.NEATROOTS_KAFKA_BROKERS.split(','), prefix);
  return { publish_records_per_s: rate(total, pubMs), consume_records_per_s: rate(total, conMs), kafka_records: messages };
}

async function logVariant(exports, total, opts) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-bench-bus-'));
  const topic = makeTopics('benchbus').events;
  const bus = new LogBus({ dir, ...opts });
  const pubMs = await publishAll(bus, topic, exports);
  const conMs = await consumeAll(bus, topic, 'reader', total);
  const out = { publish_records_per_s: rate(total, pubMs), consume_records_per_s: rate(total, conMs), frames: bus.stats.frames, mb_written: +(bus.stats.bytesWritten / 1048576).toFixed(1) };
  await bus.close();
  fs.rmSync(dir, { recursive: true, force: true });
  return out;
}

async function benchBus({ spans = 200_000, rounds = 2 } = {}) {
  const exports = exportsOf({ spans });
  const total = exports.reduce((n, e) => n + e.length, 0);
  const out = { records: total, records_per_publish: 500, publishes_in_flight: 8 };
  // Interleaved, best of `rounds` each: the machine is shared.
  const best = (key, r) => {
    const cur = out[key];
    if (!cur) out[key] = r;
    else for (const k of Object.keys(r)) if (k.endsWith('_per_s')) cur[k] = Math.max(cur[k], r[k]);
  };
  for (let i = 0; i < rounds; i++) {
    best('log_one_record_per_span', await logVariant(exports, total, { pack: false }));
    best('log_packed', await logVariant(exports, total, { pack: true }));
    if (process.env.NEATROOTS_KAFKA_BROKERS) {
      best('kafka_one_record_per_span', await kafkaVariant(`u${i}`, exports, total, { pack: false }));
      best('kafka_packed', await kafkaVariant(`p${i}`, exports, total, { pack: true }));
      best('kafka_packed_gzip', await kafkaVariant(`g${i}`, exports, total, { pack: true, compression: 'gzip' }));
    }
  }
  if (!process.env.NEATROOTS_KAFKA_BROKERS) out.kafka_skipped = 'set NEATROOTS_KAFKA_BROKERS (deploy/local/services env)';
  return out;
}

module.exports = { benchBus };

if (require.main === module) {
  benchBus({ spans: Number(process.argv[2] ?? 200_000) }).then((r) => console.log(JSON.stringify(r, null, 2)), (e) => {
    console.error(e);
    process.exit(1);
  });
}
