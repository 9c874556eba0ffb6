import { readFileSync } from 'node:fs';
import Module from 'node:module';
import path from 'node:path';
// types only: nothing of kafkajs loads here (this module must load before it)
import type { ICustomPartitioner } from 'kafkajs';

/**
 * Two of kafkajs's (2.2.x) producer helpers, written again at the same results and put in
 * their place before kafkajs loads, and a partitioner at the same partitions. A profile of
 * ingest in the distributed bench (2026-12-06) had them at about 4% of its CPU:
 *
 * - `protocol/recordBatch/crc32C`: the CRC-32C of every record batch a producer sends (over the
 *   compressed bytes, or over all of them for a send under `compressMinBytes`), a table lookup
 *   a byte in JavaScript. `crc32c` below reads eight bytes a step (slicing by 8): the same
 *   checksum.
 * - `producer/groupMessagesPerPartition`: a send's messages by partition, copying a partition's
 *   array for every message it adds (quadratic in a partition's share of a send: ingest's sends
 *   carry up to maxBatchRecords messages). `groupByPartition` appends: the same arrays.
 * - kafkajs's default partitioner hashes a key with murmur2 on 64-bit Long objects (BigInt) and
 *   filters the partitions' metadata for every message. `keyPartitioner` hashes with 32-bit
 *   integer arithmetic (the same Java-compatible murmur2 value) and asks kafkajs's own
 *   partitioner only for a message with neither a partition nor a key.
 *
 * The swap goes through Node's module cache (`require.cache`), keyed by the files' resolved
 * paths: it takes effect only when this module loads before kafkajs (kafka.ts imports it first)
 * and only for kafkajs's CommonJS files of that layout, in a release listed in KAFKAJS_VERSIONS
 * (kafkajs is installed from the lockfile; an upgrade keeps kafkajs's own until the copies are
 * checked against it and its version added). Where a file is not found, or was
 * loaded already, kafkajs keeps its own (the same results, slower); `installed` says which.
 * Tests hold each one to kafkajs's own over random inputs (kafkajs-parts.spec.ts).
 */

/** CRC-32C (Castagnoli, reflected 0x82f63b78), eight tables of 256 for slicing by 8. */
const T = ((): Int32Array => {
  const t = new Int32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n];
    for (let k = 1; k < 8; k++) {
      c = t[c & 0xff] ^ (c >>> 8);
      t[k * 256 + n] = c;
    }
  }
  return t;
})();

/** The CRC-32C of `buf`, unsigned: what kafkajs's `protocol/recordBatch/crc32C` returns. */
export function crc32c(buf: Uint8Array): number {
  let crc = -1;
  let i = 0;
  const n = buf.length;
  for (const end = n - 8; i <= end; i += 8) {
    const a = crc ^ (buf[i] | (buf[i + 1] << 8) | (buf[i + 2] << 16) | (buf[i + 3] << 24));
    crc =
      T[1792 + (a & 0xff)] ^
      T[1536 + ((a >>> 8) & 0xff)] ^
      T[1280 + ((a >>> 16) & 0xff)] ^
      T[1024 + (a >>> 24)] ^
      T[768 + buf[i + 4]] ^
      T[512 + buf[i + 5]] ^
      T[256 + buf[i + 6]] ^
      T[buf[i + 7]];
  }
  for (; i < n; i++) crc = T[(crc ^ buf[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ -1) >>> 0;
}

interface GroupArgs<M> {
  topic: string;
  partitionMetadata: readonly unknown[];
  messages: M[];
  partitioner: (args: { topic: string; partitionMetadata: readonly unknown[]; message: M }) => number;
}

/** A send's messages by partition, in send order: what kafkajs's `producer/groupMessagesPerPartition` returns. */
export function groupByPartition<M>({ topic, partitionMetadata, messages, partitioner }: GroupArgs<M>): Record<string, M[]> {
  if (partitionMetadata.length === 0) return {};
  const out: Record<string, M[]> = {};
  for (let i = 0; i < messages.length; i++) {
    // reduce skips the holes of a sparse array; so does this
    if (!(i in messages)) continue;
    const message = messages[i];
    const partition = partitioner({ topic, partitionMetadata, message });
    const list = out[partition];
    if (list) list.push(message);
    else out[partition] = [message];
  }
  return out;
}

const M = 0x5bd1e995;

/** Kafka's murmur2 (the Java client's Utils.murmur2) of a key, as a signed 32-bit integer: kafkajs's `partitioners/default/murmur2`. */
export function murmur2(key: Buffer | string): number {
  const data = Buffer.isBuffer(key) ? key : Buffer.from(String(key));
  const length = data.length;
  let h = 0x9747b28c ^ length;
  const length4 = length >>> 2;
  for (let i = 0; i < length4; i++) {
    const i4 = i * 4;
    let k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24);
    k = Math.imul(k, M);
    k ^= k >>> 24;
    k = Math.imul(k, M);
    h = Math.imul(h, M) ^ k;
  }
  const tail = length & ~3;
  const rest = length & 3;
  if (rest === 3) h ^= data[tail + 2] << 16;
  if (rest >= 2) h ^= data[tail + 1] << 8;
  if (rest >= 1) h = Math.imul(h ^ data[tail], M);
  h ^= h >>> 13;
  h = Math.imul(h, M);
  h ^= h >>> 15;
  return h | 0;
}

/**
 * A createPartitioner for kafkajs at the partitions of its DefaultPartitioner (given as
 * `fallback`): a message's own partition, else its key's murmur2 (made positive by masking, as
 * Java's client does) modulo the topic's partition count; a message with neither goes to
 * kafkajs's own (its round robin over the partitions with a leader).
 */
export function keyPartitioner(fallback: ICustomPartitioner): ICustomPartitioner {
  return () => {
    const other = fallback();
    return (args) => {
      const m = args.message;
      if (m.partition !== null && m.partition !== undefined) return m.partition;
      if (m.key !== null && m.key !== undefined) return (murmur2(m.key) & 0x7fffffff) % args.partitionMetadata.length;
      return other(args);
    };
  };
}

/** Which of kafkajs's files were replaced in this process (false: kafkajs's own is used). */
export const installed = { crc32C: false, groupMessagesPerPartition: false };

function swap(file: string, exports: unknown): boolean {
  const cache = Module['_cache' as keyof typeof Module] as unknown as Record<string, NodeJS.Module | undefined> | undefined;
  // Already loaded (kafkajs required before this module): its users hold kafkajs's own.
  if (!cache || cache[file]) return false;
  const m = new Module(file, module);
  m.filename = file;
  m.exports = exports;
  m.loaded = true;
  cache[file] = m;
  return true;
}

/**
 * The kafkajs releases whose two files were read and tested against these copies
 * (kafkajs-parts.spec.ts). Another release keeps its own: a file at the same path may take other
 * arguments or return another shape, which nothing here would notice.
 */
export const KAFKAJS_VERSIONS: readonly string[] = ['2.2.4'];

function install(): void {
  let root: string;
  try {
    const manifest = require.resolve('kafkajs/package.json');
    if (!KAFKAJS_VERSIONS.includes((JSON.parse(readFileSync(manifest, 'utf8')) as { version?: string }).version ?? '')) return;
    root = path.dirname(manifest);
  } catch {
    return;
  }
  const at = (rel: string): string | undefined => {
    try {
      return require.resolve(path.join(root, rel));
    } catch {
      return undefined;
    }
  };
  const crcFile = at('src/protocol/recordBatch/crc32C/index.js');
  // kafkajs's module is `buffer => unsigned(crc32C(buffer))`; checked on one known value first
  if (crcFile && crc32c(Buffer.from('123456789')) === 0xe3069283) installed.crc32C = swap(crcFile, crc32c);
  const groupFile = at('src/producer/groupMessagesPerPartition.js');
  if (groupFile) installed.groupMessagesPerPartition = swap(groupFile, groupByPartition);
}

install();
