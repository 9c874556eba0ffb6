/**
 * Records sized for the log: the Bus port's records stay one per span (no consumer changes),
 * but the Kafka and durable-log drivers store the records of one key from one publish() as
 * ONE physical record, a pack. Per-record costs (kafkajs's record encoding, a frame and its
 * CRC, an fsync'ed write) are then paid per run and export, not per span.
 *
 * A pack's value is a framed list of the topic's encoded values, in publish order:
 *
 *   u32 count | (u32 length | value bytes) * count      (little endian)
 *
 * The drivers mark a pack out of band (a Kafka header, a flag in the log's frame), so a value
 * is never guessed at: records written before packing existed are read as they were.
 */

/** The Kafka header that marks a packed record (its value: the format version). */
export const PACK_HEADER = 'neatroots-pack';
export const PACK_VERSION = '1';

/** Bytes a pack adds: its count, and a length before each value. */
export const PACK_OVERHEAD = 4;
export const PACK_ITEM_OVERHEAD = 4;

export function packValues(values: Uint8Array[]): Buffer {
  let size = PACK_OVERHEAD;
  for (const v of values) size += PACK_ITEM_OVERHEAD + v.byteLength;
  const buf = Buffer.allocUnsafe(size);
  buf.writeUInt32LE(values.length, 0);
  let at = PACK_OVERHEAD;
  for (const v of values) {
    buf.writeUInt32LE(v.byteLength, at);
    at += PACK_ITEM_OVERHEAD;
    buf.set(v, at);
    at += v.byteLength;
  }
  return buf;
}

/** How many values a pack holds (read from its first bytes only: recovery indexes without decoding). */
export function packCount(buf: Uint8Array): number {
  if (buf.byteLength < PACK_OVERHEAD) throw new Error(`pack of ${buf.byteLength} bytes has no count`);
  return Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).readUInt32LE(0);
}

/**
 * The values of a pack, in order (views into `buf`). A pack whose framing is damaged throws
 * (the whole physical record is then set aside); a value that its topic cannot decode is the
 * caller's to set aside on its own.
 */
export function unpackValues(buf: Uint8Array): Uint8Array[] {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const count = packCount(b);
  const out: Uint8Array[] = new Array(count);
  let at = PACK_OVERHEAD;
  for (let i = 0; i < count; i++) {
    if (at + PACK_ITEM_OVERHEAD > b.length) throw new Error(`pack of ${count} values ends after ${i}`);
    const len = b.readUInt32LE(at);
    at += PACK_ITEM_OVERHEAD;
    if (at + len > b.length) throw new Error(`pack value ${i} of ${len} bytes runs past the end`);
    out[i] = b.subarray(at, at + len);
    at += len;
  }
  if (at !== b.length) throw new Error(`pack of ${count} values has ${b.length - at} bytes left over`);
  return out;
}

/**
 * The records of one publish() cut into packs: each a key and the indexes of its records, in
 * publish order within the key (keys in the order they first appear; only a key's order is
 * promised, so a run's records interleaved with other runs' in an export still pack together).
 * A pack stays within `maxBytes` (its encoded size); a value too big for one travels alone.
 */
export function planPacks(keys: string[], sizes: number[], maxBytes: number): { key: string; indexes: number[] }[] {
  const byKey = new Map<string, number[]>();
  for (let i = 0; i < keys.length; i++) {
    const list = byKey.get(keys[i]);
    if (list) list.push(i);
    else byKey.set(keys[i], [i]);
  }
  const out: { key: string; indexes: number[] }[] = [];
  for (const [key, indexes] of byKey) {
    let cur: number[] = [];
    let bytes = PACK_OVERHEAD;
    for (const i of indexes) {
      const size = PACK_ITEM_OVERHEAD + sizes[i];
      if (cur.length && bytes + size > maxBytes) {
        out.push({ key, indexes: cur });
        cur = [];
        bytes = PACK_OVERHEAD;
      }
      cur.push(i);
      bytes += size;
    }
    if (cur.length) out.push({ key, indexes: cur });
  }
  return out;
}
