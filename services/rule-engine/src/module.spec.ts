import { parseCheckFile, type QuestionCheck } from '@neatroots/checks';
import { LOCAL_LLM_POLICY, questionKey, type AgreementRecord } from '@neatroots/questions';
import { spanPolicy } from './module';

function q(id: string): QuestionCheck {
  return parseCheckFile(`id: ${id}\nkind: yes_no\nscope: span\nask: Is ${id} wrong?\n`, `${id}.yaml`, 'user').checks[0] as QuestionCheck;
}

describe("the rule engine's span policy", () => {
  it('asks every span when the decision model answers, and caps every question when the local LLM stands in with nothing recorded', () => {
    expect(spanPolicy(false, undefined, () => undefined)).toBeUndefined();
    expect(spanPolicy(true, undefined, () => undefined)).toBe(LOCAL_LLM_POLICY);
  });

  it('lifts the cap for a question the fast classifier answers first, as the agreement store records it', async () => {
    const sure = q('sure');
    const unsure = q('unsure');
    const records: AgreementRecord[] = [
      { key: questionKey(sure), check_id: 'sure', answers: 40, agreed: 40, recent: 'a'.repeat(40) },
      { key: questionKey(unsure), check_id: 'unsure', answers: 40, agreed: 30, recent: 'a'.repeat(30) + 'd'.repeat(10) },
    ];
    const policy = spanPolicy(true, { list: async () => records }, () => undefined) as (x: QuestionCheck) => unknown;
    // The first ask reads the store in the background: until it has, the cap applies.
    expect(policy(sure)).toBe(LOCAL_LLM_POLICY);
    await new Promise((r) => setImmediate(r));
    expect(policy(sure)).toBeUndefined();
    expect(policy(unsure)).toBe(LOCAL_LLM_POLICY);
  });
});
