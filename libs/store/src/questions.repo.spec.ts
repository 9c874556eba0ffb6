import type { Db } from '@neatroots/ports';
import type { Plan, QuestionResult, SavedModel } from '@neatroots/questions';
import { QuestionsRepo } from './questions.repo';
import { openTestDb } from './test-db.test';

let db: Db;
let repo: QuestionsRepo;
beforeAll(async () => {
  db = await openTestDb();
  repo = new QuestionsRepo(db);
}, 60_000);
afterAll(() => db.close());

describe('the question tables', () => {
  it('keeps classifier models by question, replacing an older save', async () => {
    const m: SavedModel = { v: 1, k: 1, dims: 65536, n: 3, b: [0.1], wi: 'AAAAAA==', wv: 'AACAPw==' };
    await repo.save([{ key: 'q@1', check_id: 'q', model: m }]);
    await repo.save([{ key: 'q@1', check_id: 'q', model: { ...m, n: 4 } }]);
    const got = await repo.load(['q@1', 'missing']);
    expect(got.get('q@1')).toEqual({ ...m, n: 4 });
    expect(got.has('missing')).toBe(false);
  });

  it('keeps agreement per question and lists it', async () => {
    await repo.agreement.save([{ key: 'q@1', check_id: 'q', answers: 31, agreed: 29, recent: 'a'.repeat(27) + 'AA' + 'dD' }]);
    expect((await repo.agreement.load(['q@1'])).get('q@1')).toMatchObject({ answers: 31, agreed: 29 });
    expect((await repo.agreement.list!()).map((r) => r.key)).toContain('q@1');
  });

  it('keeps one plan per workflow', async () => {
    const plan: Plan = { project: 'p', workflow: 'w', tools: ['a'], picks: [{ id: 'unfinished-task' }], written: [], planned_by: 'heuristic', at_ms: 1 };
    await repo.put(plan);
    await repo.put({ ...plan, tools: ['a', 'b'] });
    expect(await repo.get('p', 'w')).toEqual({ ...plan, tools: ['a', 'b'] });
    expect(await repo.get('p', 'other')).toBeUndefined();
  });

  it('records question results once, "not checked" included', async () => {
    const r: QuestionResult = {
      task_id: 't1', project: 'p', run_id: 'r1', check_id: 'q', anchor: 'run', span_ids: ['s1'], at_ms: 1_700_000_000_000,
      answer: { status: 'not_checked', flagged: false, reason: 'the model timed out', confidence: 'Not checked' },
    };
    await repo.record([r]);
    await repo.record([r]);
    const rows = await repo.results('p', 'r1');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 'not_checked', flagged: false, reason: 'the model timed out', span_ids: ['s1'] });
  });

  it('stores every field of a batch of results as given (NUL in text replaced), a task twice in one batch once', async () => {
    const answered = (i: number): QuestionResult => ({
      task_id: `t-batch-${i}`, project: 'p', run_id: 'r2', check_id: 'leaks-data', anchor: `s${i}`, span_ids: [`s${i}`, 'x"y'], at_ms: 1_700_000_000_000 + i,
      finding_id: i % 2 ? `f${i}` : undefined,
      answer: { status: 'answered', flagged: i % 2 === 1, probability: i / 1000, value: i % 3 ? 2.5 : undefined, label: 'leak', quote: `said "card 4111"\u0000 ${i}`, answered_by: 'decision', confidence: 'High', reason: 'line\nbreak' },
    });
    const batch = Array.from({ length: 600 }, (_, i) => answered(i));
    await repo.record([...batch, answered(7)]);
    const rows = await repo.results('p', 'r2');
    expect(rows).toHaveLength(600);
    expect(rows[7]).toEqual({
      task_id: 't-batch-7', project: 'p', run_id: 'r2', check_id: 'leaks-data', anchor: 's7', span_ids: ['s7', 'x"y'], status: 'answered', flagged: true,
      probability: 0.007, value: 2.5, label: 'leak', quote: 'said "card 4111"\ufffd 7', answered_by: 'decision', confidence: 'High', reason: 'line\nbreak',
      finding_id: 'f7', at: new Date(1_700_000_000_007).toISOString(),
    });
    expect(rows[0]).toMatchObject({ value: null, finding_id: null, flagged: false, probability: 0 });
  });
});
