import { BinaryWriter } from '@bufbuild/protobuf/wire';
import type { MessageFns } from './gen/neatroots/v1/spans';

/**
 * Encodes a message with a writer kept between calls. A fresh writer starts with a small
 * buffer and doubles it, zeroed, until the message fits: for the bus's records (a question
 * task of 5-10 KB, a run's spans of one export) that growth cost three to four times the
 * encoding itself. `finish()` hands back a copy of the bytes written and resets the writer, so
 * nothing returned shares its buffer. Encoding is synchronous, so one writer serves the thread;
 * a writer left mid-message by a throw is dropped, and one grown past `KEEP_BYTES` is not kept.
 */
const KEEP_BYTES = 1 << 20;
/** The writer kept between calls; taken (undefined) while a call writes with it. */
let idle: BinaryWriter | undefined = new BinaryWriter();

export function encodeMessage<T>(fns: Pick<MessageFns<T>, 'encode'>, message: T): Uint8Array {
  const w = idle ?? new BinaryWriter();
  idle = undefined;
  // A throw leaves `idle` empty: the writer it left mid-message is not used again.
  const bytes = fns.encode(message, w).finish();
  if (bytes.length <= KEEP_BYTES) idle = w;
  return bytes;
}

/** How many bytes the protobuf varint of `n` takes (0 <= n < 2^32): for writers that size a record before writing it. */
export function varintSize(n: number): number {
  return n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5;
}

/** Writes the protobuf varint of `n` (0 <= n < 2^32) into `out` at `at`; where it ends. */
export function writeVarint(out: Uint8Array, at: number, n: number): number {
  while (n > 0x7f) {
    out[at++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  out[at++] = n;
  return at;
}
