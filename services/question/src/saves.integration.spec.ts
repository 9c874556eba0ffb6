/**
 * The question service saves what the classifier learnt on its interval while the background
 * checks of classifier-first answers keep coming (a real database, PGlite, and a local
 * OpenAI-compatible server that answers slowly): a save does not wait for the checks still in
 * the model queue, and a slow save is never joined by another.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { parseCheckFile, type QuestionCheck } from '@neatroots/checks';
import { MemoryBus, MemoryWindowStore, migrate, openAiChatModel, openPglite } from '@neatroots/platform';
import type { Db } from '@neatroots/ports';
import { questionKey, type AgreementStore, type EvidenceDoc, type QuestionFindingsWindow } from '@neatroots/questions';
import { QuestionsRepo } from '@neatroots/store';
import { judgeReply, startFakeOpenAI, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The library's ignored-tool-error, as shipped (the classifier answers it with its heuristic). */
function libraryQuestion(id: string): QuestionCheck {
  const file = path.join(__dirname, '../../../packages/neatroots/library/questions/tool-results.yaml');
  const c = parseCheckFile(readFileSync(file, 'utf8'), 'tool-results.yaml', 'library').checks.find((x) => x.id === id);
  if (!c || c.kind === 'rule') throw new Error(`no library question ${id}`);
  return c;
}

it('saves the agreement every interval while background checks wait on a slow model, one save at a time', async () => {
  const q = libraryQuestion('ignored-tool-error');
  const key = questionKey(q);
  const repo = new QuestionsRepo(db);
  // Agreed on 40 answers: the question goes to the classifier first, and every answer it gives
  // is also put to the LLM in the background (auditRate 1).
  await repo.agreement.save([{ key, check_id: q.id, answers: 40, agreed: 40, recent: 'a'.repeat(40) }]);
  let delayMs = 300;
  fake.script = (call) => (call.kind === 'judge' ? { ...judgeReply(call, () => ({ p: 0.05, quote: '' })), delayMs } : { json: {} });
  // The database's agreement store, its writes slowed to outlast the interval.
  let inFlight = 0;
  let maxInFlight = 0;
  const agreementStore: AgreementStore = {
    load: (keys) => repo.agreement.load(keys),
    list: () => repo.agreement.list!(),
    save: async (records) => {
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      try {
        await sleep(700);
        await repo.agreement.save(records);
      } finally {
        inFlight--;
      }
    },
  };
  const service = await startQuestionService({
    bus: new MemoryBus({ onError: () => undefined }),
    db,
    agreementStore,
    windows: new MemoryWindowStore<QuestionFindingsWindow>(),
    models: { local: openAiChatModel({ role: 'local', baseURL: fake.url, model: 'llama-test', timeoutMs: 10_000 }) },
    questions: () => [q],
    localQueue: { maxConcurrent: 1, maxWaitMs: 5, retries: 0 },
    auditRate: 1,
    flushMs: 150,
  });
  const doc = (i: number): EvidenceDoc => ({ spans: [{ id: 's1', type: 'tool', name: 'search', tool: 'search', status: 'ok', input: `q${i}`, output: `result ${i}` }] });
  let asked = 0;
  let byClassifier = 0;
  // About 50 asks a second, the model answering 8 every 300 ms: background checks are always waiting.
  const load = setInterval(() => {
    void service.answerer.ask({ q, evidence: doc(asked++) }).then((a) => {
      if (a.answered_by === 'classifier') byClassifier++;
    });
  }, 20);
  const stored = async () => (await repo.agreement.load([key])).get(key)?.answers ?? 0;
  const seen: number[] = [];
  try {
    for (let t = 0; t < 5_000; t += 250) {
      await sleep(250);
      seen.push(await stored());
    }
  } finally {
    clearInterval(load);
  }
  const pendingAtEnd = service.answerer.stats.audits - (service.answerer.agreement.get(key)!.answers - 40);
  delayMs = 0;
  await service.close();

  expect(byClassifier).toBeGreaterThan(100);
  // Checks were still waiting when it stopped: there was never a moment with none under way.
  expect(pendingAtEnd).toBeGreaterThan(20);
  // The database followed what was learnt, step by step, while the checks kept coming.
  const steps = new Set(seen.filter((n) => n > 40));
  expect(steps.size).toBeGreaterThanOrEqual(4);
  expect(seen.at(-1)).toBeGreaterThan(40 + 8 * 4);
  // A save outlasting the interval was never joined by another.
  expect(maxInFlight).toBe(1);
  // close() saved what was learnt up to the stop: the background checks answered by then (those
  // still waiting on the model are given up with its queue: a stop does not wait for them).
  const learnt = service.answerer.agreement.get(key)!.answers;
  expect(learnt).toBeGreaterThan(40);
  expect(await stored()).toBe(learnt);
}, 60_000);
