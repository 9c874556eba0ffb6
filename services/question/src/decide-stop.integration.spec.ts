import { credentials, Metadata, status as Status, type ServiceError } from '@grpc/grpc-js';
import { openAiChatModel } from '@neatroots/platform';
import { v1 } from '@neatroots/proto';
import { QuestionAnswerer } from '@neatroots/questions';
import { startFakeOpenAI, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { QuestionDecisionsClient } from './decisions';
import { startQuestionGrpc } from './grpc';

/**
 * A decision asked over gRPC Decide (review's procedure checks, distributed) while the question
 * service stops: its model queue closes under the decision. The service answers UNAVAILABLE, as
 * a service restarting is, without its "unexpected error" line; review's client then fails the
 * check's try as for a question service away (an error, never an answer "not made", so no rule
 * is recorded not checked because of a stop).
 */
let fake: FakeOpenAI;
let answer: () => void = () => undefined;

beforeAll(async () => {
  const held = new Promise<void>((r) => (answer = r));
  fake = await startFakeOpenAI(async () => {
    await held;
    return { json: { answers: [] } };
  });
});
afterAll(async () => {
  answer();
  await fake.close();
});

it('a decision in flight when the question service stops is answered UNAVAILABLE, not logged as unexpected, and fails the caller as a service away', async () => {
  const answerer = new QuestionAnswerer({
    decision: openAiChatModel({ role: 'decision', baseURL: fake.url, model: 'decider-test', timeoutMs: 60_000 }),
    queue: { maxWaitMs: 5, retries: 0 },
    onError: () => undefined,
  });
  const logged: string[] = [];
  const grpc = await startQuestionGrpc(answerer, { port: 0, log: (m) => logged.push(m) });
  const raw = new v1.QuestionClient(`127.0.0.1:${grpc.port}`, credentials.createInsecure());
  const client = new QuestionDecisionsClient(`127.0.0.1:${grpc.port}`);
  try {
    const item = { endpoint: 'decision', instructions: 'You decide.', subject: 'The agent said hello.', ask: 'Did it greet?', answer_format: 'sop-model-answer' };
    const code = new Promise<{ code?: number; details?: string }>((resolve) => {
      raw.decide(item, new Metadata(), { deadline: new Date(Date.now() + 30_000) }, (err: ServiceError | null) => resolve({ code: err?.code, details: err?.details }));
    });
    const viaReview = client.decide('decision', { instructions: item.instructions, subject: 'The agent said hi.', ask: item.ask, answer_format: item.answer_format }).then(
      (r) => ({ answered: r }),
      (e: Error) => ({ failed: e.message }),
    );
    for (const t0 = Date.now(); fake.calls.length === 0 && Date.now() - t0 < 10_000; ) await new Promise((r) => setTimeout(r, 20));
    expect(fake.calls.length).toBeGreaterThan(0); // the model holds them: both are in flight
    answerer.close(); // the question service stops: its model queues close
    expect(await code).toEqual({ code: Status.UNAVAILABLE, details: expect.stringMatching(/closed/) });
    expect(await viaReview).toEqual({ failed: expect.stringMatching(/^question service: .*closed/) });
    expect(logged).toEqual([]);
  } finally {
    raw.close();
    client.close();
    await grpc.close();
    answerer.close();
  }
});
