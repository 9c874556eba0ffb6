import type { Evidence } from '../body';
import type { LockRule } from '../lock';
import { isFinding, procedureResult } from '../result';
import type { StepObservation } from './observation';
import { stepStatuses } from './steps';

const rule = (index: number, extra: Partial<LockRule> = {}): LockRule => ({
  rule_id: `r${index}`, kind: 'step', index, text: `Step ${index}.`, tool: null, required: false, when: null, action: null, ...extra,
});
const ev = (turn: number): Evidence[] => [{ turn, quote: null, source: 'tool_calls' }];
type O = Pick<StepObservation, 'applies' | 'done'> & { turn?: number };
const done = (turn: number): O => ({ applies: true, done: true, turn });
const notDone: O = { applies: true, done: false };
const unknown: O = { applies: true, done: null };
const notApplicable: O = { applies: false, done: null };
const conditionUnknown: O = { applies: null, done: false };

const statuses = (obs: O[]) =>
  stepStatuses(obs.map((o, i) => ({ rule: rule(i + 1), applies: o.applies, done: o.done, evidence: o.turn === undefined ? [] : ev(o.turn), reason: '' }))).map((d) => d.status);

describe('stepStatuses', () => {
  it.each<[string, O[], string[]]>([
    ['all done in order', [done(1), done(2), done(4)], ['done', 'done', 'done']],
    ['not done with a later step done: skipped', [done(1), notDone, done(3)], ['done', 'skipped', 'done']],
    ['not done with no later step done: not_reached', [done(1), notDone, notDone], ['done', 'not_reached', 'not_reached']],
    ['nothing done: all not_reached', [notDone, notDone], ['not_reached', 'not_reached']],
    ['skipped before the last done, not_reached after it', [notDone, done(2), notDone], ['skipped', 'done', 'not_reached']],
    ['a condition that never arose: not_applicable, and it is no evidence', [done(1), notApplicable], ['done', 'not_applicable']],
    ['not_applicable in the middle leaves the order alone', [done(1), notApplicable, done(3)], ['done', 'not_applicable', 'done']],
    ['undecided: not_checked, and not evidence of progress', [notDone, unknown], ['not_reached', 'not_checked']],
    ['not done but condition unknown: not_checked', [conditionUnknown, done(3)], ['not_checked', 'done']],
    ['done early: out_of_order', [done(5), done(1), done(2)], ['out_of_order', 'done', 'done']],
    ['out_of_order still counts as progress for skipped', [notDone, done(4), done(2)], ['skipped', 'out_of_order', 'done']],
    ['done without an evidence turn counts as progress for skipped', [notDone, { applies: true, done: true }, notDone], ['skipped', 'done', 'not_reached']],
    ['done without an evidence turn, after an out-of-order pair', [done(5), done(1), notDone, { applies: true, done: true }], ['out_of_order', 'done', 'skipped', 'done']],
  ])('%s', (_what, obs, expected) => {
    expect(statuses(obs)).toEqual(expected);
  });

  it('a done step without an evidence turn is done, and cannot be out of order', () => {
    expect(statuses([{ applies: true, done: true }, done(0)])).toEqual(['done', 'done']);
  });

  it('a done step without an evidence turn still counts as progress: a required step before it is skipped, and the procedure deviated', () => {
    // a model's "done" often names no turn (or one out of range, which the checker drops)
    const d = stepStatuses([
      { rule: rule(1, { required: true }), applies: true, done: false, evidence: [], reason: '' },
      { rule: rule(2), applies: true, done: true, evidence: [], reason: '' },
      { rule: rule(3), applies: true, done: false, evidence: [], reason: '' },
    ]);
    expect(d.map((x) => x.status)).toEqual(['skipped', 'done', 'not_reached']);
    expect(d[0].reason).toBe('Step 2 was done later in the procedure, so the session went past it.');
    expect(d.map((x) => isFinding(x.status))).toEqual([true, false, false]);
    const rolled = d.map((x, i) => ({ kind: 'step' as const, status: x.status, required: i === 0 }));
    expect(procedureResult(rolled, true, true)).toBe('deviated');
  });

  it('says why in the reason', () => {
    const d = stepStatuses([
      { rule: rule(1), applies: true, done: false, evidence: [], reason: 'x was never called.' },
      { rule: rule(2), applies: true, done: true, evidence: ev(5), reason: '' },
      { rule: rule(3), applies: true, done: true, evidence: ev(2), reason: '' },
      { rule: rule(4), applies: true, done: false, evidence: [], reason: '' },
    ]);
    expect(d[0].reason).toBe('x was never called. Step 3 was done later in the procedure, so the session went past it.');
    expect(d[1].reason).toBe('Done at turn 5, after step 3 (turn 2), which comes later in the procedure.');
    expect(d[3].reason).toBe('No later step was done: the session ended before it.');
  });
});
