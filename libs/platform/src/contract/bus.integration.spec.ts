import { Kafka, logLevel } from 'kafkajs';
import { KafkaBus } from '../bus/kafka';
import { MemoryBus } from '../bus/memory';
import { TEST_KAFKA_BUS } from '../testing/kafka-topics';
import { serviceOrSkip } from '../testing/services';
import { busContract } from './bus.contract.test';

/** The contract's own failing handler says "(test)"; anything else is shown. */
const onError = (err: unknown) => {
  if (!String((err as Error)?.message).includes('(test)')) console.error(err);
};

busContract('MemoryBus', { open: async () => new MemoryBus({ retryDelayMs: 50, onError }) });

const kafka = serviceOrSkip('kafka', 'Bus contract on Kafka');
if (kafka) {
  busContract('KafkaBus', {
    open: async () =>
      new KafkaBus({
        brokers: kafka.brokers,
        clientId: 'contract',
        partitions: 6,
        ...TEST_KAFKA_BUS,
        onError,
      }),
    cleanup: async ({ topics, groups }) => {
      const admin = new Kafka({ brokers: kafka.brokers, logLevel: logLevel.NOTHING }).admin();
      await admin.connect();
      try {
        await admin.deleteGroups(groups).catch(() => undefined);
        await admin.deleteTopics({ topics });
      } finally {
        await admin.disconnect();
      }
    },
  });
} else {
  describe.skip('Bus contract: KafkaBus (no Kafka)', () => it('needs Kafka', () => undefined));
}
