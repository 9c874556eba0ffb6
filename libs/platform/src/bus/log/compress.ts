import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { PACK_OVERHEAD } from '../pack';

/**
 * A frame's value deflated (raw deflate, level 1: the cheapest that still finds what a value
 * repeats). A pack keeps its count in front, uncompressed: recovery reads the count of every
 * frame to index its records and never inflates one. Measured on the log of the embedded default
 * (bench/e2e.js): the question tasks, most of the bytes written, 6.1x smaller, the events' packs
 * 3.2x; the findings and notes, small and unrepeating, not worth it (compressBytes).
 *
 * Undefined when deflating saves less than an eighth: the value is stored as it is.
 */
export function compressValue(value: Uint8Array, packed: boolean): Buffer | undefined {
  const head = packed ? PACK_OVERHEAD : 0;
  const body = deflateRawSync(value.subarray(head), { level: 1 });
  if (head + body.length > value.byteLength - (value.byteLength >> 3)) return undefined;
  if (!packed) return body;
  const out = Buffer.allocUnsafe(head + body.length);
  out.set(value.subarray(0, head), 0);
  out.set(body, head);
  return out;
}

/** The value compressValue was given, from what it returned. */
export function expandValue(stored: Uint8Array, packed: boolean): Uint8Array {
  const head = packed ? PACK_OVERHEAD : 0;
  const body = inflateRawSync(stored.subarray(head));
  if (!packed) return body;
  const out = Buffer.allocUnsafe(head + body.length);
  out.set(stored.subarray(0, head), 0);
  out.set(body, head);
  return out;
}
