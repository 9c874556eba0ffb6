import * as crypto from 'node:crypto';

/**
 * A string's SHA-1 in hex. Node's one-shot `crypto.hash` (20.12 and later) where there is one:
 * the same digest, without a Hash object a call (task ids and question keys are made for every
 * question asked).
 */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'hex') => string }).hash;

export const sha1Hex: (s: string) => string = oneShot
  ? (s) => oneShot('sha1', s, 'hex')
  : (s) => crypto.createHash('sha1').update(s).digest('hex');
