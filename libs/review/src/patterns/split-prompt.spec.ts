import { MalformedSplit, readSplit, splitSubject } from './split-prompt';

const IDS = ['f1', 'f2', 'f3', 'f4', 'f5', 'f6', 'f7', 'f8'];

describe("reading the reasoning model's split of a rule's findings", () => {
  it('keeps named failure modes; what none took is other', () => {
    const r = readSplit({ failure_modes: [{ name: 'Quoted a price.', findings: ['f1', 'f2', 'f3'] }, { name: 'Described a dish', findings: ['f4', 'f5'] }] }, IDS);
    expect(r).toEqual({ failure_modes: [{ name: 'Quoted a price', findings: ['f1', 'f2', 'f3'] }, { name: 'Described a dish', findings: ['f4', 'f5'] }], other: ['f6', 'f7', 'f8'], dropped: [] });
  });

  it('drops unknown and repeated findings, unusable names, empty modes, and modes past 5', () => {
    const r = readSplit(
      {
        failure_modes: [
          { name: 'A', findings: ['f1', 'f99'] },
          { name: 'B', findings: ['f1', 'f2'] },
          { name: 'the agent said a lot of things that were not at all what it should have', findings: ['f3'] },
          { name: 'D', findings: [] },
          { name: 'E', findings: ['f4'] },
          { name: 'F', findings: ['f5'] },
          { name: 'G', findings: ['f6'] },
          { name: 'H', findings: ['f7'] },
        ],
      },
      IDS,
    );
    expect(r.failure_modes.map((m) => m.name)).toEqual(['A', 'B', 'E', 'F', 'G']);
    expect(r.failure_modes[1].findings).toEqual(['f2']);
    expect(r.other).toEqual(['f3', 'f7', 'f8']);
    expect(r.dropped).toEqual([
      'failure mode 1: unknown finding "f99"',
      'failure mode 2: f1 is already in another',
      'failure mode 3: the name has 16 words (at most 8)',
      'failure mode 4 ("D"): no finding',
      'failure mode 8: more than 5',
    ]);
  });

  it('refuses an answer without failure modes', () => {
    expect(() => readSplit({ modes: [] }, IDS)).toThrow(MalformedSplit);
  });

  it('shows the findings numbered and reads the numbers back as their ids (an id written out is read too)', () => {
    const findings = [{ id: 'sf_Kx9aBcQ2zTqLmN0pRsUvWx', quote: 'That is $12.' }, { id: 'sf_Ab3dEf6hIj9kLm2oPq5sTu', quote: 'The lobster is fresh.' }, { id: 'sf_Zz1yYx2wWv3uUt4sSr5qQp', quote: 'Bye.' }];
    expect(splitSubject({ procedure_name: 'P', rule_label: 'Never rule 1', rule_text: 'Volunteer a price.' }, findings)).toBe('Procedure "P", Never rule 1: "Volunteer a price."\nFindings:\n- f1: That is $12.\n- f2: The lobster is fresh.\n- f3: Bye.');
    const r = readSplit({ failure_modes: [{ name: 'Quoted a price', findings: ['f1', ' F3 '] }, { name: 'Described a dish', findings: ['sf_Ab3dEf6hIj9kLm2oPq5sTu', 'f4'] }] }, findings.map((f) => f.id));
    expect(r.failure_modes).toEqual([
      { name: 'Quoted a price', findings: ['sf_Kx9aBcQ2zTqLmN0pRsUvWx', 'sf_Zz1yYx2wWv3uUt4sSr5qQp'] },
      { name: 'Described a dish', findings: ['sf_Ab3dEf6hIj9kLm2oPq5sTu'] },
    ]);
    expect(r.dropped).toEqual(['failure mode 2: unknown finding "f4"']);
  });

  it('lists the findings under the rule', () => {
    expect(splitSubject({ procedure_name: 'Take an order', rule_label: 'Never rule 1', rule_text: 'Volunteer a price.' }, [{ id: 'f1', quote: 'That is  $12.' }])).toBe(
      'Procedure "Take an order", Never rule 1: "Volunteer a price."\nFindings:\n- f1: That is $12.',
    );
  });
});
