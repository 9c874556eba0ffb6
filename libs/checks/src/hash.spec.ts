import * as crypto from 'node:crypto';
import { sha1Hex, sha1HexOver } from './hash';

// Finding ids, task ids and question keys are stored: the digest must not depend on the Node release.
describe('sha1Hex', () => {
  const texts = ['', 'p\u0000run-1\u0000refund-needs-lookup\u0000s1', 'ünïcødé ✓ 🚀', 'x'.repeat(100_000)];
  const expected = texts.map((t) => crypto.createHash('sha1').update(t, 'utf8').digest('hex'));

  it('is the SHA-1 of the text in hex, with Node\'s one-shot hash and without it (before 20.12)', () => {
    expect(texts.map(sha1Hex)).toEqual(expected);
    expect(texts.map(sha1HexOver(undefined))).toEqual(expected);
    expect(sha1Hex('abc')).toBe('a9993e364706816aba3e25717850c26c9cd0d89d');
  });
});
