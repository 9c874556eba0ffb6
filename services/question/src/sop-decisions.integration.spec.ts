/**
 * sopops' checker with its models, through the question service: the real `openai` client
 * over HTTP to a local OpenAI-compatible server that answers from scripts. Bands, review of
 * flagged and unsure rules, review mode, SOPOPS_CHECK_REVIEW=off, "Decided:" reasons, quotes
 * verified against the transcript, failures as "not checked", and batching (fewer HTTP
 * requests than decisions), in-process and over gRPC.
 */
import { openAiChatModel } from '@neatroots/platform';
import { QuestionAnswerer } from '@neatroots/questions';
import { compileFiles, createCheckSession, loadSopSettings, toLock, type Lock, type SessionBody, type Session, type SopModelSettings } from '@neatroots/sop';
import { startFakeOpenAI, type FakeCall, type FakeOpenAI, type FakeReply } from '../../../libs/platform/src/models/fake-openai.test';
import { answererDecisions, QuestionDecisionsClient } from './decisions';
import { startQuestionGrpc } from './grpc';

const compiled = compileFiles({
  'procedures/take-order.md': `# Take an order
Goal: The order is placed and read back to the caller.

## Steps
1. Greet the caller with the name of the restaurant.
2. Look up the account of the caller. [tool: lookup_account, required]
3. Confirm the delivery address. [when: the caller wants delivery]
4. Read the order back to the caller.

## Never
- Volunteer a price or a description of a dish.

## Warning signs
- The caller sounds upset. -> Offer a callback from the manager.
`,
  'procedures/allergies.md': '# Allergies\nApplies when: The caller mentions an allergy.\n\n## Steps\n1. Note the allergy. [tool: note_allergy, required]\n',
  'agents/phone-agent.yaml': 'procedures: [take-order, allergies]\n',
});
if (compiled.errors.length) throw new Error(JSON.stringify(compiled.errors));
const lock: Lock = toLock(compiled);

function session(id: string): Session {
  return {
    external_id: id,
    agent: 'phone-agent',
    release_id: null,
    started_at: null,
    transcript_ref: null,
    turns: [
      { role: 'user', text: `Hi, I would like to order a pizza (${id}).` },
      { role: 'agent', text: "Welcome to Luigi's! Let me find your account." },
      { role: 'user', text: 'How much is the margherita?' },
      { role: 'agent', text: 'That dish is $12, and it is delicious.' },
      { role: 'user', text: 'Fine, one margherita for pickup.' },
      { role: 'agent', text: 'One margherita for pickup. Goodbye.' },
    ],
    tool_calls: [{ turn: 1, tool: 'lookup_account', input: { phone: '555' }, output: { id: 7 }, error: null }],
  };
}

/** The questions of a decision prompt (decisionMessages in @neatroots/questions). */
function questionsOf(call: FakeCall): { id: string; ask: string }[] {
  const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
  return [...user.matchAll(/^(q\d+) \(about subject S\d+\) (.*)$/gm)].map((m) => ({ id: m[1], ask: m[2] }));
}

type Scripted = { p?: number; evidence?: { turn: number; quote: string }[]; reason?: string } | 'malformed' | 'hang';

/** Answers each question by the first pattern its text matches (p 0.05 otherwise). */
function answering(table: [RegExp, Scripted][]): (call: FakeCall) => FakeReply {
  return (call) => {
    const qs = questionsOf(call);
    const picks = qs.map((q) => table.find(([re]) => re.test(q.ask))?.[1] ?? { p: 0.05, reason: 'Nothing shows it.' });
    if (picks.includes('hang')) return { hang: true };
    if (picks.includes('malformed')) return { content: 'I think the agent did fine overall.' };
    return { json: { answers: qs.map((q, i) => ({ id: q.id, evidence: [], reason: 'Scripted.', ...(picks[i] as object) })) } };
  };
}

const GREET = /step 1: "Greet/;
const READ_BACK = /step 4: "Read the order back/;
const DELIVERY = /step 3: "Confirm the delivery address." is to be done only when/;
const NEVER = /never rule 1/;
const UPSET = /warning sign 1: "The caller sounds upset." Did/;
const GOAL = /has the goal/;
const ALLERGY = /Procedure "Allergies" applies when/;

const decisionsOf = (fake: FakeOpenAI) => fake.calls.reduce((n, c) => n + questionsOf(c).length, 0);
const rules = (body: SessionBody, i = 0) => Object.fromEntries(body.checks[i].rules.map((r) => [`${r.kind}${r.index}`, r]));

describe('sopops checks through the question service', () => {
  let decision: FakeOpenAI;
  let reasoning: FakeOpenAI;
  let answerer: QuestionAnswerer;
  const check = (settings: SopModelSettings, s: Session = session('call-1')) =>
    createCheckSession({ gateway: answererDecisions(answerer), settings })({ lock, releaseId: 'rel-1', session: s });

  beforeEach(async () => {
    decision = await startFakeOpenAI(answering([]));
    reasoning = await startFakeOpenAI(answering([]));
    answerer = new QuestionAnswerer({
      decision: openAiChatModel({ role: 'decision', baseURL: decision.url, model: 'jev-test', timeoutMs: 1_000 }),
      reasoning: openAiChatModel({ role: 'reasoning', baseURL: reasoning.url, model: 'reasoner-test', timeoutMs: 1_000 }),
      queue: { maxWaitMs: 20, retries: 0 },
      onError: () => undefined,
    });
  });
  afterEach(async () => {
    answerer.close();
    await Promise.all([decision.close(), reasoning.close()]);
  });

  it('decides every rule in few requests, routes, and says "Decided:" for what no review touched', async () => {
    decision.script = answering([
      [GREET, { p: 0.95, evidence: [{ turn: 1, quote: "Welcome to Luigi's!" }], reason: 'The agent greeted with the name.' }],
      [READ_BACK, { p: 0.9, evidence: [{ turn: 5, quote: 'One margherita for pickup.' }], reason: 'Read back.' }],
      [GOAL, { p: 0.9, reason: 'Placed and read back.' }],
      [DELIVERY, { p: 0.03, reason: 'The caller wants pickup.' }],
      [ALLERGY, { p: 0.02, reason: 'No allergy came up.' }],
    ]);
    const body = await check(loadSopSettings({}));
    const take = body.checks.find((c) => c.procedure_name === 'Take an order')!;
    const allergies = body.checks.find((c) => c.procedure_name === 'Allergies')!;
    expect(allergies).toMatchObject({ applicable: false, route_reason: 'No allergy came up.', result: null });
    expect(Object.fromEntries(take.rules.map((r) => [`${r.kind}${r.index}`, r.status]))).toEqual({
      step1: 'done',
      step2: 'done',
      step3: 'not_applicable',
      step4: 'done',
      never1: 'ok',
      warning1: 'absent',
    });
    expect(take.rules.find((r) => r.kind === 'step' && r.index === 1)).toMatchObject({ reason: 'Decided: The agent greeted with the name.', evidence: [{ turn: 1, quote: "Welcome to Luigi's!", source: 'transcript' }] });
    expect(take.rules.find((r) => r.kind === 'step' && r.index === 3)!.reason).toBe('Decided: The caller wants pickup.');
    for (const r of take.rules.filter((r) => !(r.kind === 'step' && r.index === 2))) expect(r.reason).toMatch(/^Decided: /);
    expect(take).toMatchObject({ result: 'followed', goal_reached: true, goal_reason: 'Decided: Placed and read back.', model: 'jev-test', prompt_version: 'decide-1' });
    // step1, step3's condition, step4, never1, warning1, goal, and the allergies route: 7 decisions
    expect(decisionsOf(decision)).toBe(7);
    expect(decision.calls.length).toBeLessThan(7);
    expect(reasoning.calls).toHaveLength(0);
  });

  it("a long session's decisions share one request: its transcript is written once and counted once", async () => {
    const long = session('long');
    for (let i = 0; i < 40; i++) long.turns.push({ role: 'user', text: `Still there? ${'I am calling about my usual order from last week. '.repeat(10)}` }); // ~20,000 characters
    decision.script = answering([[GREET, { p: 0.95 }], [READ_BACK, { p: 0.95 }], [GOAL, { p: 0.9 }]]);
    // Within the subject's budget (default 16,000 characters, which would shorten it), so it goes whole.
    await check(loadSopSettings({ SOPOPS_CHECK_REVIEW: 'off', SOPOPS_SUBJECT_CHARS: '30000' }), long);
    expect(decisionsOf(decision)).toBe(7);
    expect(decision.calls).toHaveLength(1);
    const user = decision.calls[0].body.messages.find((m) => m.role === 'user')!.content;
    expect(user.split('Still there?').length - 1).toBe(40);
  });

  it('bands: a sure no, an unsure answer decided by `decide`, a sure yes (SOPOPS_CHECK_REVIEW=off)', async () => {
    const settings = loadSopSettings({ SOPOPS_CHECK_REVIEW: 'off', SOPOPS_DECISIONS: '{"step": [0.2, 0.8, 0.5]}' });
    const statusAt = async (p: number) => {
      decision.script = answering([[GREET, { p, reason: `p=${p}` }], [READ_BACK, { p: 0.95 }], [ALLERGY, { p: 0 }]]);
      return rules(await check(settings, session(`p${p}`))).step1;
    };
    expect(await statusAt(0.1)).toMatchObject({ status: 'skipped', reason: expect.stringMatching(/^Decided: p=0.1( |$)/) });
    expect(await statusAt(0.45)).toMatchObject({ status: 'skipped', reason: expect.stringMatching(/^Decided: p=0.45( |$)/) });
    expect(await statusAt(0.55)).toMatchObject({ status: 'done', reason: expect.stringMatching(/^Decided: p=0.55( |$)/) });
    expect(await statusAt(0.9)).toMatchObject({ status: 'done', reason: expect.stringMatching(/^Decided: p=0.9( |$)/) });
    // Moving `decide` moves the unsure answers only.
    const strict = loadSopSettings({ SOPOPS_CHECK_REVIEW: 'off', SOPOPS_DECISIONS: '{"step": [0.2, 0.8, 0.7]}' });
    decision.script = answering([[GREET, { p: 0.6 }], [READ_BACK, { p: 0.95 }], [ALLERGY, { p: 0 }]]);
    expect(rules(await check(strict, session('strict'))).step1.status).toBe('skipped');
    expect(reasoning.calls).toHaveLength(0);
  });

  it('the reasoning model reviews what is flagged or unsure, and can change it (decide-1+check-5)', async () => {
    decision.script = answering([
      [GREET, { p: 0.1, reason: 'No greeting.' }], // a sure no, but skipped is flagged: reviewed
      [READ_BACK, { p: 0.6, reason: 'Maybe read back.' }], // unsure: reviewed
      [UPSET, { p: 0.02 }], // a sure absent: not reviewed
      [ALLERGY, { p: 0 }],
    ]);
    reasoning.script = answering([
      [GREET, { p: 0.97, evidence: [{ turn: 1, quote: "Welcome to Luigi's!" }], reason: 'The agent greeted with the name of the restaurant.' }],
      [READ_BACK, { p: 0.05, reason: 'The agent only repeated the item, not the order.' }],
    ]);
    const r = rules(await check(loadSopSettings({}), session('rev')));
    expect(r.step1).toMatchObject({ status: 'done', reason: 'The agent greeted with the name of the restaurant.', evidence: [{ turn: 1, quote: "Welcome to Luigi's!", source: 'transcript' }] });
    expect(r.step4).toMatchObject({ status: 'not_reached', reason: expect.stringMatching(/^The agent only repeated the item, not the order\./) });
    expect(r.warning1.reason).toMatch(/^Decided: /);
    const reviewed = reasoning.calls.flatMap(questionsOf).map((q) => q.ask);
    expect(reviewed).toHaveLength(2);
    expect(reviewed.every((a) => /A first decision answered/.test(a))).toBe(true);
    const body = await check(loadSopSettings({}), session('rev'));
    expect(body.checks.find((c) => c.procedure_name === 'Take an order')).toMatchObject({ model: 'jev-test+reasoner-test', prompt_version: 'decide-1+check-5' });
  });

  it('SOPOPS_CHECK_REVIEW=off: nothing is reviewed; SOPOPS_CHECK_MODE=review: the reasoning model judges every rule (check-5)', async () => {
    decision.script = answering([[GREET, { p: 0.6 }], [ALLERGY, { p: 0 }]]);
    const off = await check(loadSopSettings({ SOPOPS_CHECK_REVIEW: 'off' }), session('off'));
    expect(reasoning.calls).toHaveLength(0);
    expect(off.checks.find((c) => c.procedure_name === 'Take an order')).toMatchObject({ model: 'jev-test', prompt_version: 'decide-1' });

    const before = decision.calls.length;
    reasoning.script = answering([[GREET, { p: 0.9, reason: 'Greeted by name.' }], [ALLERGY, { p: 0.01, reason: 'No allergy.' }]]);
    const body = await check(loadSopSettings({ SOPOPS_CHECK_MODE: 'review' }), session('review-mode'));
    expect(decision.calls.length).toBe(before);
    const take = body.checks.find((c) => c.procedure_name === 'Take an order')!;
    expect(take).toMatchObject({ model: 'reasoner-test', prompt_version: 'check-5' });
    expect(rules(body).step1).toMatchObject({ status: 'done', reason: 'Greeted by name.' });
    expect(take.rules.some((r) => r.reason.startsWith('Decided:'))).toBe(false);
    expect(body.checks.find((c) => c.procedure_name === 'Allergies')).toMatchObject({ applicable: false, route_reason: 'No allergy.', prompt_version: 'check-5' });
    expect(reasoning.calls.flatMap(questionsOf).some((q) => /A first decision/.test(q.ask))).toBe(false);
  });

  it("a violated never rule quotes the agent's own words; without them it is stored ok, saying so", async () => {
    const settings = loadSopSettings({ SOPOPS_CHECK_REVIEW: 'off' });
    decision.script = answering([[NEVER, { p: 0.97, evidence: [{ turn: 2, quote: 'That dish is $12' }], reason: 'The agent gave a price.' }], [ALLERGY, { p: 0 }]]);
    const quoted = rules(await check(settings, session('quoted'))).never1;
    // The turn it named was the user's: corrected to the agent turn that has the words.
    expect(quoted).toMatchObject({ status: 'violated', finding: true, evidence: [{ turn: 3, quote: 'That dish is $12', source: 'transcript' }], reason: 'Decided: The agent gave a price.' });

    decision.script = answering([[NEVER, { p: 0.97, evidence: [{ turn: 3, quote: 'The special costs nine dollars' }], reason: 'Gave a price.' }], [ALLERGY, { p: 0 }]]);
    const unquoted = rules(await check(settings, session('unquoted'))).never1;
    expect(unquoted).toMatchObject({ status: 'ok', finding: false, evidence: [] });
    expect(unquoted.reason).toMatch(/^Stored as ok: it was flagged as violated without quoting the agent's own words/);
  });

  it('a model that times out or answers malformed JSON leaves the rule not checked, never passed', async () => {
    const settings = loadSopSettings({ SOPOPS_CHECK_REVIEW: 'off' });
    decision.script = answering([[READ_BACK, 'hang'], [ALLERGY, { p: 0 }]]);
    // Alone in its request, so only the hanging one fails.
    const a = new QuestionAnswerer({ decision: openAiChatModel({ role: 'decision', baseURL: decision.url, model: 'jev-test', timeoutMs: 300 }), queue: { maxBatch: 1, retries: 0 }, onError: () => undefined });
    const body = await createCheckSession({ gateway: answererDecisions(a), settings })({ lock, releaseId: 'r', session: session('hang') });
    a.close();
    expect(rules(body).step4.status).toBe('not_checked');
    expect(rules(body).step4.reason).toMatch(/^Not checked: the decision model \(jev-test\) could not decide whether the step was done: the model timed out/);
    expect(body.checks.find((c) => c.procedure_name === 'Take an order')!.result).not.toBe('followed');

    decision.script = answering([[GREET, 'malformed']]);
    const bad = rules(await check(settings, session('malformed')));
    expect(bad.step1.status).toBe('not_checked');
    expect(bad.step1.reason).toMatch(/^Not checked: .*malformed/);
  });

  it('with no model configured: tool steps decided, the rest not checked, said plainly', async () => {
    // A gateway resolved at the first check (the question service started later) that has no model.
    answerer.close();
    answerer = new QuestionAnswerer({ onError: () => undefined });
    const body = await createCheckSession({ gateway: async () => answererDecisions(answerer) })({ lock, releaseId: 'r', session: session('none') });
    const r = rules(body);
    expect(r.step2.status).toBe('done');
    expect(r.step1).toMatchObject({ status: 'not_checked' });
    expect(r.step1.reason).toMatch(/^Not checked: .*needs a model, and no decision model \(NEATROOTS_DECISION_MODEL_URL\) or local LLM \(NEATROOTS_LLM_URL\) is configured\.$/);
    expect((await createCheckSession({})({ lock, releaseId: 'r', session: session('none') })).checks[0].rules[0].reason).toMatch(/^Not checked: .*needs a model, and no model is configured\.$/);
    expect(body.checks[0]).toMatchObject({ model: null, prompt_version: null });
  });

  it('over gRPC: many sessions at once share model requests with each other', async () => {
    decision.script = (call) => ({ delayMs: 50, ...answering([[GREET, { p: 0.95 }], [READ_BACK, { p: 0.95 }], [GOAL, { p: 0.9 }], [ALLERGY, { p: 0.02 }]])(call) });
    const grpc = await startQuestionGrpc(answerer, { port: 0, log: () => undefined });
    const client = new QuestionDecisionsClient(`127.0.0.1:${grpc.port}`);
    try {
      const run = createCheckSession({ gateway: client, settings: loadSopSettings({}) });
      const bodies = await Promise.all(Array.from({ length: 20 }, (_, i) => run({ lock, releaseId: 'r', session: session(`grpc-${i}`) })));
      for (const b of bodies) expect(b.checks.find((c) => c.procedure_name === 'Take an order')).toMatchObject({ result: 'followed', model: 'jev-test' });
      const decisions = decisionsOf(decision);
      expect(decisions).toBe(20 * 7);
      expect(decision.calls.length / decisions).toBeLessThanOrEqual(0.2);
    } finally {
      client.close();
      await grpc.close();
    }
  });
});
