import { fieldLine } from './field-line';

const YAML = `id: slow-refund
kind: rule
title: Refund without lookup
rule:
  type: count
  span: { type: [tool] }
  at_least: 0
action: flag
`;

describe('fieldLine', () => {
  it('finds the line of a nested field, of its parent when it is missing, and of the check without a field', () => {
    expect(fieldLine(YAML, 'rule.at_least')).toBe(7);
    expect(fieldLine(YAML, 'action')).toBe(8);
    expect(fieldLine(YAML, 'rule.requires')).toBe(4);
    expect(fieldLine(YAML, undefined)).toBe(1);
  });

  it('gives nothing for text that is not one check', () => {
    expect(fieldLine('id: [', 'id')).toBeUndefined();
    expect(fieldLine('- id: a\n- id: b\n', 'id')).toBeUndefined();
  });
});
