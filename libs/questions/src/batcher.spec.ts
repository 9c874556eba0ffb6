import { openAiChatModel } from '@neatroots/platform';
import { ModelError } from '@neatroots/ports';
import { startFakeOpenAI, type FakeOpenAI } from '../../platform/src/models/fake-openai.test';
import { ModelQueue } from './batcher';
import { QuestionAnswerer } from './answerer';
import { MalformedAnswerError } from './judge';

/**
 * The model queue against a local OpenAI-compatible server through the real `openai` client:
 * how it waits on a rate limit's Retry-After, what budget a request gets, and the reasons it
 * gives for a reply it cannot use.
 */
let fake: FakeOpenAI;
beforeAll(async () => {
  fake = await startFakeOpenAI(() => ({ content: '{}' }));
});
afterAll(() => fake.close());
beforeEach(() => {
  fake.calls.length = 0;
});

const model = () => openAiChatModel({ role: 'reasoning', baseURL: fake.url, model: 'm', timeoutMs: 5_000 });
const item = (ask = 'Is it so?') => ({ instructions: 'You decide.', subject: 'The agent said hello.', ask });

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a failure');
}

describe('the model queue', () => {
  it('tells each request\'s outcome (retries each count), with the endpoint: ok, rate_limited, rejected, malformed', async () => {
    const seen: string[] = [];
    const q = new ModelQueue(model(), { sleep: async () => undefined, onRequest: (endpoint, outcome, err) => seen.push(`${endpoint}/${outcome}${err ? `: ${(err as Error).message.slice(0, 40)}` : ''}`) });
    fake.script = (c) => (c.n === 1 ? { status: 429 } : { json: { answers: [{ id: 'q1', p: 0.1 }] } });
    await q.decide('a', item('A?'));
    fake.script = () => ({ status: 401, content: 'Incorrect API key provided' });
    await rejection(q.decide('b', item('B?')));
    fake.script = () => ({ content: 'not JSON at all' });
    await rejection(q.decide('c', item('C?')));
    expect(seen).toEqual([
      'reasoning/rate_limited: HTTP 429: scripted 429',
      'reasoning/ok',
      'reasoning/rejected: HTTP 401: Incorrect API key provided',
      expect.stringMatching(/^reasoning\/malformed: /),
    ]);
    q.close();
  });

  it('holds at most maxQueue questions however many are asked at the same moment: the rest fail at once with QueueFullError', async () => {
    // Questions wait a minute for a full batch: none leaves the queue while they are asked.
    const q = new ModelQueue(model(), { maxQueue: 5, maxBatch: 100, maxWaitMs: 60_000 });
    const asked = Array.from({ length: 8 }, (_, i) => q.decide(`k${i}`, item(`Q${i}?`)).then(() => 'answered', (e: Error) => e.name));
    const failed = await Promise.all(asked.slice(5));
    expect(failed).toEqual(['QueueFullError', 'QueueFullError', 'QueueFullError']);
    expect(q.queued).toBe(5);
    expect(q.stats.rejected).toBe(3);
    q.close();
    expect(await Promise.all(asked.slice(0, 5))).toEqual(Array(5).fill('ModelQueueClosedError'));
  });

  it('waits as long as a 429 asks (Retry-After) before the retry', async () => {
    fake.script = (c) => (c.n === 1 ? { status: 429, headers: { 'retry-after': '1' } } : { json: { answers: [{ id: 'q1', holds: true }] } });
    const q = new ModelQueue(model());
    await expect(q.decide('k', item())).resolves.toEqual({ id: 'q1', holds: true });
    expect(fake.calls).toHaveLength(2);
    expect(fake.calls[1].at - fake.calls[0].at).toBeGreaterThanOrEqual(990);
    q.close();
  });

  it('fails at once, saying so, when a 429 asks for longer than the queue waits', async () => {
    fake.script = () => ({ status: 429, headers: { 'retry-after': '120' } });
    const q = new ModelQueue(model());
    const t0 = Date.now();
    const err = await rejection(q.decide('k', item()));
    expect(err).toBeInstanceOf(ModelError);
    expect(err).toMatchObject({ kind: 'rate_limited', retryAfterMs: 120_000 });
    expect(err.message).toMatch(/the server asked to retry after 120 s, longer than the 30 s the queue waits/);
    expect(fake.calls).toHaveLength(1);
    expect(Date.now() - t0).toBeLessThan(2_000);
    q.close();
  });

  it('says an answer was cut at the token limit, not just that it is not JSON', async () => {
    fake.script = () => ({ content: `{"answers": [{"id": "q1", "reason": "${'very long '.repeat(400)}"}]}` });
    const q = new ModelQueue(model());
    const err = await rejection(q.decide('k', item()));
    expect(err).toBeInstanceOf(MalformedAnswerError);
    expect(err.message).toMatch(/^the answer was cut at 450 tokens \(max_tokens\) before it was complete/);
    expect(fake.calls[0].body.max_tokens).toBe(450);
    q.close();
  });

  it("a reasoning model's cut answer gives the server's count (its limit includes its thinking)", async () => {
    fake.script = () => ({ content: 'a '.repeat(9_000) });
    const q = new ModelQueue(openAiChatModel({ role: 'reasoning', baseURL: fake.url, model: 'o-test', params: 'reasoning' }));
    const err = await rejection(q.decide('k', item()));
    expect(fake.calls[0].body.max_completion_tokens).toBe(8_450);
    expect(err.message).toMatch(/^the answer was cut at 8450 tokens \(max_tokens\)/);
    q.close();
  });

  it("a decision's max_tokens is its answer's budget: a long list comes back whole", async () => {
    const list = Array.from({ length: 200 }, (_, i) => `f${i + 1}`);
    fake.script = () => ({ json: { answers: [{ id: 'q1', findings: list }] } });
    const q = new ModelQueue(model());
    await expect(q.decide('k', { ...item(), max_tokens: 1_500 })).resolves.toEqual({ id: 'q1', findings: list });
    expect(fake.calls[0].body.max_tokens).toBe(1_700);
    // Two decisions in one request: each brings its own budget (the default, 250, for one that sets none).
    fake.calls.length = 0;
    fake.script = () => ({ json: { answers: [{ id: 'q1', findings: list }, { id: 'q2', holds: true }] } });
    const [a, b] = await Promise.all([q.decide('k1', { ...item('List them.'), max_tokens: 1_500 }), q.decide('k2', item('Is it so?'))]);
    expect([a, b]).toEqual([{ id: 'q1', findings: list }, { id: 'q2', holds: true }]);
    expect(fake.calls.map((c) => c.body.max_tokens)).toEqual([1_950]);
    q.close();
  });

  describe('a batch reply that leaves questions out', () => {
    const asked = (c: { body: { messages: { content: string }[] } }) => (c.body.messages[1].content.match(/^q\d+ \(about subject S\d+\) .*$/gm) ?? []).map((l) => l.replace(/^q\d+ \(about subject S\d+\) /, ''));
    // Full batches of 8 go at once; none waits for company.
    const queue = () => new ModelQueue(model(), { maxBatch: 8, maxWaitMs: 60_000, sleep: async () => undefined });
    const decideAll = (q: ModelQueue, n: number) => Promise.allSettled(Array.from({ length: n }, (_, i) => q.decide(`k${i + 1}`, item(`Q${i + 1}?`))));

    it('a reply that is not JSON at all fails its batch as not checked, with the reason, in one request a batch (not one more per question)', async () => {
      fake.script = () => ({ content: 'The agent seems to have done everything it was asked.' });
      const q = queue();
      const results = await decideAll(q, 16);
      expect(fake.calls.map((c) => asked(c).length)).toEqual([8, 8]);
      expect(q.stats.requests).toBe(2);
      for (const r of results) {
        expect(r.status).toBe('rejected');
        const err = (r as PromiseRejectedResult).reason as Error;
        expect(err).toBeInstanceOf(MalformedAnswerError);
        expect(err.message).not.toBe('the reply has no answer for this question');
      }
      q.close();
      // Through the answerer: a decision not made, saying why.
      fake.calls.length = 0;
      const a = new QuestionAnswerer({ reasoning: model(), cache: false });
      await expect(a.decide('reasoning', item())).resolves.toEqual({ ok: false, reason: expect.stringMatching(/^the model gave a malformed answer \(/) });
      expect(fake.calls).toHaveLength(1);
      a.close();
    });

    it('a reply that answers 6 of 8 has the 2 it left out asked again alone', async () => {
      fake.script = (c) => {
        const qs = asked(c);
        if (qs.length === 8) return { json: { answers: qs.slice(0, 6).map((_, i) => ({ id: `q${i + 1}`, holds: true })) } };
        return { json: { answers: [{ id: 'q1', holds: false, said: qs[0] }] } };
      };
      const q = queue();
      const results = await decideAll(q, 8);
      expect(results.map((r) => (r.status === 'fulfilled' ? r.value : r.reason))).toEqual([
        ...Array.from({ length: 6 }, (_, i) => ({ id: `q${i + 1}`, holds: true })),
        { id: 'q1', holds: false, said: 'Q7?' },
        { id: 'q1', holds: false, said: 'Q8?' },
      ]);
      expect(asked(fake.calls[0])).toEqual(Array.from({ length: 8 }, (_, i) => `Q${i + 1}?`));
      // The two alone requests go side by side, in either order.
      expect(fake.calls.slice(1).map((c) => asked(c)).sort()).toEqual([['Q7?'], ['Q8?']]);
      q.close();
    });
  });

  it("gives a refusal's own words as the reason a decision has no answer", async () => {
    fake.script = () => ({ refusal: 'I cannot help with that request' });
    const a = new QuestionAnswerer({ reasoning: model(), cache: false });
    await expect(a.decide('reasoning', item())).resolves.toEqual({ ok: false, reason: expect.stringMatching(/the model refused: I cannot help with that request/) });
    a.close();
  });
});
