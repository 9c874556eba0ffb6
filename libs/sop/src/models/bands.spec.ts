import type { DecisionRecord } from '../checker';
import type { Lock, LockRule } from '../lock';
import type { Session } from '../session';
import { QuestionBands, questionWording } from './bands';
import { createCheckSession } from './check-session';
import type { DecisionGateway } from './gateway';
import { DEFAULT_SOP_SETTINGS } from './settings';

/**
 * The checker reads each rule question with the band calibration fitted for it while the
 * question reads the same, and tells what it decided so the check can keep it.
 */
const step: LockRule = { rule_id: 'r_greet', kind: 'step', index: 1, text: 'Greet the caller.', tool: null, required: true, when: null, action: null };
const sign: LockRule = { rule_id: 'r_upset', kind: 'warning', index: 1, text: 'The caller is upset.', tool: null, required: false, when: null, action: 'Offer a callback.' };
const lockWith = (rules: LockRule[]): Lock => ({
  procedures: [{ procedure_id: 'take-order', name: 'Take an order', version: 'v1', goal: null, applies_when: null, rules }],
  agents: [{ agent: 'phone', procedures: ['take-order'], instructions: '' }],
});
const session: Session = { external_id: 'c1', agent: 'phone', release_id: null, started_at: null, transcript_ref: null, turns: [{ role: 'user', text: 'Hi' }, { role: 'agent', text: 'Hello.' }], tool_calls: [] };

/** Every decision answers p = 0.15 (a sure no under the default step band [0.2, 0.8, 0.5]); reviews are counted. */
function gateway() {
  const asked = { decision: 0, reasoning: 0 };
  const g: DecisionGateway = {
    decisionModels: async () => ({ decision: 'fast', reasoning: 'deep' }),
    decide: async (endpoint) => {
      asked[endpoint]++;
      return { ok: true, answer: { p: endpoint === 'decision' ? 0.15 : 0.9, reason: endpoint }, model: endpoint, cached: false };
    },
  };
  return { g, asked };
}

// Review only what the band leaves unsure (no status is reviewed for being a finding).
const settings = { ...DEFAULT_SOP_SETTINGS, decisions: { ...DEFAULT_SOP_SETTINGS.decisions, review_statuses: [] } };

describe('fitted question bands', () => {
  it('an answer sure under the default band is reviewed under a wider fitted band; the decision is told', async () => {
    const { g, asked } = gateway();
    const check = createCheckSession({ gateway: g, settings });
    const plain = await check({ lock: lockWith([step]), releaseId: 'rel_1', session });
    expect(plain.checks[0].rules[0].status).toBe('not_reached');
    expect(asked.reasoning).toBe(0);

    const decisions: DecisionRecord[] = [];
    const bands = new QuestionBands([{ procedure_id: 'take-order', rule_id: 'r_greet', field: 'step', wording: questionWording('step', step), band: [0.1, 0.8, 0.5] }]);
    const fitted = await check({ lock: lockWith([step]), releaseId: 'rel_1', session, bands, onDecision: (d) => decisions.push(d) });
    expect(asked.reasoning).toBe(1);
    expect(fitted.checks[0].rules[0].status).toBe('done'); // the reviewer's yes
    expect(decisions).toEqual([{ procedure_id: 'take-order', rule_id: 'r_greet', field: 'step', p: 0.15, sure: false }]);
  });

  it('a question whose wording changed goes back to the default band', () => {
    const bands = new QuestionBands([
      { procedure_id: 'take-order', rule_id: 'r_upset', field: 'responded', wording: questionWording('responded', sign), band: [0.05, 0.8, 0.5] },
      { procedure_id: 'take-order', rule_id: 'r_greet', field: 'step', wording: 'Greet the caller by name.', band: [0.1, 0.8, 0.5] },
    ]);
    const procedure = lockWith([]).procedures[0];
    const d = settings.decisions;
    expect(bands.bandFor({ kind: 'responded', procedure, rule: sign }, d)).toEqual([0.05, 0.8, 0.5]);
    // SOPOPS_DECISIONS widened since the fit: the wider end wins, so a fit never narrows a band
    expect(bands.bandFor({ kind: 'responded', procedure, rule: sign }, { ...d, bands: { ...d.bands, responded: [0.1, 0.95, 0.6] } })).toEqual([0.05, 0.95, 0.6]);
    // the sign's "-> ..." action changed: its rule id is the same, its question is not
    expect(bands.bandFor({ kind: 'responded', procedure, rule: { ...sign, action: 'Hand over to a manager.' } }, d)).toEqual(d.bands.responded);
    expect(bands.bandFor({ kind: 'step', procedure, rule: step }, d)).toEqual(d.bands.step);
    // another procedure with the same rule, and the sign's other question, keep the defaults
    expect(bands.bandFor({ kind: 'responded', procedure: { ...procedure, procedure_id: 'card-payment' }, rule: sign }, d)).toEqual(d.bands.responded);
    expect(bands.bandFor({ kind: 'warning', procedure, rule: sign }, d)).toEqual(d.bands.warning);
  });
});
