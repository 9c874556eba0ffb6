import { extractJson, parseBatchReply, stripCodeFence } from './prompt';
import { quoteFound } from './quote';

/**
 * How a model's reply is read. The whole process (ingest, rule checks, the API) waits while a
 * reply is read, so reading must take time in proportion to the reply: a backtracking pattern
 * took 10 s on a reply with a run of 100,000 spaces. The time bounds here are orders of
 * magnitude above the linear reading (a few milliseconds) and below the quadratic one.
 */
describe("reading a model's reply", () => {
  const took = (f: () => unknown): number => {
    const t = Date.now();
    f();
    return Date.now() - t;
  };

  it('reads JSON in a code fence, or after a sentence', () => {
    expect(extractJson('```json\n{"answers": [{"id": "q1", "p": 0.2}]}\n```')).toEqual({ answers: [{ id: 'q1', p: 0.2 }] });
    expect(extractJson('```JSON {"a": 1}```')).toEqual({ a: 1 });
    expect(extractJson('```\n{"a": 1}\n```  ')).toEqual({ a: 1 });
    expect(extractJson('Here it is: {"a": 1} Hope that helps.')).toEqual({ a: 1 });
    expect(stripCodeFence('```')).toBe('');
    expect(() => extractJson('Sure! The agent did fine.')).toThrow(/not JSON: "Sure! The agent did fine\."/);
  });

  it('reads a reply with a long run of whitespace quickly', () => {
    const reply = '{"answers":[' + ' '.repeat(200_000) + ']}';
    let json: unknown;
    expect(took(() => (json = extractJson(reply)))).toBeLessThan(1_000);
    expect(json).toEqual({ answers: [] });
    expect(took(() => parseBatchReply(`\`\`\`json\n{"answers":[{"id":"q1","p":0.1}${' '.repeat(100_000)}]}\n\`\`\``, 1))).toBeLessThan(1_000);
    expect(took(() => expect(() => extractJson(`Sure${'\n'.repeat(100_000)}no.`)).toThrow(/not JSON/))).toBeLessThan(1_000);
  });

  it("checks a model's quote with a long run of quote marks quickly", () => {
    const run = 'The refund of $40 has been issued to your card.';
    expect(quoteFound('"“The refund of $40”\'', run)).toBe(true);
    expect(quoteFound(' " \' The refund of $40 \' " ', run)).toBe(true);
    expect(took(() => expect(quoteFound(`x${'"'.repeat(50_000)}x`, run)).toBe(false))).toBeLessThan(1_000);
    expect(took(() => expect(quoteFound(`${'" '.repeat(50_000)}The refund of $40${' "'.repeat(50_000)}`, run)).toBe(true))).toBeLessThan(1_000);
  });
});
