import { promisify } from 'node:util';
import { gzip, unzip } from 'node:zlib';
// Before kafkajs: puts faster copies of two of its producer helpers in its place (see the module).
import { keyPartitioner } from './kafkajs-parts';
import {
  CompressionCodecs,
  CompressionTypes,
  ConfigResourceTypes,
  ConfigSource,
  Kafka,
  Partitioners,
  logLevel as KafkaLogLevel,
  type Admin,
  type ConsumerRunConfig,
  type EachBatchPayload,
  type LogEntry,
  type Message,
  type Producer,
} from 'kafkajs';
import { causes, deadLetterTopic, type Bus, type BusBatch, type BusRecord, type DeadLetter, type SubscribeOptions, type Subscription, type Topic } from '@neatroots/ports';
import { PACK_HEADER, PACK_VERSION, packValues, planPacks, unpackValues } from './pack';
import { busDeadLetterSink, guardHandler, type DeadLetterBusOptions } from './set-aside';

/**
 * The bus on Apache Kafka (kafkajs), for the distributed deployment. It keeps the guarantees
 * MemoryBus documents, on a real broker:
 *
 * - Records are keyed (run_id): the partitioner (kafkajs's default's partitions, Java-compatible
 *   murmur2, in 32-bit arithmetic: keyPartitioner in kafkajs-parts.ts) puts a key on one partition, so
 *   a run's spans and its run_end stay in order.
 * - Topics are created before first use with the configured partition count (never left to
 *   broker auto-creation, whose partition count is whatever the broker says), and with a
 *   topic-level max.message.bytes that holds the largest record (`maxRecordBytes`).
 * - A record too large for the bus is its publisher's to refuse, never retried: a
 *   RecordTooLargeError names it (ingest rejects that item alone).
 * - Publishing: kafkajs has no linger, so publish() calls are gathered here and sent with one
 *   sendBatch when `maxBatchRecords` / `maxBatchBytes` are reached or the oldest waiting record
 *   has waited `lingerMs`. One send is in flight at a time (with maxInFlightRequests 1 on an
 *   idempotent producer), so records reach the log in the order publish() was called. Each
 *   caller's promise resolves when all of ITS records are acknowledged by the broker (acks=-1)
 *   and rejects when their send fails, so ingest can answer UNAVAILABLE and the agent retries.
 * - Packs (./pack.ts): the records of one key in one publish() travel as one Kafka record
 *   (header `neatroots-pack`), within `maxBatchBytes`, so kafkajs encodes a record per run
 *   and export instead of per span. Consumers unpack it into the same records, in order, in
 *   the same handler batch: the offset moves only after all of them were handled, and a pack
 *   read again is handed over whole again. Records without the header (written before packs,
 *   or with `pack: false`) are read as single records.
 * - Consuming: a consumer group with eachBatch, auto-commit off. A fetch brings at most
 *   `maxBytes` (`maxBytesPerPartition` of a partition), and each partition batch goes to the
 *   handler in parts of at most `maxHandlerBytes` of decoded record values: for each part the
 *   records are decoded, the handler runs, and only after it resolved (its effects are stored)
 *   is the part's offset resolved, so memory is bounded by these settings, not the backlog. Resolved offsets are committed at the end of a batch once
 *   `commitIntervalMs` has passed since the last commit (every partition resolved since goes in
 *   that one commit), and always when the subscription closes. Commits are sent only from
 *   within a batch kafkajs handed over, or at close: never beside its fetch loop, so none goes
 *   through a consumer kafkajs is restarting. A crash re-reads at most what was handled within
 *   the interval (at-least-once, as a rebalance does). A handler that throws is reported, and
 *   after `retryDelayMs` the batch is read again from the same offset: nothing is skipped.
 *   Heartbeats are sent automatically while a handler runs (and BusBatch.heartbeat() is there
 *   for handlers that want to), so a long batch does not get the member evicted.
 * - close() of a subscription stops fetching, lets the batch in hand finish and commit, leaves
 *   the group: nothing is skipped, nothing committed is read again.
 * - Lag (`onLag`): every `lagIntervalMs` the bus asks the broker, through its one admin client,
 *   each topic's partition ends and each of its groups' committed offsets, and tells the sum
 *   of the differences (KafkaLagInfo), whether batches arrive or not: a group whose handler
 *   keeps failing, or blocks, reads as falling behind.
 * - Rebalances: only processed offsets are ever committed. A batch whose partition moved while
 *   it was processed may fail to commit; the new owner then reads it again (at-least-once:
 *   consumers are idempotent, e.g. findings have deterministic ids).
 */
export interface KafkaBusOptions extends DeadLetterBusOptions {
  brokers: string[];
  clientId?: string;
  /** Partition count of the topics this bus creates (existing topics are left alone). Default 6. */
  partitions?: number;
  /** Replication factor of created topics; -1 uses the broker's default.replication.factor. Default -1. */
  replicationFactor?: number;
  /** Records of one key in one publish() go as one Kafka record (a pack). Default true. */
  pack?: boolean;
  /**
   * Compression of the record batches sent: 'gzip' (at GZIP_LEVEL) or 'none'. Default 'gzip':
   * measured on this project's 2-core machine with the broker on it (docs/performance.md,
   * bench/distributed.js, six alternated pairs), the broker's CPU about halved, the receipt to
   * finding p99 lower in every pair and the CPU of all processes together within the noise
   * (-1.8 to +1.2 s of 13-16 s). The rule engine's question tasks (about 20 KB each, the
   * run's spans as evidence) are most of the bytes on the bus, and compress 13 times. Sends
   * smaller than `compressMinBytes` go uncompressed all the same.
   */
  compression?: 'none' | 'gzip';
  /**
   * A send smaller than this (keys and values, before compression) goes uncompressed whatever
   * `compression` says. A small send is a light load's, where each publish waits for its
   * compression on the thread pool and every consumer for its decompression, and the bytes saved
   * are few; the large sends of a heavy load are compressed. Default 64 KiB; 0 compresses every
   * send.
   */
  compressMinBytes?: number;
  /**
   * A send goes out when this many Kafka records (packs count one) wait. Default 5000: kafkajs's idempotent producer
   * sends one request per broker at a time (it holds a broker lock across the request), so
   * throughput comes from the size of each request, not from overlapping them. On this
   * project's 2-core test machine (broker on the same cores) 2000 gave ~12k records/s
   * published and consumed (one process), 5000 ~20-30k/s. Under light load the linger decides.
   */
  maxBatchRecords?: number;
  /**
   * ...or when this many bytes (keys + values) wait. Default 768 KiB: a send of many records
   * stays under a broker's default 1 MiB message.max.bytes per partition batch. A single record
   * larger than this goes alone in its send (up to `maxRecordBytes`).
   */
  maxBatchBytes?: number;
  /**
   * The largest record (its key and encoded value) this bus publishes. The topics it creates
   * get a topic-level `max.message.bytes` that holds one (MAX_RECORD_OVERHEAD more), whatever
   * the broker's `message.max.bytes`, and topics that exist with a smaller one are raised at
   * first use. A record larger than this is refused before anything of its publish() is sent,
   * with a RecordTooLargeError naming it; so is one the broker refuses as too large
   * (MESSAGE_TOO_LARGE). Default DEFAULT_MAX_RECORD_BYTES: the largest span or run event ingest
   * accepts under the default limits (recordBytesFor).
   */
  maxRecordBytes?: number;
  /** ...or when the oldest waiting record has waited this long. Default 5 ms. */
  lingerMs?: number;
  /**
   * Retries of broker requests (producer, admin, connection) before a publish() rejects.
   * Bounded on purpose: with kafkajs's idempotent default (retry forever) a publish during a
   * Kafka outage would never answer. Default 5 (about 3 s with the default times).
   */
  retry?: { retries?: number; initialRetryTime?: number; maxRetryTime?: number };
  connectionTimeout?: number;
  requestTimeout?: number;
  /** Consumer group session timeout (ms). Default 30000. */
  sessionTimeout?: number;
  /** Default 60000. */
  rebalanceTimeout?: number;
  /** Default 3000. */
  heartbeatInterval?: number;
  /** How long a fetch waits for records; also bounds how long close() waits for an idle fetch. Default 500. */
  maxWaitTimeInMs?: number;
  /**
   * The most bytes (as stored: compressed) one fetch of a consumer brings, all its partitions
   * together (Kafka's fetch.max.bytes). A consumer holds one fetch at a time, decompressed: with
   * gzip about 10 to 20 times this in memory. Default 2 MiB (kafkajs's own: 10 MiB). Kafka sends
   * a record batch larger than this alone all the same, so nothing is ever stuck.
   */
  maxBytes?: number;
  /** ...and of one partition (max.partition.fetch.bytes). Default 512 KiB (kafkajs's own: 1 MiB). */
  maxBytesPerPartition?: number;
  /**
   * A partition's fetched records are handed to the handler in parts of at most this many
   * bytes of record values, decompressed and unpacked (a part holds one record at least, and a
   * pack whole): each part is decoded only when its turn comes, and its offset resolved once it
   * is handled. What a consumer holds decoded at once is then this times the partitions it
   * handles at once (`partitionsConsumedConcurrently`), whatever the backlog. Default 2 MiB.
   */
  maxHandlerBytes?: number;
  /** The broker answers a fetch once this many bytes wait (or maxWaitTimeInMs passed). Default 1. */
  minBytes?: number;
  /** Partition batches handled at once per subscription. A run's order is per partition anyway. Default 2. */
  partitionsConsumedConcurrently?: number;
  /** Wait after a failed batch before it is read again. Default 500. */
  retryDelayMs?: number;
  /**
   * Handled offsets are committed at the end of a batch once this long has passed since the
   * last commit; 0 commits after every batch. Each commit is a round trip the next fetch waits
   * for, so committing every batch holds the consumer's whole fetch behind it. Default 500.
   */
  commitIntervalMs?: number;
  /** kafkajs's own log lines at or above this level. Default 'warn'. */
  logLevel?: 'nothing' | 'error' | 'warn' | 'info' | 'debug';
  /** Where kafkajs's lines go (the process's logger). Default: the console. */
  log?: KafkaLogSink;
  /** A failed batch (retried), an undecodable record (skipped), a crashed consumer. Default: console.error. */
  onError?: (err: unknown, where: { topic: string; group?: string; partition?: number }) => void;
  /** Called after each committed batch: for metrics (records consumed). */
  onBatch?: (info: KafkaBatchInfo) => void;
  /** Called when the bus starts again a consumer kafkajs had stopped for good: for metrics. */
  onConsumerRestart?: (where: { topic: string; group: string }) => void;
  /** Called once a subscription runs: for metrics (its counters start at 0). */
  onSubscribe?: (where: { topic: string; group: string }) => void;
  /**
   * Told every `lagIntervalMs` of each (topic, group) this bus consumes: the group's lag as the
   * broker has it (KafkaLagInfo), whether batches arrive or not. Without it nothing is asked.
   */
  onLag?: (info: KafkaLagInfo) => void;
  /** How often the lags are read from the broker (two admin requests per topic and group). Default 10000. */
  lagIntervalMs?: number;
}

export interface KafkaBatchInfo {
  topic: string;
  group: string;
  partition: number;
  records: number;
  ms: number;
}

/**
 * A consumer group's lag on a topic as the broker has it: summed over the topic's partitions,
 * the partition's end (high watermark) less the group's committed offset there. Counted in
 * Kafka messages: with packs (the default) a message carries the records of one key (a run) in
 * one publish(), as many as fit in `maxBatchBytes`; without, one record. What was handled and
 * not committed yet (at most `commitIntervalMs` of it, or a batch a handler holds) counts.
 */
export interface KafkaLagInfo {
  topic: string;
  group: string;
  /** Kafka messages of the topic the group has not committed yet. */
  lag: number;
}

/** Counters since the bus was created (tests, metrics). */
export interface KafkaBusStats {
  /** Records acknowledged by the broker. */
  published: number;
  /** Kafka records they travelled in (a pack is one). */
  messages: number;
  /** sendBatch calls that succeeded. */
  sends: number;
  /** ...of which compressed (at least compressMinBytes). */
  compressedSends: number;
  /** Records handed to handlers whose batch was then committed. */
  consumed: number;
  /** Handler failures (each one is retried). */
  handlerErrors: number;
  /** Producers dropped after a failed send (a new one took over). */
  producerResets: number;
  /** Records whose handler kept failing, set aside on the dead-letter topic. */
  setAside: number;
  /** Records (or packs whose framing is damaged) that could not be decoded (set aside). */
  decodeErrors: number;
  /** Consumers kafkajs had stopped for good (an error it does not retry) started again by the bus. */
  consumerRestarts: number;
}

interface Owner {
  left: number;
  failed: boolean;
  resolve(): void;
  reject(err: unknown): void;
}

interface Chunk {
  topic: string;
  messages: Message[];
  /** For each message, the indexes of the publish()'s records it carries, and its size. */
  carried: { indexes: number[]; bytes: number }[];
  /** The publish()'s records these messages carry (a pack carries several). */
  records: number;
  bytes: number;
  owner: Owner;
  /** When it was queued: the linger counts from the oldest waiting chunk. */
  at: number;
}

/**
 * kafkajs's gzip compresses at zlib's default level (6). Measured on this project's records
 * (question tasks of ~20 KB and packs of spans, batches of 500 KB): level 6 costs about 5 ms a
 * MB, level 3 about 2 ms a MB, the same as the CRC-32C kafkajs computes in JavaScript over
 * every byte it sends, and still shrinks them 10-15 times (level 6: 12-22 times). So at level
 * 3 compressing costs the producer about what it saves in checksumming and copying, and the
 * broker and every consumer handle a tenth of the bytes. Registered once for the process
 * (kafkajs keeps its codecs in one table); reading is any gzip, whatever its level.
 */
export const GZIP_LEVEL = 3;
const gzipAsync = promisify(gzip);
const unzipAsync = promisify(unzip);
CompressionCodecs[CompressionTypes.GZIP] = () => ({
  compress: (encoder: { buffer: Buffer }) => gzipAsync(encoder.buffer, { level: GZIP_LEVEL }),
  decompress: (buffer: Buffer) => unzipAsync(buffer),
});

/**
 * The largest record ingest can publish for an item of at most `maxItemChars` characters
 * (NEATROOTS_MAX_ITEM_CHARS; string lengths as JavaScript counts them): a character takes at
 * most 3 bytes in UTF-8, and the envelope (project, ids, names, times, which the item's bound
 * does not count) at most ENVELOPE_BYTES more. JSON escapes a control character (or a lone
 * surrogate) to six: an item made mostly of those can pass this, and is then refused alone
 * (RecordTooLargeError) rather than taken. A process whose item limit is not the default passes
 * this as KafkaBusOptions.maxRecordBytes.
 */
export function recordBytesFor(limits: { maxItemChars: number }): number {
  return 3 * limits.maxItemChars + ENVELOPE_BYTES;
}
const ENVELOPE_BYTES = 64 * 1024;
/** NEATROOTS_MAX_ITEM_CHARS's default (4 Mi characters): a record of up to 12 MiB + 64 KiB. */
export const DEFAULT_MAX_RECORD_BYTES = recordBytesFor({ maxItemChars: 4 * 1024 * 1024 });
/** KafkaBusOptions.maxBytes's default: one fetch of a consumer, all partitions (compressed bytes). */
export const DEFAULT_FETCH_MAX_BYTES = 2 * 1024 * 1024;
/** KafkaBusOptions.maxBytesPerPartition's default (compressed bytes). */
export const DEFAULT_PARTITION_FETCH_MAX_BYTES = 512 * 1024;
/** KafkaBusOptions.maxHandlerBytes's default: a part of a partition's batch handed over at once (decoded bytes). */
export const DEFAULT_HANDLER_MAX_BYTES = 2 * 1024 * 1024;
/** What a record batch adds around its records (batch header, a record's framing and headers). */
export const MAX_RECORD_OVERHEAD = 4 * 1024;

/**
 * A publish() refused because records of it are too large for the bus: larger than its
 * `maxRecordBytes` (nothing of the publish was sent), or refused by the broker as too large
 * (MESSAGE_TOO_LARGE; the rest of the publish may have been sent). Not worth retrying:
 * `indexes` are the publish()'s records that will never fit, each `bytes` long, against `limit`.
 */
export class RecordTooLargeError extends Error {
  readonly code = 'RECORD_TOO_LARGE';
  constructor(
    readonly records: { index: number; bytes: number }[],
    readonly limit: number,
    readonly topic: string,
    readonly byBroker: boolean,
  ) {
    super(
      `${records.length === 1 ? 'a record' : `${records.length} records`} of ${records.map((r) => r.bytes).join(', ')} bytes ` +
        `${byBroker ? `refused by the broker as too large for topic ${topic} (the bus's limit is ${limit} bytes)` : `larger than the ${limit} bytes a record on ${topic} may have`}`,
    );
    this.name = 'RecordTooLargeError';
  }
}

const LIMITED_RETRIES_WARNING = 'Limiting retries for the idempotent producer may invalidate EoS guarantees';

const LEVELS: Record<NonNullable<KafkaBusOptions['logLevel']>, KafkaLogLevel> = {
  nothing: KafkaLogLevel.NOTHING,
  error: KafkaLogLevel.ERROR,
  warn: KafkaLogLevel.WARN,
  info: KafkaLogLevel.INFO,
  debug: KafkaLogLevel.DEBUG,
};

/** Group membership changes answered by the coordinator: routine, not errors. */
const REBALANCE_RESPONSE = /rebalanc|generation|not aware of this member|member id/i;

export interface KafkaLogSink {
  error(msg: string): void;
  warn(msg: string): void;
  info(msg: string): void;
  debug?(msg: string): void;
}

const consoleSink: KafkaLogSink = { error: (m) => console.error(m), warn: (m) => console.warn(m), info: (m) => console.log(m) };

/** One line per kafkajs log entry. kafkajs filters by level before calling this. */
function logCreator(configured: KafkaLogLevel, sink: KafkaLogSink = consoleSink) {
  return ({ namespace, level, log }: LogEntry) => {
    const { message, timestamp: _t, logger: _l, ...extra } = log as LogEntry['log'] & { logger?: string };
    // Retries are bounded on purpose (see KafkaBusOptions.retry): at-least-once with
    // idempotent consumers is the guarantee, not exactly-once.
    if (message === LIMITED_RETRIES_WARNING) return;
    // kafkajs logs every error response as an error, including "rebalancing, rejoin" answers
    // to heartbeats while consumers come and go (the consumer's own warning says it once), and
    // CreateTopics answers "already exists" each time a process starts; other creation errors
    // reach the caller of publish/subscribe anyway.
    let effective = level;
    const error = String((extra as { error?: unknown }).error);
    if (namespace === 'Connection' && message.startsWith('Response ') && (REBALANCE_RESPONSE.test(error) || message.startsWith('Response CreateTopics'))) {
      effective = KafkaLogLevel.INFO;
    }
    if (effective > configured) return;
    const detail = Object.keys(extra).length ? ` ${JSON.stringify(extra)}` : '';
    const line = `kafkajs [${namespace}] ${message}${detail}`;
    if (effective === KafkaLogLevel.ERROR) sink.error(line);
    else if (effective === KafkaLogLevel.WARN) sink.warn(line);
    else sink.info(line);
  };
}

export class KafkaBus implements Bus {
  readonly stats: KafkaBusStats = { published: 0, messages: 0, sends: 0, compressedSends: 0, consumed: 0, handlerErrors: 0, decodeErrors: 0, setAside: 0, producerResets: 0, consumerRestarts: 0 };

  private readonly kafka: Kafka;
  private readonly partitions: number;
  private readonly replicationFactor: number;
  private readonly maxBatchRecords: number;
  private readonly maxBatchBytes: number;
  private readonly maxRecordBytes: number;
  private readonly lingerMs: number;
  private readonly maxFetchBytes: number;
  private readonly maxPartitionFetchBytes: number;
  private readonly maxHandlerBytes: number;
  private readonly commitIntervalMs: number;
  private readonly retryDelayMs: number;
  private readonly pack: boolean;
  private readonly compression: CompressionTypes;
  private readonly compressMinBytes: number;
  private readonly onError: NonNullable<KafkaBusOptions['onError']>;

  private producerP: Promise<Producer> | undefined;
  private adminP: Promise<Admin> | undefined;
  /** The admin client once connected (the lags are read through it, never connecting one). */
  private adminConnected: Admin | undefined;
  private readonly topics = new Map<string, Promise<void>>();
  private readonly subscriptions = new Set<Subscription>();
  /** What this bus consumes, by `topic\0group`: whose lag onLag is told of. */
  private readonly consuming = new Map<string, { topic: string; group: string; fromBeginning: boolean; subscriptions: number }>();
  private lagTimer: NodeJS.Timeout | undefined;
  private lagReading: Promise<void> | undefined;

  private queue: Chunk[] = [];
  /** Records (what backlog() tells) and Kafka messages (what a send's size counts) waiting. */
  private queuedRecords = 0;
  private queuedMessages = 0;
  private queuedBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly opts: KafkaBusOptions) {
    if (!opts.brokers.length) throw new Error('KafkaBus needs at least one broker');
    this.partitions = opts.partitions ?? 6;
    this.replicationFactor = opts.replicationFactor ?? -1;
    this.maxBatchRecords = Math.max(1, opts.maxBatchRecords ?? 5000);
    this.maxBatchBytes = Math.max(1024, opts.maxBatchBytes ?? 768 * 1024);
    this.maxRecordBytes = Math.max(1024, opts.maxRecordBytes ?? DEFAULT_MAX_RECORD_BYTES);
    this.lingerMs = Math.max(0, opts.lingerMs ?? 5);
    this.maxFetchBytes = Math.max(1024, opts.maxBytes ?? DEFAULT_FETCH_MAX_BYTES);
    this.maxPartitionFetchBytes = Math.min(this.maxFetchBytes, Math.max(1024, opts.maxBytesPerPartition ?? DEFAULT_PARTITION_FETCH_MAX_BYTES));
    this.maxHandlerBytes = Math.max(1, opts.maxHandlerBytes ?? DEFAULT_HANDLER_MAX_BYTES);
    this.commitIntervalMs = Math.max(0, opts.commitIntervalMs ?? 500);
    this.retryDelayMs = opts.retryDelayMs ?? 500;
    this.pack = opts.pack ?? true;
    this.compression = opts.compression === 'none' ? CompressionTypes.None : CompressionTypes.GZIP;
    this.compressMinBytes = Math.max(0, opts.compressMinBytes ?? 64 * 1024);
    this.onError =
      opts.onError ??
      ((err, w) =>
        console.error(`bus: ${w.topic}${w.group ? `/${w.group}` : ''}${w.partition !== undefined ? ` partition ${w.partition}` : ''}:`, err));
    this.kafka = new Kafka({
      brokers: opts.brokers,
      clientId: opts.clientId ?? 'neatroots',
      connectionTimeout: opts.connectionTimeout,
      requestTimeout: opts.requestTimeout,
      retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000, ...opts.retry },
      logLevel: LEVELS[opts.logLevel ?? 'warn'],
      logCreator: (level: KafkaLogLevel) => logCreator(level, opts.log),
    });
  }

  // ---- topics ---------------------------------------------------------------------------

  private admin(): Promise<Admin> {
    if (!this.adminP) {
      const admin = this.kafka.admin({ retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000, ...this.opts.retry } });
      this.adminP = admin.connect().then(() => (this.adminConnected = admin));
      this.adminP.catch(() => (this.adminP = undefined));
    }
    return this.adminP;
  }

  /** Creates the topic once per process (idempotent on the broker too: an existing topic is kept). */
  ensureTopic(name: string): Promise<void> {
    let p = this.topics.get(name);
    if (!p) {
      p = this.createTopic(name);
      this.topics.set(name, p);
      p.catch(() => this.topics.delete(name));
    }
    return p;
  }

  private async createTopic(name: string): Promise<void> {
    const admin = await this.admin();
    // kafkajs waits for the new topic's leaders but gives up on a broker that does not serve its
    // metadata yet (UNKNOWN_TOPIC_OR_PARTITION, seen on a broker just started): asked again,
    // the topic exists, and its metadata is read the same way.
    const maxMessageBytes = String(this.topicMaxMessageBytes());
    const created = await whileRetriable(() =>
      admin.createTopics({
        topics: [
          {
            topic: name,
            numPartitions: this.partitions,
            replicationFactor: this.replicationFactor,
            configEntries: [{ name: 'max.message.bytes', value: maxMessageBytes }],
          },
        ],
        waitForLeaders: true,
      }),
    );
    if (!created) {
      const md = await whileRetriable(() => admin.fetchTopicMetadata({ topics: [name] }));
      const n = md.topics[0]?.partitions.length;
      // Not changed here: adding partitions moves keys to other partitions mid-run.
      if (n !== undefined && n !== this.partitions) {
        console.warn(`bus: topic ${name} exists with ${n} partitions (configured: ${this.partitions}); using it as it is`);
      }
      await this.raiseMaxMessageBytes(admin, name);
    }
  }

  /** The topic-level max.message.bytes that holds the largest record, or the largest send of many. */
  topicMaxMessageBytes(): number {
    return Math.max(this.maxRecordBytes, this.maxBatchBytes) + MAX_RECORD_OVERHEAD;
  }

  /**
   * A topic that exists (made by an older version, by hand, or by the broker) with a smaller
   * max.message.bytes than this bus's records need is raised to it; a larger one is kept.
   * Kafka's AlterConfigs sets a topic's whole configuration (kafkajs has no incremental
   * variant), so the topic's other settings of its own (retention, ...) are sent along unchanged.
   */
  private async raiseMaxMessageBytes(admin: Admin, name: string): Promise<void> {
    const want = this.topicMaxMessageBytes();
    const described = await whileRetriable(() =>
      admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name }] }),
    );
    const entries = described.resources[0]?.configEntries ?? [];
    const current = Number(entries.find((e) => e.configName === 'max.message.bytes')?.configValue);
    if (Number.isFinite(current) && current >= want) return;
    const own = entries
      .filter((e) => e.configSource === ConfigSource.TOPIC_CONFIG && !e.readOnly && !e.isSensitive && e.configName !== 'max.message.bytes')
      .map((e) => ({ name: e.configName, value: e.configValue }));
    await whileRetriable(() =>
      admin.alterConfigs({
        validateOnly: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name, configEntries: [...own, { name: 'max.message.bytes', value: String(want) }] }],
      }),
    );
    console.warn(`bus: topic ${name} had max.message.bytes ${Number.isFinite(current) ? current : '(unknown)'}; raised to ${want} for records of up to ${this.maxRecordBytes} bytes`);
  }

  // ---- publishing -----------------------------------------------------------------------

  private producer(): Promise<Producer> {
    if (!this.producerP) {
      const producer = this.kafka.producer({
        idempotent: true,
        // kafkajs: an idempotent producer keeps order only with one request in flight.
        maxInFlightRequests: 1,
        allowAutoTopicCreation: false,
        // Explicit, so kafkajs does not warn about the v2 default change: murmur2 like Java clients.
        createPartitioner: keyPartitioner(Partitioners.DefaultPartitioner),
        retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000, ...this.opts.retry },
      });
      this.producerP = producer.connect().then(() => producer);
      this.producerP.catch(() => (this.producerP = undefined));
    }
    return this.producerP;
  }

  /** Drops the producer (disconnected in the background); the next send starts another. */
  private resetProducer(): void {
    const old = this.producerP;
    this.producerP = undefined;
    this.stats.producerResets++;
    void old?.then((p) => p.disconnect()).catch(() => undefined);
  }

  async publish<T>(topic: Topic<T>, records: BusRecord<T>[]): Promise<void> {
    if (this.closed) throw new Error('bus is closed');
    if (!records.length) return;
    // Encode before waiting: a value that cannot be encoded is the caller's error, now.
    const values: Buffer[] = new Array(records.length);
    for (let i = 0; i < records.length; i++) {
      const bytes = topic.encode(records[i].value);
      values[i] = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }
    const { messages, counts, sizes, carried: carriedBy } = this.toMessages(records, values);
    // A record that no topic of this bus takes: refused now, before anything of the publish is sent.
    const tooLarge: { index: number; bytes: number }[] = [];
    for (let i = 0; i < records.length; i++) {
      const bytes = values[i].byteLength + Buffer.byteLength(records[i].key);
      if (bytes > this.maxRecordBytes) tooLarge.push({ index: i, bytes });
    }
    if (tooLarge.length) throw new RecordTooLargeError(tooLarge, this.maxRecordBytes, topic.name, false);
    await this.ensureTopic(topic.name);
    if (this.closed) throw new Error('bus is closed');
    return new Promise<void>((resolve, reject) => {
      const owner: Owner = { left: 0, failed: false, resolve, reject };
      // A large publish is cut into chunks a send can carry; its promise waits for all of them.
      let start = 0;
      while (start < messages.length) {
        let end = start;
        let bytes = 0;
        let n = 0;
        while (end < messages.length && end - start < this.maxBatchRecords && (end === start || bytes + sizes[end] <= this.maxBatchBytes)) {
          bytes += sizes[end];
          n += counts[end];
          end++;
        }
        owner.left++;
        this.enqueue({ topic: topic.name, messages: messages.slice(start, end), carried: carriedBy.slice(start, end), records: n, bytes, owner, at: Date.now() });
        start = end;
      }
      this.kick();
    });
  }

  /**
   * The Kafka messages of one publish(): a pack per key (records of a key in publish order,
   * each pack within maxBatchBytes), or one message per record with packing off. A key with a
   * single record goes as a plain record (no pack header to read).
   */
  private toMessages<T>(
    records: BusRecord<T>[],
    values: Buffer[],
  ): { messages: Message[]; counts: number[]; sizes: number[]; carried: { indexes: number[]; bytes: number }[] } {
    const messages: Message[] = [];
    const counts: number[] = [];
    const sizes: number[] = [];
    const carried: { indexes: number[]; bytes: number }[] = [];
    if (!this.pack) {
      for (let i = 0; i < records.length; i++) {
        messages.push({ key: records[i].key, value: values[i] });
        counts.push(1);
        sizes.push(values[i].byteLength + Buffer.byteLength(records[i].key) + 16);
        carried.push({ indexes: [i], bytes: values[i].byteLength + Buffer.byteLength(records[i].key) });
      }
      return { messages, counts, sizes, carried };
    }
    const keys = records.map((r) => r.key);
    // Room for the key, the header and the record's own framing inside a send's bytes.
    let keyMax = 0;
    for (const k of keys) keyMax = Math.max(keyMax, Buffer.byteLength(k));
    const plan = planPacks(keys, values.map((v) => v.byteLength), this.maxBatchBytes - keyMax - PACK_HEADER.length - 64);
    for (const { key, indexes } of plan) {
      const keyBytes = Buffer.byteLength(key);
      if (indexes.length === 1) {
        const value = values[indexes[0]];
        messages.push({ key, value });
        sizes.push(value.byteLength + keyBytes + 16);
        carried.push({ indexes, bytes: value.byteLength + keyBytes });
      } else {
        const value = packValues(indexes.map((i) => values[i]));
        messages.push({ key, value, headers: { [PACK_HEADER]: PACK_VERSION } });
        sizes.push(value.byteLength + keyBytes + PACK_HEADER.length + 32);
        carried.push({ indexes, bytes: value.byteLength + keyBytes });
      }
      counts.push(indexes.length);
    }
    return { messages, counts, sizes, carried };
  }

  private enqueue(c: Chunk): void {
    this.queue.push(c);
    this.queuedRecords += c.records;
    this.queuedMessages += c.messages.length;
    this.queuedBytes += c.bytes;
  }

  /** Sends now if a batch is full or the oldest record has lingered long enough; else arms the timer. */
  private kick(now = false): void {
    if (this.sending || !this.queue.length) return;
    const full = this.queuedMessages >= this.maxBatchRecords || this.queuedBytes >= this.maxBatchBytes;
    const waited = Date.now() - this.queue[0].at;
    if (full || waited >= this.lingerMs || this.closed || now) {
      if (this.timer) {
        clearTimeout(this.timer);
        this.timer = undefined;
      }
      this.sending = this.sendOne().finally(() => {
        this.sending = undefined;
        this.kick();
      });
    } else if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.kick();
      }, this.lingerMs - waited);
    }
  }

  private async sendOne(): Promise<void> {
    const take: Chunk[] = [];
    let records = 0;
    let messages = 0;
    let bytes = 0;
    while (this.queue.length) {
      const c = this.queue[0];
      if (take.length && (messages + c.messages.length > this.maxBatchRecords || bytes + c.bytes > this.maxBatchBytes)) break;
      this.queue.shift();
      this.queuedRecords -= c.records;
      this.queuedMessages -= c.messages.length;
      this.queuedBytes -= c.bytes;
      // The rest of a failed publish is not sent: its caller retries the whole of it.
      if (c.owner.failed) continue;
      take.push(c);
      records += c.records;
      messages += c.messages.length;
      bytes += c.bytes;
    }
    if (!take.length) return;
    const byTopic = new Map<string, Message[]>();
    for (const c of take) {
      const list = byTopic.get(c.topic);
      if (list) for (const m of c.messages) list.push(m);
      else byTopic.set(c.topic, c.messages.slice());
    }
    const compression = bytes >= this.compressMinBytes ? this.compression : CompressionTypes.None;
    try {
      const producer = await this.producer();
      await producer.sendBatch({ acks: -1, compression, topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })) });
    } catch (err) {
      // Any failed send ends this producer; the next publish (the caller's retry) gets a new
      // producer id from a new one. A send whose answer was lost (a timeout, a connection closed
      // after the broker wrote it) may be in the log, and kafkajs winds its sequence number back:
      // the next, different send would reuse it, and the broker, taking it for a retry of the one
      // it has, would answer OK and write nothing, so an acknowledged publish would be lost. And
      // when the broker no longer knows this producer (its state lost in a restart), every later
      // send of it would fail the same way, forever. Failures are rare; a new producer is cheap.
      this.resetProducer();
      // The broker refused a message as too large: a send of one message larger than a send of
      // many may be (only a record too big for a pack travels so) names its record; sending it
      // again would fail alike, forever. A send of many refused so is a broker configured below
      // maxBatchBytes: an error like any other.
      const alone = messageTooLarge(err) && take.length === 1 && take[0].messages.length === 1 && bytes > this.maxBatchBytes;
      for (const c of take) {
        if (!c.owner.failed) {
          c.owner.failed = true;
          c.owner.reject(
            alone
              ? new RecordTooLargeError(
                  c.carried[0].indexes.map((index) => ({ index, bytes: c.carried[0].bytes })),
                  this.maxRecordBytes,
                  c.topic,
                  true,
                )
              : err,
          );
        }
      }
      return;
    }
    this.stats.sends++;
    if (compression !== CompressionTypes.None) this.stats.compressedSends++;
    this.stats.published += records;
    this.stats.messages += messages;
    for (const c of take) {
      if (--c.owner.left === 0 && !c.owner.failed) c.owner.resolve();
    }
  }

  /**
   * Records waiting to be sent to the broker (all topics): what this process holds in memory.
   * The consumers' backlog is the broker's, on its disk.
   */
  backlog(): number {
    return this.queuedRecords;
  }

  /** Resolves when everything published so far was sent (acknowledged or failed). */
  async flush(): Promise<void> {
    while (this.queue.length || this.sending) {
      if (!this.sending) this.kick(true); // now, not after the linger
      await this.sending;
    }
  }

  // ---- consuming ------------------------------------------------------------------------

  async subscribe<T>(topic: Topic<T>, opts: SubscribeOptions, handler: (batch: BusBatch<T>) => Promise<void>): Promise<Subscription> {
    if (this.closed) throw new Error('bus is closed');
    await this.ensureTopic(topic.name);
    const consumer = this.kafka.consumer({
      groupId: opts.group,
      sessionTimeout: this.opts.sessionTimeout ?? 30_000,
      rebalanceTimeout: this.opts.rebalanceTimeout ?? 60_000,
      heartbeatInterval: this.opts.heartbeatInterval ?? 3_000,
      maxWaitTimeInMs: this.opts.maxWaitTimeInMs ?? 500,
      // fetch.min.bytes: the broker holds a fetch until this much is there (or maxWaitTimeInMs
      // passed), so a busy consumer gets fewer, larger batches instead of one per export.
      minBytes: this.opts.minBytes ?? 1,
      maxBytes: this.maxFetchBytes,
      maxBytesPerPartition: this.maxPartitionFetchBytes,
      allowAutoTopicCreation: false,
    });
    const state: ConsumerState = { stopping: false, wake: undefined, commits: undefined, inHand: 0 };
    const where = { topic: topic.name, group: opts.group };
    // Bounded retries, then the records that fail alone are set aside (./set-aside.ts).
    const guarded = guardHandler(this, handler, {
      ...where,
      stopping: () => state.stopping || this.closed,
      onError: (err) => {
        this.stats.handlerErrors++;
        this.onError(new Error(`batch failed: ${(err as Error)?.message ?? err}`, { cause: err }), where);
      },
    }, { ...this.opts, counted: () => this.stats.setAside++ });
    const runOptions: ConsumerRunConfig = {
      autoCommit: false,
      // With autoCommit off kafkajs commits nothing itself; this is the interval its
      // commitOffsetsIfNecessary() (called at the end of each batch) keeps to.
      autoCommitInterval: this.commitIntervalMs,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: this.opts.partitionsConsumedConcurrently ?? 2,
      eachBatch: (payload) => this.onBatch(topic, opts.group, payload, guarded, state),
    };
    // kafkajs restarts a crashed consumer only when the error is one it retries. Others stop it
    // for good, and some of those come and go with a broker restart ("failed to find group
    // coordinator" while the broker loads its groups): the subscription would then read nothing
    // again, silently. The bus starts such a consumer again itself, waiting longer each time
    // (retryDelayMs doubled, up to 30 s), until it runs or the subscription is closed.
    let restarts = 0;
    const restartLater = () => {
      const delay = Math.min(30_000, Math.max(100, this.retryDelayMs) * 2 ** Math.min(restarts++, 8));
      state.restartTimer = setTimeout(() => {
        state.restartTimer = undefined;
        if (state.stopping || this.closed) return;
        this.stats.consumerRestarts++;
        this.opts.onConsumerRestart?.(where);
        // A crash inside run() comes back through the CRASH event (and so here); connect()
        // failing does not, so it is retried from here.
        consumer
          .connect()
          // Closed while connecting: close() has disconnected already, so this connection is let go here.
          .then(() => (state.stopping || this.closed ? consumer.disconnect() : consumer.run(runOptions)))
          .catch((err) => {
            this.onError(new Error(`consumer restart failed: ${(err as Error).message}`, { cause: err }), where);
            if (!state.stopping && !this.closed) restartLater();
          });
      }, delay);
    };
    consumer.on(consumer.events.CRASH, (e) => {
      if (state.stopping) return;
      const { error, restart } = e.payload;
      // The offsets it had resolved go with that consumer group: kafkajs starts another, which
      // reads them again from the last commit. Nothing is committed through the old one.
      state.commits = undefined;
      this.onError(new Error(`consumer ${restart ? 'crashed, restarting' : 'crashed and stopped by kafkajs, the bus starts it again'}: ${error.message}`, { cause: error }), where);
      if (!restart) restartLater();
    });
    // A consumer that got through a group join counts as running again.
    consumer.on(consumer.events.GROUP_JOIN, () => (restarts = 0));

    // kafkajs resolves a new group's "latest" position at its first fetch after joining: wait
    // for that fetch, so that what is published after subscribe() resolves is seen.
    const firstFetch = new Promise<void>((resolve) => {
      const off = consumer.on(consumer.events.FETCH, () => {
        off();
        resolve();
      });
    });

    await consumer.connect();
    try {
      // Just after a topic is created, a KRaft broker may not yet serve its metadata ("does not
      // host this topic-partition"): kafkajs marks that retriable, and so it is retried here.
      await whileRetriable(() => consumer.subscribe({ topics: [topic.name], fromBeginning: opts.fromBeginning ?? true }));
      await consumer.run(runOptions);
      if (opts.fromBeginning === false) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([firstFetch, new Promise<void>((r) => (timer = setTimeout(r, this.opts.sessionTimeout ?? 30_000)))]);
        clearTimeout(timer);
      }
    } catch (err) {
      await consumer.disconnect().catch(() => undefined);
      throw err;
    }

    let closing: Promise<void> | undefined;
    const sub: Subscription = {
      close: () => {
        closing ??= (async () => {
          state.stopping = true;
          state.wake?.();
          clearTimeout(state.restartTimer);
          // What was handled and not yet committed, with no batch in hand to commit it at its
          // end (a batch in hand commits everything resolved as it ends, seeing `stopping`).
          if (state.inHand === 0) await state.commits?.flush().catch(() => undefined);
          // stop() (inside disconnect) stops fetching, waits for the batch in hand (which
          // commits as it ends), then leaves the group.
          await consumer.disconnect();
          // A group of this subscriber's alone is not left on the broker: with no member, its
          // committed offsets stay there until offsets.retention.minutes (7 days by default),
          // reported by lag monitors with a lag that grows all that time.
          if (opts.transient) await this.deleteGroup(opts.group, where);
          this.subscriptions.delete(sub);
          this.consumed(where, opts, -1);
        })();
        return closing;
      },
    };
    this.subscriptions.add(sub);
    this.consumed(where, opts, 1);
    this.opts.onSubscribe?.(where);
    return sub;
  }

  /** Counts a subscription of (topic, group) in or out of what the lags are read of. */
  private consumed(where: { topic: string; group: string }, opts: SubscribeOptions, by: 1 | -1): void {
    if (!this.opts.onLag) return;
    const key = `${where.topic}\0${where.group}`;
    const c = this.consuming.get(key) ?? { ...where, fromBeginning: opts.fromBeginning ?? true, subscriptions: 0 };
    c.subscriptions += by;
    if (c.subscriptions > 0) this.consuming.set(key, c);
    else this.consuming.delete(key);
    if (!this.lagTimer && !this.closed) {
      this.lagTimer = setInterval(() => {
        this.lagReading ??= this.readLags().finally(() => (this.lagReading = undefined));
      }, Math.max(100, this.opts.lagIntervalMs ?? 10_000));
      this.lagTimer.unref();
    }
  }

  /**
   * Reads from the broker the lag of each (topic, group) this bus consumes and tells onLag: for
   * each partition, its end less the group's committed offset (a group that committed none
   * there starts at the partition's start when it reads from the beginning, else at its end;
   * an offset the retention has deleted counts from the start). Through the admin client this
   * bus has connected, never connecting one: skipped while there is none. A failed request is
   * logged at debug and that lag is not told, so a gauge keeps its last value.
   */
  private async readLags(): Promise<void> {
    const admin = this.adminConnected;
    const onLag = this.opts.onLag;
    if (!admin || !onLag || this.closed || !this.consuming.size) return;
    const byTopic = new Map<string, { topic: string; group: string; fromBeginning: boolean }[]>();
    for (const c of this.consuming.values()) byTopic.set(c.topic, [...(byTopic.get(c.topic) ?? []), c]);
    const failed = (what: string, err: unknown) => this.opts.log?.debug?.(`consumer lag of ${what} not read (the last one stands): ${(err as Error)?.message ?? String(err)}`);
    await Promise.all(
      [...byTopic].map(async ([topic, groups]) => {
        let ends: Awaited<ReturnType<Admin['fetchTopicOffsets']>>;
        try {
          ends = await admin.fetchTopicOffsets(topic);
        } catch (err) {
          failed(topic, err);
          return;
        }
        await Promise.all(
          groups.map(async (g) => {
            try {
              const [committed] = await admin.fetchOffsets({ groupId: g.group, topics: [topic] });
              const at = new Map((committed?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
              let lag = 0;
              for (const e of ends) {
                const high = Number(e.high);
                const low = Number(e.low);
                const offset = at.get(e.partition) ?? -1;
                const from = offset >= 0 ? Math.max(offset, low) : g.fromBeginning ? low : high;
                lag += Math.max(0, high - from);
              }
              if (!this.closed && this.consuming.has(`${topic}\0${g.group}`)) onLag({ topic, group: g.group, lag });
            } catch (err) {
              failed(`${topic}/${g.group}`, err);
            }
          }),
        );
      }),
    );
  }

  /**
   * Deletes a consumer group that no member is in any more (just left: the broker may still be
   * ending its last rebalance, NON_EMPTY_GROUP, so it is asked again for a few seconds). A failure
   * is reported through onError, not thrown: the group is then left as a crash leaves it.
   */
  private async deleteGroup(group: string, where: { topic: string; group: string }): Promise<void> {
    try {
      const admin = await this.admin();
      for (let attempt = 1; ; attempt++) {
        try {
          await admin.deleteGroups([group]);
          return;
        } catch (err) {
          const type = (err as { groups?: { groupId: string; error?: { type?: string } }[] }).groups?.find((g) => g.groupId === group)?.error?.type;
          if (type === 'GROUP_ID_NOT_FOUND') return;
          if (type !== 'NON_EMPTY_GROUP' || attempt >= 20) throw err;
          await new Promise((r) => setTimeout(r, 250));
        }
      }
    } catch (err) {
      const why = (err as { groups?: { error?: Error }[] }).groups?.[0]?.error?.message ?? (err as Error)?.message ?? String(err);
      this.onError(
        new Error(`could not delete the consumer group as the subscription closed (${why}): it stays on the broker with no member until offsets.retention.minutes`, { cause: err }),
        where,
      );
    }
  }

  private async onBatch<T>(
    topic: Topic<T>,
    group: string,
    payload: EachBatchPayload,
    handler: (batch: BusBatch<T>) => Promise<void>,
    state: ConsumerState,
  ): Promise<void> {
    // Not started once the consumer is stopping or the batch was superseded: not resolved, so
    // whoever owns the partition next reads it again from the committed offset.
    if (state.stopping || !payload.isRunning() || payload.isStale()) return;
    state.inHand++;
    try {
      await this.handleBatch(topic, group, payload, handler, state);
    } finally {
      state.inHand--;
    }
  }

  private async handleBatch<T>(
    topic: Topic<T>,
    group: string,
    { batch, resolveOffset, heartbeat, commitOffsetsIfNecessary, uncommittedOffsets, isRunning, isStale }: EachBatchPayload,
    handler: (batch: BusBatch<T>) => Promise<void>,
    state: ConsumerState,
  ): Promise<void> {
    // This batch's consumer group is the live one: close() commits through it.
    const commits = { flush: () => commitOffsetsIfNecessary(uncommittedOffsets()) };
    state.commits = commits;
    const where = { topic: topic.name, group, partition: batch.partition };
    // The partition's batch is handed over in parts of at most maxHandlerBytes of record values
    // (decoded: decompressed and unpacked), each decoded only when its turn comes, and the offset
    // moves past each part once it is handled. A fetch of a backlog brings as many records as fit
    // in its bytes as stored, compressed 10-20 times: handed over whole, 50,000 spans of one
    // partition were decoded and evaluated at once, and the memory a consumer needed grew with
    // the backlog up to the fetch's size times the compression. A pack is never split.
    let records: BusRecord<T>[] = [];
    let undecodable: DeadLetter[] = [];
    let bytes = 0;
    let started = Date.now();
    let firstOffset = batch.firstOffset();
    // A record no reader of this version understands would block the partition forever: it
    // is set aside as a dead letter (its bytes in base64) and skipped. In a pack only that
    // value is (the rest of the pack is handled); a pack whose framing is damaged goes whole.
    const setAside = (m: KafkaMessage, raw: Buffer, err: unknown, item?: number) => {
      const at = item === undefined ? `offset ${m.offset}` : `offset ${m.offset} value ${item}`;
      this.stats.decodeErrors++;
      this.onError(new Error(`${at}: cannot decode, set aside: ${(err as Error).message}`, { cause: err }), where);
      undecodable.push({
        project: '',
        source: `bus:${topic.name}/${group}`,
        kind: 'undecodable',
        ...(m.key ? { run_id: m.key.toString('utf8') } : {}),
        item_id: at,
        reason: `cannot decode: ${(err as Error).message}`,
        payload: { partition: batch.partition, offset: m.offset, ...(item === undefined ? {} : { item }), base64: raw.toString('base64') },
      });
    };
    const decode = (m: KafkaMessage) => {
      if (!m.value) return;
      const key = m.key ? m.key.toString('utf8') : '';
      bytes += m.value.length;
      if (isPack(m)) {
        let values: Uint8Array[];
        try {
          values = unpackValues(m.value);
        } catch (err) {
          setAside(m, m.value, err);
          return;
        }
        for (let i = 0; i < values.length; i++) {
          try {
            records.push({ key, value: topic.decode(values[i]) });
          } catch (err) {
            setAside(m, Buffer.from(values[i]), err, i);
          }
        }
        return;
      }
      try {
        records.push({ key, value: topic.decode(m.value) });
      } catch (err) {
        setAside(m, m.value, err);
      }
    };

    /** Hands the part decoded so far over, then moves the offset past `last`; false when it failed (or the consumer stops). */
    const handOver = async (last: string): Promise<boolean> => {
      if (records.length) {
        // Heartbeats while the handler runs; a rebalance seen here is left to the commit (which
        // then fails, and kafkajs rejoins) rather than thrown into the handler.
        const beat = () => heartbeat().catch(() => undefined);
        const hb = setInterval(beat, Math.max(100, Math.floor((this.opts.heartbeatInterval ?? 3_000) / 2)));
        const busBatch: BusBatch<T> = { topic: topic.name, partition: batch.partition, records, heartbeat: beat };
        try {
          await handler(busBatch);
        } catch (err) {
          // Counted by the guard (each try); here only what it gave up on for now: a dependency
          // down, or the subscription closing.
          this.onError(new Error(`batch at offset ${firstOffset} failed, reading it again: ${(err as Error)?.message ?? err}`, { cause: err }), where);
          clearInterval(hb);
          // Not resolved: the next fetch starts again at this part's first offset.
          await this.pause(this.retryDelayMs, state, beat);
          // Closing: what the other batches handled is committed, this one's is not.
          if (state.stopping && this.commitIntervalMs > 0) await commits.flush().catch(() => undefined);
          return false;
        } finally {
          clearInterval(hb);
        }
      }

      // Kept before the offset moves past them (if this fails, the part is read again).
      const dl = deadLetterTopic(this.opts.deadLetterPrefix);
      if (undecodable.length && topic.name !== dl.name) {
        await busDeadLetterSink(this, dl).setAside(undecodable);
        this.stats.setAside += undecodable.length;
      }

      // The handler's effects are stored: only now does the offset move.
      resolveOffset(last);
      if (this.commitIntervalMs === 0) {
        await commitOffsetsIfNecessary({
          topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: (BigInt(last) + 1n).toString() }] }],
        });
      } else {
        if (!state.stopping) await commitOffsetsIfNecessary(); // every resolved offset, once commitIntervalMs has passed
        // Closing (seen after the await too, so a close() that came meanwhile is not missed):
        // everything resolved, this part's included. From here to the end nothing is awaited.
        if (state.stopping) await commits.flush();
      }
      this.stats.consumed += records.length;
      this.opts.onBatch?.({ topic: topic.name, group, partition: batch.partition, records: records.length, ms: Date.now() - started });
      records = [];
      undecodable = [];
      bytes = 0;
      started = Date.now();
      // The parts not handed over yet are read again by whoever owns the partition next.
      return !state.stopping && isRunning() && !isStale();
    };

    const messages = batch.messages;
    for (let i = 0; i < messages.length; i++) {
      decode(messages[i]);
      // Full, with more to come: this part now (the last goes below, to the batch's end).
      if (bytes >= this.maxHandlerBytes && i < messages.length - 1) {
        if (!(await handOver(messages[i].offset))) return;
        firstOffset = messages[i + 1].offset;
      }
    }
    await handOver(batch.lastOffset());
  }

  /** Waits before a failed batch is read again, heartbeating, and ends early on close. */
  private async pause(ms: number, state: ConsumerState, beat: () => Promise<void>): Promise<void> {
    const end = Date.now() + ms;
    while (!state.stopping && Date.now() < end) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(1000, end - Date.now()));
        state.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      state.wake = undefined;
      if (!state.stopping) await beat();
    }
  }

  // ---- lifecycle ------------------------------------------------------------------------

  /** Is a broker reachable (metadata answered)? For readiness checks. */
  async healthy(): Promise<boolean> {
    try {
      const admin = await this.admin();
      await admin.describeCluster();
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Tears down in order: the subscriptions (each finishes and commits its batch; their
   * handlers may still publish), then what is waiting to be published, then the clients.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.subscriptions].map((s) => s.close().catch((err) => this.onError(err, { topic: '(close)' }))));
    this.closed = true;
    clearInterval(this.lagTimer);
    await this.lagReading;
    await this.flush();
    const producer = this.producerP && (await this.producerP.catch(() => undefined));
    const admin = this.adminP && (await this.adminP.catch(() => undefined));
    await Promise.all([producer?.disconnect(), admin?.disconnect()]);
  }
}

type KafkaMessage = EachBatchPayload['batch']['messages'][number];

/** Did the broker refuse a message as larger than its topic takes (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE), through kafkajs's causes? */
export function messageTooLarge(err: unknown): boolean {
  for (const e of causes<{ type?: unknown }>(err)) {
    if (e.type === 'MESSAGE_TOO_LARGE' || e.type === 'RECORD_LIST_TOO_LARGE') return true;
  }
  return false;
}

/** Does this record carry a pack (./pack.ts)? Records written before packs have no such header. */
function isPack(m: KafkaMessage): boolean {
  const h = m.headers?.[PACK_HEADER];
  const v = Array.isArray(h) ? h[0] : h;
  return v !== undefined && v.toString() === PACK_VERSION;
}

interface ConsumerState {
  stopping: boolean;
  wake: (() => void) | undefined;
  /** Commits what was resolved, through the consumer group of the last batch handed over. */
  commits: { flush: () => Promise<void> } | undefined;
  /** Batches being handled now. */
  inHand: number;
  /** A consumer kafkajs stopped for good, waiting to be started again by the bus. */
  restartTimer?: NodeJS.Timeout;
}

/** Runs `fn` again (up to 10 times, 100 ms more each time) while it fails with an error kafkajs marks retriable. */
async function whileRetriable<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= 10 || (err as { retriable?: boolean }).retriable !== true) throw err;
      await new Promise((r) => setTimeout(r, 100 * attempt));
    }
  }
}
