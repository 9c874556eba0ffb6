import { KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError } from 'kafkajs';
import { producerStateLost } from './kafka';

// kafkajs's own decoding of a broker's error code (what a produce response carries).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { createErrorFromCode } = require('kafkajs/src/protocol/error') as { createErrorFromCode(code: number): KafkaJSProtocolError };

describe('KafkaBus: a producer whose state the broker lost', () => {
  it('is recognised by the broker error, also as the cause of a retries-exceeded error; other failures are not', () => {
    // 45 OUT_OF_ORDER_SEQUENCE_NUMBER (seen after a broker restart in the fault test), 59 UNKNOWN_PRODUCER_ID, 47 INVALID_PRODUCER_EPOCH
    for (const code of [45, 59, 47]) {
      const broker = createErrorFromCode(code);
      expect(producerStateLost(broker)).toBe(true);
      expect(producerStateLost(new KafkaJSNumberOfRetriesExceeded(broker, { retryCount: 5, retryTime: 2000 }))).toBe(true);
    }
    // NOT_LEADER_FOR_PARTITION, a connection refused, a plain error: the producer is still good
    expect(producerStateLost(createErrorFromCode(6))).toBe(false);
    expect(producerStateLost(new KafkaJSNumberOfRetriesExceeded(new Error('connect ECONNREFUSED'), { retryCount: 5, retryTime: 2000 }))).toBe(false);
    expect(producerStateLost(new Error('boom'))).toBe(false);
    expect(producerStateLost(undefined)).toBe(false);
  });
});
