import { CheckError } from '@neatroots/checks';
import { draftCheck, draftMessages } from './draft';
import type { PlannerChat } from './planner';

/** The model's reply, as the question service's gateway would hand it back. */
const reply = (json: unknown): PlannerChat => async () => ({ text: JSON.stringify(json), answered_by: 'local' });

describe('draftCheck', () => {
  it('drafts a rule for an order of calls, scoped to the project, flagging only', async () => {
    const d = await draftCheck(
      { concern: 'refunds issued without looking up the order first', project: 'shop', tools: ['lookup_order', 'issue_refund'] },
      reply({ check: 'rule', id: 'Refund before lookup', title: 'Refund without lookup', rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } }, guidance: 'Look the order up first.' }),
    );
    expect(d.check).toMatchObject({ id: 'refund-before-lookup', kind: 'rule', action: 'flag', applies_to: { project: ['shop'] }, rule: { type: 'requires_before' } });
    expect(d.yaml).toContain('type: requires_before');
    expect(d.warnings).toEqual([]);
  });

  it('drafts a question otherwise, given the answer when it asks about it, and says so', async () => {
    const d = await draftCheck(
      { concern: 'the bot tells customers a refund went through when it did not' },
      reply({ check: 'question', id: 'false-refund', kind: 'yes_no', scope: 'span', ask: 'Does the agent claim a refund was issued that the tools do not show?' }),
    );
    expect(d.check).toMatchObject({ kind: 'yes_no', scope: 'trace', evidence: { final_output: true } });
    expect(d.warnings).toEqual([expect.stringContaining("asks about the agent's answer")]);
  });

  it('refuses an unusable draft naming the field', async () => {
    await expect(draftCheck({ concern: 'x' }, reply({ check: 'rule', rule: { type: 'match', pattern: 'a' } }))).rejects.toThrow(/rule\.type/);
    await expect(draftCheck({ concern: 'x' }, reply({ check: 'rule', rule: { type: 'count', at_least: 0 } }))).rejects.toThrow('rule.at_least');
    await expect(draftCheck({ concern: 'x' }, async () => ({ text: 'I cannot', answered_by: 'local' }))).rejects.toThrow(CheckError);
    await expect(draftCheck({ concern: '  ' }, reply({}))).rejects.toThrow('concern');
  });

  // The reason the reply cannot be used, as the model's server gave it (in-process, the gateway
  // hands back the whole reply): not 'the model's reply is not JSON: ""'.
  it.each<[string, Awaited<ReturnType<PlannerChat>>, string]>([
    ['a refusal', { text: '', refusal: "I'm sorry, I can't help with that.", finishReason: 'stop', answered_by: 'decision' }, "the model refused: I'm sorry, I can't help with that."],
    ['a reply cut at max_tokens', { text: '{"check": "question", "ask": "Did the agent', finishReason: 'length', usage: { output_tokens: 800 }, answered_by: 'decision' }, 'the answer was cut at 800 tokens (max_tokens) before it was complete'],
    ['a tool call instead of text', { text: '', finishReason: 'tool_calls', answered_by: 'decision' }, 'the reply has no text (finish_reason tool_calls)'],
    ['an empty reply over gRPC (text only)', { text: ' ', answered_by: 'decision' }, 'the reply has no text'],
  ])('says why a reply cannot be used: %s', async (_, res, why) => {
    const err = await draftCheck({ concern: 'refunds without a lookup' }, async () => res).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CheckError);
    expect((err as Error).message).toContain(why);
    expect((err as Error).message).not.toContain('not JSON');
  });

  it('still says a reply that is text but not JSON is not JSON', async () => {
    await expect(draftCheck({ concern: 'x' }, async () => ({ text: 'I cannot', finishReason: 'stop', answered_by: 'local' }))).rejects.toThrow(`the model's reply is not JSON: "I cannot"`);
  });

  it('tells the model the project tools', () => {
    expect(draftMessages({ concern: 'c', tools: ['a', 'b'] })[1].content).toBe('Concern: c\n\nThe agent\'s tools: a, b');
    expect(draftMessages({ concern: 'c' })[0].content.startsWith('You turn a concern')).toBe(true);
  });
});
