import { quoteParts, type QuotePart } from '../app/quotes';

/** How components/Highlight.tsx found the quotes before: a comparison at every character. */
function before(text: string, quotes: readonly (string | null | undefined)[]): QuotePart[] {
  const wanted = [...new Set(quotes)].filter((q): q is string => !!q && text.includes(q)).sort((a, b) => b.length - a.length);
  if (!wanted.length) return [];
  const parts: QuotePart[] = [];
  let plainFrom = 0;
  for (let i = 0; i < text.length; ) {
    const q = wanted.find((w) => text.startsWith(w, i));
    if (!q) {
      i++;
      continue;
    }
    if (i > plainFrom) parts.push({ text: text.slice(plainFrom, i), quote: false });
    parts.push({ text: q, quote: true });
    i += q.length;
    plainFrom = i;
  }
  if (plainFrom < text.length) parts.push({ text: text.slice(plainFrom), quote: false });
  return parts;
}

describe("marking a finding's quote in a span's text", () => {
  it('marks a 2,001-character quote at the end of 1 MB of indentation without freezing the page', () => {
    const quote = `${' '.repeat(2000)}A`;
    const text = `${' '.repeat(1_000_000)}A`;
    const started = Date.now();
    const parts = quoteParts(text, [quote]);
    // The character-by-character search took many seconds here; this takes milliseconds.
    expect(Date.now() - started).toBeLessThan(1000);
    expect(parts).toEqual([
      { text: ' '.repeat(1_000_000 - 2000), quote: false },
      { text: quote, quote: true },
    ]);
  });

  it('marks the same places as before: the longer of two at one place, never overlapping, case and spaces as sent', () => {
    const cases: [string, (string | null | undefined)[]][] = [
      ['Issue the refund now. issue the REFUND now.', ['the refund', 'refund']],
      ['aaaaaa', ['aa']],
      ['aaaaa', ['aaa', 'aa']],
      ['abcabcabc', ['bca', 'abc']],
      ['abcabcabc', ['cab', 'abcab', 'b']],
      ['the  refund\nthe refund', ['the refund', null, undefined, '']],
      ['nothing here', ['absent']],
      ['', ['x']],
      ['xyxyx', ['xy', 'yx', 'x']],
      ['same same', ['same', 'same']],
      ['ab', ['ab', 'ba', 'a', 'b']],
    ];
    for (const [text, quotes] of cases) expect([text, quoteParts(text, quotes)]).toEqual([text, before(text, quotes)]);
    // And on generated texts over a small alphabet, where quotes meet, overlap and repeat.
    let seed = 7;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const word = (n: number) => Array.from({ length: n }, () => 'ab '[rnd(3)]).join('');
    for (let c = 0; c < 500; c++) {
      const text = word(rnd(40));
      const quotes = Array.from({ length: 1 + rnd(3) }, () => (rnd(2) ? word(1 + rnd(4)) : text.slice(rnd(20), rnd(40))));
      expect([text, quotes, quoteParts(text, quotes)]).toEqual([text, quotes, before(text, quotes)]);
    }
  });

  it('gives every character of the text back, in order', () => {
    const text = 'one two one three one';
    expect(quoteParts(text, ['one']).map((p) => p.text).join('')).toBe(text);
    expect(quoteParts(text, ['one']).filter((p) => p.quote)).toHaveLength(3);
  });
});
