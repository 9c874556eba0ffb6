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

it("a decision its caller gives up (a check cut short by a stop) is cancelled at once; the question service keeps the model's answer for the check that runs next", async () => {
  let answer!: () => void;
  const held = new Promise<void>((r) => (answer = r));
  const reply = answering(() => ({ p: 0.95, evidence: [], reason: 'It greeted.' }));
  fake.script = async (call) => {
    await held;
    return reply(call);
  };
  const before = fake.calls.length;
  const item = { instructions: 'You decide.', subject: 'The agent said: Hello, welcome to the cut check!', ask: 'Did it greet?', answer_format: 'sop-model-answer' };
  const stop = new AbortController();
  const asked = client.decide('decision', item, { signal: stop.signal });
  for (const t0 = Date.now(); fake.calls.length === before && Date.now() - t0 < 10_000; ) await new Promise((r) => setTimeout(r, 20));
  expect(fake.calls.length).toBe(before + 1);
  stop.abort(new Error('the check was cut short'));
  // over at once, with the signal's reason (not an answer "not made": nothing is recorded as not checked)
  const ended = await Promise.race([asked.then(() => 'answered', (e: Error) => e.message), new Promise((r) => setTimeout(() => r('still waiting'), 3_000))]);
  expect(ended).toBe('the check was cut short');
  answer();
  // the model's answer reached the question service all the same, and is cached there: the
  // replica that checks the session next reads it without asking the model again
  let next = await client.decide('decision', item);
  for (const t0 = Date.now(); next.ok && !next.cached && Date.now() - t0 < 10_000; ) {
    await new Promise((r) => setTimeout(r, 50));
    next = await client.decide('decision', item);
  }
  expect(next).toEqual({ ok: true, answer: expect.objectContaining({ p: 0.95 }), model: 'decider-test', cached: true });
  expect(fake.calls.length).toBe(before + 1);
});
