import { openAiChatModel } from '@neatroots/platform';
import { QuestionAnswerer, type Backend } from '@neatroots/questions';
import { startFakeOpenAI, type FakeCall, type FakeOpenAI, type FakeReply } from '../../../platform/src/models/fake-openai.test';
import type { Question } from '../decider';
import type { LockProcedure } from '../lock';
import type { DecisionGateway } from './gateway';
import { modelDecider } from './deciders';
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
