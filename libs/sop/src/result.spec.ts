import type { ProcedureResult, RuleStatus } from './body';
import { counts, excludedReason, isFinding, procedureResult, resultWithSuppressed, sessionResult, type RolledRule } from './result';

const step = (status: RuleStatus, required = false): RolledRule => ({ kind: 'step', status, required });
const never = (status: RuleStatus): RolledRule => ({ kind: 'never', status, required: false });
const warning = (status: RuleStatus): RolledRule => ({ kind: 'warning', status, required: false });

describe('procedureResult', () => {
  it.each<[string, RolledRule[], boolean | null, ProcedureResult]>([
    ['every step done, nothing violated', [step('done'), step('done', true), never('ok')], null, 'followed'],
    ['a not_applicable step does not stop followed', [step('done'), step('not_applicable')], null, 'followed'],
    ['a never rule violated', [step('done'), never('violated')], true, 'deviated'],
    ['a required step skipped, even with the goal reached', [step('skipped', true), step('done')], true, 'deviated'],
    ['a step skipped, goal not reached', [step('skipped'), step('done')], false, 'deviated'],
    ['a step skipped, goal unclear', [step('skipped'), step('done')], null, 'deviated'],
    ['leniency: a step that is not required skipped, goal reached', [step('skipped'), step('done')], true, 'partial'],
    ['a step out of order', [step('out_of_order'), step('done')], null, 'partial'],
    ['a step not reached', [step('done'), step('not_reached', true)], null, 'partial'],
    ['no applicable step', [step('not_applicable'), never('ok')], null, 'not_measurable'],
    ['only never rules, none violated', [never('ok')], null, 'not_measurable'],
    ['only never rules, one violated', [never('violated')], null, 'deviated'],
    ['warning signs never change it: unheeded', [step('done'), warning('unheeded')], null, 'followed'],
    ['warning signs never change it: not checked', [step('done'), warning('not_checked')], null, 'followed'],
    ['a step not checked is never a pass', [step('done'), step('not_checked')], true, 'not_measurable'],
    ['a never rule not checked is never a pass', [step('done'), never('not_checked')], true, 'not_measurable'],
    ['not checked rules cannot hide a deviation', [step('skipped', true), step('not_checked'), never('not_checked')], null, 'deviated'],
    ['nor a gap', [step('out_of_order'), step('done'), never('not_checked')], null, 'partial'],
  ])('%s', (_what, rules, goal, expected) => {
    expect(procedureResult(rules, goal, true)).toBe(expected);
  });

  it('is not_measurable when the agent never spoke, whatever the rules', () => {
    expect(procedureResult([step('skipped', true), never('violated')], false, false)).toBe('not_measurable');
    expect(procedureResult([step('done')], true, false)).toBe('not_measurable');
  });

  it('reads suppressed findings as passed for result, not for checked_result', () => {
    const rules: RolledRule[] = [step('done'), { ...step('skipped', true), suppressed: true }];
    expect(procedureResult(rules, null, true)).toBe('deviated');
    expect(resultWithSuppressed(rules, null, true)).toBe('followed');
    expect(resultWithSuppressed([step('done'), { ...never('violated'), suppressed: true }], null, true)).toBe('followed');
  });
});

describe('excludedReason: the session ended before the procedure started', () => {
  it('excludes a procedure none of whose applicable steps was reached, nothing else observed', () => {
    expect(excludedReason([step('not_reached', true), step('not_applicable'), step('not_reached'), never('ok'), warning('absent')], true)).toBe(
      "The session ended before the procedure started: none of its 2 applicable steps was reached, so it isn't checked.",
    );
    expect(excludedReason([step('not_reached')], true)).toBe(
      "The session ended before the procedure started: its only applicable step was not reached, so it isn't checked.",
    );
  });

  it('excludes it too when a step is undecided only on its condition, seen not done either way', () => {
    expect(excludedReason([step('not_reached', true), { ...step('not_checked', true), seenNotDone: true }], true)).toBe(
      "The session ended before the procedure started: its only applicable step was not reached, so it isn't checked.",
    );
  });

  it.each<[string, RolledRule[]]>([
    ['a step done: the procedure started, and ended in the middle (partial)', [step('done'), step('not_reached')]],
    ['a step skipped', [step('skipped'), step('not_reached')]],
    ['a step out of order', [step('out_of_order'), step('not_reached')]],
    ['a step not decided: it may have been done', [step('not_checked'), step('not_reached')]],
    ['only steps seen not done whose condition is undecided (none not reached)', [{ ...step('not_checked'), seenNotDone: true }]],
    ['a never rule violated: a finding is never hidden', [step('not_reached'), never('violated')]],
    ['a never rule not decided', [step('not_reached'), never('not_checked')]],
    ['a warning sign that came up and was handled', [step('not_reached'), warning('present')]],
    ['a warning sign unheeded', [step('not_reached'), warning('unheeded')]],
    ['no step applies', [step('not_applicable'), never('ok')]],
    ['no steps at all', [never('ok')]],
  ])('checks it when %s', (_what, rules) => {
    expect(excludedReason(rules, true)).toBeNull();
  });

  it('leaves a session where the agent never spoke not_measurable, not excluded', () => {
    expect(excludedReason([step('not_reached')], false)).toBeNull();
  });
});

describe('sessionResult: the worst of its checks', () => {
  it.each<[(ProcedureResult | null)[], ProcedureResult]>([
    [['followed', 'deviated', 'partial'], 'deviated'],
    [['followed', 'partial', 'not_measurable'], 'partial'],
    [['not_measurable', 'followed'], 'followed'],
    [['not_measurable', null], 'not_measurable'],
    [[null], 'not_measurable'],
    [[], 'not_measurable'],
  ])('%j -> %s', (results, expected) => {
    expect(sessionResult(results)).toBe(expected);
  });
});

describe('findings and counts', () => {
  it('findings are skipped, violated, out_of_order and unheeded only', () => {
    const all: RuleStatus[] = ['done', 'out_of_order', 'skipped', 'not_reached', 'not_applicable', 'violated', 'ok', 'present', 'unheeded', 'absent', 'not_checked'];
    expect(all.filter(isFinding)).toEqual(['out_of_order', 'skipped', 'violated', 'unheeded']);
  });

  it('counts applicable steps (known to apply), done steps (out of order included) and violated nevers', () => {
    expect(
      counts([step('done'), step('out_of_order'), step('skipped'), step('not_reached'), step('not_applicable'), step('not_checked'), never('violated'), never('ok'), warning('present')]),
    ).toEqual({ steps_applicable: 4, steps_done: 2, nevers_violated: 1 });
  });
});
