import { openAiChatModel } from '@neatroots/platform';
import { QuestionAnswerer, type Backend } from '@neatroots/questions';
import { startFakeOpenAI, type FakeCall, type FakeOpenAI, type FakeReply } from '../../../platform/src/models/fake-openai.test';
import type { Question } from '../decider';
import type { LockProcedure } from '../lock';
import type { DecisionGateway } from './gateway';
import { modelDecider, retryableModelFailure } from './deciders';
import { askText, DECIDE_INSTRUCTIONS, renderSubject } from './prompt';
import { DEFAULT_DECISIONS } from './settings';

/**
 * The procedure checker's decider through the question service (its QuestionAnswerer
 * in-process, the real `openai` client over HTTP to a local OpenAI-compatible server).
 */
const servers: FakeOpenAI[] = [];
const answerers: QuestionAnswerer[] = [];

async function server(script: (call: FakeCall) => FakeReply): Promise<FakeOpenAI> {
  const s = await startFakeOpenAI(script);
  servers.push(s);
  return s;
}

function answererWith(models: { decision?: FakeOpenAI; local?: FakeOpenAI }, backend?: Backend): QuestionAnswerer {
  const a = new QuestionAnswerer({
    ...(models.decision ? { decision: openAiChatModel({ role: 'decision', baseURL: models.decision.url, model: 'decider-test', timeoutMs: 2_000 }) } : {}),
    ...(models.local ? { local: openAiChatModel({ role: 'local', baseURL: models.local.url, model: 'local-test', timeoutMs: 2_000 }) } : {}),
    ...(backend ? { backend } : {}),
    queue: { maxWaitMs: 5, retries: 0 },
    onError: () => undefined,
  });
  answerers.push(a);
  return a;
}

const gatewayOf = (a: QuestionAnswerer): DecisionGateway => ({ decide: (e, i) => a.decide(e, i, { wait: true }), decisionModels: () => a.decisionModels() });

/** Each question of a decide-1 request answered with `fields` (besides its id). */
function answering(fields: () => Record<string, unknown>): (call: FakeCall) => FakeReply {
  return (call) => {
    const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
    return { json: { answers: [...user.matchAll(/^(q\d+) \(about subject S\d+\)/gm)].map((m) => ({ id: m[1], ...fields() })) } };
  };
}

const procedure = { name: 'take-order' } as LockProcedure;
const greet: Question = {
  kind: 'step',
  procedure,
  rule: { index: 1, text: 'Greet the caller' } as Question['rule'],
  session: { external_id: null, agent: 'a', release_id: null, started_at: null, transcript_ref: null, turns: [{ role: 'agent', text: 'Hello, welcome!' }], tool_calls: [] },
};

afterEach(async () => {
  for (const a of answerers.splice(0)) a.close();
  for (const s of servers.splice(0)) await s.close();
});

describe('a malformed answer to a procedure question', () => {
  it('leaves the rule not checked, and checking again asks the model again rather than reading it from the cache', async () => {
    let replies = 0;
    const model = await server(answering(() => (replies++ === 0 ? { p: 'high', reason: 'x' } : { p: 0.95, evidence: [{ turn: 0, quote: 'Hello, welcome!' }], reason: 'It greeted.' })));
    const decider = modelDecider(gatewayOf(answererWith({ decision: model })), 'decider-test', DEFAULT_DECISIONS);

    const first = await decider.decide(greet);
    expect(first).toEqual({ decided: false, retryable: true, reason: expect.stringMatching(/^Not checked: the decision model \(decider-test\) could not decide whether the step was done: the model gave a malformed answer \("p" is not a probability/) });

    const again = await decider.decide(greet);
    expect(model.calls).toHaveLength(2);
    expect(again).toMatchObject({ decided: true, answer: true, probability: 0.95, reason: 'It greeted.' });

    // A usable answer is cached: the third check reads it without asking.
    expect(await decider.decide(greet)).toMatchObject({ decided: true, probability: 0.95 });
    expect(model.calls).toHaveLength(2);
  });

  it('cached by a caller that did not say what it can use, is asked again by the checker', async () => {
    let replies = 0;
    const model = await server(answering(() => (replies++ === 0 ? { answer: 'maybe' } : { p: 0.1, reason: 'No greeting.' })));
    const answerer = answererWith({ decision: model });
    const decider = modelDecider(gatewayOf(answerer), 'decider-test', DEFAULT_DECISIONS);
    // The same item without `usable` (as it arrives over gRPC): any JSON object is cached.
    expect(await answerer.decide('decision', { instructions: DECIDE_INSTRUCTIONS, subject: renderSubject(greet.session), ask: askText(greet) })).toMatchObject({ ok: true, answer: { answer: 'maybe' } });

    expect(await decider.decide(greet)).toMatchObject({ decided: true, answer: false, probability: 0.1 });
    expect(model.calls).toHaveLength(2);
  });
});

describe('a model that fails', () => {
  /** The decider over one server answering `reply` to everything, the model's client timing out after `timeoutMs`. */
  async function deciderOver(reply: FakeReply | null, timeoutMs = 2_000) {
    const model = reply ? await server(() => reply) : null;
    // null: a server that was there and is gone (connection refused)
    const gone = model ?? (await server(() => ({ content: '{}' })));
    if (!model) await gone.close();
    const answerer = new QuestionAnswerer({ decision: openAiChatModel({ role: 'decision', baseURL: gone.url, model: 'decider-test', timeoutMs }), queue: { maxWaitMs: 5, retries: 0 }, onError: () => undefined });
    answerers.push(answerer);
    return modelDecider(gatewayOf(answerer), 'decider-test', DEFAULT_DECISIONS);
  }

  // Asking again may decide these: the review service checks the session again.
  it.each<[string, FakeReply | null, RegExp]>([
    ['a server error', { status: 500, content: 'boom' }, /: the model answered HTTP 500: boom\.$/],
    ['a rate limit', { status: 429, content: 'slow down' }, /: the model is rate limited \(HTTP 429\): slow down\.$/],
    ['no answer in time', { hang: true }, /: the model timed out: /],
    ['a server that is gone', null, /: the model cannot be reached: /],
    ['an answer that is not JSON', { content: 'I think yes, the agent did it.' }, /: the model gave a malformed answer/],
  ])('%s leaves the rule not checked, marked retryable', async (_what, reply, why) => {
    const a = await (await deciderOver(reply, reply?.hang ? 300 : 2_000)).decide(greet);
    expect(a).toEqual({ decided: false, retryable: true, reason: expect.stringMatching(why) });
  });

  // Asking again cannot help by itself: not marked.
  it('a request the model refuses (a 4xx) leaves the rule not checked, not retryable', async () => {
    const a = await (await deciderOver({ status: 401, content: 'Incorrect API key provided' })).decide(greet);
    expect(a).toEqual({ decided: false, reason: expect.stringMatching(/^Not checked: the decision model \(decider-test\) could not decide whether the step was done: the model refused the request \(HTTP 401\): Incorrect API key provided\.$/) });
  });

  it('reads the reasons the question service gives', () => {
    for (const r of [
      'the model timed out: no answer within 20000 ms',
      'the model answered HTTP 500: boom',
      'the model is rate limited (HTTP 429): slow down',
      'the model is rate limited: the server asked to retry after 120 s',
      'the model cannot be reached: Connection error.',
      'the model server closed the connection before its answer was complete',
      'the model call was aborted: the request was aborted',
      'the model failed: queue closed',
      'the model gave a malformed answer (not a JSON object)',
      // from a question service of an earlier version
      'the model server: 500 boom',
      'the model rate_limited: 429',
      'the model connection: cannot reach the model: ECONNREFUSED',
      'the model aborted: the request was aborted',
    ]) {
      expect([r, retryableModelFailure(r)]).toEqual([r, true]);
    }
    for (const r of [
      'the model refused the request (HTTP 400): context too long',
      'the model server answered with a stream, which was not asked for',
      'the model rejected: 400 context too long',
      'no decision model or local LLM is configured',
      'the model serverless: x',
    ]) {
      expect([r, retryableModelFailure(r)]).toEqual([r, false]);
    }
  });
});

describe('which model decides procedure questions', () => {
  it.each<Backend>(['classifier', 'local', 'auto'])('the decision model when it is on, whatever NEATROOTS_CLASSIFIER_BACKEND (%s) says for questions', async (backend) => {
    const decision = await server(answering(() => ({ p: 0.9, reason: 'Greeted.' })));
    const local = await server(answering(() => ({ p: 0.2, reason: 'local' })));
    const answerer = answererWith({ decision, local }, backend);
    expect(await answerer.decisionModels()).toEqual({ decision: 'decider-test', reasoning: 'local-test' });
    const decider = modelDecider(gatewayOf(answerer), 'decider-test', DEFAULT_DECISIONS);
    expect(await decider.decide(greet)).toMatchObject({ decided: true, answer: true, probability: 0.9, reason: 'Greeted.' });
    expect(decision.calls).toHaveLength(1);
    expect(local.calls).toHaveLength(0);
  });

  it('the local LLM when there is no decision model, also with backend classifier', async () => {
    const local = await server(answering(() => ({ p: 0.9, reason: 'Greeted.' })));
    const answerer = answererWith({ local }, 'classifier');
    expect(await answerer.decisionModels()).toEqual({ decision: 'local-test', reasoning: 'local-test' });
    expect(await modelDecider(gatewayOf(answerer), 'local-test', DEFAULT_DECISIONS).decide(greet)).toMatchObject({ decided: true, probability: 0.9 });
    expect(local.calls).toHaveLength(1);
  });
});

describe('a long session', () => {
  /** A server with a context of about 8k tokens: a longer prompt is refused, as vLLM does (400). */
  function withContext(chars: number, answer: (call: FakeCall) => FakeReply): (call: FakeCall) => FakeReply {
    return (call) => {
      const size = call.body.messages.reduce((n, m) => n + m.content.length, 0);
      if (size > chars) return { status: 400, content: `This model's maximum context length is 8192 tokens. However, you requested ${Math.ceil(size / 4)} tokens.` };
      return answer(call);
    };
  }
  const turns = Array.from({ length: 300 }, (_, i) => ({ role: i % 2 ? ('agent' as const) : ('user' as const), text: `Turn ${i}: ${'and so the conversation went on '.repeat(12)}` }));
  turns[299] = { role: 'agent', text: 'Your order is two margheritas. Goodbye!' };
  const readBack: Question = { ...greet, rule: { index: 5, text: 'Read the order back' } as Question['rule'], session: { ...greet.session, turns } };

  it('is decided from its first and last turns within the model context, the evidence citing the turn by its own number', async () => {
    const model = await server(withContext(24_000, answering(() => ({ p: 0.9, evidence: [{ turn: 299, quote: 'Your order is two margheritas.' }], reason: 'Read back at the end.' }))));
    const decider = modelDecider(gatewayOf(answererWith({ decision: model })), 'decider-test', DEFAULT_DECISIONS);
    const a = await decider.decide(readBack);
    expect(a).toMatchObject({ decided: true, answer: true, evidence: [{ turn: 299, quote: 'Your order is two margheritas.' }] });
    const user = model.calls[0].body.messages.find((m) => m.role === 'user')!.content;
    expect(user).toContain('[0] user: Turn 0:');
    expect(user).toContain('[299] agent: Your order is two margheritas. Goodbye!');
    expect(user).toMatch(/\[… \d+ turns \(\d+ to \d+\), [\d,]+ characters, are left out: the session is too long …\]/);
  });

  it('is cut to a smaller budget when the checker is given one (SOPOPS_SUBJECT_CHARS)', async () => {
    const model = await server(withContext(6_000, answering(() => ({ p: 0.9, reason: 'Read back.' }))));
    const decider = modelDecider(gatewayOf(answererWith({ decision: model })), 'decider-test', DEFAULT_DECISIONS, undefined, 4_000);
    expect(await decider.decide(readBack)).toMatchObject({ decided: true, answer: true });
    expect(model.calls[0].body.messages.find((m) => m.role === 'user')!.content).toContain('[299] agent: Your order is two margheritas.');
  });
});
