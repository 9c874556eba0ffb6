import { sha1Hex } from '../hash';

/**
 * A finding's id is derived from what it is about, never from when it was computed, so
 * a redelivered batch (or a replica taking over a partition) produces the same id and
 * the store writes nothing new.
 */
export function findingId(project: string, run_id: string, check_id: string, anchor: string): string {
  return sha1Hex(`${project}\u0000${run_id}\u0000${check_id}\u0000${anchor}`).slice(0, 24);
}

/**
 * A short fingerprint of the values `repeat` compares: the window keeps this instead of
 * the (possibly large) arguments themselves. 53-bit cyrb53: collisions need ~10^8 distinct
 * values in one streak position, which a run does not have.
 */
export function fingerprint(s: string): string {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < s.length; i++) {
    const ch = s.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(36);
}
