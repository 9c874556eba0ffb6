import { openAiChatModel } from '@neatroots/platform';
import { QuestionAnswerer } from '@neatroots/questions';
import { startFakeOpenAI, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { QuestionDecisionsClient } from './decisions';
import { startQuestionGrpc } from './grpc';

/**
 * A decision's answer budget (max_tokens) over gRPC Decide, as the review service's failure-mode
 * split asks it in the distributed deployment: it reaches the model, so an answer that lists
 * 200 findings is not cut at the default 450 tokens. The real `openai` client talks to a local
 * OpenAI-compatible server that stops at max_tokens like a real one.
 */
let fake: FakeOpenAI;
let answerer: QuestionAnswerer;
beforeAll(async () => {
  fake = await startFakeOpenAI(() => ({ content: '{}' }));
  answerer = new QuestionAnswerer({ reasoning: openAiChatModel({ role: 'reasoning', baseURL: fake.url, model: 'reason-test', timeoutMs: 5_000 }), cache: false });
});
afterAll(async () => {
  answerer.close();
  await fake.close();
});

it('Decide over gRPC carries max_tokens to the model: a long list comes back whole', async () => {
  const list = Array.from({ length: 200 }, (_, i) => `f${i + 1}`);
  fake.script = () => ({ json: { answers: [{ id: 'q1', failure_modes: [{ name: 'Quoted a price', findings: list }] }] } });
  const grpc = await startQuestionGrpc(answerer, { port: 0, log: () => undefined });
  const client = new QuestionDecisionsClient(`127.0.0.1:${grpc.port}`);
  try {
    const reply = await client.decide('reasoning', { instructions: 'You group findings.', subject: 'Findings: ...', ask: 'Split them.', max_tokens: 1_900 });
    expect(reply).toEqual({ ok: true, answer: { id: 'q1', failure_modes: [{ name: 'Quoted a price', findings: list }] }, model: 'reason-test', cached: false });
    expect(fake.calls.map((c) => c.body.max_tokens)).toEqual([2_100]);
    // Without one, the default budget.
    fake.script = () => ({ json: { answers: [{ id: 'q1', holds: true }] } });
    await expect(client.decide('reasoning', { instructions: 'You decide.', subject: 'x', ask: 'Is it so?' })).resolves.toMatchObject({ ok: true });
    expect(fake.calls.at(-1)!.body.max_tokens).toBe(450);
  } finally {
    client.close();
    await grpc.close();
  }
});
