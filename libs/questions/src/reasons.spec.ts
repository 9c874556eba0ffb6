import { openAiChatModel } from '@neatroots/platform';
import { startFakeOpenAI, type FakeOpenAI } from '../../platform/src/models/fake-openai.test';
import { QuestionAnswerer } from './answerer';
import type { QuestionDef } from './judge';

/**
 * The reasons a check is not checked, and a decision has no answer, when the model fails: what
 * the run page, session rules and the API show. Against a local OpenAI-compatible server through
 * the real adapter. They read as sentences ("the model answered HTTP 500: upstream 500"), not
 * as an error's kind ("the model server: HTTP 500: 500 upstream 500").
 */
let fake: FakeOpenAI;
beforeAll(async () => {
  fake = await startFakeOpenAI(() => ({ content: '{}' }));
});
afterAll(() => fake.close());
beforeEach(() => {
  fake.calls.length = 0;
});

const q: QuestionDef = { id: 'claims-refund', kind: 'yes_no', ask: 'Does the agent claim a refund it did not make?' };
const item = { instructions: 'You decide.', subject: 'The agent said hello.', ask: 'Did it greet?' };

function answerer(baseURL = fake.url, timeoutMs = 2_000) {
  return new QuestionAnswerer({
    decision: openAiChatModel({ role: 'decision', baseURL, model: 'm', timeoutMs }),
    cache: false,
    queue: { retries: 2, backoffMs: 1, maxBackoffMs: 1, maxWaitMs: 0 },
    onError: () => undefined,
  });
}

async function reasons(a: QuestionAnswerer): Promise<[string | undefined, string | undefined]> {
  const asked = await a.ask({ q, evidence: { spans: [], text: 'the agent said hello' } }, { secondLook: false });
  const decided = await a.decide('decision', item);
  a.close();
  return [asked.status === 'not_checked' ? asked.reason : undefined, decided.ok ? undefined : decided.reason];
}

describe('why the model gave no answer', () => {
  it.each<[string, FakeOpenAI['script'], string]>([
    ['a 5xx', () => ({ status: 500, content: 'upstream 500' }), 'the model answered HTTP 500: upstream 500'],
    ['a 4xx', () => ({ status: 400, content: "Invalid parameter: 'response_format' is not supported with this model." }), "the model refused the request (HTTP 400): Invalid parameter: 'response_format' is not supported with this model."],
    [
      'a rate limit asking for a day',
      () => ({ status: 429, content: 'Rate limit reached', headers: { 'retry-after': '86400' } }),
      'the model is rate limited (HTTP 429): Rate limit reached (the server asked to retry after 86400 s, longer than the 30 s the queue waits)',
    ],
    ['an HTTP 200 carrying an error', () => ({ body: JSON.stringify({ error: { message: 'model overloaded', code: 503 } }) }), 'the model failed: the server answered HTTP 200 with an error: model overloaded'],
    ['a stream nobody asked for', () => ({ headers: { 'content-type': 'text/event-stream' }, body: 'data: {"choices":[{"delta":{"content":"{}"}}]}\n\ndata: [DONE]\n\n' }), 'the model server answered with a stream, which was not asked for'],
  ])('%s', async (_, script, why) => {
    fake.script = script;
    expect(await reasons(answerer())).toEqual([why, why]);
  });

  it('a stream is not asked for again (asking again gets another)', async () => {
    fake.script = () => ({ headers: { 'content-type': 'text/event-stream' }, body: 'data: [DONE]\n\n' });
    await reasons(answerer());
    expect(fake.calls).toHaveLength(2);
  });

  it('no answer in time', async () => {
    fake.script = () => ({ hang: true });
    expect(await reasons(answerer(fake.url, 150))).toEqual(['the model timed out: no answer within 150 ms', 'the model timed out: no answer within 150 ms']);
  });

  it('a server that is not there', async () => {
    const [asked, decided] = await reasons(answerer('http://127.0.0.1:9/v1'));
    expect(asked).toBe('the model cannot be reached: Connection error.');
    expect(decided).toBe(asked);
  });
});
