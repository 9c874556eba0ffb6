import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Kafka, logLevel, type Admin } from 'kafkajs';
import { makeTopics } from '@neatroots/messages';
import { deleteKafkaTopics, KafkaBus, loadConfig, loadModelConfig, requireService, silentLogger, uniqueName, until } from '@neatroots/platform';
import { serve, type Served } from './serve';

/**
 * Ingest's notes listener is a Kafka consumer group of the process's own (`<prefix>.ingest-notes-
 * <host>-<pid>-<random>`: every replica hands out every note), a new name at each start. It used
 * to stay on the broker after the process stopped, with its committed offsets and no member,
 * until offsets.retention.minutes (7 days): one more group at each start or rollout, each with a
 * lag that grows as notes are published, which broker-side lag monitors report. A stop now
 * deletes it.
 */
const SUITE = 'ingest: the notes consumer group';
const kafka = requireService('kafka', SUITE);
const maybe = kafka ? describe : describe.skip;

maybe(SUITE, () => {
  const prefix = uniqueName('notesgrp');
  const topics = makeTopics(prefix);
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'notes-group-'));
  let admin: Admin;
  let bus: KafkaBus;
  let served: Served | undefined;

  beforeAll(async () => {
    admin = new Kafka({ clientId: 'notes-group-test', brokers: kafka!, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    bus = new KafkaBus({ brokers: kafka!, clientId: 'notes-group-test', logLevel: 'error', partitions: 2 });
  });

  afterAll(async () => {
    await served?.close();
    await bus?.close();
    await admin?.disconnect();
    await deleteKafkaTopics(kafka!, prefix);
    fs.rmSync(home, { recursive: true, force: true });
  });

  const notesGroups = async () => (await admin.listGroups()).groups.map((g) => g.groupId).filter((g) => g.startsWith(`${prefix}.ingest-notes-`));

  it('serve --target ingest: its group holds committed offsets while it runs, and is gone once it stopped', async () => {
    const config = loadConfig({
      NEATROOTS_HOME: home,
      NEATROOTS_KAFKA_BROKERS: kafka!.join(','),
      NEATROOTS_TOPIC_PREFIX: prefix,
      NEATROOTS_PARTITIONS: '2',
      NEATROOTS_OTLP_PORT: '0',
      NEATROOTS_GRPC_PORT: '0',
      NEATROOTS_OTLP_HTTP_PORT: '0',
      NEATROOTS_ADMIN_PORT: '0',
      NEATROOTS_SERVICE_PORT: '0',
    });
    served = await serve('ingest', config, loadModelConfig({}), silentLogger);
    const [group, ...others] = await notesGroups();
    expect([group, others]).toEqual([expect.stringMatching(new RegExp(`^${prefix}\\.ingest-notes-.+-${process.pid}-[0-9a-f]{8}$`)), []]);
    // A note for no one here: taken, and its offset committed, as a live deployment's would be.
    await bus.publish(topics.notes, [{ key: 'r1', value: { id: 'n1', project: 'p', run_id: 'r1', check_id: 'c', finding_id: 'f1', kind: 'note', title: 't', text: 'x', at_ms: Date.now() } }]);
    await until('the notes group to commit an offset', async () => {
      const [partitions] = (await admin.fetchOffsets({ groupId: group, topics: [topics.notes.name] })).map((t) => t.partitions);
      return partitions?.some((p) => Number(p.offset) > 0);
    }, 60_000);

    await served.close();
    served = undefined;
    expect(await notesGroups()).toEqual([]);
  }, 120_000);
});
