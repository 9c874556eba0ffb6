import { crc32 } from 'node:zlib';

/**
 * One record as the durable log stores it. A frame is
 *
 *   u32 body length | u32 CRC-32 of the body | body
 *   body = u16 topic length, topic (UTF-8) | u16 partition | f64 offset | u32 key length, key | value
 *
 * The partition's top bit marks a pack (../pack.ts): the value holds the encoded values of
 * several records of one key, at offsets offset, offset + 1, ... The next bit marks a value
 * deflated (./compress.ts). Frames written before either existed have neither set (partitions
 * are far fewer than 16,384).
 *
 * The CRC is what recovery trusts: a frame cut short or torn by a crash (its group was never
 * acknowledged: acknowledgement waits for the fsync) fails it, and the log is truncated there.
 * The offset is stored in the frame because segments are deleted once consumed: counting
 * frames from the start of what is left would not give the offsets back.
 */
export const FRAME_HEADER = 8;
const PACKED = 0x8000;
const COMPRESSED = 0x4000;

export interface Frame {
  topic: string;
  partition: number;
  offset: number;
  key: string;
  value: Uint8Array;
  /** The value is a pack of several records (offsets offset .. offset + count - 1). */
  packed: boolean;
  /** The value is deflated (./compress.ts: expandValue gives it back). */
  compressed: boolean;
}

export function encodeFrame(topic: string, partition: number, offset: number, key: string, value: Uint8Array, packed = false, compressed = false): Buffer {
  if (partition >= COMPRESSED) throw new Error(`partition ${partition}: at most ${COMPRESSED} partitions`);
  const topicBytes = Buffer.byteLength(topic);
  const keyBytes = Buffer.byteLength(key);
  const bodyLen = 2 + topicBytes + 2 + 8 + 4 + keyBytes + value.byteLength;
  const buf = Buffer.allocUnsafe(FRAME_HEADER + bodyLen);
  let at = FRAME_HEADER;
  buf.writeUInt32LE(bodyLen, 0);
  buf.writeUInt16LE(topicBytes, at);
  at += 2;
  at += buf.write(topic, at, 'utf8');
  buf.writeUInt16LE(partition | (packed ? PACKED : 0) | (compressed ? COMPRESSED : 0), at);
  at += 2;
  buf.writeDoubleLE(offset, at);
  at += 8;
  buf.writeUInt32LE(keyBytes, at);
  at += 4;
  at += buf.write(key, at, 'utf8');
  buf.set(value, at);
  buf.writeUInt32LE(crc32(buf.subarray(FRAME_HEADER)), 4);
  return buf;
}

/** What decodeFrame found at a position: a frame, the end of the data, or damage. */
export type FrameRead = { frame: Frame; size: number } | { end: true } | { damaged: string };

export function decodeFrame(buf: Buffer, at: number): FrameRead {
  if (at === buf.length) return { end: true };
  if (buf.length - at < FRAME_HEADER) return { damaged: `${buf.length - at} bytes, less than a frame header` };
  const bodyLen = buf.readUInt32LE(at);
  const end = at + FRAME_HEADER + bodyLen;
  if (bodyLen < 16 || end > buf.length) return { damaged: `frame of ${bodyLen} bytes runs past the end` };
  const body = buf.subarray(at + FRAME_HEADER, end);
  if (crc32(body) !== buf.readUInt32LE(at + 4)) return { damaged: 'checksum mismatch' };
  let p = 0;
  const topicLen = body.readUInt16LE(p);
  p += 2;
  const topic = body.toString('utf8', p, p + topicLen);
  p += topicLen;
  const word = body.readUInt16LE(p);
  const partition = word & ~(PACKED | COMPRESSED);
  const packed = (word & PACKED) !== 0;
  const compressed = (word & COMPRESSED) !== 0;
  p += 2;
  const offset = body.readDoubleLE(p);
  p += 8;
  const keyLen = body.readUInt32LE(p);
  p += 4;
  const key = body.toString('utf8', p, p + keyLen);
  p += keyLen;
  // A copy: the caller may keep the value after the read buffer is reused.
  const value = Uint8Array.prototype.slice.call(body, p);
  return { frame: { topic, partition, offset, key, value, packed, compressed }, size: FRAME_HEADER + bodyLen };
}
