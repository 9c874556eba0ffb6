import { MAX_ARGS_CHARS, fillGuidance, unknownPlaceholders } from './guidance';

describe('fillGuidance', () => {
  it('fills every placeholder', () => {
    const out = fillGuidance('{tool}|{count}|{args}|{name}|{ms}|{metric}|{value}|{pattern}|{requires}', {
      tool: 'search', count: 3, args: { q: 'x', n: 1 }, name: 'chat', ms: 31500, metric: 'total_tokens', value: 0.123456,
      pattern: '(?i)refund', requires: ['lookup_order', 'get_customer'],
    });
    expect(out).toBe('search|3|{"q":"x","n":1}|chat|31500|total_tokens|0.1235|(?i)refund|lookup_order, get_customer');
  });

  it('leaves a misspelt placeholder as written, and writes one without a value as words saying so', () => {
    expect(fillGuidance('You called {tool} {times} times ({count})', { tool: 'search' })).toBe('You called search {times} times (several)');
    expect(unknownPlaceholders('{tool} {times} {times} {args}')).toEqual(['times']);
  });

  it('writes {args} as compact JSON cut at about 200 characters', () => {
    const args = { text: 'a'.repeat(1000) };
    const out = fillGuidance('({args})', { args });
    expect(out.startsWith('({"text":"aaa')).toBe(true);
    expect(out.endsWith('…)')).toBe(true);
    expect(out.length).toBe(MAX_ARGS_CHARS + 3);
    expect(fillGuidance('{args}', { args: 'plain' })).toBe('"plain"');
  });

  it('does not split a surrogate pair at the cut', () => {
    const s = fillGuidance('{args}', { args: `${'a'.repeat(MAX_ARGS_CHARS - 2)}😀😀` });
    expect(s).toBe(`"${'a'.repeat(MAX_ARGS_CHARS - 2)}…`);
  });
});
