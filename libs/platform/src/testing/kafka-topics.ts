import { Kafka, logLevel } from 'kafkajs';
import type { KafkaBusOptions } from '../bus/kafka';

/**
 * Deletes the Kafka topics named `${prefix}.*` that a test or bench run made: each partition
 * left on the broker makes every later start of it slower (it loads them all before it opens
 * its port). A failure is written to stderr, not thrown: the run is over.
 */
export async function deleteKafkaTopics(brokers: string[], prefix: string): Promise<void> {
  const admin = new Kafka({ clientId: 'neatroots-cleanup', brokers, logLevel: logLevel.NOTHING }).admin();
  try {
    await admin.connect();
    const topics = (await admin.listTopics()).filter((t) => t.startsWith(`${prefix}.`));
    if (topics.length > 0) await admin.deleteTopics({ topics, timeout: 30_000 });
  } catch (e) {
    process.stderr.write(`could not delete the topics ${prefix}.*: ${(e as Error).message}\n`);
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/**
 * A test's KafkaBus timings: a group's joins and rebalances take a fraction of a second, a fetch
 * waits at most 100 ms, a failed handler is tried again after 100 ms; errors only in the log.
 */
export const TEST_KAFKA_BUS = {
  sessionTimeout: 6_000,
  rebalanceTimeout: 6_000,
  heartbeatInterval: 300,
  maxWaitTimeInMs: 100,
  retryDelayMs: 100,
  logLevel: 'error',
} as const satisfies Partial<KafkaBusOptions>;
