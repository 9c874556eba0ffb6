import { Lineage } from '../lineage';
import { lineageIdOf } from './lineage-id';
import { nameFromRuleText, ruleLabel, NAME_MAX_CHARS } from './names';
import { excerpt } from './excerpt';

describe('a rule pattern named without a model', () => {
  it.each([
    ['Volunteer a price or a description of a dish.', 'Volunteer a price or a description of a dish'],
    ['Read the order back to the caller.', 'Read the order back to the caller'],
    ['  Greet the caller   with the name\nof the restaurant. ', 'Greet the caller with the name of the restaurant'],
    ['Confirm the delivery address: street, number, floor and the name on the bell.', 'Confirm the delivery address'],
    ['Ask for the card number; never read it back aloud to anyone on the call.', 'Ask for the card number'],
    ['Say no.', 'Say no'],
  ])('%j is named %j', (text, name) => {
    expect(nameFromRuleText(text)).toBe(name);
  });

  it('cuts a long rule at a word, within the limit, and marks the cut', () => {
    const text = 'Offer the caller a callback from the manager on duty whenever the order is late by more than thirty minutes.';
    const name = nameFromRuleText(text);
    expect(name.length).toBeLessThanOrEqual(NAME_MAX_CHARS);
    expect(name.endsWith('…')).toBe(true);
    expect(text.startsWith(name.slice(0, -1))).toBe(true);
    expect(name.slice(0, -1).endsWith(' ')).toBe(false);
  });

  it('names a rule whose text holds a long run of dots or spaces at once (an author wrote it; no backtracking over it)', () => {
    const t0 = Date.now();
    expect(nameFromRuleText(`Confirm the order${'.'.repeat(100_000)}x`)).toMatch(/^Confirm the order\.+…$/);
    expect(nameFromRuleText(`Confirm the order${' ,'.repeat(50_000)}`)).toBe('Confirm the order');
    expect(nameFromRuleText('Confirm the order!!! ')).toBe('Confirm the order');
    // With the trailing run trimmed by /[\s.!,;:]+$/ these took about 20 s.
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it('labels rules as the UI shows them', () => {
    expect(ruleLabel('step', 3)).toBe('Step 3');
    expect(ruleLabel('never', 2)).toBe('Never rule 2');
    expect(ruleLabel('warning', 1)).toBe('Warning sign 1');
  });
});

describe('lineageIdOf', () => {
  it("is the rule's own id until lineage rows exist, and the first wording's id with them", () => {
    expect(lineageIdOf('take-order', 'r-new')).toBe('r-new');
    const lineage = new Lineage([
      { procedure_id: 'take-order', rule_id: 'r2', previous_rule_id: 'r1', how: 'matched', similarity: 0.6 },
      { procedure_id: 'take-order', rule_id: 'r3', previous_rule_id: 'r2', how: 'suggestion', similarity: null },
    ]);
    expect(lineageIdOf('take-order', 'r3', lineage)).toBe('r1');
    expect(lineageIdOf('other', 'r3', lineage)).toBe('r3');
  });
});

describe('excerpt', () => {
  it('is the first quote, else the reason, on one line and capped', () => {
    expect(excerpt([{ quote: null }, { quote: 'It costs\n  12 euros' }], 'why')).toBe('It costs 12 euros');
    expect(excerpt([], 'lookup_account was not called')).toBe('lookup_account was not called');
    expect(excerpt([], null)).toBe('');
    const long = excerpt([{ quote: 'word '.repeat(100) }], null, 50);
    expect(long.length).toBe(50);
    expect(long.endsWith('…')).toBe(true);
  });
});
