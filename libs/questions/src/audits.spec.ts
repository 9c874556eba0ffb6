/**
 * The background audits of the fast classifier's answers (a share of them put to the LLM, so
 * agreement stays current) against a hung model: they stay bounded, never take the model's
 * queue from real questions, and end when the answerer closes.
 */
import type { ChatModel, ChatRequest, ChatResponse } from '@neatroots/ports';
import { AgreementTracker } from './agreement';
import { QuestionAnswerer } from './answerer';
import { ModelQueueClosedError } from './batcher';
import { FastClassifier } from './classifier/classifier';
import type { QuestionDef } from './judge';
import type { Answer } from './types';

/** A model that never answers; what it was asked, in order; a request ends only when aborted. */
function hungModel() {
  const asked: ChatRequest[] = [];
  const answers: ((res: ChatResponse) => void)[] = [];
  const model: ChatModel = {
    role: 'local',
    id: 'hung',
    complete: (req) => {
      asked.push(req);
      return new Promise<ChatResponse>((resolve, reject) => {
        answers.push(resolve);
        req.signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      });
    },
  };
  /** The first request is answered (with nothing usable: what matters is what is sent next). */
  const answerFirst = () => answers.shift()!({ text: '{}' } as ChatResponse);
  return { model, asked, answerFirst };
}

async function until(cond: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}

const q = (id: string): QuestionDef => ({ id, kind: 'yes_no', ask: `Did the agent do ${id} wrong?` }) as QuestionDef;

/** Every question goes to the classifier first, which answers it (not flagged); every such answer is audited. */
function answerer(model: ChatModel, opts: { maxQueue: number; maxAudits?: number; classifierFirst?: () => boolean }) {
  const agreement = new AgreementTracker();
  agreement.classifierFirst = opts.classifierFirst ?? (() => true);
  const classifier = new FastClassifier();
  classifier.answer = () => ({ status: 'answered', flagged: false, probability: 0.1, answered_by: 'classifier' }) as Answer;
  return new QuestionAnswerer({
    local: model,
    agreement,
    classifier,
    auditRate: 1,
    maxAudits: opts.maxAudits,
    cache: false,
    queue: { maxConcurrent: 1, maxBatch: 1, maxWaitMs: 0, maxQueue: opts.maxQueue, retries: 0 },
    onError: () => undefined,
  });
}

describe('background audits against a hung model', () => {
  it('stay under their bound however many classifier answers come, and leave half the queue to real questions', async () => {
    const { model } = hungModel();
    const a = answerer(model, { maxQueue: 100, maxAudits: 30 });
    for (let i = 0; i < 2_000; i++) {
      expect(await a.ask({ q: q(`c${i}`), evidence: { spans: [], text: `run ${i}` } })).toMatchObject({ status: 'answered', answered_by: 'classifier' });
    }
    const stats = a.queueStats().local;
    // One request hangs; the rest of the audits wait, at most maxAudits in all.
    expect(stats.queued + stats.active).toBeLessThanOrEqual(30);
    expect(a.stats.audits).toBeLessThanOrEqual(30);
    expect(a.stats.audits_dropped).toBe(2_000 - a.stats.audits);
    a.close();
    await a.idle();
  });

  it('without a bound of their own, never fill more than half the queue', async () => {
    const { model } = hungModel();
    const a = answerer(model, { maxQueue: 40, maxAudits: 10_000 });
    for (let i = 0; i < 500; i++) await a.ask({ q: q(`c${i}`), evidence: { spans: [], text: `run ${i}` } });
    expect(a.queueStats().local.queued).toBeLessThanOrEqual(20);
    a.close();
    await a.idle();
  });

  it('let a real question go to the model before the audits waiting, and give their place up in a full queue', async () => {
    const { model, asked, answerFirst } = hungModel();
    let classifierFirst = true;
    const a = answerer(model, { maxQueue: 4, maxAudits: 100, classifierFirst: () => classifierFirst });
    // The first audit takes the one request slot (and hangs); two more wait (half the queue).
    for (let i = 0; i < 10; i++) await a.ask({ q: q(`c${i}`), evidence: { spans: [], text: `run ${i}` } });
    expect(asked).toHaveLength(1);
    expect(a.queueStats().local.queued).toBe(2);
    // Real questions (not ones the classifier answers first) fill the queue: the audits waiting give their places up.
    classifierFirst = false;
    const real: Promise<Answer>[] = [];
    for (let i = 0; i < 4; i++) {
      real.push(a.ask({ q: q(`real${i}`), evidence: { spans: [], text: `real run ${i}` } }));
      await until(() => a.stats.asked === 11 + i && a.queueStats().local.queued === Math.min(4, 3 + i));
    }
    // Dropped: 7 beyond half the queue, and the 2 that gave their places up.
    await until(() => a.stats.audits_dropped === 7 + 2);
    // The hung request ends: the next one sent is a real question's.
    answerFirst();
    await until(() => asked.length === 2);
    expect(JSON.stringify(asked[1].messages)).toContain('real run 0');
    // Closed (a stop): the real questions fail, not answered "not checked" (their batch is delivered again).
    const ends = real.map((p) => p.then(() => 'answered', (e: unknown) => e));
    a.close();
    for (const e of await Promise.all(ends)) expect(e).toBeInstanceOf(ModelQueueClosedError);
    await a.idle();
  });
});
