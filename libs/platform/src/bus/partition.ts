/**
 * Which partition a key goes to. FNV-1a over the key's UTF-16 code units: stable across
 * processes, so the embedded bus and tests agree on placement. (Kafka's own placement is
 * done by kafkajs's default partitioner; only "same key, same partition" is relied on.)
 */
export function partitionFor(key: string, partitions: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % partitions;
}
