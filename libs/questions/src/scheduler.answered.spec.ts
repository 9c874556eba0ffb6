/**
 * The scheduler's tasks answered by the question processor through a model over HTTP (the fake
 * OpenAI server): what the run's end asks of a live trace question when nothing came since.
 */
import { MemoryWindowStore, openAiChatModel } from '@neatroots/platform';
import { judgeReply, startFakeOpenAI, type FakeOpenAI, type FakeReply } from '../../platform/src/models/fake-openai.test';
import { QuestionAnswerer } from './answerer';
import type { QuestionFindingsWindow } from './findings';
import { runEnd, span, question, T0 } from './fixtures.test';
import { questionSet } from './library';
import { QuestionProcessor } from './processor';
import { QuestionScheduler, type SchedulerWindow } from './scheduler';

let fake: FakeOpenAI;
/** What the model does with the next judge call. */
let judge: 'fail' | 'flag' = 'flag';
beforeAll(async () => {
  fake = await startFakeOpenAI((call): FakeReply => {
    if (call.kind === 'second_look') return { json: { holds: true, quote: 'result s1' } };
    if (call.kind !== 'judge') return { content: 'A note.' };
    return judge === 'fail' ? { status: 500, content: 'down' } : judgeReply(call, () => ({ p: 0.95, quote: 'result s1' }));
  });
});
afterAll(() => fake.close());

const wentWrong = question({ id: 'went-wrong', scope: 'trace', when: 'live', ask: 'Did the run go wrong?', guidance: 'Look again.' });

function pipeline() {
  const set = questionSet([wentWrong]);
  const scheduler = new QuestionScheduler({ windows: new MemoryWindowStore<SchedulerWindow>(), questions: () => set });
  const answerer = new QuestionAnswerer({
    decision: openAiChatModel({ role: 'decision', baseURL: fake.url, model: 'decision-test', timeoutMs: 2_000 }),
    queue: { maxWaitMs: 5, retries: 0 },
    cache: false,
    onError: () => undefined,
  });
  const processor = new QuestionProcessor({ answerer, windows: new MemoryWindowStore<QuestionFindingsWindow>(), log: () => undefined });
  const step = async (envs: Parameters<QuestionScheduler['process']>[0]) => {
    const asked = await scheduler.process(envs);
    await asked.commit();
    const out = await processor.process(asked.tasks);
    await out.commit();
    return { tasks: asked.tasks, results: out.results.map((r) => r.answer.status), findings: out.findings.map((f) => [f.status, f.count]) };
  };
  return { step, close: () => answerer.close() };
}

describe("a live trace question at the run's end, nothing new since its last ask", () => {
  it('is asked again when the last ask went unanswered (not checked): the finding is raised at the end', async () => {
    const p = pipeline();
    judge = 'fail';
    const live = await p.step([span('r1', 's1', {}, T0)]);
    expect(live.results).toEqual(['not_checked']);
    judge = 'flag';
    const calls = fake.calls.length;
    const end = await p.step([runEnd('r1', 'ok', T0 + 100)]);
    expect(end.results).toEqual(['answered']);
    expect(end.findings).toEqual([['raised', 1]]);
    expect(fake.calls.length).toBeGreaterThan(calls);
    p.close();
  });

  it('when the last ask was answered, the end asks it as the same task: the model is not asked again and the finding is not counted twice', async () => {
    const p = pipeline();
    judge = 'flag';
    const live = await p.step([span('r2', 's1', {}, T0)]);
    expect(live.findings).toEqual([['raised', 1]]);
    const calls = fake.calls.length;
    const end = await p.step([runEnd('r2', 'ok', T0 + 100)]);
    expect(end.tasks.map((t) => t.id)).toEqual(live.tasks.map((t) => t.id));
    expect(end.results).toEqual([]);
    expect(end.findings).toEqual([]);
    expect(fake.calls.length).toBe(calls);
    p.close();
  });
});
