import { checkSession } from './checker';
import { compileFiles } from './compile';
import { noModelDecider, type Reviewer } from './decider';
import { recordedDecider, type RecordedAnswer } from './recorded-decider';
import type { Session } from './session';

const folder = compileFiles({
  'procedures/take-order.md': `# Take an order
Goal: The order is placed and read back to the caller.

## Steps
1. Greet the caller with the name of the restaurant.
2. Look up the account of the caller. [tool: lookup_account, required]
3. Confirm the delivery address. [when: the caller wants delivery]
4. Place the order. [tool: place_order, required]

## Never
- Volunteer a price or a description of a dish.

## Warning signs
- The caller sounds upset. -> Offer a callback from the manager.
`,
  'procedures/allergies.md': '# Allergies\nApplies when: The caller mentions an allergy.\n\n## Steps\n1. Note the allergy. [tool: note_allergy, required]\n',
  'agents/phone-agent.yaml': 'procedures: [take-order, allergies]\n',
});
if (folder.errors.length) throw new Error(JSON.stringify(folder.errors));

const session = (tools: [number, string][], turns = 6): Session => ({
  external_id: 'call-1', agent: 'phone-agent', release_id: null, started_at: null, transcript_ref: null,
  turns: Array.from({ length: turns }, (_, i) => ({ role: i % 2 ? ('agent' as const) : ('user' as const), text: i % 2 ? `Agent line ${i}. That dish is $12.` : `User line ${i}.` })),
  tool_calls: tools.map(([turn, tool]) => ({ turn, tool, input: { q: 1 }, output: null, error: null })),
});

const offline = noModelDecider();
const statuses = (body: Awaited<ReturnType<typeof checkSession>>, i = 0) => body.checks[i].rules.map((r) => `${r.kind}${r.index}:${r.status}`);

describe('checkSession without a model', () => {
  it('decides required tool steps from tool calls and leaves the rest not_checked, saying so', async () => {
    const body = await checkSession(folder, session([[1, 'lookup_account'], [3, 'place_order']]), { decider: offline });
    expect(statuses(body)).toEqual(['step1:not_checked', 'step2:done', 'step3:not_checked', 'step4:done', 'never1:not_checked', 'warning1:not_checked']);
    const [, s2, s3] = body.checks[0].rules;
    expect(s2.evidence).toEqual([{ turn: 1, quote: 'lookup_account {"q":1}', source: 'tool_calls' }]);
    expect(s3.reason).toMatch(/^Not checked: deciding .*needs a model, and no model is configured\.$/);
    expect(body.checks[0]).toMatchObject({ applicable: true, result: 'not_measurable', checked_result: 'not_measurable', goal_reached: null, model: null, prompt_version: null });
    // a procedure with Applies when: is not routed without a model
    expect(body.checks[1]).toMatchObject({ procedure_id: 'allergies', applicable: null, result: null, rules: [] });
    expect(body.checks[1].route_reason).toMatch(/^Not checked: deciding whether the procedure applies needs a model/);
    expect(body.result).toBe('not_measurable');
  });

  it('a required tool step not called is skipped when a later step was done, else not_reached', async () => {
    const skipped = await checkSession(folder, session([[3, 'place_order']]), { decider: offline });
    expect(statuses(skipped)[1]).toBe('step2:skipped');
    expect(skipped.checks[0]).toMatchObject({ result: 'deviated', steps_applicable: 2, steps_done: 1 });
    expect(skipped.checks[0].rules[1]).toMatchObject({ finding: true, evidence: [] });
    const notReached = await checkSession(folder, session([[1, 'lookup_account']]), { decider: offline });
    expect(statuses(notReached)[3]).toBe('step4:not_reached');
    expect(notReached.checks[0].rules[3].finding).toBe(false);
    expect(notReached.checks[0].result).toBe('partial');
    expect(notReached.checks[0].excluded_reason).toBeNull();
  });

  it('a procedure none of whose tools was called is excluded, though a step\'s condition is undecided', async () => {
    const refunds = compileFiles({
      'procedures/refund-order.md': `# Refund an order
Goal: The customer gets the refund they are owed.

## Steps
1. Look up the order. [tool: lookup_order, required]
2. Issue the refund. [tool: issue_refund, required, when: the order is owed a refund]
`,
      'agents/support-agent.yaml': 'procedures: [refund-order]\n',
    });
    const asked = (tools: [number, string][]) => ({ ...session(tools), agent: 'support-agent' });
    // the customer asked about shipping: neither tool called; whether a refund was owed, nobody could tell
    const unrelated = await checkSession(refunds, asked([[1, 'track_parcel']]), { decider: offline });
    expect(statuses(unrelated)).toEqual(['step1:not_reached', 'step2:not_checked']);
    // not_checked says so first, then what the tool calls showed
    expect(unrelated.checks[0].rules[1].reason).toMatch(/^Not checked: deciding .*needs a model, and no model is configured\. issue_refund was never called\.$/);
    expect(unrelated.checks[0]).toMatchObject({
      excluded_reason: "The session ended before the procedure started: its only applicable step was not reached, so it isn't checked.",
      result: null,
      checked_result: null,
    });
    // the refund issued without the lookup: the undecided step was done, so the procedure started
    const unchecked = await checkSession(refunds, asked([[3, 'issue_refund']]), { decider: offline });
    expect(statuses(unchecked)).toEqual(['step1:skipped', 'step2:done']);
    expect(unchecked.checks[0]).toMatchObject({ excluded_reason: null, result: 'deviated' });
  });

  describe('each call counts for one step: a tool serving several steps, calls sent out of turn order', () => {
    const payments = compileFiles({
      'procedures/pay.md': '# Pay\n\n## Steps\n1. Email the quote. [tool: send_email, required]\n2. Charge the card. [tool: charge, required]\n3. Email the receipt. [tool: send_email, required]\n',
      'procedures/two.md': '# Two\n\n## Steps\n1. Look up. [tool: a, required]\n2. Book. [tool: b, required]\n',
      'agents/pay-agent.yaml': 'procedures: [pay]\n',
      'agents/two-agent.yaml': 'procedures: [two]\n',
    });
    if (payments.errors.length) throw new Error(JSON.stringify(payments.errors));
    const paid = (agent: string, tools: [number, string][]) => checkSession(payments, { ...session(tools), agent }, { decider: offline });

    it('quote, charge, receipt in order: all done, each with its own call', async () => {
      const body = await paid('pay-agent', [[1, 'send_email'], [3, 'charge'], [5, 'send_email']]);
      expect(statuses(body)).toEqual(['step1:done', 'step2:done', 'step3:done']);
      expect(body.checks[0].rules.map((r) => r.evidence.map((e) => e.turn))).toEqual([[1], [3], [5]]);
      expect(body.checks[0].result).toBe('followed');
      expect(body.checks[0].rules.some((r) => r.finding)).toBe(false);
    });

    it('the receipt never sent: its step is not done (the quote\'s email is the quote step\'s)', async () => {
      const body = await paid('pay-agent', [[1, 'send_email'], [3, 'charge']]);
      expect(statuses(body)).toEqual(['step1:done', 'step2:done', 'step3:not_reached']);
      expect(body.checks[0].rules[2].reason).toBe('send_email was not called for this step: each of its calls counts for an earlier step. No later step was done: the session ended before it.');
      expect(body.checks[0].result).toBe('partial');
    });

    it('the quote email sent twice (a retry): the receipt is the email after the charge, not the retry, and nothing is out of order', async () => {
      const body = await paid('pay-agent', [[1, 'send_email'], [2, 'send_email'], [3, 'charge'], [5, 'send_email']]);
      expect(statuses(body)).toEqual(['step1:done', 'step2:done', 'step3:done']);
      expect(body.checks[0].rules.map((r) => r.evidence.map((e) => e.turn))).toEqual([[1], [3], [5]]);
      expect(body.checks[0].result).toBe('followed');
    });

    it('the card charged before the quote: the charge is still its step\'s call, out of order', async () => {
      const body = await paid('pay-agent', [[1, 'charge'], [2, 'send_email'], [4, 'send_email']]);
      expect(body.checks[0].rules.map((r) => r.evidence.map((e) => e.turn))).toEqual([[2], [1], [4]]);
      // The quote and the charge were done in the wrong order: one of the two is out of order.
      expect(statuses(body).filter((x) => x.endsWith(':out_of_order'))).toHaveLength(1);
      expect(body.checks[0].result).toBe('partial');
    });

    it('calls listed out of turn order are read by turn', async () => {
      const body = await paid('two-agent', [[1, 'b'], [4, 'a'], [0, 'a']]);
      expect(statuses(body)).toEqual(['step1:done', 'step2:done']);
      expect(body.checks[0].rules[0].evidence[0].turn).toBe(0);
    });
  });

  it('only a required tool step left undecided on its when: lets a procedure be excluded; one not required may have been done another way', async () => {
    const refunds = (annotation: string) => compileFiles({
      'procedures/refund-order.md': `# Refund an order\n\n## Steps\n1. Look up the order. [tool: lookup_order, required]\n2. Issue the refund. [${annotation}]\n`,
      'agents/support-agent.yaml': 'procedures: [refund-order]\n',
    });
    const asked = { ...session([[1, 'track_parcel']]), agent: 'support-agent' };
    const required = await checkSession(refunds('tool: issue_refund, required, when: the order is owed a refund'), asked, { decider: offline });
    expect(required.checks[0].excluded_reason).not.toBeNull();
    const optional = await checkSession(refunds('tool: issue_refund, when: the order is owed a refund'), asked, { decider: offline });
    expect(statuses(optional)).toEqual(['step1:not_reached', 'step2:not_checked']);
    expect(optional.checks[0]).toMatchObject({ excluded_reason: null, result: 'partial' });
  });

  it('without any tool calls, the transcript decides tool steps (so, offline, they are not checked)', async () => {
    const body = await checkSession(folder, session([]), { decider: offline });
    expect(statuses(body).slice(0, 4)).toEqual(['step1:not_checked', 'step2:not_checked', 'step3:not_checked', 'step4:not_checked']);
  });

  it('a session where the agent never spoke is not_measurable', async () => {
    const s = session([[1, 'place_order']], 1);
    s.tool_calls[0].turn = 0;
    const body = await checkSession(folder, s, { decider: offline });
    expect(body.checks[0].result).toBe('not_measurable');
    expect(body.result).toBe('not_measurable');
  });

  it('has the body fields in order', async () => {
    const body = await checkSession(folder, session([]), { decider: offline });
    expect(Object.keys(body)).toEqual(['id', 'external_id', 'agent', 'release_id', 'status', 'result', 'checks']);
    expect(Object.keys(body.checks[0])).toEqual([
      'procedure_id', 'procedure_name', 'procedure_version', 'release_id', 'applicable', 'excluded_reason', 'route_reason', 'result', 'checked_result',
      'goal_reached', 'goal_reason', 'steps_applicable', 'steps_done', 'nevers_violated', 'model', 'prompt_version', 'rules',
    ]);
    expect(Object.keys(body.checks[0].rules[0])).toEqual(['rule_id', 'kind', 'index', 'text', 'status', 'evidence', 'reason', 'finding', 'finding_id', 'pattern_id', 'suppressed', 'override']);
  });
});

describe('checkSession with a decider', () => {
  const all = (extra: Record<string, RecordedAnswer>): Record<string, RecordedAnswer> => ({
    'take-order/step/1': { answer: true, evidence: [{ turn: 1, quote: 'Agent line 1', source: 'transcript' }] },
    'take-order/condition/3': { answer: false, reason: 'Pickup.' },
    'take-order/never/1': { answer: false },
    'take-order/warning/1': { answer: false },
    'take-order/goal': { answer: true },
    'allergies/route': { answer: false, reason: 'No allergy came up.' },
    ...extra,
  });
  const tools: [number, string][] = [[1, 'lookup_account'], [3, 'place_order']];

  it('routes, decides each rule, and says which model ran; decided reasons start with "Decided:"', async () => {
    const body = await checkSession(folder, session(tools), { decider: recordedDecider({ model: 'fast', prompt_version: 'decide-1', answers: all({}) }) });
    expect(statuses(body)).toEqual(['step1:done', 'step2:done', 'step3:not_applicable', 'step4:done', 'never1:ok', 'warning1:absent']);
    expect(body.checks[0]).toMatchObject({ result: 'followed', goal_reached: true, model: 'fast', prompt_version: 'decide-1', steps_applicable: 3, steps_done: 3 });
    expect(body.checks[0].rules[2].reason).toBe('Decided: Pickup.');
    expect(body.checks[1]).toMatchObject({ applicable: false, route_reason: 'No allergy came up.', result: null });
    expect(body.result).toBe('followed');
  });

  it('a violated never rule quotes the agent; flagged without the agent\'s words it is stored as ok', async () => {
    const quoted = await checkSession(folder, session(tools), {
      decider: recordedDecider({ answers: all({ 'take-order/never/1': { answer: true, evidence: [{ turn: 3, quote: 'that dish is  $12', source: 'transcript' }] } }) }),
    });
    expect(quoted.checks[0].rules[4]).toMatchObject({ status: 'violated', finding: true, evidence: [{ turn: 3, quote: 'that dish is  $12', source: 'transcript' }] });
    expect(quoted.checks[0]).toMatchObject({ result: 'deviated', nevers_violated: 1 });
    const userWords = await checkSession(folder, session(tools), {
      decider: recordedDecider({ answers: all({ 'take-order/never/1': { answer: true, evidence: [{ turn: 2, quote: 'User line 2', source: 'transcript' }] } }) }),
    });
    expect(userWords.checks[0].rules[4]).toMatchObject({ status: 'ok', finding: false, evidence: [] });
    expect(userWords.checks[0].rules[4].reason).toMatch(/^Stored as ok: it was flagged as violated without quoting the agent's own words\./);
    expect(userWords.checks[0].result).toBe('followed');
  });

  it('a violated never rule whose quote names a turn out of range is moved to the agent turn that has it, not stored as ok', async () => {
    const body = await checkSession(folder, session(tools), {
      decider: recordedDecider({ answers: all({ 'take-order/never/1': { answer: true, evidence: [{ turn: 40, quote: 'Agent line 3', source: 'transcript' }] } }) }),
    });
    expect(body.checks[0].rules[4]).toMatchObject({ status: 'violated', finding: true, evidence: [{ turn: 3, quote: 'Agent line 3', source: 'transcript' }] });
    expect(body.checks[0]).toMatchObject({ result: 'deviated', nevers_violated: 1 });
    // the same from a reviewer's answer
    const reviewer: Reviewer = {
      model: 'reasoner',
      promptVersion: 'check-5',
      review: async () => ({ decided: true, answer: true, probability: 0.9, sure: true, evidence: [{ turn: -1, quote: 'agent line 5', source: 'transcript' }], reason: 'A price.' }),
    };
    const reviewed = await checkSession(folder, session(tools), {
      decider: recordedDecider({ answers: all({ 'take-order/never/1': { answer: false, sure: false } }) }),
      reviewer,
    });
    expect(reviewed.checks[0].rules[4]).toMatchObject({ status: 'violated', evidence: [{ turn: 5, quote: 'agent line 5', source: 'transcript' }] });
  });

  it('a procedure the session ended before is excluded: applicable, no result, left out of the session\'s', async () => {
    // the caller hangs up after the greeting: no step of take-order was done, no tool called
    const ended = await checkSession(folder, session([], 2), {
      decider: recordedDecider({ answers: all({ 'take-order/step/1': { answer: false }, 'take-order/step/2': { answer: false }, 'take-order/step/4': { answer: false }, 'take-order/goal': { answer: false } }) }),
    });
    expect(statuses(ended)).toEqual(['step1:not_reached', 'step2:not_reached', 'step3:not_applicable', 'step4:not_reached', 'never1:ok', 'warning1:absent']);
    expect(ended.checks[0]).toMatchObject({
      applicable: true,
      excluded_reason: "The session ended before the procedure started: none of its 3 applicable steps was reached, so it isn't checked.",
      result: null,
      checked_result: null,
    });
    expect(ended.result).toBe('not_measurable');
    // the same session, where the agent had volunteered a price: checked, and deviated
    const violated = await checkSession(folder, session([], 2), {
      decider: recordedDecider({
        answers: all({ 'take-order/step/1': { answer: false }, 'take-order/step/2': { answer: false }, 'take-order/step/4': { answer: false }, 'take-order/never/1': { answer: true, evidence: [{ turn: 1, quote: 'That dish is $12', source: 'transcript' }] } }),
      }),
    });
    expect(violated.checks[0]).toMatchObject({ excluded_reason: null, result: 'deviated' });
  });

  it('a step decided not done whose condition nobody could decide is not_checked, its reason starting "Not checked:"', async () => {
    const answers = all({ 'take-order/step/3': { answer: false, reason: 'No address was confirmed.' } });
    delete answers['take-order/condition/3'];
    const body = await checkSession(folder, session(tools), { decider: recordedDecider({ answers }) });
    const s3 = body.checks[0].rules[2];
    expect(s3.status).toBe('not_checked');
    expect(s3.reason).toBe('Not checked: no recorded answer for take-order/condition/3. Decided: No address was confirmed.');
  });

  it('a warning sign that came up, where nobody could decide whether it was handled, is not_checked, its reason starting "Not checked:"', async () => {
    const body = await checkSession(folder, session(tools), {
      decider: recordedDecider({ answers: all({ 'take-order/warning/1': { answer: true, reason: 'The caller said this is ridiculous.' } }) }),
    });
    expect(body.checks[0].rules[5]).toMatchObject({
      status: 'not_checked',
      reason: 'Not checked: no recorded answer for take-order/responded/1. Decided: The caller said this is ridiculous.',
    });
  });

  it('a warning sign that came up and was not handled is unheeded (a finding that leaves the result alone)', async () => {
    const body = await checkSession(folder, session(tools), {
      decider: recordedDecider({ answers: all({ 'take-order/warning/1': { answer: true }, 'take-order/responded/1': { answer: false } }) }),
    });
    expect(body.checks[0].rules[5]).toMatchObject({ status: 'unheeded', finding: true });
    expect(body.checks[0].result).toBe('followed');
  });

  it('the reviewer looks again at flagged and unsure decisions, and the same status rules apply to its answer', async () => {
    const seen: string[] = [];
    const reviewer: Reviewer = {
      model: 'reasoner',
      promptVersion: 'check-5',
      async review(q, _draft, status) {
        seen.push(`${q.kind}/${q.rule?.index}:${status}`);
        return { decided: true, answer: true, probability: 0.9, sure: true, evidence: [{ turn: 5, quote: 'Agent line 5', source: 'transcript' }], reason: 'Greeted late.' };
      },
    };
    const body = await checkSession(folder, session(tools), {
      decider: recordedDecider({ model: 'fast', prompt_version: 'decide-1', answers: all({ 'take-order/step/1': { answer: false }, 'take-order/never/1': { answer: false, sure: false } }) }),
      reviewer,
    });
    expect(seen).toEqual(['step/1:skipped', 'never/1:ok']);
    // step 1 now done at turn 5, after steps 2 and 4: out of order; the never rule now "violated" with the agent's words
    expect(statuses(body)).toEqual(['step1:out_of_order', 'step2:done', 'step3:not_applicable', 'step4:done', 'never1:violated', 'warning1:absent']);
    expect(body.checks[0].rules[0].reason).toBe('Greeted late. Done at turn 5, after step 2 (turn 1), which comes later in the procedure.');
    expect(body.checks[0]).toMatchObject({ model: 'fast+reasoner', prompt_version: 'decide-1+check-5', result: 'deviated' });
  });
});

describe('checkSession agents', () => {
  it('refuses a session whose agent is not in the folder', async () => {
    await expect(checkSession(folder, { ...session([]), agent: 'nobody' }, { decider: offline })).rejects.toThrow('agent "nobody" is not in the procedures folder (agents: phone-agent)');
  });
});
