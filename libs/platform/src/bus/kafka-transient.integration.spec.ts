import { Kafka, logLevel } from 'kafkajs';
import { TEST_KAFKA_BUS } from '../testing/kafka-topics';
import { serviceOrSkip, uniqueName } from '../testing/services';
import { jsonTopic, waitUntil, type Rec } from '../contract/bus.contract.test';
import { KafkaBus } from './kafka';

/**
 * A transient subscription's group (ingest's notes group: the subscriber's alone, a new name at
 * each start) is deleted from the broker when the subscription closes. When the broker will not
 * delete it, the close still ends: the failure is reported through onError (the services log it,
 * `could not delete the consumer group ...`) and the group is left as a crash leaves it.
 */
const kafka = serviceOrSkip('kafka', 'KafkaBus transient groups');

(kafka ? describe : describe.skip)('KafkaBus: a transient subscription closing', () => {
  const brokers = kafka?.brokers ?? [];
  const base = uniqueName('it_kafka_transient');
  const client = new Kafka({ brokers: brokers.length ? brokers : ['127.0.0.1:9'], clientId: 'it-transient', logLevel: logLevel.NOTHING });
  const admin = client.admin();
  const topic = jsonTopic<Rec>(`${base}.notes`);
  const group = `${base}.ingest-notes-test`;
  const errors: { message: string; where: { topic: string; group?: string } }[] = [];
  const bus = new KafkaBus({
    brokers,
    clientId: 'it',
    ...TEST_KAFKA_BUS,
    onError: (err, where) => errors.push({ message: (err as Error).message, where }),
  });
  const other = client.consumer({ groupId: group, sessionTimeout: 6_000, rebalanceTimeout: 6_000, heartbeatInterval: 300 });

  beforeAll(() => admin.connect());
  afterAll(async () => {
    await other.disconnect().catch(() => undefined);
    await bus.close();
    await admin.deleteGroups([group]).catch(() => undefined);
    await admin.deleteTopics({ topics: [topic.name] }).catch(() => undefined);
    await admin.disconnect();
  }, 60_000);

  it('a group the broker will not delete (another member in it) is reported through onError, the close ends, and the group is left', async () => {
    const got: Rec[] = [];
    const sub = await bus.subscribe(topic, { group, fromBeginning: true, transient: true }, async (b) => void got.push(...b.records.map((r) => r.value)));
    await bus.publish(topic, [{ key: 'r1', value: { k: 'r1', i: 1 } }]);
    await waitUntil(() => got.length === 1, 30_000, () => `the record handled (got ${got.length})`);
    // another member joins the group (a consumer of the same name: as if the replica id were
    // shared), so the group is not empty when this subscription leaves it
    await other.connect();
    await other.subscribe({ topic: topic.name, fromBeginning: true });
    let othersJoined = false;
    other.on(other.events.GROUP_JOIN, () => (othersJoined = true));
    await other.run({ eachMessage: async () => undefined });
    await waitUntil(() => othersJoined, 30_000, () => 'the other member in the group');

    const t0 = Date.now();
    await sub.close(); // resolves: the stop goes on
    const took = Date.now() - t0;
    expect(errors.filter((e) => /could not delete the consumer group/.test(e.message))).toEqual([
      {
        message: expect.stringMatching(/^could not delete the consumer group as the subscription closed \(.*\): it stays on the broker with no member until offsets\.retention\.minutes$/),
        where: expect.objectContaining({ topic: topic.name, group }),
      },
    ]);
    // asked again for a while (the broker may still be ending a rebalance), then given up: bounded
    expect(took).toBeLessThan(30_000);
    expect((await admin.listGroups()).groups.map((g) => g.groupId)).toContain(group);
  }, 120_000);
});
