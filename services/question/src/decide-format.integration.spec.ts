import { openAiChatModel } from '@neatroots/platform';
import { QuestionAnswerer } from '@neatroots/questions';
import { DEFAULT_DECISIONS, modelDecider, type DecisionGateway } from '@neatroots/sop';
import { startFakeOpenAI, type FakeCall, type FakeOpenAI, type FakeReply } from '../../../libs/platform/src/models/fake-openai.test';
import { QuestionDecisionsClient } from './decisions';
import { startQuestionGrpc } from './grpc';

/**
 * The procedure checker over gRPC Decide, as the review service asks the question service in the
 * distributed deployment: a malformed answer is not cached there either, so checking the session
 * again asks the model again. The real `openai` client talks to a local OpenAI-compatible server.
 */
let fake: FakeOpenAI;
let answerer: QuestionAnswerer;
let grpc: Awaited<ReturnType<typeof startQuestionGrpc>>;
let client: QuestionDecisionsClient;

/** Each question of a decide-1 request answered with `fields` (besides its id). */
function answering(fields: () => Record<string, unknown>): (call: FakeCall) => FakeReply {
  return (call) => {
    const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
    return { json: { answers: [...user.matchAll(/^(q\d+) \(about subject S\d+\)/gm)].map((m) => ({ id: m[1], ...fields() })) } };
  };
}

beforeAll(async () => {
  fake = await startFakeOpenAI(() => ({ content: '{}' }));
  answerer = new QuestionAnswerer({
    decision: openAiChatModel({ role: 'decision', baseURL: fake.url, model: 'decider-test', timeoutMs: 5_000 }),
    queue: { maxWaitMs: 5, retries: 0 },
    onError: () => undefined,
  });
  grpc = await startQuestionGrpc(answerer, { port: 0, log: () => undefined });
  client = new QuestionDecisionsClient(`127.0.0.1:${grpc.port}`);
});
afterAll(async () => {
  client.close();
  await grpc.close();
  answerer.close();
  await fake.close();
});

it("a procedure check's malformed answer is not cached by the question service: the next check asks the model again", async () => {
  let replies = 0;
  fake.script = answering(() => (replies++ === 0 ? { p: 'high', reason: 'x' } : { p: 0.95, evidence: [{ turn: 0, quote: 'Hello, welcome!' }], reason: 'It greeted.' }));
  const gateway: DecisionGateway = { decide: (e, i) => client.decide(e, i), decisionModels: () => client.decisionModels() };
  const decider = modelDecider(gateway, 'decider-test', DEFAULT_DECISIONS);
  const greet = {
    kind: 'step',
    procedure: { name: 'take-order' },
    rule: { index: 1, text: 'Greet the caller' },
    session: { external_id: null, agent: 'a', release_id: null, started_at: null, transcript_ref: null, turns: [{ role: 'agent', text: 'Hello, welcome!' }], tool_calls: [] },
  } as unknown as Parameters<typeof decider.decide>[0];

  expect(await decider.decide(greet)).toEqual({ decided: false, retryable: true, reason: expect.stringMatching(/could not decide whether the step was done: the model gave a malformed answer \("p" is not a probability/) });
  expect(await decider.decide(greet)).toMatchObject({ decided: true, answer: true, probability: 0.95 });
  expect(fake.calls).toHaveLength(2);
  // A usable answer is cached: the third check reads it without asking.
  expect(await decider.decide(greet)).toMatchObject({ decided: true, probability: 0.95 });
  expect(fake.calls).toHaveLength(2);
});

it('refuses an answer format it does not know (INVALID_ARGUMENT), naming the ones it does', async () => {
  await expect(client.decide('decision', { instructions: 'You decide.', subject: 'x', ask: 'Is it so?', answer_format: 'nope' })).rejects.toThrow(/answer_format: must be one of sop-model-answer, got "nope"/);
});
