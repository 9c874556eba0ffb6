import { parseDatabaseCheck } from '@neatroots/checks';
import { ModelError } from '@neatroots/ports';
import { question } from './fixtures.test';
import { ModelQueueClosedError } from './batcher';
import { needsPlan, Planner, plannedId, type PlannerChat } from './planner';
import type { Plan, PlanRequest } from './types';

const library = [
  question({ id: 'ignored-tool-error', ask: 'Did a tool fail unnoticed?' }, 'library'),
  question({ id: 'contradicts-tools', ask: 'Does the final answer contradict the tools?', evidence: { final_output: true } }, 'library'),
  question({ id: 'instructions-in-tool-content', ask: 'Did it follow instructions from tool content?' }, 'library'),
  question({ id: 'personal-data-in-answer', ask: 'Does the final answer reveal personal data?', evidence: { final_output: true } }, 'library'),
  question({ id: 'system-prompt-violation', ask: 'Did it break these rules: {rules}?' }, 'library'),
  question({ id: 'unfinished-task', ask: 'Did it leave {task} unfinished?' }, 'library'),
  question({ id: 'wrong-tool-or-arguments', scope: 'span', ask: 'Wrong tool ({tools})?' }, 'library'),
  question({ id: 'repeating-without-progress', ask: 'Is it going round in circles?' }, 'library'),
];

const req: PlanRequest = {
  project: 'p',
  workflow: 'Refund Agent',
  system_prompt: 'You handle refunds. Never refund more than the order total. Be friendly.',
  user_message: 'Refund order 17',
  tools: [{ name: 'lookup_order' }, { name: 'issue_refund', description: 'refunds an order' }],
};

const chat = (reply: unknown): PlannerChat => async () => ({ text: typeof reply === 'string' ? reply : JSON.stringify(reply), answered_by: 'local' });

describe('the planner', () => {
  it('plans by rules without an LLM: the always-on four for tool users, and what the inputs point to', async () => {
    const plan = await new Planner({ library }).plan(req);
    expect(plan.planned_by).toBe('heuristic');
    expect(plan.picks.map((p) => p.id)).toEqual([
      'ignored-tool-error', 'contradicts-tools', 'instructions-in-tool-content', 'personal-data-in-answer',
      'system-prompt-violation', 'unfinished-task', 'wrong-tool-or-arguments', 'repeating-without-progress',
    ]);
    expect(plan.picks.find((p) => p.id === 'system-prompt-violation')!.params).toEqual({ rules: 'Never refund more than the order total.' });
    expect(plan.picks.find((p) => p.id === 'wrong-tool-or-arguments')!.params).toEqual({ tools: 'lookup_order, issue_refund' });
    expect(plan.tools).toEqual(['lookup_order', 'issue_refund']);
  });

  it('takes 3 to 8 library questions from the LLM, fills their parameters, and validates the questions it writes', async () => {
    const planner = new Planner({
      library,
      onError: () => undefined,
      chat: chat({
        pick: [{ id: 'unfinished-task', params: { task: 'the refund of order 17', bogus: 'x' } }, { id: 'made-up' }],
        new: [
          { id: 'Over Refund', ask: 'Does the agent claim in its final response that more was refunded than paid?', scope: 'span' },
          { id: 'broken', kind: 'choice', ask: 'Which?' },
        ],
      }),
    });
    const plan = await planner.plan(req);
    expect(plan.planned_by).toBe('local');
    expect(plan.picks[0]).toEqual({ id: 'unfinished-task', params: { task: 'the refund of order 17' } });
    expect(plan.picks.length).toBe(3);
    expect(plan.written.map((w) => w.id)).toEqual([plannedId('Refund Agent', 'Over Refund')]);
    const c = parseDatabaseCheck(plan.written[0]);
    // It asks about the agent's answer: given scope trace and the final output automatically.
    expect(c).toMatchObject({ id: 'plan-refund-agent-over-refund', scope: 'trace', evidence: { final_output: true }, applies_to: { workflow: ['Refund Agent'], project: ['p'] } });
  });

  it('falls back to the rules when the LLM answer is not JSON', async () => {
    const plan = await new Planner({ library, chat: chat('Sure! I would pick a few.'), onWarn: () => undefined, onError: () => undefined }).plan(req);
    expect(plan.planned_by).toBe('heuristic');
  });

  // A model's failure is not a bug: one line at warn level, no stack, saying why; error (with its
  // stack) is kept for what is.
  it.each<[string, () => never, RegExp]>([
    ['a timeout', () => { throw new ModelError('timeout', 'no answer within 3000 ms'); }, /^the LLM could not plan Refund Agent: the model timed out: no answer within 3000 ms; planning by rules$/],
    ['an HTTP error', () => { throw new ModelError('server', 'HTTP 502: upstream 502', 502); }, /^the LLM could not plan Refund Agent: the model answered HTTP 502: upstream 502; planning by rules$/],
    ['a connection closed', () => { throw new ModelError('connection', 'the model server closed the connection before its answer was complete'); }, /^the LLM could not plan Refund Agent: the model server closed the connection before its answer was complete; planning by rules$/],
  ])('warns, without a stack, when the model fails: %s', async (_, fail, line) => {
    const warned: string[] = [];
    const errors: unknown[] = [];
    const plan = await new Planner({ library, chat: async () => fail(), onWarn: (m) => warned.push(m), onError: (m, e) => errors.push([m, e]) }).plan(req);
    expect(plan.planned_by).toBe('heuristic');
    expect(warned).toEqual([expect.stringMatching(line)]);
    expect(errors).toEqual([]);
  });

  it.each<[string, Awaited<ReturnType<PlannerChat>>, string]>([
    ['a refusal', { text: '', refusal: 'I cannot help with that.', answered_by: 'decision' }, 'the LLM could not plan Refund Agent: the model refused: I cannot help with that.; planning by rules'],
    ['a reply cut at max_tokens', { text: '{"pick": [{"id": "unfin', finishReason: 'length', usage: { output_tokens: 1500 }, answered_by: 'decision' }, 'the LLM could not plan Refund Agent: the answer was cut at 1500 tokens (max_tokens) before it was complete; planning by rules'],
    ['a tool call', { text: '', finishReason: 'tool_calls', answered_by: 'decision' }, 'the LLM could not plan Refund Agent: the reply has no text (finish_reason tool_calls); planning by rules'],
    ['text that is not JSON', { text: 'Sure! I would pick a few.', answered_by: 'local' }, 'the LLM could not plan Refund Agent: the model\'s reply is not JSON: "Sure! I would pick a few."; planning by rules'],
  ])('says why a reply cannot be used, at warn: %s', async (_, res, line) => {
    const warned: string[] = [];
    const errors: unknown[] = [];
    const plan = await new Planner({ library, chat: async () => res, onWarn: (m) => warned.push(m), onError: (m, e) => errors.push([m, e]) }).plan(req);
    expect(plan.planned_by).toBe('heuristic');
    expect(warned).toEqual([line]);
    expect(errors).toEqual([]);
  });

  it('makes no plan when a stop closed the model\'s queue (the rules\' plan would stand for good): the error goes to the caller', async () => {
    const errors: unknown[] = [];
    const planner = new Planner({ library, chat: async () => { throw new ModelQueueClosedError('local'); }, onWarn: (m) => errors.push(m), onError: (m, e) => errors.push([m, e]) });
    await expect(planner.plan(req)).rejects.toBeInstanceOf(ModelQueueClosedError);
    expect(errors).toEqual([]);
  });

  it('keeps error level, with the error, for a bug', async () => {
    const warned: string[] = [];
    const errors: [string, unknown][] = [];
    const bug = new TypeError("Cannot read properties of undefined (reading 'text')");
    const plan = await new Planner({ library, chat: async () => { throw bug; }, onWarn: (m) => warned.push(m), onError: (m, e) => errors.push([m, e]) }).plan(req);
    expect(plan.planned_by).toBe('heuristic');
    expect(warned).toEqual([]);
    expect(errors).toEqual([["the LLM's plan for Refund Agent is unusable; planning by rules", bug]]);
  });

  it('redoes a plan only when new tools appear, keeping the tools and questions planned before', async () => {
    const before: Plan = { project: 'p', workflow: 'w', tools: ['a', 'b'], picks: [], written: [{ id: 'plan-w-x', yaml: 'id: plan-w-x' }], planned_by: 'local', at_ms: 0 };
    expect(needsPlan(before, [{ name: 'a' }])).toBe(false);
    expect(needsPlan(before, [{ name: 'a' }, { name: 'c' }])).toBe(true);
    expect(needsPlan(undefined, [])).toBe(true);
    const again = await new Planner({ library }).plan({ ...req, workflow: 'w', tools: [{ name: 'c' }] }, before);
    expect(again.tools).toEqual(['a', 'b', 'c']);
    expect(again.written.map((w) => w.id)).toEqual(['plan-w-x']);
    // Planned for every tool known, not only the new one (a tool span asks with the one it showed).
    expect(again.picks.find((p) => p.id === 'wrong-tool-or-arguments')?.params).toEqual({ tools: 'c, a, b' });
    let prompt = '';
    const llm = new Planner({ library, chat: async (messages) => ((prompt = messages.map((m) => m.content).join('\n')), { text: JSON.stringify({ pick: [] }), answered_by: 'local' }) });
    await llm.plan({ project: 'p', workflow: 'w', tools: [{ name: 'c' }] }, before);
    expect(prompt).toMatch(/### Tools\n- c\n- a\n- b\n/);
  });

  it('never carries forward nor writes again a question whose database check was deleted', async () => {
    const x = { id: plannedId('w', 'x'), yaml: `id: ${plannedId('w', 'x')}` };
    const y = { id: plannedId('w', 'y'), yaml: `id: ${plannedId('w', 'y')}` };
    // As ChecksRepo.delete leaves it: x moved from written to deleted.
    const before: Plan = { project: 'p', workflow: 'w', tools: ['a'], picks: [], written: [y], deleted: [x.id], planned_by: 'local', at_ms: 0 };
    const rewrites = new Planner({ library, onError: () => undefined, chat: chat({ pick: [], new: [{ id: 'x', ask: 'Did it refund twice?' }, { id: 'z', ask: 'Did it refund a closed order?' }] }) });
    const again = await rewrites.plan({ ...req, workflow: 'w', tools: [{ name: 'b' }] }, before);
    expect(again.written.map((w) => w.id)).toEqual([plannedId('w', 'z'), y.id]);
    expect(again.deleted).toEqual([x.id]);
    // A plan from before anything was deleted keeps no `deleted`.
    expect((await new Planner({ library }).plan({ ...req, workflow: 'w', tools: [{ name: 'b' }] }, { ...before, deleted: undefined })).deleted).toBeUndefined();
  });
});
