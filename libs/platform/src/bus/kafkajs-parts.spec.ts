import { Partitioners } from 'kafkajs';
import { crc32c, groupByPartition, keyPartitioner, murmur2 } from './kafkajs-parts';

// kafkajs's own, as it ships them (jest's module registry does not see the swap in Node's cache)
// eslint-disable-next-line @typescript-eslint/no-require-imports
const kafkajsCrc32C = require('kafkajs/src/protocol/recordBatch/crc32C') as (b: Buffer) => number;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const kafkajsGroup = require('kafkajs/src/producer/groupMessagesPerPartition') as typeof groupByPartition;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const kafkajsMurmur2 = require('kafkajs/src/producer/partitioners/default/murmur2') as (k: Buffer | string) => number;

/** A seeded generator (mulberry32): the same inputs every run. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function bytes(rnd: () => number, n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(rnd() * 256);
  return b;
}

function text(rnd: () => number, n: number): string {
  const alphabet = ['a', 'Z', '0', '-', '_', 'é', '€', '😀', '\u0000', '\ud800'];
  let s = '';
  for (let i = 0; i < n; i++) s += rnd() < 0.7 ? String.fromCharCode(32 + Math.floor(rnd() * 95)) : alphabet[Math.floor(rnd() * alphabet.length)];
  return s;
}

describe("kafkajs's producer helpers, written again", () => {
  it("crc32c is kafkajs's CRC-32C over any bytes, at any length and offset", () => {
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283);
    expect(crc32c(Buffer.alloc(0))).toBe(kafkajsCrc32C(Buffer.alloc(0)));
    const rnd = random(13);
    for (let round = 0; round < 3000; round++) {
      const n = round < 2000 ? round % 70 : Math.floor(rnd() * (round < 2990 ? 5000 : 200_000));
      const whole = bytes(rnd, n + 7);
      const at = Math.floor(rnd() * 8);
      const b = whole.subarray(at, at + n);
      expect(crc32c(b)).toBe(kafkajsCrc32C(b));
    }
  });

  it("murmur2 is kafkajs's (Java's) murmur2 of any key, a string or bytes", () => {
    const rnd = random(7);
    for (let round = 0; round < 5000; round++) {
      const n = round % 64;
      const key = round % 2 ? bytes(rnd, n) : text(rnd, n);
      expect(murmur2(key)).toBe(kafkajsMurmur2(key));
    }
    expect(murmur2('')).toBe(kafkajsMurmur2(''));
  });

  it("keyPartitioner picks the partition kafkajs's DefaultPartitioner picks for a keyed message or one with its partition", () => {
    const ours = keyPartitioner(Partitioners.DefaultPartitioner)();
    const theirs = Partitioners.DefaultPartitioner();
    const rnd = random(3);
    for (let round = 0; round < 3000; round++) {
      const partitions = 1 + Math.floor(rnd() * 12);
      const partitionMetadata = Array.from({ length: partitions }, (_, i) => ({ partitionId: i, leader: rnd() < 0.1 ? -1 : 1, partitionErrorCode: 0, replicas: [1], isr: [1] }));
      const key = round % 3 === 0 ? bytes(rnd, round % 50) : text(rnd, round % 50);
      const message = round % 10 === 0 ? { key, value: 'v', partition: Math.floor(rnd() * partitions) } : { key, value: 'v' };
      const args = { topic: 't', partitionMetadata, message };
      expect(ours(args)).toBe(theirs(args));
    }
    // neither a partition nor a key: kafkajs's own round robin over the partitions with a leader
    const partitionMetadata = [0, 1, 2, 3].map((i) => ({ partitionId: i, leader: i === 2 ? -1 : 1, partitionErrorCode: 0, replicas: [1], isr: [1] }));
    const seen = new Set<number>();
    for (let i = 0; i < 30; i++) seen.add(ours({ topic: 't', partitionMetadata, message: { value: 'v', key: null } }));
    expect([...seen].sort()).toEqual([0, 1, 3]);
  });

  it("groupByPartition gives kafkajs's grouping, asking the partitioner the same questions in the same order", () => {
    const rnd = random(11);
    for (let round = 0; round < 500; round++) {
      const partitions = Math.floor(rnd() * 7);
      const partitionMetadata = Array.from({ length: partitions }, (_, i) => ({ partitionId: i }));
      const messages = Array.from({ length: Math.floor(rnd() * 300) }, (_, i) => ({ key: `k${Math.floor(rnd() * 40)}`, value: String(i) }));
      const run = (group: typeof groupByPartition) => {
        const asked: string[] = [];
        const partitioner = ({ message }: { message: { key: string } }) => {
          asked.push(message.key);
          return (murmur2(message.key) & 0x7fffffff) % Math.max(1, partitions);
        };
        const out = group({ topic: 't', partitionMetadata, messages, partitioner });
        return { out, keys: Object.keys(out), asked };
      };
      const a = run(groupByPartition);
      const b = run(kafkajsGroup);
      expect(a).toEqual(b);
      // the same message objects, in fresh arrays
      for (const k of a.keys) a.out[k].forEach((m, i) => expect(m).toBe(b.out[k][i]));
    }
    // a sparse array's holes are skipped, as reduce skips them
    const sparse: { key: string }[] = [];
    sparse[0] = { key: 'a' };
    sparse[3] = { key: 'b' };
    const part = ({ message }: { message: { key: string } }) => (message.key === 'a' ? 0 : 1);
    expect(groupByPartition({ topic: 't', partitionMetadata: [{}, {}], messages: sparse, partitioner: part })).toEqual(
      kafkajsGroup({ topic: 't', partitionMetadata: [{}, {}], messages: sparse, partitioner: part }),
    );
  });
});
