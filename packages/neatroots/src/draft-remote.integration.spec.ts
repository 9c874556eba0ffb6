import { openAiChatModel } from '@neatroots/platform';
import { startQuestionGrpc, type QuestionGrpc } from '@neatroots/question';
import { NoModelError, QuestionAnswerer } from '@neatroots/questions';
import { startFakeOpenAI, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { questionRemote } from './compose';

/**
 * Drafting a check in the distributed deployment: the api's process drafts through the
 * question service in another one (neatroots.v1.Question Complete over gRPC), so the model
 * call joins the one gateway's queue; without an LLM there, the draft says so.
 */
let fake: FakeOpenAI;
const closers: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of closers.reverse()) await c();
  await fake?.close();
});

async function questionService(withModel: boolean): Promise<string> {
  const answerer = new QuestionAnswerer(withModel ? { local: openAiChatModel({ role: 'local', baseURL: fake.url, model: 'llama-test' }), queue: { maxWaitMs: 0 } } : {});
  const grpc: QuestionGrpc = await startQuestionGrpc(answerer, { port: 0, host: '127.0.0.1', log: () => undefined });
  closers.push(() => answerer.close(), () => grpc.close());
  return `127.0.0.1:${grpc.port}`;
}

describe('checks/draft through a question service in another process', () => {
  it('asks the model through the service and validates the draft here', async () => {
    fake = await startFakeOpenAI((call) =>
      call.kind === 'draft' ? { json: { check: 'rule', id: 'slow-search', title: 'Slow search', rule: { type: 'slow', span: { tool: ['search'] }, at_least_ms: 5000 } } } : { json: {} },
    );
    const remote = questionRemote(await questionService(true), (step) => closers.push(step));
    const d = await remote.draft!({ concern: 'search taking longer than five seconds', project: 'shop' });
    expect(d.check).toMatchObject({ id: 'slow-search', kind: 'rule', rule: { type: 'slow', at_least_ms: 5000 }, applies_to: { project: ['shop'] } });
    expect(fake.calls.map((c) => c.kind)).toEqual(['draft']);
  });

  it('says no LLM is configured when the service has none', async () => {
    const remote = questionRemote(await questionService(false), (step) => closers.push(step));
    await expect(remote.draft!({ concern: 'anything' })).rejects.toBeInstanceOf(NoModelError);
  });
});
