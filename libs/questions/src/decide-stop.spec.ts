import { openAiChatModel, until } from '@neatroots/platform';
import { startFakeOpenAI, type FakeOpenAI } from '../../platform/src/models/fake-openai.test';
import { QuestionAnswerer } from './answerer';
import { ModelQueueClosedError } from './batcher';

/**
 * A decision (review's procedure checks) asked while the question service stops: the model
 * queue closes under it. Before, decide() answered it "not made" (`the model failed: the local
 * model queue is closed (the process is stopping)`), a reason review takes for a model failure:
 * the session's rules were recorded as not checked on the check's last try, and a try was spent
 * with a warning otherwise. Now it throws ModelQueueClosedError: no decision is recorded either
 * way, and the check is asked again.
 */
let fake: FakeOpenAI;
let release: () => void = () => undefined;
beforeAll(async () => {
  const held = new Promise<void>((r) => (release = r));
  fake = await startFakeOpenAI(async () => {
    await held;
    return { json: { answers: [] } };
  });
});
afterAll(async () => {
  release();
  await fake.close();
});

const item = { instructions: 'You decide.', subject: 'The agent said hello.', ask: 'Did it greet?' };

describe('a decision asked while the model queue closes', () => {
  it('is not answered "not made": it fails with ModelQueueClosedError, in flight or waiting', async () => {
    const answerer = new QuestionAnswerer({ local: openAiChatModel({ role: 'local', baseURL: fake.url, model: 'm', timeoutMs: 60_000 }), localQueue: { maxBatch: 1, maxConcurrent: 1, maxWaitMs: 0 } });
    const inFlight = answerer.decide('decision', item).then((r) => r, (e: unknown) => e);
    await until('the decision sent to the model', () => fake.calls.length >= 1, 30_000);
    const waiting = answerer.decide('decision', { ...item, ask: 'Did it leave?' }).then((r) => r, (e: unknown) => e);
    answerer.close();
    expect(await inFlight).toBeInstanceOf(ModelQueueClosedError);
    expect(await waiting).toBeInstanceOf(ModelQueueClosedError);
    // Closed before it is asked: the same.
    await expect(answerer.decide('reasoning', item)).rejects.toBeInstanceOf(ModelQueueClosedError);
  }, 60_000);
});
