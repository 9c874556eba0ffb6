import { BudgetedRegex, PatternError, compileSafe, findNestedRepeat, type RegexLogger } from './regex';

describe('compileSafe', () => {
  it.each(['(a+)+', '(a*)*', '(\\w+\\s?)*', '(?:x+){2,}', '((a+)b)+', '(a{1,3})+', '(?i)(?:foo\\d+)+$'])('rejects nested repeats: %s', (p) => {
    expect(() => compileSafe(p)).toThrow(PatternError);
    expect(() => compileSafe(p)).toThrow(/nests repeats/);
  });

  it.each(['(ab)+', 'a+b+', '(\\d{1,3}\\.){3}\\d{1,3}', '[(a+)]+', '\\(a+\\)+', '(a|aa)+', '(a?)+', 'x{2,}', '\\p{L}+'])('accepts %s', (p) => {
    expect(() => compileSafe(p)).not.toThrow();
  });

  it('names the nested part', () => {
    expect(findNestedRepeat('^id=(\\w+\\s?)*$')).toBe('(\\w+\\s?)*');
    expect(findNestedRepeat('(ab)+c*')).toBeUndefined();
  });

  it('rejects a pattern RE2 cannot compile, with RE2\'s reason', () => {
    expect(() => compileSafe('a(?=b)')).toThrow(/does not compile as an RE2 pattern/);
    expect(() => compileSafe('(a)\\1')).toThrow(PatternError);
    expect(() => compileSafe('[abc')).toThrow(/missing \]/);
    expect(() => compileSafe('')).toThrow(PatternError);
  });

  it('honours (?i)', () => {
    expect(compileSafe('(?i)refund').test('Issued a REFUND')).toBe(true);
    expect(compileSafe('refund').test('Issued a REFUND')).toBe(false);
  });
});

describe('BudgetedRegex', () => {
  const logger = () => {
    const warnings: string[] = [];
    const l: RegexLogger = { warn: (m) => warnings.push(m) };
    return { l, warnings };
  };

  it('matches while within its budget', () => {
    const { l, warnings } = logger();
    const re = new BudgetedRegex('(?i)timed? ?out', { checkId: 'ok-check', budgetMs: 10_000, logger: l });
    expect(re.test('the request TIMED OUT')).toBe(true);
    expect(re.test('all good')).toBe(false);
    expect(re.disabled).toBe(false);
    expect(warnings).toEqual([]);
  });

  it('disables a pattern after one call over the budget and warns once, naming the check and the time', () => {
    const { l, warnings } = logger();
    // A zero budget: any real call on a large input takes longer, so this is deterministic.
    const re = new BudgetedRegex('[a-z]+@[a-z]+\\.example', { checkId: 'slow-pattern', budgetMs: 0, logger: l });
    const big = 'x'.repeat(500_000) + ' bob@mail.example';
    re.test(big);
    expect(re.disabled).toBe(true);
    expect(re.test('bob@mail.example')).toBe(false);
    expect(re.test(big)).toBe(false);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/check slow-pattern/);
    expect(warnings[0]).toMatch(/took \d+(\.\d)? ms/);
    expect(warnings[0]).toMatch(/limit 0 ms/);
  });

  it('stays disabled for the process when the check is loaded again', () => {
    const { l } = logger();
    const a = new BudgetedRegex('reload[0-9]+', { checkId: 'reloaded', budgetMs: 0, logger: l });
    a.test('y'.repeat(200_000));
    expect(a.disabled).toBe(true);
    const b = new BudgetedRegex('reload[0-9]+', { checkId: 'reloaded', budgetMs: 10_000, logger: l });
    expect(b.disabled).toBe(true);
    expect(b.test('reload1')).toBe(false);
    // Another check with the same pattern is not affected.
    expect(new BudgetedRegex('reload[0-9]+', { checkId: 'other', logger: l }).test('reload1')).toBe(true);
  });

  it('measures with the injected clock', () => {
    const { l, warnings } = logger();
    let t = 0;
    const re = new BudgetedRegex('abc', { checkId: 'clocked', budgetMs: 50, logger: l, now: () => (t += 30) });
    expect(re.test('abc')).toBe(true); // 30 ms
    expect(re.disabled).toBe(false);
    const slow = new BudgetedRegex('abcd', { checkId: 'clocked', budgetMs: 50, logger: l, now: () => (t += 60) });
    expect(slow.test('abcd')).toBe(true); // 60 ms: the answer stands, later calls are skipped
    expect(slow.disabled).toBe(true);
    expect(slow.test('abcd')).toBe(false);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/took 60\.0 ms/);
  });

  it('does not disable a pattern for one slow call that a second timing does not confirm (a descheduled thread)', () => {
    const { l, warnings } = logger();
    // clock readings: start 0, end 80 (80 ms: over), retry start 80, retry end 81 (1 ms)
    const readings = [0, 80, 80, 81];
    const re = new BudgetedRegex('abc', { checkId: 'paused', budgetMs: 50, logger: l, now: () => readings.shift() ?? 1000 });
    expect(re.test('xabcx')).toBe(true);
    expect(re.disabled).toBe(false);
    expect(warnings).toHaveLength(0);
  });

  it('refuses an unsafe pattern at construction', () => {
    expect(() => new BudgetedRegex('(a+)+$')).toThrow(PatternError);
  });
});
