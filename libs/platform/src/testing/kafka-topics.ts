import { Kafka, logLevel } from 'kafkajs';

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
