import { createHash } from 'node:crypto';

/** What a shared cache stores a key under: its sha1 in hex (a key may be a whole question and its evidence). */
export function cacheDigest(key: string): string {
  return createHash('sha1').update(key).digest('hex');
}
