import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { compileFolder, type ProcedureCheck, type SessionBody } from '@neatroots/sop';
import { rollUpCheck, rollUpSession } from './rollup';

// The restaurant fixture of libs/sop and the bodies its sessions check to.
const FIXTURES = path.resolve(__dirname, '../../../sop/fixtures');
const compiled = compileFolder(path.join(FIXTURES, 'luigis'));
const required = new Map(compiled.procedures.flatMap((p) => p.rules.map((r) => [`${p.procedure_id}\0${r.rule_id}`, r.required] as const)));
const body = (name: string): SessionBody => JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', name, 'expected.json'), 'utf8'));

/** The session rolled up again with the findings of these rules (by kind and index, e.g. "n1") suppressed. */
function rolled(name: string, suppress: string[], requiredOverride?: (ruleId: string) => boolean) {
  const b = body(name);
  const checks = b.checks.map((c: ProcedureCheck) => {
    const ids = new Set(c.rules.filter((r) => suppress.includes(`${r.kind[0]}${r.index}`) && r.finding).map((r) => r.rule_id));
    const requiredOf = requiredOverride ?? ((id: string) => required.get(`${c.procedure_id}\0${id}`) ?? false);
    return { procedure_id: c.procedure_id, result: rollUpCheck(c, ids, requiredOf), checked_result: c.checked_result };
  });
  return { checks, ...rollUpSession(checks) };
}

describe('results rolled up with suppressed findings read as passed', () => {
  it.each([
    // session, suppressed findings, session result after, checker's own
    ['phone-never-violated', ['n1'], 'followed', 'deviated'], // its only deviation suppressed: followed
    ['phone-never-violated', [], 'deviated', 'deviated'],
    ['phone-skipped-goal-not-reached', ['s2'], 'followed', 'deviated'],
    ['phone-leniency-partial', ['s2'], 'followed', 'partial'],
    ['payment-out-of-order', ['s2'], 'followed', 'partial'],
    ['payment-skipped', ['s1'], 'followed', 'deviated'],
    ['phone-warning-signs', ['w2'], 'followed', 'followed'], // a warning sign never changes a result
    ['payment-agent-never-spoke', [], 'not_measurable', 'not_measurable'],
    ['phone-routed-out', [], 'followed', 'followed'],
  ])('%s with %j suppressed: %s (checked_result %s)', (name, suppress, result, checked) => {
    const r = rolled(name, suppress);
    expect([r.result, r.checked_result]).toEqual([result, checked]);
    expect(r.checked_result).toBe(body(name).result);
  });

  it("reads each rule's required from the release (a required step skipped is a deviation whatever the goal)", () => {
    expect(rolled('phone-leniency-partial', []).result).toBe('partial');
    expect(rolled('phone-leniency-partial', [], () => true).result).toBe('deviated');
  });

  it('keeps a check that was not checked (null) and one that is not measurable as they are', () => {
    const b = body('phone-offline-not-checked');
    expect(b.checks.map((c) => rollUpCheck(c, new Set(c.rules.map((r) => r.rule_id)), () => false))).toEqual(['not_measurable', null]);
  });
});
