import { ConfigResourceTypes, Kafka, logLevel } from 'kafkajs';
import type { Logger } from '@neatroots/ports';
import { loadConfig } from '../config';
import { createMetrics } from '../ops';
import { requireService, uniqueName } from '../testing/services';
import { jsonTopic, type Rec } from '../contract/bus.contract.test';
import { DEFAULT_MAX_RECORD_BYTES, recordBytesFor } from '../bus/kafka';
import { distributedPlatform } from './platforms';

/**
 * The distributed services' Kafka takes a record as large as the largest span ingest accepts,
 * NEATROOTS_MAX_ITEM_CHARS included: a raised item limit raises the topics' max.message.bytes,
 * else ingest would accept spans the bus then refuses one by one.
 */
const SUITE = 'distributed record size';
const kafka = requireService('kafka', SUITE);
const quiet: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {}, child: () => quiet };

(kafka ? describe : describe.skip)(SUITE, () => {
  const admin = new Kafka({ brokers: kafka ?? ['127.0.0.1:9'], logLevel: logLevel.NOTHING }).admin();
  const topics: string[] = [];
  beforeAll(() => admin.connect());
  afterAll(async () => {
    await admin.deleteTopics({ topics }).catch(() => undefined);
    await admin.disconnect();
  });

  const maxMessageBytes = async (name: string) => {
    const d = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name }] });
    return Number(d.resources[0].configEntries.find((e) => e.configName === 'max.message.bytes')?.configValue);
  };

  async function topicFor(itemChars?: number): Promise<number> {
    const config = loadConfig({
      NEATROOTS_KAFKA_BROKERS: kafka!.join(','),
      NEATROOTS_TOPIC_PREFIX: uniqueName('recsize'),
      ...(itemChars ? { NEATROOTS_MAX_ITEM_CHARS: String(itemChars) } : {}),
    });
    const platform = distributedPlatform({ config, log: quiet, metrics: createMetrics('t'), name: 'probe' });
    try {
      const name = uniqueName('it_recsize');
      topics.push(name);
      await platform.bus().publish(jsonTopic<Rec>(name), [{ key: 'r', value: { k: 'r', i: 0 } }]);
      return await maxMessageBytes(name);
    } finally {
      await platform.close();
    }
  }

  it('creates topics for the largest item NEATROOTS_MAX_ITEM_CHARS lets through, and never below the default', async () => {
    const raised = 6 * 1024 * 1024;
    expect(await topicFor(raised)).toBeGreaterThanOrEqual(recordBytesFor({ maxItemChars: raised }));
    expect(await topicFor()).toBeGreaterThanOrEqual(DEFAULT_MAX_RECORD_BYTES);
    expect(await topicFor(64 * 1024)).toBeGreaterThanOrEqual(DEFAULT_MAX_RECORD_BYTES);
  }, 60_000);
});
