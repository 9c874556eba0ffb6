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
});
