/**
 * The bus port: Kafka in the distributed deployment, an in-process bus in the embedded one.
 * Messages are keyed (run_id) and a key's messages are delivered in order to one consumer
 * of a group at a time. Offsets move only after the handler's promise resolves, so a
 * handler must store its effects before it returns (at-least-once delivery).
 */
export interface Topic<T> {
  readonly name: string;
  encode(value: T): Uint8Array;
  decode(bytes: Uint8Array): T;
}

export interface BusRecord<T> {
  key: string;
  value: T;
}

export interface BusBatch<T> {
  topic: string;
  partition: number;
  records: BusRecord<T>[];
  /** Call during a long batch so the group does not think this consumer died. */
  heartbeat(): Promise<void>;
  /**
   * Offered only by buses that can let a partition's next batch come before this one's effects
   * are stored (the embedded durable log). The handler hands it the promise of its last effects
   * (window saves still syncing) and may return without waiting for it: the batch's position,
   * and that of every later batch of the partition, moves only once it resolves; if it rejects,
   * the partition is delivered again from this batch. Absent: the handler waits for its effects.
   */
  defer?(stored: Promise<void>): void;
}

export interface SubscribeOptions {
  /** Consumers sharing a group split the partitions; each group sees every message. */
  group: string;
  /** Where a new group starts: the earliest kept message (default) or only new ones. */
  fromBeginning?: boolean;
  /**
   * The group is this subscriber's alone for as long as it runs (a name no other process uses:
   * ingest's notes listener): closing the subscription removes it, so none is left behind to
   * grow its lag. Kafka: the consumer group and its committed offsets are deleted once the
   * consumer left it (a failure is reported, not thrown). The in-process buses save no group
   * that starts at new records only anyway.
   */
  transient?: boolean;
}

export interface Subscription {
  /** Stops taking new batches, waits for the batch in hand, commits it, leaves the group. */
  close(): Promise<void>;
}

export interface Bus {
  publish<T>(topic: Topic<T>, records: BusRecord<T>[]): Promise<void>;
  subscribe<T>(topic: Topic<T>, opts: SubscribeOptions, handler: (batch: BusBatch<T>) => Promise<void>): Promise<Subscription>;
  /**
   * Records of `topic` accepted and not processed yet, as far as this process can tell (the
   * in-process buses: the slowest group's lag; Kafka: what waits to be sent to the broker).
   * Ingest refuses exports past a bound of it (back-pressure).
   */
  backlog?(topic: string): number;
  close(): Promise<void>;
}
