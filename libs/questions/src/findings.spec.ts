import { MemoryWindowStore } from '@neatroots/platform';
import { WindowConflictError } from '@neatroots/ports';
import { question, recordSaves, T0 } from './fixtures.test';
import { QuestionFindings, type QuestionFindingsWindow } from './findings';
import type { Answer, QuestionTask } from './types';

function task(id: string, over: Partial<QuestionTask> = {}): QuestionTask {
  const check = over.check ?? question({ id: 'went-wrong', scope: 'trace', guidance: 'Tell the user what failed.' });
  return {
    id,
    type: 'question',
    project: 'p',
    run_id: 'r1',
    check,
    scope: check.scope,
    anchor: 'run',
    evidence: { spans: [{ id: 's1', type: 'tool', name: 'pay', tool: 'pay', status: 'ok', output: 'payment declined' }] },
    span_ids: ['s1'],
    final: false,
    at_ms: T0,
    ...over,
  };
}

const flagged: Answer = { status: 'answered', flagged: true, probability: 0.9, quote: 'payment declined', answered_by: 'local', confidence: 'Very likely (LLM judgment)' };
const passed: Answer = { status: 'answered', flagged: false, probability: 0.1, answered_by: 'local' };
const notChecked: Answer = { status: 'not_checked', flagged: false, reason: 'the model timed out' };

async function step(f: QuestionFindings, items: [QuestionTask, Answer][]) {
  const s = await f.begin(items.map(([t]) => t));
  for (const [t, a] of items) f.apply(s, t, a);
  const out = await f.finish(s);
  await out.commit();
  return out;
}

describe('question findings', () => {
  let f: QuestionFindings;
  beforeEach(() => {
    f = new QuestionFindings({ windows: new MemoryWindowStore<QuestionFindingsWindow>() });
  });

  it('keeps runs of the same id in two projects apart, and the same run of a project together, step after step', async () => {
    const a = await step(f, [[task('t1'), flagged], [task('t1', { project: 'q' }), flagged]]);
    expect(a.findings.map((e) => [e.project, e.status])).toEqual([['p', 'raised'], ['q', 'raised']]);
    // Each run's task t1 is done in its own window: asked again, neither applies; a new task of p updates p's finding only.
    const b = await step(f, [[task('t1'), flagged], [task('t1', { project: 'q' }), flagged], [task('t2'), flagged]]);
    expect(b.findings.map((e) => [e.project, e.status, e.count])).toEqual([['p', 'updated', 2]]);
  });

  it('raises with the quote, updates while it holds, resolves when a later check falls below the line', async () => {
    const a = await step(f, [[task('t1'), flagged]]);
    expect(a.findings).toHaveLength(1);
    expect(a.findings[0]).toMatchObject({ status: 'raised', check_id: 'went-wrong', quote: 'payment declined', probability: 0.9, confidence: 'Very likely (LLM judgment)', span_ids: ['s1'], count: 1 });
    expect(a.notes).toHaveLength(1);
    expect(a.notes[0]).toMatchObject({ finding_id: a.findings[0].id, text: 'Tell the user what failed.' });
    const b = await step(f, [[task('t2'), flagged]]);
    expect(b.findings[0]).toMatchObject({ status: 'updated', id: a.findings[0].id, count: 2 });
    expect(b.notes).toEqual([]);
    const c = await step(f, [[task('t3'), passed]]);
    expect(c.findings[0]).toMatchObject({ status: 'resolved', id: a.findings[0].id });
    // Raised again later: a new finding with its own id.
    const d = await step(f, [[task('t4'), flagged]]);
    expect(d.findings[0].status).toBe('raised');
    expect(d.findings[0].id).not.toBe(a.findings[0].id);
  });

  it('records "not checked" without passing: an open finding stays open', async () => {
    await step(f, [[task('t1'), flagged]]);
    const out = await step(f, [[task('t2'), notChecked]]);
    expect(out.findings).toEqual([]);
    const later = await step(f, [[task('t3'), flagged]]);
    expect(later.findings[0].status).toBe('updated');
  });

  it('gives a span-scope question one finding per run, later calls joining it', async () => {
    const check = question({ id: 'neg', scope: 'span', ask: 'Did this call pass a negative amount?' });
    const t = (id: string, anchor: string) => task(id, { check, scope: 'span', anchor, span_ids: [anchor] });
    const out = await step(f, [
      [t('a', 's1'), flagged],
      [t('b', 's2'), passed],
      [t('c', 's3'), flagged],
    ]);
    expect(out.findings.map((x) => [x.status, x.count, x.span_ids])).toEqual([
      ['raised', 1, ['s1']],
      ['updated', 2, ['s1', 's3']],
    ]);
  });

  it('saves a run\'s findings window at rest once its end was asked about, so an embedded store may keep it out of memory', async () => {
    const windows = new MemoryWindowStore<QuestionFindingsWindow>();
    const saved = recordSaves(windows);
    const g = new QuestionFindings({ windows });
    await step(g, [[task('t1'), passed]]);
    await step(g, [[task('t2', { final: true }), flagged]]);
    const rests = saved.map((e) => e.rest);
    expect(rests).toEqual([undefined, true]);
  });

  it('applies a redelivered task once, with the same finding id', async () => {
    const a = await step(f, [[task('t1'), flagged]]);
    const again = await step(f, [[task('t1'), flagged]]);
    expect(again.findings).toEqual([]);
    const other = new QuestionFindings({ windows: new MemoryWindowStore<QuestionFindingsWindow>() });
    const b = await step(other, [[task('t1'), flagged]]);
    expect(b.findings[0].id).toBe(a.findings[0].id);
  });

  it('saves with compare-and-set: a replica that saved the run meanwhile wins, and this batch is redone', async () => {
    const store = new MemoryWindowStore<QuestionFindingsWindow>();
    const a = new QuestionFindings({ windows: store });
    const b = new QuestionFindings({ windows: store });
    const sa = await a.begin([task('t1')]);
    const sb = await b.begin([task('t1')]);
    a.apply(sa, task('t1'), flagged);
    b.apply(sb, task('t1'), flagged);
    const outA = await a.finish(sa);
    const outB = await b.finish(sb);
    await outB.commit();
    await expect(outA.commit()).rejects.toBeInstanceOf(WindowConflictError);
    // Redone from the saved windows, the task is already applied: nothing twice.
    expect((await step(a, [[task('t1'), flagged]])).findings).toEqual([]);
  });

  it('has a note written ahead of the questions only when it goes to a running agent: quiet, a group already noted, or a run ended gets its guidance at the questions\' priority', async () => {
    const asked: [string, string][] = [];
    const writeNote = async (t: QuestionTask, _a: Answer, priority: string) => {
      asked.push([t.id, priority]);
      return `note for ${t.id}`;
    };
    const bare = (id: string, over: Partial<QuestionTask> = {}) => task(id, { check: question({ id: `q-${id}`, scope: 'trace', group: 'g' }), run_id: `run-${id}`, ...over });
    const finishWith = async (q: QuestionFindings, items: [QuestionTask, Answer][]) => {
      const s = await q.begin(items.map(([t]) => t));
      for (const [t, a] of items) q.apply(s, t, a);
      const out = await q.finish(s, writeNote);
      await out.commit();
      return out;
    };
    // a running agent: ahead
    const live = await finishWith(f, [[bare('live'), flagged]]);
    expect(live.notes[0]).toMatchObject({ text: 'note for live' });
    // the run ended: nobody reads it, but the finding keeps the guidance
    const ended = await finishWith(f, [[bare('ended', { final: true }), flagged]]);
    expect(ended.findings[0].guidance).toBe('note for ended');
    // a second finding of the same group in one run: no note
    const grouped = await finishWith(f, [[bare('g1', { run_id: 'shared' }), flagged], [task('g2', { run_id: 'shared', check: question({ id: 'q-g2', scope: 'trace', group: 'g' }) }), flagged]]);
    expect(grouped.notes).toHaveLength(1);
    // a quiet check
    const quiet = new QuestionFindings({ windows: new MemoryWindowStore<QuestionFindingsWindow>(), quiet: () => true });
    await finishWith(quiet, [[bare('quiet'), flagged]]);
    expect(asked).toEqual([
      ['live', 'note'],
      ['ended', 'normal'],
      ['g1', 'note'],
      ['g2', 'normal'],
      ['quiet', 'normal'],
    ]);
  });

  it('sends no note for a quiet check, and one per group per run', async () => {
    const quiet = new QuestionFindings({ windows: new MemoryWindowStore<QuestionFindingsWindow>(), quiet: () => true });
    expect((await step(quiet, [[task('t1'), flagged]])).notes).toEqual([]);
    const g1 = question({ id: 'a', scope: 'trace', group: 'tool-result' });
    const g2 = question({ id: 'b', scope: 'trace', group: 'tool-result' });
    const out = await step(f, [
      [task('x', { check: g1 }), flagged],
      [task('y', { check: g2 }), flagged],
    ]);
    expect(out.findings).toHaveLength(2);
    expect(out.notes).toHaveLength(1);
  });
});
