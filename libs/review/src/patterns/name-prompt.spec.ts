import { MalformedName, nameAsk, nameSubject, readPatternName } from './name-prompt';

describe('reading the name the reasoning model gave a rule pattern', () => {
  const OK: [string, unknown, string][] = [
    ['the JSON object', { name: 'Quoted prices unprompted' }, 'Quoted prices unprompted'],
    ['quotes and a final period stripped', { name: ' "skipped the address check." ' }, 'Skipped the address check'],
    ['a bare string', 'Never read the order back', 'Never read the order back'],
    ['eight words', { name: 'one two three four five six seven eight' }, 'One two three four five six seven eight'],
  ];
  it.each(OK)('%s', (_, answer, name) => expect(readPatternName(answer)).toBe(name));

  const BAD: [string, unknown, RegExp][] = [
    ['no name', { label: 'x' }, /no "name"/],
    ['an empty name', { name: ' . ' }, /empty/],
    ['nine words', { name: 'one two three four five six seven eight nine' }, /9 words/],
    ['a paragraph on lines', { name: 'Quoted\nprices' }, /plain words/],
    ['too long', { name: 'Supercalifragilisticexpialidocious-ly quoted the incomprehensibilities' }, /characters/],
    ['an array', ['Quoted prices'], /no "name"/],
  ];
  it.each(BAD)('%s', (_, answer, why) => {
    expect(() => readPatternName(answer)).toThrow(MalformedName);
    expect(() => readPatternName(answer)).toThrow(why);
  });
});

describe('a name answer that would take long to read', () => {
  // Read in time in proportion to the answer: a backtracking pattern took 6 s on 50,000 dots,
  // blocking the process meanwhile. The bound is far above the linear reading (milliseconds).
  it.each([
    ['many dots before a word', '.'.repeat(50_000) + 'x', /50001 characters/],
    ['many closing quotes before a word', `x${'”'.repeat(50_000)}x`, /50002 characters/],
    ['many dots and spaces', `Skipped${' .'.repeat(50_000)}x`, /words/],
  ])('%s is refused quickly', (_, name, why) => {
    const t = Date.now();
    expect(() => readPatternName({ name })).toThrow(why);
    expect(Date.now() - t).toBeLessThan(1_000);
  });

  it('still strips long runs of final punctuation quickly', () => {
    const t = Date.now();
    expect(readPatternName({ name: `"Skipped the address check${'.'.repeat(50_000)}"` })).toBe('Skipped the address check');
    expect(Date.now() - t).toBeLessThan(1_000);
  });
});

describe('the NameRulePattern question', () => {
  it('names the procedure and the rule, and what breaking it means for its kind', () => {
    const s = { procedure_name: 'Take an order', rule_label: 'Never rule 1', rule_text: 'Volunteer a price.' };
    expect(nameSubject(s)).toBe('Procedure "Take an order", Never rule 1: "Volunteer a price."');
    expect(nameAsk(s)).toMatch(/did what this rule forbids/);
    expect(nameAsk({ ...s, rule_label: 'Step 2' })).toMatch(/did not do this step/);
  });
});
