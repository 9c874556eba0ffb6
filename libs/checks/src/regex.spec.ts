import { checkPatternBounds, compileSafe, DEFAULT_PATTERN_BOUNDS, findNestedRepeat, PatternError } from './regex';
import { estimatePatternSize } from './regex-size';
import { edgeAssertions } from './regex-syntax';
import { parseCheckFile } from './schema';
import { loadChecks } from './sources';

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

/** The check (863 bytes of YAML): this pattern froze RE2 for seconds on a 200,000-character span. */
const FREEZING = '([a-z]{1,1000}x)'.repeat(50);

describe('pattern bounds', () => {
  const reason = (p: string) => {
    try {
      compileSafe(p);
    } catch (e) {
      expect(e).toBeInstanceOf(PatternError);
      return (e as PatternError).reason;
    }
    throw new Error(`accepted ${p.slice(0, 40)}`);
  };

  it('rejects the freezing pattern, naming the count', () => {
    expect(FREEZING).toHaveLength(800);
    expect(reason(FREEZING)).toMatch(/^repeats something 1000 times \(\[a-z\]\{1,1000\}\); the limit is 200/);
  });

  it('rejects a 2.2 MB pattern by its length, without compiling it', () => {
    // 'a' repeated compiles fine under RE2 (after a long stall): only the length check can say no.
    const huge = 'a'.repeat(2_200_000);
    expect(reason(huge)).toBe('is 2200000 characters long; the limit is 2000');
  });

  it('rejects a program too large even when each count is small: counts multiply', () => {
    expect(reason('((a{100}){100})')).toMatch(/^compiles to about \d+ instructions; the limit is 2000/);
    expect(reason('\\p{L}{1,50}z')).toMatch(/compiles to about \d+ instructions/);
    expect(estimatePatternSize('(a{100}){100}').size).toBeGreaterThanOrEqual(10_000);
  });

  it('keeps ordinary patterns well inside the bounds', () => {
    for (const p of ['(?i)refund', '\\b4[0-9]{3}[ -]?[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}\\b', '[a-f0-9]{64}', '(?s)api.{0,200}key', '\\p{L}+']) {
      expect(() => compileSafe(p)).not.toThrow();
    }
    // Every shipped pattern, with room to spare.
    const shipped = loadChecks({ home: false }).checks.flatMap((c) => (c.kind === 'rule' && c.rule.type === 'match' ? [c.rule.pattern] : []));
    expect(shipped.length).toBeGreaterThan(0);
    for (const p of shipped) expect(checkPatternBounds(p).size).toBeLessThan(DEFAULT_PATTERN_BOUNDS.maxProgram / 2);
  });

  it('estimates what counts cost: a count copies its part, alternatives add up', () => {
    expect(estimatePatternSize('abc').size).toBeLessThan(estimatePatternSize('a{3}bc').size + 3);
    expect(estimatePatternSize('[a-z]{1,100}').size).toBeGreaterThanOrEqual(100);
    expect(estimatePatternSize('x|y|z').size).toBeGreaterThan(estimatePatternSize('x').size);
    expect(estimatePatternSize('(?i)[(a{9})]+').maxCount).toBe(0); // inside a class, {9} is text
    expect(estimatePatternSize('\\Qa{500}\\E').maxCount).toBe(0); // quoted
  });

  it('says which file, check and field, like other schema errors', () => {
    const yaml = `id: frozen\nkind: rule\ntitle: t\nrule:\n  type: match\n  span: {}\n  pattern: '${FREEZING}'\naction: flag\n`;
    expect(() => parseCheckFile(yaml, '/checks/frozen.yaml', 'user')).toThrow(/frozen\.yaml.*frozen.*rule\.pattern.*repeats something 1000 times/s);
  });

  it('finds where a pattern asserts an edge of the text, not in classes or escapes', () => {
    expect(edgeAssertions('^a')).toEqual({ start: true, end: false });
    expect(edgeAssertions('\\Aa|b\\z')).toEqual({ start: true, end: true });
    expect(edgeAssertions('(?m)done$')).toEqual({ start: false, end: true });
    expect(edgeAssertions('[^$]\\$\\^\\bx\\Q^$\\E[[:alpha:]^]')).toEqual({ start: false, end: false });
  });
});
