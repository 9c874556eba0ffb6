import type { Db } from '@neatroots/ports';
import type { Plan, QuestionResult, SavedModel } from '@neatroots/questions';
import { finding } from './fixtures.test';
import { FINDING_STORED_WAIT_MS, QuestionsRepo } from './questions.repo';
import { StoreWriter } from './writer';
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

  it('counts the tasks handed over and not answered, in either order, and forgets done tasks an hour after their answer', async () => {
    const answered = (task_id: string): QuestionResult => ({
      task_id, project: 'p', run_id: 'rp', check_id: 'q', anchor: task_id, span_ids: [], at_ms: 1_700_000_000_000, answer: { status: 'answered', flagged: false },
    });
    const rows = async () => (await db.query<{ task_id: string }>("SELECT task_id FROM question_pending WHERE run_id = 'rp' ORDER BY task_id")).rows.map((r) => r.task_id);
    await repo.handed([{ task_id: 'h1', project: 'p', run_id: 'rp' }, { task_id: 'h2', project: 'p', run_id: 'rp' }]);
    // h3's answer is recorded before its hand-over: done when the hand-over comes.
    await repo.record([answered('h1'), answered('h3')]);
    await repo.handed([{ task_id: 'h3', project: 'p', run_id: 'rp' }, { task_id: 'h1', project: 'p', run_id: 'rp' }]);
    expect(await repo.pending('p', 'rp')).toBe(1);
    // An hour on, the done rows go (a repo deletes them at most once a minute, a new one at once); h2 still waits.
    await db.query("UPDATE question_pending SET done_at = now() - interval '61 minutes' WHERE task_id IN ('h1', 'h3')");
    await new QuestionsRepo(db).record([answered('h4')]);
    expect(await rows()).toEqual(['h2', 'h4']);
    expect(await repo.pending('p', 'rp')).toBe(1);
  });

  it('counts a task whose answer raised a finding as waiting until the finding is stored, so at 0 the findings are there', async () => {
    const flagged = (task_id: string, finding_id: string): QuestionResult => ({
      task_id, project: 'p', run_id: 'rf', check_id: 'q', anchor: task_id, span_ids: [], at_ms: 1_700_000_000_000, finding_id,
      answer: { status: 'answered', flagged: true, quote: 'the words' },
    });
    await repo.handed([{ task_id: 'f1', project: 'p', run_id: 'rf' }, { task_id: 'f2', project: 'p', run_id: 'rf' }]);
    // The question service recorded the results once it published the findings; the review service has not stored them yet.
    await repo.record([flagged('f1', 'qf-1'), flagged('f2', 'qf-2')]);
    expect(await repo.pending('p', 'rf')).toBe(2);
    const writer = new StoreWriter(db);
    await writer.writeFindings([finding({ id: 'qf-1', project: 'p', run_id: 'rf', check_id: 'q' })]);
    await writer.close();
    expect(await repo.pending('p', 'rf')).toBe(1);
    // A finding the store never stores (set aside) does not keep its task waiting past the bound.
    await db.query(`UPDATE question_pending SET done_at = now() - interval '${FINDING_STORED_WAIT_MS / 60_000 + 1} minutes' WHERE task_id = 'f2'`);
    expect(await repo.pending('p', 'rf')).toBe(0);
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

  it('stores every field of a batch of not-checked results as given (NUL in text replaced), a task twice in one batch once', async () => {
    const notChecked = (i: number): QuestionResult => ({
      task_id: `t-batch-${i}`, project: 'p', run_id: 'r2', check_id: 'leaks-data', anchor: `s${i}`, span_ids: [`s${i}`, 'x"y'], at_ms: 1_700_000_000_000 + i,
      answer: { status: 'not_checked', flagged: false, probability: i / 1000, value: i % 3 ? 2.5 : undefined, label: 'leak', quote: `said "card 4111"\u0000 ${i}`, answered_by: 'decision', confidence: 'Not checked', reason: 'line\nbreak' },
    });
    const batch = Array.from({ length: 600 }, (_, i) => notChecked(i));
    await repo.record([...batch, notChecked(7)]);
    const rows = await repo.results('p', 'r2');
    expect(rows).toHaveLength(600);
    expect(rows[7]).toEqual({
      task_id: 't-batch-7', project: 'p', run_id: 'r2', check_id: 'leaks-data', anchor: 's7', span_ids: ['s7', 'x"y'], status: 'not_checked', flagged: false,
      probability: 0.007, value: 2.5, label: 'leak', quote: 'said "card 4111"\ufffd 7', answered_by: 'decision', confidence: 'Not checked', reason: 'line\nbreak',
      finding_id: null, at: new Date(1_700_000_000_007).toISOString(),
    });
    expect(rows[0]).toMatchObject({ value: null, probability: 0 });
  });

  it('keeps no row for an answer; an answer takes back the not-checked rows of its check and anchor from no later than it', async () => {
    const T = 1_700_000_100_000;
    const result = (task_id: string, check_id: string, anchor: string, at_ms: number, status: 'answered' | 'not_checked', flagged = false): QuestionResult => ({
      task_id, project: 'p', run_id: 'r3', check_id, anchor, span_ids: [anchor], at_ms,
      answer: status === 'answered' ? { status, flagged, answered_by: 'classifier', confidence: 'High' } : { status, flagged: false, reason: 'the model timed out' },
    });
    await repo.record([
      result('a1', 'q1', 's1', T, 'not_checked'),
      result('a2', 'q1', 's2', T, 'not_checked'),
      result('a3', 'q2', 's1', T, 'not_checked'),
      result('a4', 'q1', 's1', T + 50, 'not_checked'),
    ]);
    // q1 about s1 answered at T + 10 (with a flag: the finding holds it); q1 about s2 in the same call as a later not-checked
    await repo.record([result('b1', 'q1', 's1', T + 10, 'answered', true), result('b2', 'q1', 's2', T + 5, 'answered'), result('b3', 'q1', 's2', T + 20, 'not_checked')]);
    const rows = await repo.results('p', 'r3');
    // kept: q2 about s1 (another check), q1 about s1 at T + 50 (after the answer), q1 about s2 asked again after its answer
    expect(rows.map((r) => r.task_id).sort()).toEqual(['a3', 'a4', 'b3']);
    // a redelivered not-checked task that a later answer took back is written again, and taken back again by the answer that follows it in the log
    await repo.record([result('a1', 'q1', 's1', T, 'not_checked')]);
    await repo.record([result('b1', 'q1', 's1', T + 10, 'answered', true)]);
    expect((await repo.results('p', 'r3')).map((r) => r.task_id).sort()).toEqual(['a3', 'a4', 'b3']);
    // a task that timed out and was answered when redelivered (the same task id) is taken back too
    await repo.record([result('c1', 'q3', 'run', T, 'not_checked')]);
    await repo.record([result('c1', 'q3', 'run', T, 'answered')]);
    expect((await repo.results('p', 'r3')).map((r) => r.task_id)).not.toContain('c1');
  });
});
