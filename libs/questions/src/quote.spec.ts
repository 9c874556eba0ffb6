import { normalizedRunText, runText } from './evidence';
import { normalizeForQuote, quoteFound, spanQuoteText } from './quote';
import type { ContextDoc, EvidenceDoc, SpanSummary } from './types';

const run = 'tool lookup_order returned {"status":"not_found","order":"A-17"}\nThe refund of $40 has been issued to your card.';

describe('the quote check', () => {
  it('finds words that are really in the run, forgiving spacing, case and curly quotes', () => {
    expect(quoteFound('The refund of $40 has been issued', run)).toBe(true);
    expect(quoteFound('"status": "not_found"', run)).toBe(true);
    expect(quoteFound('“THE REFUND of  $40”', run)).toBe(true);
  });

  it('accepts an ellipsis between pieces that appear in order', () => {
    expect(quoteFound('The refund … issued to your card', run)).toBe(true);
    expect(quoteFound('issued to your card ... The refund', run)).toBe(false);
  });

  it('rejects words that are not there, and quotes too short to prove anything', () => {
    expect(quoteFound('The refund of $400 has been issued', run)).toBe(false);
    expect(quoteFound('the order was cancelled', run)).toBe(false);
    expect(quoteFound('a', run)).toBe(false);
    expect(quoteFound('', run)).toBe(false);
    expect(quoteFound(undefined, run)).toBe(false);
  });

  it('reads JSON-escaped text as the model would quote it', () => {
    expect(quoteFound('He said "stop" now', 'output: "He said \\"stop\\"\\nnow"')).toBe(true);
  });
});

describe('the run text a quote is looked for in', () => {
  // Text made of what normalizing treats specially: case (with the Greek final sigma, the
  // dotted capital I), JSON escapes, curly quotes, dashes, whitespace and newlines.
  const pieces = ['A', 'b', 'Σ', 'ΑΣ', 'İ', 'ς', '\\', '\\n', 'n', 'r', 't', '"', "'", '/', '\u2019', '\u201c', '\u2014', ' ', '\n', '\t', '.', ':', 'x y', '\u00a0', '😀'];
  let seed = 7;
  const rnd = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n);
  const text = () => Array.from({ length: rnd(9) }, () => pieces[rnd(pieces.length)]).join('');
  const maybe = () => (rnd(3) ? text() : undefined);
  const span = (i: number): SpanSummary => ({ id: `s${i}`, type: 'tool', name: text(), tool: maybe(), status: 'ok', input: maybe(), output: maybe(), error: maybe() });

  it('normalized part by part is the joined text normalized, for any text', () => {
    for (let i = 0; i < 3_000; i++) {
      const spans = Array.from({ length: rnd(4) }, (_, j) => span(j));
      const doc: EvidenceDoc = { spans, final_output: maybe(), user_message: maybe(), system_prompt: maybe(), text: maybe() };
      if (rnd(2)) doc.tools = [{ name: text(), description: maybe() }, { name: text() }];
      if (rnd(2)) doc.runs = [{ run_id: 'r0', user_message: maybe(), final_output: maybe(), spans: [span(9), spans[0] ?? span(8)] }];
      const context: ContextDoc | undefined = rnd(2) ? { spans: [span(7), ...spans], user_message: maybe(), text: maybe() } : undefined;
      expect(normalizedRunText(doc, context)).toBe(normalizeForQuote(runText(doc, context)));
      for (const s of spans) expect(spanQuoteText(s)).toBe(normalizeForQuote([s.input, s.output, s.error].filter(Boolean).join('\n')));
    }
  });

  it('finds a quote in it as in the run text, and builds it only when there is a quote to look for', () => {
    const doc: EvidenceDoc = { spans: [{ id: 's1', type: 'tool', name: 'lookup_order', tool: 'lookup_order', status: 'ok', output: '{"status":"not_found"}' }], final_output: 'The refund of $40 has been issued.' };
    for (const quote of ['"status": "not_found"', 'THE REFUND … issued', 'issued ... refund', 'lookup_order', 'nothing like it', 'a', undefined]) {
      expect(quoteFound(quote, '', () => normalizedRunText(doc))).toBe(quoteFound(quote, runText(doc)));
    }
    const built = jest.fn(() => normalizedRunText(doc));
    expect(quoteFound(undefined, '', built)).toBe(false);
    expect(quoteFound('ok', '', built)).toBe(false);
    expect(built).not.toHaveBeenCalled();
  });
});
