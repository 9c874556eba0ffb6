import { Lineage, type LineageLink } from './links';
import { planRealign, type FindingGroup, type RulePatternKey } from './realign';

const link = (rule_id: string, previous_rule_id: string | null, how: LineageLink['how'] = 'matched'): LineageLink => ({ procedure_id: 'p', rule_id, previous_rule_id, how, similarity: null });
const group = (rule_id: string, rule_pattern_id: string): FindingGroup => ({ procedure_id: 'p', rule_id, rule_pattern_id });
const pattern = (id: string, lineage_id: string): RulePatternKey => ({ id, procedure_id: 'p', lineage_id });

describe('planRealign', () => {
  it('moves nothing when every finding is in the pattern of its lineage', () => {
    const lineage = new Lineage([link('a2', 'a1')]);
    expect(planRealign([group('a1', 'P'), group('a2', 'P')], [pattern('P', 'a1')], lineage, { wholeMoves: true })).toEqual({ whole: [], rules: [] });
  });

  it('moves a pattern whole when all its findings now belong to another lineage (a manual link): re-keyed or merged, with its verdicts', () => {
    // b1 was its own rule with its own pattern; linked by hand to a2, its lineage is a1.
    const lineage = new Lineage([link('a2', 'a1'), link('b1', 'a2', 'manual')]);
    const plan = planRealign([group('a1', 'P'), group('a2', 'P'), group('b1', 'Q')], [pattern('P', 'a1'), pattern('Q', 'b1')], lineage, { wholeMoves: true });
    expect(plan).toEqual({ whole: [{ pattern_id: 'Q', procedure_id: 'p', lineage_id: 'a1' }], rules: [] });
  });

  it('moves by rule what leaves a pattern in part (an unlink): the unlinked rule and its later wordings', () => {
    // a3 made new by hand: a3 and a4 (which replaced it) leave P; a1 and a2 stay.
    const lineage = new Lineage([link('a2', 'a1'), link('a3', null, 'manual'), link('a4', 'a3')]);
    const groups = [group('a1', 'P'), group('a2', 'P'), group('a3', 'P'), group('a4', 'P')];
    expect(planRealign(groups, [pattern('P', 'a1')], lineage, { wholeMoves: true })).toEqual({
      whole: [],
      rules: [
        { procedure_id: 'p', rule_id: 'a3', lineage_id: 'a3' },
        { procedure_id: 'p', rule_id: 'a4', lineage_id: 'a3' },
      ],
    });
  });

  it('never moves a pattern whole for an unlink, so the rule gets a pattern with no verdict', () => {
    // Every finding of P is on the unlinked rule: without whole moves they still go by rule.
    const lineage = new Lineage([link('a2', null, 'manual')]);
    const plan = planRealign([group('a2', 'P')], [pattern('P', 'a1')], lineage, { wholeMoves: false });
    expect(plan).toEqual({ whole: [], rules: [{ procedure_id: 'p', rule_id: 'a2', lineage_id: 'a2' }] });
    expect(planRealign([group('a2', 'P')], [pattern('P', 'a1')], lineage, { wholeMoves: true }).whole).toHaveLength(1);
  });

  it('splits a pattern whose findings go to several lineages by rule, and keeps procedures apart', () => {
    const lineage = new Lineage([link('x', 'y', 'manual'), { procedure_id: 'other', rule_id: 'x', previous_rule_id: null, how: 'new', similarity: null }]);
    const groups = [group('x', 'P'), group('z', 'P'), { procedure_id: 'other', rule_id: 'x', rule_pattern_id: 'O' }];
    const patterns = [pattern('P', 'z'), { id: 'O', procedure_id: 'other', lineage_id: 'x' }];
    expect(planRealign(groups, patterns, lineage, { wholeMoves: true })).toEqual({ whole: [], rules: [{ procedure_id: 'p', rule_id: 'x', lineage_id: 'y' }] });
  });
});
