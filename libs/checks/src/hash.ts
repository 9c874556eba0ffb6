import * as crypto from 'node:crypto';

/**
 * A string's SHA-1 in hex. Node's one-shot `crypto.hash` (20.12 and later) where there is one:
 * the same digest, without a Hash object a call (finding ids are made for every finding, task ids
 * and question keys for every question asked).
 */
type OneShot = (algorithm: string, data: string, encoding: 'hex') => string;

/** sha1Hex over Node's one-shot hash when given one, else a Hash object a call (Node before 20.12). */
export function sha1HexOver(oneShot: OneShot | undefined): (s: string) => string {
  return oneShot ? (s) => oneShot('sha1', s, 'hex') : (s) => crypto.createHash('sha1').update(s).digest('hex');
}

export const sha1Hex: (s: string) => string = sha1HexOver((crypto as { hash?: OneShot }).hash);
