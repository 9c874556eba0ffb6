/**
 * What the question service keeps per question, on a real database (PGlite, migrated) and a
 * local OpenAI-compatible server: the fast classifier's model and the agreement record of a
 * question whose {task} is filled per run are one for every run (keyed by the question as
 * written), and what it holds in memory is bounded, letting go only what is saved.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { parseCheckFile, type QuestionCheck } from '@neatroots/checks';
import { QUESTIONS_TOPIC, questionTaskRecords } from '@neatroots/messages';
import { MemoryBus, MemoryWindowStore, migrate, openAiChatModel, openPglite } from '@neatroots/platform';
import type { Db } from '@neatroots/ports';
import {
  AgreementTracker,
  FastClassifier,
  MemoryPlanStore,
  QuestionScheduler,
  questionKey,
  questionSet,
  type EvidenceDoc,
  type QuestionFindingsWindow,
  type SchedulerWindow,
} from '@neatroots/questions';
import type { Envelope } from '@neatroots/spans';
import { QuestionsRepo } from '@neatroots/store';
import { judgeReply, startFakeOpenAI, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { agreementStats } from './grpc';
import { startQuestionService } from './service';

let db: Db;
let fake: FakeOpenAI;

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  fake = await startFakeOpenAI(() => ({ content: '{}' }));
}, 60_000);
afterAll(async () => {
  await fake.close();
  await db.close();
});
beforeEach(async () => {
  fake.calls.length = 0;
  await db.exec('TRUNCATE classifier_models, question_agreement, question_results, question_plans CASCADE');
});

/** The library's unfinished-task, as shipped: its ask holds {task}. */
function libraryQuestion(id: string): QuestionCheck {
  const file = path.join(__dirname, '../../../packages/neatroots/library/questions/workflow.yaml');
  const c = parseCheckFile(readFileSync(file, 'utf8'), 'workflow.yaml', 'library').checks.find((x) => x.id === id);
  if (!c || c.kind === 'rule') throw new Error(`no library question ${id}`);
  return c;
}

const rows = async (table: 'classifier_models' | 'question_agreement') =>
  (await db.query<{ question_key: string; check_id: string }>(`SELECT question_key, check_id FROM ${table} ORDER BY question_key`)).rows.map((r) => ({ ...r }));

describe('a question filled per run', () => {
  it("gives every run of the workflow one classifier model and one agreement record, keyed by the question as written", async () => {
    const unfinished = libraryQuestion('unfinished-task');
    expect(unfinished.ask).toContain('{task}');
    const set = questionSet([unfinished]);
    // The workflow's plan picked the question without parameters: {task} is filled from each run's request.
    const plans = new MemoryPlanStore();
    await plans.put({ project: 'p', workflow: 'refunds', tools: ['lookup_order'], picks: [{ id: 'unfinished-task' }], written: [], planned_by: 'local', at_ms: 0 });
    fake.script = (call) => (call.kind === 'judge' ? judgeReply(call, () => ({ p: 0.05, quote: '' })) : { json: {} });
    const bus = new MemoryBus({ onError: () => undefined });
    const service = await startQuestionService({
      bus,
      db,
      windows: new MemoryWindowStore<QuestionFindingsWindow>(),
      models: { local: openAiChatModel({ role: 'local', baseURL: fake.url, model: 'llama-test', timeoutMs: 2_000 }) },
      questions: () => set.questions,
      queue: { maxWaitMs: 5, retries: 0 },
      plans,
    });
    const scheduler = new QuestionScheduler({ windows: new MemoryWindowStore<SchedulerWindow>(), questions: () => set, plans, planCacheMs: 0 });
    const N = 6;
    const t0 = Date.now();
    for (let i = 0; i < N; i++) {
      const run = `r${i}`;
      const at = t0 + i * 1_000;
      const envs: Envelope[] = [
        { project: 'p', received_ms: at, item: { kind: 'run_start', run: { event: 'run_start', run_id: run, workflow: 'refunds', user_message: `Refund order ${1000 + i} please`, tools: [{ name: 'lookup_order' }] } } },
        { project: 'p', received_ms: at + 1, item: { kind: 'span', span: { run_id: run, span_id: `${run}-s1`, type: 'tool', name: 'lookup_order', tool: 'lookup_order', status: 'ok', output: `order ${1000 + i} found`, start_ms: at, end_ms: at + 1 } } },
        { project: 'p', received_ms: at + 2, item: { kind: 'run_end', run: { event: 'run_end', run_id: run, status: 'ok', final_output: `Refund for order ${1000 + i} issued.`, ts_ms: at + 2 } } },
      ];
      const out = await scheduler.process(envs);
      // As the questions topic carries them (the check as JSON, in the record's protobuf).
      await bus.publish(QUESTIONS_TOPIC, questionTaskRecords(out.tasks).map((r) => ({ key: r.key, value: QUESTIONS_TOPIC.decode(QUESTIONS_TOPIC.encode(r.value)) })));
      await out.commit();
      await bus.idle();
      await service.idle();
    }
    // The agreement is saved at each flush, the models only with theirs (hundreds of KB written whole).
    await service.answerer.flush({ models: false });
    expect(await rows('classifier_models')).toEqual([]);
    expect(await rows('question_agreement')).toHaveLength(1);
    await service.answerer.flush();
    // Each run was asked its own words...
    const asked = fake.calls.filter((c) => c.kind === 'judge').map((c) => c.body.messages[1].content);
    expect(asked).toHaveLength(N);
    for (let i = 0; i < N; i++) expect(asked[i]).toContain(`Refund order ${1000 + i} please`);
    // ...and all of them taught one model and one agreement record, under the question as written.
    const key = questionKey(unfinished);
    expect(service.answerer.classifier.held().models).toBe(1);
    expect(service.answerer.classifier.trainedByKey(key)).toBe(N);
    expect(await rows('classifier_models')).toEqual([{ question_key: key, check_id: 'unfinished-task' }]);
    expect(await rows('question_agreement')).toEqual([{ question_key: key, check_id: 'unfinished-task' }]);
    // Settings -> Models names it by the check in effect's words.
    expect(await agreementStats(service.answerer, { checks: () => set.questions })).toEqual([
      expect.objectContaining({ question_key: key, check_id: 'unfinished-task', ask: unfinished.ask, answers: N, trained: N }),
    ]);
    await service.close();
    await bus.close();
  });
});

describe('what the question service holds in memory', () => {
  const question = (id: string): QuestionCheck => parseCheckFile(`id: ${id}\nkind: yes_no\nscope: trace\nask: Did the agent ${id}?\n`, `${id}.yaml`, 'user').checks[0] as QuestionCheck;
  const doc = (i: number): EvidenceDoc => ({ spans: [{ id: 's1', type: 'tool', name: 'lookup', tool: 'lookup', status: 'ok', output: `order ${i} found` }], final_output: `done ${i}` });
  const [a, b, c] = ['overcharge', 'overpromise', 'overshare'].map(question);
  /** The bytes of one yes_no model, read from a classifier that holds one. */
  const modelBytes = () => {
    const one = new FastClassifier();
    one.learn(a, doc(0), { p: 0 });
    return one.held().bytes;
  };

  it('lets the least recently used classifier models go once saved, keeps those not saved, and reads one let go back as it was', async () => {
    const repo = new QuestionsRepo(db);
    const classifier = new FastClassifier({ store: repo, maxModelBytes: 2 * modelBytes() });
    await classifier.ready([a, b, c]);
    for (const [i, q] of [a, b, c].entries()) classifier.learn(q, doc(i), { p: i % 2 });
    // Three models over a bound of two: none saved yet, so all three stay.
    expect(classifier.held().models).toBe(3);
    await classifier.flush();
    // Saved: the least recently used goes; the database has all three.
    expect([a, b, c].map((q) => classifier.holds(questionKey(q)))).toEqual([false, true, true]);
    expect((await rows('classifier_models')).map((r) => r.question_key).sort()).toEqual([a, b, c].map(questionKey).sort());
    // Taught before it is asked again, it learns nothing: a fresh model would be saved over what it learnt.
    classifier.learn(a, doc(4), { p: 0 });
    expect(classifier.holds(questionKey(a))).toBe(false);
    // Asked again, it is read back with what it learnt, and the least recently used saved one makes room.
    classifier.learn(c, doc(5), { p: 1 });
    await classifier.ready([a]);
    expect(classifier.trained(a)).toBe(1);
    expect([a, b, c].map((q) => classifier.holds(questionKey(q)))).toEqual([true, false, true]);
    classifier.learn(a, doc(6), { p: 1 });
    expect(classifier.trained(a)).toBe(2);
    await classifier.flush();
    const again = new FastClassifier({ store: repo });
    await again.ready([a, b, c]);
    expect([a, b, c].map((q) => again.trained(q))).toEqual([2, 1, 2]);
  });

  it('lets the least recently used agreement records go once saved, keeps those not saved, and lists every record', async () => {
    const repo = new QuestionsRepo(db);
    const tracker = new AgreementTracker({ store: repo.agreement, maxRecords: 2 });
    const [ka, kb, kc] = [a, b, c].map(questionKey);
    await tracker.ready([ka, kb, kc]);
    for (const [i, k] of [ka, kb, kc].entries()) tracker.record(k, k.split('@')[0], true, i === 0);
    expect(tracker.held().records).toBe(3);
    await tracker.flush();
    expect(tracker.held().records).toBe(2);
    expect(tracker.get(ka)).toBeUndefined();
    // Listed from the database all the same, and read back as it was when asked again.
    expect((await tracker.stats()).map((s) => [s.question_key, s.answers])).toEqual([[ka, 1], [kb, 1], [kc, 1]].sort((x, y) => (x[0] < y[0] ? -1 : 1)));
    tracker.record(kb, 'overpromise', true);
    await tracker.ready([ka]);
    expect(tracker.get(ka)).toMatchObject({ answers: 1, recent: 'A' });
    // The one changed since the flush (kb) is kept; the saved one least recently used (kc) goes.
    expect([ka, kb, kc].map((k) => tracker.get(k) !== undefined)).toEqual([true, true, false]);
    tracker.record(ka, 'overcharge', false);
    await tracker.flush();
    const stored = await repo.loadAgreement([ka, kb, kc]);
    expect([ka, kb, kc].map((k) => stored.get(k)?.answers)).toEqual([2, 2, 1]);
  });
});
