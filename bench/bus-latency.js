'use strict';
// A record's time from publish to its consumer's handler on Kafka, at a light steady rate (50
// records every 25 ms over 40 keys, 6 partitions): KafkaBus as the services use it (its offset
// commits beside the fetch loop, libs/platform/src/bus/commits.ts), beside the baseline in the
// same run: plain kafkajs with the same records, committing each partition batch's offset
// before the next (what KafkaBus did before). Needs NEATROOTS_KAFKA_BROKERS.
//   node bench/bus-latency.js [sends]
const { Kafka, logLevel } = require('kafkajs');
const { KafkaBus, deleteKafkaTopics } = require('@neatroots/platform');
const { makeTopics } = require('@neatroots/messages');
const { itemRunId } = require('@neatroots/spans');
const { fleet, percentile } = require('./checks');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const summary = (a) => {
  a.sort((x, y) => x - y);
  return { p50_ms: percentile(a, 50), p99_ms: percentile(a, 99), records: a.length };
};

async function viaKafkaBus(brokers, prefix, sends, items) {
  const topics = makeTopics(prefix);
  const bus = new KafkaBus({ brokers, clientId: 'bench-latency', logLevel: 'error', partitions: 6 });
  const lat = [];
  let on = false;
  await bus.subscribe(topics.events, { group: `${prefix}.g`, fromBeginning: false }, async (b) => {
    const now = Date.now();
    if (on) for (const r of b.records) lat.push(now - r.value.received_ms);
  });
  on = true;
  for (let i = 0; i < sends; i++) {
    const recs = items.slice((i % 80) * 50, (i % 80) * 50 + 50).map((item) => ({ key: itemRunId(item), value: { project: 'bench', received_ms: Date.now(), item } }));
    void bus.publish(topics.events, recs);
    await sleep(25);
  }
  await sleep(2000);
  await bus.close();
  return summary(lat);
}

async function viaKafkajs(brokers, prefix, sends) {
  const kafka = new Kafka({ brokers, clientId: 'bench-latency-raw', logLevel: logLevel.NOTHING });
  const topic = `${prefix}.raw`;
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 6 }], waitForLeaders: true });
  await admin.disconnect();
  const producer = kafka.producer();
  await producer.connect();
  const consumer = kafka.consumer({ groupId: `${prefix}.raw-g`, maxWaitTimeInMs: 500, minBytes: 1 });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  const lat = [];
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    partitionsConsumedConcurrently: 2,
    eachBatch: async ({ batch, resolveOffset, commitOffsetsIfNecessary }) => {
      const now = Date.now();
      for (const m of batch.messages) lat.push(now - Number(m.value.toString().slice(0, 13)));
      resolveOffset(batch.lastOffset());
      await commitOffsetsIfNecessary({ topics: [{ topic, partitions: [{ partition: batch.partition, offset: (BigInt(batch.lastOffset()) + 1n).toString() }] }] });
    },
  });
  await sleep(3000);
  for (let i = 0; i < sends; i++) {
    const at = String(Date.now());
    void producer.send({ topic, acks: -1, messages: Array.from({ length: 50 }, (_, j) => ({ key: `run-${(i * 50 + j) % 40}`, value: at.padEnd(300, ' ') })) });
    await sleep(25);
  }
  await sleep(2000);
  await consumer.disconnect();
  await producer.disconnect();
  return summary(lat);
}

async function main() {
  const brokers = (process.env.NEATROOTS_KAFKA_BROKERS ?? '').split(',').filter(Boolean);
  if (!brokers.length) return { skipped: 'set NEATROOTS_KAFKA_BROKERS (deploy/local/services env)' };
  const sends = Number(process.argv[2] ?? 200);
  const prefix = `bench${Date.now().toString(36)}lat`;
  try {
    const items = [...fleet({ runs: 40, perRun: 100 })];
    const baseline = await viaKafkajs(brokers, prefix, sends);
    const kafkaBus = await viaKafkaBus(brokers, prefix, sends, items);
    return { sends, records_per_send: 50, kafka_bus_publish_to_handler: kafkaBus, baseline_kafkajs_commit_awaited_per_batch: baseline };
  } finally {
    await deleteKafkaTopics(brokers, prefix);
  }
}

main().then((r) => console.log(JSON.stringify(r, null, 2)), (e) => (console.error(e), process.exit(1)));
