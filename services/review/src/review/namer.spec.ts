import type { Db } from '@neatroots/ports';
import { openAiChatModel } from '@neatroots/platform';
import { QuestionAnswerer } from '@neatroots/questions';
import { PatternsRepo, SopSessionsRepo, sopFindingId } from '@neatroots/store';
import { startFakeOpenAI, type FakeCall, type FakeOpenAI, type FakeReply } from '../../../../libs/platform/src/models/fake-openai.test';
import { answererGateway as gatewayOf, useMigratedDb } from '../sop-fixtures.test';
import { PatternAssigner } from './assign';
import { PatternNamer } from './namer';
import { ReviewWrites } from './writes';

/**
 * NameRulePattern through the question service (its QuestionAnswerer in-process, the real
 * `openai` client over HTTP to a local OpenAI-compatible server): a pattern is named when the
 * assigner creates it; a failing model, an unusable answer or no model keep the rule-text name,
 * and rename says why.
 */
const WS = 'luigis';
let db: Db;
let reasoning: FakeOpenAI;
let answerer: QuestionAnswerer;
const repo = new PatternsRepo();

/** Answers every name question with the name the rule's text maps to (null: a paragraph). */
function naming(names: Record<string, string | null>): (call: FakeCall) => FakeReply {
  return (call) => {
    const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
    const subjects = new Map([...user.matchAll(/^### Subject (S\d+)\n(.*)$/gm)].map((m) => [m[1], m[2]]));
    const qs = [...user.matchAll(/^(q\d+) \(about subject (S\d+)\)/gm)];
    return {
      json: {
        answers: qs.map((q) => {
          const rule = Object.keys(names).find((r) => subjects.get(q[2])?.includes(r));
          const name = rule ? names[rule] : null;
          return { id: q[1], name: name ?? 'The agent, in this session, said something that was not in line with the rule it was given.' };
        }),
      },
    };
  };
}

async function checkedSession(external: string, rules: { id: string; kind: 'step' | 'never'; text: string }[]): Promise<void> {
  const sessions = new SopSessionsRepo(db);
  const r = await sessions.receive(WS, { external_id: external, agent: 'a', release_id: null, started_at: '2026-11-01T00:00:00Z', transcript_ref: null, turns: [{ role: 'agent', text: 'hi' }], tool_calls: [] });
  const findings = rules.map((rule, i) => ({
    id: sopFindingId(r.id, 'take-order', rule.id),
    procedure_id: 'take-order',
    rule_id: rule.id,
    kind: rule.kind,
    index: i + 1,
    text: rule.text,
    status: rule.kind === 'never' ? ('violated' as const) : ('skipped' as const),
    evidence: [],
    reason: null,
  }));
  await sessions.saveOutcome(r.id, r.content_hash, { release_id: null, result: 'deviated', checked_result: 'deviated', checks: [{ procedure_id: 'take-order', result: 'deviated', checked_result: 'deviated', body: {} }], findings });
}

const PRICE = { id: 'never-price', kind: 'never' as const, text: 'Volunteer a price or a description of a dish: the menu does that.' };
const READ_BACK = { id: 'step-read-back', kind: 'step' as const, text: 'Read the order back to the caller before saying goodbye, item by item.' };

useMigratedDb((d) => (db = d), 'sop_finding_days, sop_overrides, sop_verdicts, sop_findings, sop_patterns, sop_checks, sop_sessions');
beforeEach(async () => {
  reasoning = await startFakeOpenAI(naming({}));
  answerer = new QuestionAnswerer({
    reasoning: openAiChatModel({ role: 'reasoning', baseURL: reasoning.url, model: 'reasoner-test', timeoutMs: 1_000 }),
    queue: { maxWaitMs: 20, retries: 0 },
    onError: () => undefined,
  });
});
afterEach(async () => {
  answerer.close();
  await reasoning.close();
});

const names = async () => Object.fromEntries((await repo.patternsOf(db, WS)).map((p) => [p.rule_id, [p.name, p.named_by]]));

describe('naming rule patterns with the reasoning model', () => {
  it('names each pattern the assigner creates, once; an unusable answer keeps the rule-text name', async () => {
    reasoning.script = naming({ 'Volunteer a price': '"Quoted prices unprompted."', 'Read the order back': null });
    const namer = new PatternNamer(db, async () => gatewayOf(answerer));
    await checkedSession('call-1', [PRICE, READ_BACK]);
    expect(await new PatternAssigner(db, new ReviewWrites(), namer).assign(WS)).toBe(2);
    expect(await names()).toEqual({ 'never-price': ['Quoted prices unprompted', 'model'], 'step-read-back': ['Read the order back to the caller before saying goodbye…', 'rule_text'] });
    const asked = reasoning.calls.length;
    expect(asked).toBeGreaterThan(0);
    expect(reasoning.calls[0].body.messages[0].content).toMatch(/what the agent did wrong, in a few plain words/);

    // A later finding on the same rules creates nothing: nothing is asked again.
    await checkedSession('call-2', [PRICE, READ_BACK]);
    await new PatternAssigner(db, new ReviewWrites(), namer).assign(WS);
    expect(reasoning.calls.length).toBe(asked);

    // The question service keeps answers for a while: asked again now, the same unusable answer.
    reasoning.script = naming({ 'Read the order back': 'Skipped the read-back', 'Volunteer a price': 'Talked about prices' });
    expect(await namer.rename(WS)).toEqual({ renamed: 0, failed: 1, reason: expect.stringMatching(/unusable: the name has 18 words/) });

    // Later (a new process, its cache empty): rename names what is still named from its rule's
    // text; --all names every one again.
    answerer.close();
    answerer = new QuestionAnswerer({ reasoning: openAiChatModel({ role: 'reasoning', baseURL: reasoning.url, model: 'reasoner-test', timeoutMs: 1_000 }), queue: { maxWaitMs: 20, retries: 0 }, onError: () => undefined });
    expect(await namer.rename(WS)).toEqual({ renamed: 1, failed: 0, reason: null });
    expect((await names())['never-price'][0]).toBe('Quoted prices unprompted');
    expect(await namer.rename(WS, { all: true })).toEqual({ renamed: 2, failed: 0, reason: null });
    expect(await names()).toEqual({ 'never-price': ['Talked about prices', 'model'], 'step-read-back': ['Skipped the read-back', 'model'] });
  });

  it('a failing model keeps the rule-text name, and rename says why', async () => {
    reasoning.script = () => ({ status: 500 });
    const namer = new PatternNamer(db, async () => gatewayOf(answerer));
    await checkedSession('call-1', [PRICE]);
    await new PatternAssigner(db, new ReviewWrites(), namer).assign(WS);
    expect(await names()).toEqual({ 'never-price': ['Volunteer a price or a description of a dish', 'rule_text'] });
    const r = await namer.rename(WS);
    expect(r).toMatchObject({ renamed: 0, failed: 1 });
    expect(r.reason).toMatch(/the model failed/);
  });

  it('without a model: names stay trimmed rule text, and rename says it could not name them', async () => {
    const namer = new PatternNamer(db, async () => null);
    await checkedSession('call-1', [PRICE, READ_BACK]);
    await new PatternAssigner(db, new ReviewWrites(), namer).assign(WS);
    expect((await names())['never-price']).toEqual(['Volunteer a price or a description of a dish', 'rule_text']);
    expect(await namer.rename(WS)).toEqual({ renamed: 0, failed: 2, reason: expect.stringMatching(/no reasoning model is configured/) });
    expect(reasoning.calls).toHaveLength(0);
  });
});
