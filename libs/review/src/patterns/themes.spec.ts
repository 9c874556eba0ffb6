import { assignSubject, MalformedChoice, readModeChoice } from './assign-prompt';
import { MalformedThemes, readThemes, themeSubject } from './theme-prompt';
import { planThemes } from './themes';

describe('assigning a new finding to a failure mode (assign-1)', () => {
  it('numbers the failure modes from 1; 0 is none of them', () => {
    const s = assignSubject({ procedure_name: 'Take an order', rule_label: 'Never rule 1', rule_text: 'Volunteer a price.', modes: [{ name: 'Quoted a price' }, { name: 'Described a dish', description: 'talked about the food' }] });
    expect(s).toContain('1. Quoted a price\n2. Described a dish (talked about the food)\n0. None of these');
  });

  it.each([
    [{ mode: 2 }, 1],
    [{ mode: '1' }, 0],
    [{ mode: 3 }, 2],
    [{ mode: 0 }, null],
    [3, 2],
  ])('reads %j as failure mode index %p of 3 (null: other)', (answer, want) => {
    expect(readModeChoice(answer, 3)).toBe(want);
  });

  it.each([[{ mode: 4 }], [{ mode: -1 }], [{ mode: 1.5 }], [{ name: 'Quoted a price' }], [null]])('refuses %j', (answer) => {
    expect(() => readModeChoice(answer, 3)).toThrow(MalformedChoice);
  });
});

describe("reading the reasoning model's themes (theme-1)", () => {
  const IDS = ['p1', 'p2', 'p3', 'p4'];

  it('shows the existing theme names so the model can keep them', () => {
    const s = themeSubject('Take an order', [{ id: 'p1', rule_label: 'Step 1', name: 'Skipped the greeting', rule_text: 'Greet the caller.' }], [{ name: 'Opening' }]);
    expect(s).toBe('Procedure "Take an order"\nPatterns:\n- p1: Step 1, "Skipped the greeting" (rule: Greet the caller.)\nExisting themes: "Opening"');
  });

  it('keeps themes in order; drops unknown or repeated patterns, bad or repeated names, empty themes', () => {
    const r = readThemes(
      {
        themes: [
          { name: 'Opening.', patterns: ['p1', 'p9'] },
          { name: 'a theme name that is much too long to be a few plain words', patterns: ['p2'] },
          { name: 'opening', patterns: ['p2'] },
          { name: 'Taking the order', patterns: ['p1', 'p2', 'p3'] },
          { name: 'Closing', patterns: [] },
        ],
      },
      IDS,
    );
    expect(r.themes).toEqual([
      { name: 'Opening', patterns: ['p1'] },
      { name: 'Taking the order', patterns: ['p2', 'p3'] },
    ]);
    expect(r.dropped).toEqual(['theme 2: the name has 14 words (at most 8)', 'theme 3 ("Opening"): named like an earlier one', 'theme 5 ("Closing"): no pattern']);
  });

  it('shows the patterns numbered and reads the numbers back as their ids', () => {
    const pats = [
      { id: 'pat_Kx9aBcQ2zTqLmN0pRsUvWx', rule_label: 'Step 1', name: 'Skipped the greeting', rule_text: 'Greet the caller.' },
      { id: 'pat_Ab3dEf6hIj9kLm2oPq5sTu', rule_label: 'Step 2', name: 'Skipped the read-back', rule_text: 'Read the order back.' },
    ];
    expect(themeSubject('Take an order', pats, [])).toBe('Procedure "Take an order"\nPatterns:\n- p1: Step 1, "Skipped the greeting" (rule: Greet the caller.)\n- p2: Step 2, "Skipped the read-back" (rule: Read the order back.)');
    const r = readThemes({ themes: [{ name: 'Closing', patterns: ['p2', 'p2'] }, { name: 'Opening', patterns: ['p1', 'p3'] }] }, pats.map((p) => p.id));
    expect(r.themes).toEqual([
      { name: 'Closing', patterns: ['pat_Ab3dEf6hIj9kLm2oPq5sTu'] },
      { name: 'Opening', patterns: ['pat_Kx9aBcQ2zTqLmN0pRsUvWx'] },
    ]);
  });

  it('refuses an answer without themes', () => {
    expect(() => readThemes({ groups: [] }, IDS)).toThrow(MalformedThemes);
  });
});

describe('keeping theme ids when a regrouping still fits', () => {
  const old = [
    { id: 't-open', name: 'Opening', patterns: ['p1', 'p2'] },
    { id: 't-order', name: 'Taking the order', patterns: ['p3', 'p4', 'p5'] },
    { id: 't-close', name: 'Closing', patterns: ['p6'] },
  ];

  it('keeps an id by name, whatever the members', () => {
    expect(planThemes(old, [{ name: 'opening', patterns: ['p9'] }])).toEqual({ ids: ['t-open'], retired: ['t-order', 't-close'] });
  });

  it.each([
    // p3 p4 p5 vs p3 p7 p8: 1/5 = 0.2 (under 0.3): a new theme
    [['p3', 'p7', 'p8'], null],
    // p3 p4 p5 vs p3 p4 p7 p8 p9 p10: 2/7 ≈ 0.29 (just under): a new theme
    [['p3', 'p4', 'p7', 'p8', 'p9', 'p10'], null],
    // p3 p4 p5 vs p3 p4 p7 p8 p9: 2/6 ≈ 0.33 (over): the old id under the new name
    [['p3', 'p4', 'p7', 'p8', 'p9'], 't-order'],
    // exactly 0.3: 3 shared of 10
    [['p3', 'p4', 'p5', 'p11', 'p12', 'p13', 'p14', 'p15', 'p16', 'p17'], 't-order'],
  ])('renamed theme with members %j keeps id %p', (patterns, id) => {
    const plan = planThemes(old, [{ name: 'Order taking', patterns }]);
    expect(plan.ids).toEqual([id]);
    expect(plan.retired).toEqual(['t-open', 't-order', 't-close'].filter((t) => t !== id));
  });

  it('matches one to one, best overlap first; a name match is taken before any overlap', () => {
    const plan = planThemes(old, [
      { name: 'Greeting', patterns: ['p1', 'p2', 'p3'] },
      { name: 'Hello', patterns: ['p1', 'p2'] },
      { name: 'Taking the order', patterns: ['p6'] },
    ]);
    expect(plan).toEqual({ ids: [null, 't-open', 't-order'], retired: ['t-close'] });
  });
});
