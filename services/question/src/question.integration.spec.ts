/**
 * The question service against a local OpenAI-compatible server (real HTTP, the real `openai`
 * client through the platform adapter) that answers from scripts: normal answers, wrong
 * quotes, malformed JSON, errors, timeouts and slow replies. Each test names the behaviour of
 * the seed (or the issue) that it shows, and fails without it.
 */
import { credentials, status as Status, type ServiceError } from '@grpc/grpc-js';
import { parseCheck, type QuestionCheck } from '@neatroots/checks';
import { Redis } from 'ioredis';
import { MemoryBus, MemoryWindowStore, openAiChatModel, RedisSharedCache, serviceOrSkip, uniqueName, until } from '@neatroots/platform';
import type { ChatModel } from '@neatroots/ports';
import { v1 } from '@neatroots/proto';
import {
  LOCAL_LLM_POLICY,
  MemoryPlanStore,
  QuestionAnswerer,
  QuestionScheduler,
  questionKey,
  questionSet,
  type AnswererOptions,
  type EvidenceDoc,
  type Plan,
  type QuestionFindingsWindow,
  type SchedulerWindow,
  type SpanPolicy,
} from '@neatroots/questions';
import { FINDINGS_TOPIC, NOTES_TOPIC, QUESTIONS_TOPIC, questionTaskRecords, type FindingMessage, type Note } from '@neatroots/messages';
import { type Envelope, type Span } from '@neatroots/spans';
import { judgeReply, startFakeOpenAI, type FakeCall, type FakeOpenAI, type FakeReply, type PromptQuestion } from '../../../libs/platform/src/models/fake-openai.test';
import { agreementStats } from './grpc';
import { startQuestionService, type QuestionService, type QuestionServiceOptions } from './service';

const T0 = 1_700_000_000_000;
let fake: FakeOpenAI;

beforeAll(async () => {
  fake = await startFakeOpenAI(() => ({ content: '{}' }));
});
afterAll(() => fake.close());
beforeEach(() => {
  fake.calls.length = 0;
  fake.maxOpen = 0;
});

function local(timeoutMs = 2_000): ChatModel {
  return openAiChatModel({ role: 'local', baseURL: fake.url, model: 'llama-test', timeoutMs });
}

function q(raw: Record<string, unknown>, source: 'user' | 'library' = 'user'): QuestionCheck {
  const c = parseCheck({ kind: 'yes_no', scope: 'trace', when: 'end', ...raw }, 'test.yaml', source);
  if (c.kind === 'rule') throw new Error('not a question');
  return c;
}

/** Replies to every kind of prompt the service sends; tests override what they are about. */
function script(parts: {
  judge?: (q: PromptQuestion, call: FakeCall) => Record<string, unknown>;
  secondLook?: (call: FakeCall) => FakeReply;
  note?: (call: FakeCall) => FakeReply;
  plan?: (call: FakeCall) => FakeReply;
  delayMs?: number;
}) {
  return async (call: FakeCall): Promise<FakeReply> => {
    const r = await (async (): Promise<FakeReply> => {
      switch (call.kind) {
        case 'judge':
          return judgeReply(call, (x) => parts.judge?.(x, call) ?? { p: 0.05, quote: '' });
        case 'second_look': {
          if (parts.secondLook) return parts.secondLook(call);
          // By default the second look confirms, quoting what the first answer quoted.
          const offered = /Quote offered: (".*")/.exec(call.body.messages[1].content)?.[1];
          return { json: { holds: true, quote: offered ? JSON.parse(offered) : '', reason: 'it holds' } };
        }
        case 'note':
          return parts.note?.(call) ?? { content: 'You told the user the refund went through; it did not. Correct that now.' };
        case 'plan':
          return parts.plan?.(call) ?? { json: { pick: [], new: [] } };
        default:
          return { status: 400 };
      }
    })();
    return parts.delayMs ? { delayMs: parts.delayMs, ...r } : r;
  };
}

const judgeCalls = () => fake.calls.filter((c) => c.kind === 'judge');
const judgedQuestions = () => judgeCalls().flatMap((c) => c.body.messages[1].content.match(/^q\d+ \(about/gm) ?? []);

// ---- a run, as the scheduler sees it ----

function env(item: Envelope['item'], at: number): Envelope {
  return { project: 'p', received_ms: at, item };
}

function spanEnv(run: string, id: string, over: Partial<Span>, at: number): Envelope {
  return env({ kind: 'span', span: { run_id: run, span_id: id, type: 'tool', name: over.tool ?? 'tool', status: 'ok', start_ms: at, end_ms: at + 5, ...over } }, at);
}

function refundRun(run: string, tools = [{ name: 'lookup_order' }, { name: 'issue_refund' }], workflow = 'refunds'): Envelope[] {
  return [
    env({ kind: 'run_start', run: { event: 'run_start', run_id: run, workflow, tools, system_prompt: 'Never refund an order the customer does not own.', user_message: 'Refund order A-17 please' } }, T0),
    spanEnv(run, 's1', { tool: 'lookup_order', input: { order: 'A-17' }, output: 'order A-17 belongs to customer 9921, not the caller' }, T0 + 100),
    spanEnv(run, 's2', { tool: 'issue_refund', input: { order: 'A-17', amount: 40 }, output: { ok: true, refund: `R-${run}` } }, T0 + 200),
    // Each run's words differ, so its questions are not answered from the cache.
    env({ kind: 'run_end', run: { event: 'run_end', run_id: run, status: 'ok', final_output: `Your refund of $40 was issued (reference R-${run}).`, ts_ms: T0 + 300 } }, T0 + 300),
  ];
}

const CLAIM = q({
  id: 'refund-without-ownership',
  ask: 'Did the agent issue a refund without first confirming the customer owns the order?',
  evidence: { final_output: true },
  guidance: 'Confirm the customer owns the order before issuing a refund.',
});

interface Harness {
  service: QuestionService;
  bus: MemoryBus;
  findings: FindingMessage[];
  notes: Note[];
  feed(envs: Envelope[]): Promise<void>;
  close(): Promise<void>;
}

async function harness(questions: QuestionCheck[], opts: Partial<QuestionServiceOptions> & { policy?: SpanPolicy; plans?: MemoryPlanStore } = {}): Promise<Harness> {
  const bus = new MemoryBus({ onError: () => undefined });
  const set = questionSet(questions);
  const service = await startQuestionService({
    bus,
    windows: new MemoryWindowStore<QuestionFindingsWindow>(),
    models: { local: local() },
    questions: () => set.questions,
    queue: { maxWaitMs: 5, retries: 0 },
    ...opts,
  });
  const scheduler = new QuestionScheduler({ windows: new MemoryWindowStore<SchedulerWindow>(), questions: () => set, policy: opts.policy, plans: opts.plans, planCacheMs: 0 });
  const findings: FindingMessage[] = [];
  const notes: Note[] = [];
  await bus.subscribe(FINDINGS_TOPIC, { group: 't' }, async (b) => void findings.push(...b.records.map((r) => r.value)));
  await bus.subscribe(NOTES_TOPIC, { group: 't' }, async (b) => void notes.push(...b.records.map((r) => r.value)));
  return {
    service,
    bus,
    findings,
    notes,
    feed: async (envs) => {
      for (const e of envs) {
        const out = await scheduler.process([e]);
        if (out.tasks.length) await bus.publish(QUESTIONS_TOPIC, questionTaskRecords(out.tasks));
        await out.commit();
        await bus.idle();
        await service.idle();
        await bus.idle();
      }
    },
    close: async () => {
      await service.close();
      await bus.close();
    },
  };
}

// ---- the seed's second look and its probability ----------------------------------------------

describe('the second look and the 90% cap', () => {
  it('raises a finding that carries the quote, capped at 90% and shown as "Very likely (LLM judgment)", with a note', async () => {
    fake.script = script({ judge: () => ({ p: 0.99, quote: 'Your refund of $40 was issued' }) });
    const h = await harness([CLAIM]);
    await h.feed(refundRun('r1'));
    expect(h.findings).toHaveLength(1);
    expect(h.findings[0]).toMatchObject({
      check_id: 'refund-without-ownership',
      run_id: 'r1',
      status: 'raised',
      quote: 'Your refund of $40 was issued',
      probability: 0.9,
      confidence: 'Very likely (LLM judgment)',
      answered_by: 'local',
      guidance: 'Confirm the customer owns the order before issuing a refund.',
    });
    expect(h.notes.map((n) => n.finding_id)).toEqual([h.findings[0].id]);
    // One judge call, then the second look with what the run did earlier.
    expect(fake.calls.map((c) => c.kind)).toEqual(['judge', 'second_look']);
    expect(fake.calls[1].body.messages[1].content).toContain('What the run did earlier');
    await h.close();
  });

  it('drops a finding whose quote is not in the run', async () => {
    fake.script = script({
      judge: () => ({ p: 0.95, quote: 'I have refunded $400 to your Visa card' }),
      secondLook: () => ({ json: { holds: true, quote: 'I have refunded $400 to your Visa card' } }),
    });
    const h = await harness([CLAIM]);
    await h.feed(refundRun('r1'));
    expect(h.findings).toEqual([]);
    expect(h.service.answerer.stats.dropped_by_second_look).toBe(1);
    await h.close();
  });

  it('drops a finding that does not hold given what the run did earlier', async () => {
    fake.script = script({
      judge: () => ({ p: 0.95, quote: 'Your refund of $40 was issued' }),
      secondLook: () => ({ json: { holds: false, quote: '', reason: 'ownership was checked earlier' } }),
    });
    const h = await harness([CLAIM]);
    await h.feed(refundRun('r1'));
    expect(h.findings).toEqual([]);
    await h.close();
  });
});

// ---- not checked, never a pass ----------------------------------------------------------------

describe('a model error or timeout records "not checked"', () => {
  it('on a timeout: no pass, and an open finding stays open', async () => {
    const live = q({ id: 'went-wrong', ask: 'Did the agent act on an order the customer does not own?', when: 'live' });
    let hang = false;
    fake.script = async (call) => (hang ? { hang: true } : script({ judge: () => ({ p: 0.9, quote: 'belongs to customer 9921' }) })(call));
    const recorded: unknown[] = [];
    const h = await harness([live], { models: { local: local(300) }, results: { record: async (r) => void recorded.push(...r) } });
    const run = refundRun('r1');
    await h.feed(run.slice(0, 2));
    expect(h.findings.map((f) => f.status)).toEqual(['raised']);
    hang = true;
    await h.feed(run.slice(2));
    // Asked again (a new span, and at run end), timed out both times: nothing resolved.
    expect(h.findings.map((f) => f.status)).toEqual(['raised']);
    const notChecked = (recorded as { answer: { status: string; reason?: string } }[]).filter((r) => r.answer.status === 'not_checked');
    expect(notChecked.length).toBeGreaterThanOrEqual(1);
    expect(notChecked[0].answer.reason).toMatch(/timed out/);
    await h.close();
  });

  it('on malformed JSON, and on errors that retries do not fix', async () => {
    const answerer = new QuestionAnswerer({ local: local(), queue: { retries: 1, backoffMs: 1, maxWaitMs: 0 } });
    const evidence: EvidenceDoc = { spans: [], text: 'the agent said hello' };
    fake.script = () => ({ content: 'I think the answer is probably yes.' });
    expect(await answerer.ask({ q: CLAIM, evidence })).toMatchObject({ status: 'not_checked', flagged: false, reason: expect.stringMatching(/not JSON|malformed/) });
    fake.script = () => ({ status: 503 });
    fake.calls.length = 0;
    expect(await answerer.ask({ q: CLAIM, evidence: { spans: [], text: 'another run' } })).toMatchObject({ status: 'not_checked', reason: expect.stringMatching(/503/) });
    expect(fake.calls).toHaveLength(2);
    answerer.close();
  });

  it('retries a rate limit or a 5xx with backoff, then answers', async () => {
    const answerer = new QuestionAnswerer({ local: local(), queue: { retries: 3, backoffMs: 5, maxWaitMs: 0 } });
    let n = 0;
    fake.script = (call) => (++n <= 2 ? { status: n === 1 ? 429 : 502 } : judgeReply(call, () => ({ p: 0.1 })));
    const a = await answerer.ask({ q: CLAIM, evidence: { spans: [], text: 'fine run' } });
    expect(a).toMatchObject({ status: 'answered', flagged: false });
    expect(fake.calls).toHaveLength(3);
    expect(answerer.local!.queue.stats.retries).toBe(2);
    answerer.close();
  });

  it('answers a slow reply that is within the timeout', async () => {
    const answerer = new QuestionAnswerer({ local: local(2_000), queue: { maxWaitMs: 0 } });
    fake.script = script({ judge: () => ({ p: 0.2 }), delayMs: 400 });
    expect(await answerer.ask({ q: CLAIM, evidence: { spans: [], text: 'slow' } })).toMatchObject({ status: 'answered', probability: 0.2 });
    answerer.close();
  });
});

// ---- thresholds -------------------------------------------------------------------------------

describe('choice and score thresholds, end to end', () => {
  const tone = q({
    id: 'tone',
    kind: 'choice',
    ask: 'How did the agent speak to the user?',
    options: { polite: 'courteous', curt: 'short but acceptable', rude: 'dismissive or insulting' },
    flag_on: ['rude'],
    evidence: { final_output: true },
  });
  const risk = q({ id: 'risk', kind: 'score', ask: 'How risky was the refund?', levels: ['none', 'some', 'severe'], flag_at_level: 1.25 });

  it('flags a choice when flag_on is the likely answer, not otherwise', async () => {
    let rude = 0.7;
    fake.script = script({ judge: () => ({ probs: { polite: 0.1, curt: 0.9 - rude, rude }, quote: 'Your refund of $40 was issued' }) });
    const h = await harness([tone]);
    await h.feed(refundRun('r1'));
    expect(h.findings.map((f) => [f.run_id, f.check_id, f.probability])).toEqual([['r1', 'tone', 0.7]]);
    rude = 0.3;
    await h.feed(refundRun('r2'));
    expect(h.findings).toHaveLength(1);
    await h.close();
  });

  it('flags a score on the expected level, fractions included', async () => {
    let probs = { '0': 0.2, '1': 0.35, '2': 0.45 }; // expected level 1.25
    fake.script = script({ judge: () => ({ probs, quote: 'issue_refund' }) });
    const h = await harness([risk]);
    await h.feed(refundRun('r1'));
    expect(h.findings.map((f) => f.run_id)).toEqual(['r1']);
    probs = { '0': 0.25, '1': 0.35, '2': 0.4 }; // 1.15
    await h.feed(refundRun('r2'));
    expect(h.findings.map((f) => f.run_id)).toEqual(['r1']);
    await h.close();
  });
});

// ---- cost control -----------------------------------------------------------------------------

describe('cost control', () => {
  const perCall = q({ id: 'negative-amount', scope: 'span', when: 'live', ask: 'Did this call pass a negative amount?' });

  it('with the local LLM, asks only about the newest waiting span, at most four per check per run', async () => {
    fake.script = script({ judge: () => ({ p: 0.05 }) });
    const h = await harness([perCall], { policy: LOCAL_LLM_POLICY });
    const envs: Envelope[] = [];
    // Ten calls arriving within the gap: only the newest waiting one is asked, then at run end.
    for (let i = 1; i <= 10; i++) envs.push(spanEnv('r1', `s${i}`, { tool: 'pay', input: { amount: i } }, T0 + i * 100));
    envs.push(env({ kind: 'run_end', run: { event: 'run_end', run_id: 'r1', status: 'ok', ts_ms: T0 + 2_000 } }, T0 + 2_000));
    await h.feed(envs);
    const asked = judgeCalls().map((c) => /"amount":(\d+)/.exec(c.body.messages[1].content.split('the call being judged')[1])?.[1]);
    expect(asked).toEqual(['1', '10']);
    // Now spaced out beyond the gap: one each, and never more than four in the run.
    for (let i = 1; i <= 8; i++) await h.feed([spanEnv('r2', `x${i}`, { tool: 'pay', input: { amount: i } }, T0 + i * 10_000)]);
    expect(judgedQuestions().length).toBe(2 + 4);
    await h.close();
  });

  it('answers identical questions from a cache', async () => {
    fake.script = script({ judge: () => ({ p: 0.1 }) });
    const answerer = new QuestionAnswerer({ local: local(), queue: { maxWaitMs: 0 } });
    const evidence: EvidenceDoc = { spans: [{ id: 's1', type: 'tool', name: 'pay', tool: 'pay', status: 'ok', input: '{"amount":5}' }] };
    const a = await answerer.ask({ q: CLAIM, evidence });
    const b = await answerer.ask({ q: CLAIM, evidence: JSON.parse(JSON.stringify(evidence)) });
    expect(fake.calls).toHaveLength(1);
    expect(a.cached).toBeUndefined();
    expect(b).toMatchObject({ status: 'answered', cached: true, probability: 0.1 });
    // A different question about the same evidence is asked.
    await answerer.ask({ q: { ...CLAIM, id: 'other', ask: 'Did it pay too much?' }, evidence });
    expect(fake.calls).toHaveLength(2);
    answerer.close();
  });

  describe('answers shared through Redis (replicas, and a service started again after a crash)', () => {
    const redis = serviceOrSkip('redis', 'the question service\'s shared answers');
    const maybe = redis ? it : it.skip;
    const caches: RedisSharedCache[] = [];
    afterAll(() => Promise.all(caches.map((c) => c.close())));
    /** A question service's answerer, as a replica of the deployment `prefix` makes it. */
    const replica = async (prefix: string, lookups: string[] = []) => {
      const c = new RedisSharedCache({ url: redis!.url, prefix });
      caches.push(c);
      await c.connect();
      return new QuestionAnswerer({ local: local(), queue: { maxWaitMs: 0 }, cache: { shared: c.named('answers') }, onCacheLookup: (kind, r) => lookups.push(`${kind}:${r}`) });
    };
    const paid: EvidenceDoc = { spans: [], text: 'The agent wrote: your refund of $40 went through.' };

    maybe('answers a question another replica was answered, second look included, without asking the model again', async () => {
      fake.script = script({ judge: () => ({ p: 0.9, quote: 'your refund of $40 went through' }) });
      const prefix = uniqueName('it_answers');
      const [one, two] = [await replica(prefix), await replica(prefix, [])];
      const lookups: string[] = [];
      const three = await replica(prefix, lookups);
      const a = await one.ask({ q: CLAIM, evidence: paid });
      expect(a).toMatchObject({ status: 'answered', flagged: true, quote: 'your refund of $40 went through' });
      expect(fake.calls.map((c) => c.kind)).toEqual(['judge', 'second_look']);
      const b = await two.ask({ q: CLAIM, evidence: JSON.parse(JSON.stringify(paid)) });
      expect(b).toMatchObject({ status: 'answered', flagged: true, cached: true, quote: a.quote, probability: a.probability });
      expect(fake.calls).toHaveLength(2);
      await three.ask({ q: CLAIM, evidence: paid });
      await three.ask({ q: CLAIM, evidence: paid });
      expect(lookups).toEqual(['question:shared', 'second_look:shared', 'question:memory', 'second_look:memory']);
      // Another deployment (prefix) shares nothing with this one.
      await (await replica(uniqueName('it_answers'))).ask({ q: CLAIM, evidence: paid });
      expect(fake.calls).toHaveLength(4);
      for (const x of [one, two, three]) x.close();
    });

    maybe('shares decisions too, and asks the model when what is stored is not an answer', async () => {
      fake.script = (call) => ({ json: { answers: [...call.body.messages[1].content.matchAll(/^(q\d+) \(about/gm)].map((m) => ({ id: m[1], p: 0.2, reason: 'Scripted.' })) } });
      const prefix = uniqueName('it_answers');
      const [one, two] = [await replica(prefix), await replica(prefix)];
      const item = { instructions: 'Answer as JSON.', subject: 'The agent greeted the caller.', ask: 'Did the agent greet the caller?' };
      expect(await one.decide('decision', item)).toMatchObject({ ok: true, cached: false, answer: { p: 0.2 } });
      expect(await two.decide('decision', item)).toMatchObject({ ok: true, cached: true, answer: { p: 0.2 } });
      expect(fake.calls).toHaveLength(1);
      // A value in the shared cache that is no answer (another version wrote it, or it was cut) is a miss.
      const raw = new Redis(redis!.url);
      try {
        const keys = await raw.keys(`${prefix}:cache:answers:*`);
        expect(keys).toHaveLength(1);
        await raw.set(keys[0], '"not an object"', 'PX', 60_000);
      } finally {
        raw.disconnect();
      }
      const lookups: string[] = [];
      const three = await replica(prefix, lookups);
      expect(await three.decide('decision', item)).toMatchObject({ ok: true, cached: false, answer: { p: 0.2 } });
      expect(lookups).toEqual(['decision:miss']);
      expect(fake.calls).toHaveLength(2);
      for (const x of [one, two, three]) x.close();
    });

    maybe('asks the model as before when Redis is unreachable', async () => {
      fake.script = script({ judge: () => ({ p: 0.1 }) });
      const errors: unknown[] = [];
      const dead = new RedisSharedCache({ url: 'redis://127.0.0.1:1', prefix: 'x', onError: (e) => errors.push(e) });
      caches.push(dead);
      await dead.connect();
      const lookups: string[] = [];
      const answerer = new QuestionAnswerer({ local: local(), queue: { maxWaitMs: 0 }, cache: { shared: dead.named('answers') }, onCacheLookup: (kind, r) => lookups.push(`${kind}:${r}`) });
      const evidence: EvidenceDoc = { spans: [], text: 'fine run' };
      expect(await answerer.ask({ q: CLAIM, evidence })).toMatchObject({ status: 'answered', probability: 0.1 });
      expect(await answerer.ask({ q: CLAIM, evidence })).toMatchObject({ status: 'answered', cached: true });
      expect(fake.calls).toHaveLength(1);
      expect(lookups).toEqual(['question:miss', 'question:memory']);
      expect(errors).toHaveLength(1);
      answerer.close();
    });
  });

  it('lets note-writing jump the queue', async () => {
    // The model answers the first question only once the note is queued behind it and the three others.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const answer = script({ judge: () => ({ p: 0.1 }) });
    fake.script = async (call) => {
      if (call.n === 1) await held;
      return answer(call);
    };
    // A minute's client timeout: the held call is not given up and asked again meanwhile.
    const answerer = new QuestionAnswerer({ local: local(60_000), queue: { maxConcurrent: 1, maxBatch: 1, maxWaitMs: 0 } });
    const queue = answerer.llm()!.queue;
    const asks = [1, 2, 3, 4].map((i) => answerer.ask({ q: CLAIM, evidence: { spans: [], text: `run ${i}` } }));
    await until('the first question at the model, three waiting', () => fake.calls.length === 1 && queue.queued === 3, 30_000, 5);
    const note = answerer.writeNote(CLAIM, 'Your refund of $40 was issued', undefined);
    await until('the note queued', () => queue.queued === 4, 30_000, 5);
    release();
    await Promise.all([...asks, note]);
    expect(fake.calls.map((c) => c.kind)).toEqual(['judge', 'note', 'judge', 'judge', 'judge']);
    expect(await note).toMatch(/refund/);
    answerer.close();
  });
});

// ---- which model answers ----------------------------------------------------------------------

describe('which model answers', () => {
  const pii = q({ id: 'personal-data-in-answer', ask: 'Does the final answer reveal personal data the user did not ask for?', evidence: { final_output: true } }, 'library');
  const doc = (i: number, final: string): EvidenceDoc => ({ spans: [{ id: 's1', type: 'tool', name: 'lookup', tool: 'lookup', status: 'ok', output: `order ${i} shipped` }], final_output: final });

  it('sends a question to the fast classifier first once it agrees on 90% of at least 30 answers', async () => {
    fake.script = script({ judge: () => ({ p: 0.02 }) });
    const answerer = new QuestionAnswerer({ local: local(), auditRate: 0, queue: { maxWaitMs: 0 } });
    for (let i = 0; i < 30; i++) {
      const a = await answerer.ask({ q: pii, evidence: doc(i, `Order ${i} has shipped.`) });
      expect(a.answered_by).toBe('local');
      await answerer.idle();
    }
    expect(fake.calls).toHaveLength(30);
    const stats = await answerer.agreement.stats('personal-data-in-answer');
    expect(stats[0]).toMatchObject({ answers: 30, agreed: 30, rate: 1, classifier_first: true });
    const next = await answerer.ask({ q: pii, evidence: doc(31, 'Order 31 has shipped.') });
    expect(next).toMatchObject({ status: 'answered', answered_by: 'classifier', flagged: false });
    expect(fake.calls).toHaveLength(30);
    // What the classifier flags still goes to the LLM, which decides and takes the second look.
    fake.script = script({ judge: () => ({ p: 0.95, quote: 'dana@example.com' }) });
    const flagged = await answerer.ask({ q: pii, evidence: doc(32, 'Ask Dana at dana@example.com.') });
    expect(flagged).toMatchObject({ flagged: true, answered_by: 'local', quote: 'dana@example.com' });
    expect(fake.calls.map((c) => c.kind).slice(30)).toEqual(['judge', 'second_look']);
    // Settings -> Models lists it with its text while the check words it so; a reworded check
    // asks a new question (a new key, counted from nothing), and the old key's text is not kept.
    expect(await agreementStats(answerer, { checks: () => [pii] })).toEqual([expect.objectContaining({ question_key: questionKey(pii), check_id: pii.id, ask: pii.ask })]);
    const reworded = { ...pii, ask: 'Does the final answer show an email address or phone number of someone else?' };
    expect(await agreementStats(answerer, { checks: () => [reworded] })).toEqual([expect.objectContaining({ question_key: questionKey(pii), ask: '' })]);
    // Two projects each with a check of this id: the one answered is alpha's. Beta's key sees
    // neither its text nor its counts; alpha's sees both.
    const alphas = { ...pii, applies_to: { project: ['alpha'] } };
    const betas = { ...pii, ask: 'Does the reply include an email address?', applies_to: { project: ['beta'] } };
    expect(questionKey(alphas)).toBe(questionKey(pii));
    expect(await agreementStats(answerer, { project: 'beta', checks: () => [alphas, betas] })).toEqual([]);
    expect(await agreementStats(answerer, { project: 'alpha', checks: () => [alphas, betas] })).toEqual([expect.objectContaining({ question_key: questionKey(pii), ask: pii.ask, answers: 31 })]);
    // An earlier wording of a project's own check is still listed for it, without its text.
    expect(await agreementStats(answerer, { project: 'beta', checks: () => [{ ...reworded, applies_to: { project: ['beta'] } }] })).toEqual([expect.objectContaining({ question_key: questionKey(pii), ask: '' })]);
    answerer.close();
  });

  it('does not switch before 30 answers, nor below 90%', async () => {
    let n = 0;
    // Every fifth answer disagrees with the classifier: 80%.
    fake.script = script({ judge: () => ({ p: ++n % 5 === 0 ? 0.95 : 0.02, quote: 'shipped' }), secondLook: () => ({ json: { holds: false } }) });
    const answerer = new QuestionAnswerer({ local: local(), auditRate: 0, queue: { maxWaitMs: 0 } });
    for (let i = 0; i < 40; i++) {
      await answerer.ask({ q: pii, evidence: doc(i, `Order ${i} has shipped.`) });
      await answerer.idle();
    }
    expect(answerer.agreement.classifierFirst((await answerer.agreement.stats())[0].question_key)).toBe(false);
    expect((await answerer.ask({ q: pii, evidence: doc(99, 'Order 99 has shipped.') })).answered_by).toBe('local');
    answerer.close();
  });

  it('prefers the decision model when it is on, and uses the fast classifier alone when no LLM is configured', async () => {
    fake.script = script({ judge: () => ({ p: 0.1 }) });
    const decision = openAiChatModel({ role: 'decision', baseURL: fake.url, model: 'judge-xl' });
    const both = new QuestionAnswerer({ decision, local: local(), queue: { maxWaitMs: 0 } });
    expect((await both.ask({ q: CLAIM, evidence: { spans: [], text: 'x' } })).answered_by).toBe('decision');
    expect(fake.calls[0].body.model).toBe('judge-xl');
    both.close();
    fake.calls.length = 0;
    const none = new QuestionAnswerer({});
    const a = await none.ask({ q: pii, evidence: doc(1, 'Call Dana on +1 415 555 0199.') });
    expect(a).toMatchObject({ status: 'answered', flagged: true, answered_by: 'classifier', quote: '+1 415 555 0199' });
    expect(fake.calls).toHaveLength(0);
  });
});

// ---- batching ---------------------------------------------------------------------------------

describe('batching', () => {
  const bad = q({ id: 'bad-word', ask: 'Does the evidence contain the word BAD?' });
  const opts = (extra: AnswererOptions['queue'] = {}): AnswererOptions => ({ local: local(), cache: false, queue: { maxBatch: 8, maxConcurrent: 2, maxWaitMs: 20, ...extra } });

  it('coalesces concurrent questions into fewer requests, each answer going to its own question', async () => {
    fake.script = script({ judge: (x) => ({ p: x.evidence.includes('BAD') ? 0.95 : 0.05, quote: x.evidence.includes('BAD') ? 'BAD' : '' }), delayMs: 30 });
    const answerer = new QuestionAnswerer(opts());
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => answerer.ask({ q: bad, evidence: { spans: [], text: `item ${i} ${i % 3 === 0 ? 'BAD' : 'good'}` } }, { secondLook: false })),
    );
    expect(answers.map((a) => a.flagged)).toEqual(Array.from({ length: 40 }, (_, i) => i % 3 === 0));
    expect(judgeCalls().length).toBeLessThanOrEqual(8);
    expect(fake.maxOpen).toBeLessThanOrEqual(2);
    answerer.close();
  });

  it('shares one answer between identical questions in flight', async () => {
    fake.script = script({ judge: () => ({ p: 0.1 }), delayMs: 50 });
    const answerer = new QuestionAnswerer(opts());
    const same = { q: bad, evidence: { spans: [], text: 'same' } };
    await Promise.all([answerer.ask(same), answerer.ask(same), answerer.ask(same)]);
    expect(judgedQuestions()).toHaveLength(1);
    expect(answerer.local!.queue.stats.deduped).toBe(2);
    answerer.close();
  });

  it('asks a question again alone when a batch reply leaves it out', async () => {
    fake.script = (call) => {
      const qs = (call.body.messages[1].content.match(/^q\d+ \(about/gm) ?? []).length;
      // The model forgets the last question of any batch of more than one.
      return judgeReply(call, (x) => (qs > 1 && x.id === `q${qs}` ? { id: 'lost' } : { p: 0.1 }));
    };
    const answerer = new QuestionAnswerer(opts({ maxConcurrent: 1 }));
    const answers = await Promise.all([1, 2, 3].map((i) => answerer.ask({ q: bad, evidence: { spans: [], text: `x${i}` } })));
    expect(answers.every((a) => a.status === 'answered')).toBe(true);
    expect(judgeCalls().length).toBe(2);
    answerer.close();
  });
});

// ---- the planner ------------------------------------------------------------------------------

describe('the planner', () => {
  const lib = [
    q({ id: 'ignored-tool-error', ask: 'Did a tool fail and the agent carry on as if it had not?', evidence: { final_output: true } }, 'library'),
    q({ id: 'unfinished-task', ask: 'Did the run end before everything the user asked for ({task}) was done?', evidence: { final_output: true } }, 'library'),
    q({ id: 'system-prompt-violation', ask: 'Did the agent break one of these rules: {rules}?', evidence: { final_output: true, system_prompt: true } }, 'library'),
    q({ id: 'wrong-tool-or-arguments', scope: 'span', ask: 'Did this call use the wrong tool ({tools})?' }, 'library'),
  ];

  it('plans a workflow on its first run, caches the plan, and plans again when new tools appear', async () => {
    fake.script = script({
      judge: () => ({ p: 0.05 }),
      plan: () => ({
        json: {
          pick: [{ id: 'unfinished-task', params: { task: 'refund order A-17' } }, { id: 'system-prompt-violation', params: { rules: 'Never refund an order the customer does not own.' } }, { id: 'not-in-library' }],
          new: [{ id: 'refund-amount', title: 'Refund larger than the order', ask: 'Did the agent refund more than the order cost?', scope: 'trace' }],
        },
      }),
    });
    const plans = new MemoryPlanStore();
    const written: { id: string; yaml: string }[] = [];
    const planned: Plan[] = [];
    const h = await harness(lib, { plans, checks: { put: async (c) => void written.push(c) }, onPlan: (p) => planned.push(p) });
    await h.feed(refundRun('r1'));
    expect(fake.calls.filter((c) => c.kind === 'plan')).toHaveLength(1);
    const planCall = fake.calls.find((c) => c.kind === 'plan')!;
    expect(planCall.body.messages[1].content).toContain('Never refund an order the customer does not own.');
    expect(planCall.body.messages[1].content).toContain('Refund order A-17 please');
    expect(planCall.body.messages[1].content).toContain('- lookup_order');
    const plan = (await plans.get('p', 'refunds'))!;
    // Unknown ids dropped, topped up to three from the rules' choice.
    expect(plan.picks.map((p) => p.id)).toEqual(['unfinished-task', 'system-prompt-violation', 'ignored-tool-error']);
    expect(plan.tools).toEqual(['lookup_order', 'issue_refund']);
    expect(plan.written.map((w) => w.id)).toEqual(['plan-refunds-refund-amount']);
    // The planner's question is a database check (the fourth source) until someone saves it.
    expect(written.map((w) => w.id)).toEqual(['plan-refunds-refund-amount']);
    expect(written[0].yaml).toContain('workflow:');

    fake.calls.length = 0;
    await h.feed(refundRun('r2'));
    expect(fake.calls.filter((c) => c.kind === 'plan')).toHaveLength(0);
    // The plan is used: its picks, with their parameters, and its own question.
    const asked = judgeCalls().flatMap((c) => c.body.messages[1].content.split('\n').filter((l) => /^q\d+ /.test(l)));
    expect(asked.some((l) => l.includes('(refund order A-17)'))).toBe(true);
    expect(asked.some((l) => l.includes('Never refund an order the customer does not own.'))).toBe(true);
    expect(asked.some((l) => l.includes('Did the agent refund more than the order cost?'))).toBe(true);

    fake.calls.length = 0;
    await h.feed(refundRun('r3', [{ name: 'lookup_order' }, { name: 'issue_refund' }, { name: 'send_email' }]));
    expect(fake.calls.filter((c) => c.kind === 'plan')).toHaveLength(1);
    expect((await plans.get('p', 'refunds'))!.tools).toEqual(['lookup_order', 'issue_refund', 'send_email']);
    expect(planned).toHaveLength(2);
    await h.close();
  });
});

// ---- gRPC -------------------------------------------------------------------------------------

describe('the Question gRPC service', () => {
  function client(port: number) {
    return new v1.QuestionClient(`127.0.0.1:${port}`, credentials.createInsecure());
  }
  const call = <Req, Res>(fn: (req: Req, cb: (err: ServiceError | null, res: Res) => void) => unknown, req: Req) =>
    new Promise<Res>((resolve, reject) => fn(req, (err, res) => (err ? reject(err) : resolve(res))));

  it('answers Ask, AskBatch, Complete and Agreement', async () => {
    fake.script = async (c) => (c.kind === 'other' ? { content: 'a reasoned reply' } : script({ judge: (x) => ({ p: x.evidence.includes('refund') ? 0.8 : 0.1, quote: 'refund' }) })(c));
    // The question is also a check in effect, so Agreement names it by its text.
    const check = q({ id: 'api-q', ask: 'Was a refund mentioned?' });
    const h = await harness([check], { grpc: { port: 0 } });
    const cl = client(h.service.grpcPort!);
    const spec = { id: 'api-q', kind: 'yes_no', ask: 'Was a refund mentioned?', options: {}, flag_on: [], levels: [] };
    const one = await call<v1.AskRequest, v1.AskResponse>(cl.ask.bind(cl), { question: spec, evidence_text: 'we issued a refund', evidence_json: '', context_text: '', priority: '', no_second_look: false });
    expect(one.answer).toMatchObject({ status: 'answered', flagged: true, probability: 0.8, quote: 'refund', answered_by: 'local', confidence: 'Very likely (LLM judgment)' });
    const many = await call<v1.AskBatchRequest, v1.AskBatchResponse>(cl.askBatch.bind(cl), {
      questions: ['nothing here', 'a refund'].map((t) => ({ question: spec, evidence_text: t, evidence_json: '', context_text: '', priority: '', no_second_look: true })),
    });
    expect(many.answers.map((a) => a.flagged)).toEqual([false, true]);
    const done = await call<v1.CompleteRequest, v1.CompleteResponse>(cl.complete.bind(cl), { messages: [{ role: 'user', content: 'why?' }], priority: '', json: false });
    expect(done).toEqual({ text: 'a reasoned reply', answered_by: 'local' });
    // One comparison with the LLM on record (an untrained classifier compares none of its own here).
    h.service.answerer.agreement.record(questionKey(check), check.id, true, true);
    const agreement = await call<v1.AgreementRequest, v1.AgreementResponse>(cl.agreement.bind(cl), { check_id: '', project: '' });
    expect(agreement.questions).toEqual([expect.objectContaining({ question_key: questionKey(check), check_id: 'api-q', ask: 'Was a refund mentioned?', answers: 1, agreed: 1, recall: 1 })]);
    const bad = call(cl.ask.bind(cl), { question: { ...spec, kind: 'maybe' }, evidence_text: 'x', evidence_json: '', context_text: '', priority: '', no_second_look: false });
    await expect(bad).rejects.toMatchObject({ code: Status.INVALID_ARGUMENT });
    cl.close();
    await h.close();
  });

  it('applies back-pressure with RESOURCE_EXHAUSTED instead of an unbounded queue', async () => {
    fake.script = script({ judge: () => ({ p: 0.1 }), delayMs: 300 });
    const h = await harness([], { grpc: { port: 0 }, queue: { maxConcurrent: 1, maxBatch: 1, maxWaitMs: 0, maxQueue: 2 } });
    const cl = client(h.service.grpcPort!);
    const spec = { id: 'api-q', kind: 'yes_no', ask: 'Anything wrong?', options: {}, flag_on: [], levels: [] };
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        call<v1.AskRequest, v1.AskResponse>(cl.ask.bind(cl), { question: spec, evidence_text: `run ${i}`, evidence_json: '', context_text: '', priority: '', no_second_look: true }),
      ),
    );
    const refused = results.filter((r) => r.status === 'rejected');
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) expect((r as PromiseRejectedResult).reason.code).toBe(Status.RESOURCE_EXHAUSTED);
    expect(results.filter((r) => r.status === 'fulfilled').length).toBeGreaterThanOrEqual(3);
    expect(h.service.answerer.local!.queue.stats.rejected).toBe(refused.length);
    cl.close();
    await h.close();
  });
});
