import { loadModelConfig, openAiChatModel } from '@neatroots/platform';
import { startQuestionGrpc, type QuestionGrpc } from '@neatroots/question';
import { QuestionAnswerer } from '@neatroots/questions';
import { startFakeOpenAI, type FakeCall, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { questionRemote } from './compose';

/**
 * The deadline the distributed deployment's callers give the question service (review's
 * procedure decisions, the api's drafts) comes from the model configuration of the calling
 * process: the model's timeout, NEATROOTS_QUESTION_RETRIES, the batch wait. A model that answers
 * after 3 s is waited for when its timeout allows it, and given up on (DEADLINE_EXCEEDED) when the
 * configured timeout is far shorter; it was a fixed 180 s whatever the timeout.
 */
const ANSWER_AFTER_MS = 3_000;
let fake: FakeOpenAI;
let address: string;
const closers: (() => unknown)[] = [];

/** The ids of a decision prompt's questions (decisionMessages in @neatroots/questions). */
const idsOf = (call: FakeCall) => [...(call.body.messages.find((m) => m.role === 'user')?.content ?? '').matchAll(/^(q\d+) \(about subject/gm)].map((m) => m[1]);

beforeAll(async () => {
  fake = await startFakeOpenAI((call) =>
    call.kind === 'draft'
      ? { delayMs: ANSWER_AFTER_MS, json: { check: 'rule', id: 'slow-search', title: 'Slow search', rule: { type: 'slow', span: { tool: ['search'] }, at_least_ms: 5000 } } }
      : { delayMs: ANSWER_AFTER_MS, json: { answers: idsOf(call).map((id) => ({ id, p: 0.9, reason: 'greeted' })) } },
  );
  // The question service's own model timeout is long: only the caller's deadline can cut a call short.
  const answerer = new QuestionAnswerer({ local: openAiChatModel({ role: 'local', baseURL: fake.url, model: 'llama-test', timeoutMs: 30_000 }), queue: { maxWaitMs: 0 }, cache: false });
  const grpc: QuestionGrpc = await startQuestionGrpc(answerer, { port: 0, host: '127.0.0.1', log: () => undefined });
  closers.push(() => answerer.close(), () => grpc.close());
  address = `127.0.0.1:${grpc.port}`;
});
afterAll(async () => {
  for (const c of closers.reverse()) await c();
  await fake?.close();
});

/** The question service as a caller configured with this local LLM timeout sees it. */
function caller(timeoutMs: number) {
  const models = loadModelConfig({ NEATROOTS_LLM_URL: fake.url, NEATROOTS_LLM_MODEL: 'llama-test', NEATROOTS_LLM_TIMEOUT_MS: String(timeoutMs), NEATROOTS_QUESTION_RETRIES: '0', NEATROOTS_QUESTION_BATCH_WAIT_MS: '0' });
  return questionRemote(address, (step) => closers.push(step), {}, models);
}

const item = (n: number) => ({ instructions: 'Decide whether the agent did the step.', subject: `The agent said hello (${n}).`, ask: 'Did the agent greet the caller?' });

describe('deadlines of calls to the question service, from the caller\'s model configuration', () => {
  it('a decision: waited for with a timeout that allows the model\'s 3 s (deadline 3 × 2 s + 2 s), cut off with one that does not (3 × 100 ms + 2 s)', async () => {
    const t0 = Date.now();
    await expect(caller(2_000).decisions.decide('decision', item(1))).resolves.toMatchObject({ ok: true, answer: { p: 0.9 } });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(ANSWER_AFTER_MS);
    const t1 = Date.now();
    await expect(caller(100).decisions.decide('decision', item(2))).rejects.toThrow(/^question service: Deadline exceeded/);
    const waited = Date.now() - t1;
    expect(waited).toBeGreaterThanOrEqual(2_200);
    expect(waited).toBeLessThan(ANSWER_AFTER_MS);
  }, 20_000);

  it('a draft: the same, with one request of its own (2 × 2 s + 2 s; 2 × 100 ms + 2 s)', async () => {
    await expect(caller(2_000).draft!({ concern: 'search taking longer than five seconds' })).resolves.toMatchObject({ check: { id: 'slow-search' } });
    const t0 = Date.now();
    await expect(caller(100).draft!({ concern: 'search taking longer than five seconds' })).rejects.toThrow(/^question service: Deadline exceeded/);
    expect(Date.now() - t0).toBeLessThan(ANSWER_AFTER_MS);
  }, 20_000);
});
