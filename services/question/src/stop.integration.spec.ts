/**
 * A stop against a slow model: the question service does not wait for the model to answer
 * every question in hand. Once its grace is over it fails what waits in the model queue and
 * aborts the requests in flight; their bus batches are not committed and are delivered again
 * at the next start, where only the questions the model had not answered yet are asked (those
 * it answered are in the shared cache).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseCheck, type QuestionCheck } from '@neatroots/checks';
import { LogBus, MemoryWindowStore, openAiChatModel, until } from '@neatroots/platform';
import type { SharedCache } from '@neatroots/ports';
import { QuestionScheduler, questionSet, type QuestionFindingsWindow, type SchedulerWindow } from '@neatroots/questions';
import { QUESTIONS_TOPIC, questionTaskRecords } from '@neatroots/messages';
import type { Envelope } from '@neatroots/spans';
import { judgeReply, startFakeOpenAI, type FakeCall, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { startQuestionService, type QuestionService } from './service';

const T0 = 1_700_000_000_000;
const RUNS = 200;
/** The model's latency before the stop (a local LLM under load). */
const SLOW_MS = 6_000;
const GRACE_MS = 2_000;

let fake: FakeOpenAI;
const dirs: string[] = [];
beforeAll(async () => {
  fake = await startFakeOpenAI(() => ({ content: '{}' }));
});
afterAll(async () => {
  // The slow replies the stop no longer waited for end first (their timers).
  await until('the fake model is done', () => fake.open === 0, 30_000);
  await fake.close();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

const CLAIM = (() => {
  const c = parseCheck(
    { id: 'refund-claimed', kind: 'yes_no', scope: 'trace', when: 'end', ask: 'Did the agent claim a refund went through that did not?', evidence: { final_output: true } },
    'test.yaml',
    'user',
  );
  if (c.kind === 'rule') throw new Error('not a question');
  return c as QuestionCheck;
})();

function runEnvs(run: string): Envelope[] {
  const env = (item: Envelope['item'], at: number): Envelope => ({ project: 'p', received_ms: at, item });
  return [
    env({ kind: 'run_start', run: { event: 'run_start', run_id: run, workflow: 'refunds', tools: [{ name: 'issue_refund' }], user_message: 'Refund order A-17 please' } }, T0),
    // Each run's words differ: its question is its own (not answered from another's cache entry).
    env({ kind: 'run_end', run: { event: 'run_end', run_id: run, status: 'ok', final_output: `Your refund was issued (reference R-${run}).`, ts_ms: T0 + 300 } }, T0 + 300),
  ];
}

/** The runs a judge request asked about (each run's question quotes its reference). */
const runsAsked = (calls: FakeCall[]) => calls.filter((c) => c.kind === 'judge').flatMap((c) => [...c.body.messages[1].content.matchAll(/reference R-(run-\d+)/g)].map((m) => m[1]));

describe('a stop while a slow model has a backlog of questions', () => {
  it('ends within its grace and a few seconds, and the next start asks the model only what it had not answered', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-question-stop-'));
    dirs.push(dir);
    // The deployment's shared cache (the embedded database's), outliving the process.
    const stored = new Map<string, string>();
    const shared: SharedCache = { get: async (k) => stored.get(k), set: async (k, v) => void stored.set(k, v) };
    const answeredCount = () => [...stored.keys()].filter((k) => k.startsWith('question@2')).length;
    const set = questionSet([CLAIM]);
    const start = (bus: LogBus): Promise<QuestionService> =>
      startQuestionService({
        bus,
        windows: new MemoryWindowStore<QuestionFindingsWindow>(),
        models: { local: openAiChatModel({ role: 'local', baseURL: fake.url, model: 'llama-test', timeoutMs: 60_000 }) },
        questions: () => set.questions,
        queue: { maxWaitMs: 5, retries: 0 },
        cache: { shared },
        stopGraceMs: GRACE_MS,
        log: () => undefined,
      });

    fake.calls.length = 0;
    fake.script = async (call) => ({ delayMs: SLOW_MS, ...judgeReply(call, () => ({ p: 0.05, quote: '' })) });
    let bus = new LogBus({ dir, commitIntervalMs: 5, onError: () => undefined });
    const first = await start(bus);
    const scheduler = new QuestionScheduler({ windows: new MemoryWindowStore<SchedulerWindow>(), questions: () => set, planCacheMs: 0 });
    let published = 0;
    for (let i = 0; i < RUNS; i++) {
      for (const e of runEnvs(`run-${i}`)) {
        const out = await scheduler.process([e]);
        if (out.tasks.length) await bus.publish(QUESTIONS_TOPIC, questionTaskRecords(out.tasks));
        published += out.tasks.length;
        await out.commit();
      }
    }
    expect(published).toBe(RUNS);
    // The model answered its first requests, and is slow on the rest (many requests' worth queued).
    await until('the model answered its first questions', () => answeredCount() > 0, 60_000);
    const t0 = Date.now();
    await first.close();
    const took = Date.now() - t0;
    await bus.close();
    // Waiting for the model to answer the rest takes several times SLOW_MS: a stop past any supervisor's grace.
    expect(took).toBeLessThan(GRACE_MS + 15_000);
    const answeredBefore = answeredCount();
    expect(answeredBefore).toBeLessThan(RUNS);
    const askedBefore = runsAsked(fake.calls);

    // The next start: what was not committed is delivered again; only the unanswered questions reach the model.
    fake.calls.length = 0;
    fake.script = async (call) => judgeReply(call, () => ({ p: 0.05, quote: '' }));
    bus = new LogBus({ dir, commitIntervalMs: 5, onError: () => undefined });
    const second = await start(bus);
    try {
      await until('every task processed', () => first.metrics.tasks + second.metrics.tasks >= RUNS, 60_000);
      const askedAfter = runsAsked(fake.calls);
      // Each question the model had not answered is asked once, and none it had answered.
      expect(new Set(askedAfter).size).toBe(askedAfter.length);
      expect(askedAfter.length).toBe(RUNS - answeredBefore);
      expect(answeredCount()).toBe(RUNS);
      // Every run's question was asked before the stop or after it.
      expect(new Set([...askedBefore, ...askedAfter]).size).toBe(RUNS);
    } finally {
      await second.close();
      await bus.close();
    }
  }, 120_000);
});
