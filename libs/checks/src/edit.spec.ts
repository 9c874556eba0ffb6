import { checkObject, setCheckField } from './edit';

describe('editing a check in its YAML', () => {
  const text = '# keep me\nid: a\nkind: rule # inline\nrule: { type: count, at_least: 3 }\n';

  it('sets a field, keeping comments and the rest as written', () => {
    const out = setCheckField(text, ['action'], 'halt');
    expect(out.startsWith('# keep me\nid: a\nkind: rule # inline\n')).toBe(true);
    expect(checkObject(out)).toEqual({ id: 'a', kind: 'rule', rule: { type: 'count', at_least: 3 }, action: 'halt' });
    expect(checkObject(setCheckField(out, ['applies_to', 'project'], ['shop']))).toMatchObject({ applies_to: { project: ['shop'] } });
  });

  it('leaves text that is not one check alone', () => {
    expect(setCheckField('- id: a\n', ['action'], 'halt')).toBe('- id: a\n');
    expect(checkObject('id: [')).toBeUndefined();
  });
});
