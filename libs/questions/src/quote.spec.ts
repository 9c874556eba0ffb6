import { quoteFound } from './quote';

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
