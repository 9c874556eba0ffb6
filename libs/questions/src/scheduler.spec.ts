import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { JournalWindowStore, MemoryWindowStore } from '@neatroots/platform';
import { recordSaves, runEnd, runStart, span, question, T0 } from './fixtures.test';
import { questionKey } from './judge';
import { questionSet, type FilledQuestion } from './library';
import { MemoryPlanStore } from './planner';
import { QuestionScheduler, questionWindowKey, type QuestionWindow, type SchedulerWindow, type SpanPolicy } from './scheduler';
import type { Plan, PlanTask, QuestionTask } from './types';

const perCall = question({ id: 'negative-amount', scope: 'span', ask: 'Did this call pass a negative amount?' });
const trace = question({ id: 'went-wrong', scope: 'trace', ask: 'Did the run go wrong?', when: 'live' });
const answer = question({ id: 'false-claim', scope: 'trace', ask: 'Does the final response claim a refund was issued?', when: 'end', evidence: { final_output: true } });

function scheduler(questions = [perCall], policy?: SpanPolicy, extra: Partial<ConstructorParameters<typeof QuestionScheduler>[0]> = {}) {
  const set = questionSet(questions);
  return new QuestionScheduler({ windows: new MemoryWindowStore<SchedulerWindow>(), questions: () => set, policy, ...extra });
}

async function run(s: QuestionScheduler, envs: Parameters<QuestionScheduler['process']>[0]) {
  const out = await s.process(envs);
  await out.commit();
  return out.tasks.filter((t): t is QuestionTask => t.type === 'question');
}

const LOCAL: SpanPolicy = { newestOnly: true, perRunCap: 4, gapMs: 0 };

/** Span ids p<from> to p<to - 1>. */
const ids = (from: number, to: number, p = 's') => Array.from({ length: to - from }, (_, i) => `${p}${from + i}`);

describe('span-scope questions', () => {
  it('with the fast classifier or the decision model, asks about every matching span', async () => {
    const s = scheduler();
    const tasks = await run(s, [span('r1', 's1'), span('r1', 's2'), span('r1', 's3', { type: 'llm', tool: undefined, name: 'gpt' })]);
    expect(tasks.map((t) => t.anchor)).toEqual(['s1', 's2']);
    expect(tasks[1].evidence.focus).toBe('s2');
    // It also sees the tool calls made earlier in the run.
    expect(tasks[1].evidence.spans.map((x) => x.id)).toEqual(['s1', 's2']);
    expect(tasks[1].span_ids).toEqual(['s2']);
  });

  it('with the local LLM, asks only about the newest waiting span', async () => {
    const s = scheduler([perCall], LOCAL);
    const batch = Array.from({ length: 10 }, (_, i) => span('r1', `s${i + 1}`, {}, T0 + i));
    const tasks = await run(s, batch);
    expect(tasks.map((t) => t.anchor)).toEqual(['s10']);
  });

  it('with the local LLM, asks at most four times per check per run', async () => {
    const s = scheduler([perCall], LOCAL);
    const anchors: string[] = [];
    for (let i = 1; i <= 9; i++) anchors.push(...(await run(s, [span('r1', `s${i}`, {}, T0 + i)])).map((t) => t.anchor));
    anchors.push(...(await run(s, [runEnd('r1')])).map((t) => t.anchor));
    expect(anchors).toEqual(['s1', 's2', 's3', 's4']);
    // Another run has its own four.
    expect((await run(s, [span('r2', 'x1')])).map((t) => t.anchor)).toEqual(['x1']);
  });

  it('applies the local LLM policy per question: one the fast classifier answers first is asked about every span', async () => {
    const other = question({ id: 'wrong-tool', scope: 'span', ask: 'Was this the wrong tool?' });
    const s = scheduler([perCall, other], undefined, { policy: (q) => (q.id === 'wrong-tool' ? undefined : LOCAL) });
    const batch = Array.from({ length: 6 }, (_, i) => span('r1', `s${i + 1}`, {}, T0 + i));
    const tasks = await run(s, batch);
    expect(tasks.filter((t) => t.check.id === 'negative-amount').map((t) => t.anchor)).toEqual(['s6']);
    expect(tasks.filter((t) => t.check.id === 'wrong-tool').map((t) => t.anchor)).toEqual(['s1', 's2', 's3', 's4', 's5', 's6']);
  });

  it('while the last ask is recent, spans wait and only the newest is asked, at the latest at run end', async () => {
    const s = scheduler([perCall], { newestOnly: true, perRunCap: 4, gapMs: 1_000 });
    expect((await run(s, [span('r1', 's1', {}, T0)])).map((t) => t.anchor)).toEqual(['s1']);
    expect(await run(s, [span('r1', 's2', {}, T0 + 100)])).toEqual([]);
    expect(await run(s, [span('r1', 's3', {}, T0 + 200)])).toEqual([]);
    const end = await run(s, [runEnd('r1', 'ok', T0 + 300)]);
    expect(end.map((t) => t.anchor)).toEqual(['s3']);
  });

  it('saves a run\'s window at rest once the run ended, so an embedded store may keep it out of memory', async () => {
    const windows = new MemoryWindowStore<SchedulerWindow>();
    const saved = recordSaves(windows);
    const s = scheduler([perCall], undefined, { windows });
    await run(s, [span('r1', 's1')]);
    await run(s, [runEnd('r1')]);
    const rests = saved.filter((e) => e.key === questionWindowKey('p', 'r1')).map((e) => e.rest);
    expect(rests).toEqual([undefined, true]);
  });

  it('asks about every matching call of a batch, past the 40 spans a run keeps: one export of 512 calls of one run, each shown the calls before it', async () => {
    const s = scheduler();
    const tasks = await run(s, ids(0, 512).map((id, i) => span('r1', id, {}, T0 + i)));
    expect(tasks.map((t) => t.anchor)).toEqual(ids(0, 512));
    // Each is shown the ten calls before it, as when the calls come one export each.
    const t = tasks[300];
    expect(t.evidence.focus).toBe('s300');
    expect(t.evidence.spans.map((x) => x.id)).toEqual([...ids(290, 300), 's300']);
    expect(t.evidence.omitted).toBe(290);
    // A redelivered batch asks the same tasks.
    const again = await run(scheduler(), ids(0, 512).map((id, i) => span('r1', id, {}, T0 + i)));
    expect(again.map((x) => x.id)).toEqual(tasks.map((x) => x.id));
  });

  it('a span question asked at run end holds the calls waiting past the 40 kept, up to 200, each shown the calls before it; older ones are counted as skipped', async () => {
    const atEnd = question({ id: 'needed', scope: 'span', when: 'end', ask: 'Was this call needed?' });
    const tasks = await run(scheduler([atEnd]), [...ids(0, 150).map((id, i) => span('r1', id, {}, T0 + i)), runEnd('r1')]);
    expect(tasks.map((t) => t.anchor)).toEqual(ids(0, 150));
    expect(tasks.every((t) => t.final)).toBe(true);
    expect(tasks[100].evidence.spans.map((x) => x.id)).toEqual([...ids(90, 100), 's100']);

    const windows = new MemoryWindowStore<SchedulerWindow>();
    const more = await run(scheduler([atEnd], undefined, { windows }), [...ids(0, 300).map((id, i) => span('r2', id, {}, T0 + i)), runEnd('r2')]);
    expect(more.map((t) => t.anchor)).toEqual(ids(100, 300));
    expect(more[0].evidence.spans.map((x) => x.id)).toEqual([...ids(90, 100), 's100']);
    const w = (await windows.load([questionWindowKey('p', 'r2')])).get(questionWindowKey('p', 'r2')) as QuestionWindow;
    expect(w.checks.needed.skipped).toBe(100);
    expect(w.ring.length).toBeLessThanOrEqual(240);
  });

  it('counts a re-exported span once', async () => {
    const s = scheduler();
    expect(await run(s, [span('r1', 's1')])).toHaveLength(1);
    expect(await run(s, [span('r1', 's1', { output: 'retried copy' })])).toHaveLength(0);
  });

  it('gives task ids that a redelivered batch reproduces', async () => {
    const a = await run(scheduler(), [span('r1', 's1'), span('r1', 's2')]);
    const b = await run(scheduler(), [span('r1', 's1'), span('r1', 's2')]);
    expect(a.map((t) => t.id)).toEqual(b.map((t) => t.id));
    expect(new Set(a.map((t) => t.id)).size).toBe(2);
  });
});

describe('a step never committed (its tasks were not published)', () => {
  it('is done again from the windows as they were: the same tasks, over the embedded window stores', async () => {
    const s = scheduler([perCall, answer]);
    expect(await run(s, [span('r1', 's0')])).toHaveLength(1);
    const batch = [span('r1', 's1'), span('r1', 's2')];
    const lost = await s.process(batch); // the publish failed: commit is never called
    expect(lost.tasks.map((t) => (t as QuestionTask).anchor)).toEqual(['s1', 's2']);
    const again = await run(s, batch);
    expect(again.map((t) => t.id)).toEqual(lost.tasks.map((t) => t.id));
    // The run's end: its end question, seeing the run's spans.
    const endLost = await s.process([runEnd('r1', 'ok')]);
    expect(endLost.tasks.map((t) => (t as QuestionTask).check.id)).toEqual(['false-claim']);
    const endAgain = await run(s, [runEnd('r1', 'ok')]);
    expect(endAgain.map((t) => t.id)).toEqual(endLost.tasks.map((t) => t.id));
    expect(endAgain[0].evidence.spans.map((x) => x.id)).toEqual(['s0', 's1', 's2']);
    // Committed, a redelivery asks nothing twice.
    expect(await run(s, batch)).toEqual([]);
    expect(await run(s, [runEnd('r1', 'ok')])).toEqual([]);
  });
});

describe('trace-scope questions and when', () => {
  it('live: asked as spans arrive and again at run end; end: only at run end, with the answer', async () => {
    const s = scheduler([trace, answer]);
    const live = await run(s, [runStart('r1', { user_message: 'refund order 17' }), span('r1', 's1')]);
    expect(live.map((t) => t.check.id)).toEqual(['went-wrong']);
    const end = await run(s, [span('r1', 's2'), runEnd('r1', 'Your refund was issued.')]);
    expect(end.map((t) => [t.check.id, t.final])).toEqual([
      ['went-wrong', true],
      ['false-claim', true],
    ]);
    const claim = end.find((t) => t.check.id === 'false-claim')!;
    expect(claim.evidence.final_output).toBe('Your refund was issued.');
    expect(claim.evidence.spans.map((x) => x.id)).toEqual(['s1', 's2']);
    expect(claim.scope).toBe('trace');
  });

  it('live: asks a trace question again at most once a gap while the run goes on; what came meanwhile goes with the next ask, and the end always asks', async () => {
    const s = scheduler([trace], undefined, { liveTraceGapMs: 1_000 });
    const asked = async (envs: Parameters<typeof run>[1]) => (await run(s, envs)).map((t) => t.evidence.spans.map((x) => x.id));
    expect(await asked([span('r1', 's1', {}, T0)])).toEqual([['s1']]);
    // Exports within the second after it: not asked again yet.
    expect(await asked([span('r1', 's2', {}, T0 + 300)])).toEqual([]);
    expect(await asked([span('r1', 's3', {}, T0 + 900)])).toEqual([]);
    // The next export past the gap: asked with everything so far.
    expect(await asked([span('r1', 's4', {}, T0 + 1_000)])).toEqual([['s1', 's2', 's3', 's4']]);
    expect(await asked([span('r1', 's5', {}, T0 + 1_200)])).toEqual([]);
    // The run's end asks once more, within the gap or not.
    const end = await run(s, [runEnd('r1', 'ok', T0 + 1_300)]);
    expect(end.map((t) => [t.final, t.evidence.spans.map((x) => x.id)])).toEqual([[true, ['s1', 's2', 's3', 's4', 's5']]]);
    // Another run keeps its own gap.
    expect(await asked([span('r2', 'a', {}, T0 + 1_250)])).toEqual([['a']]);
  });

  it('asks a live trace question again at run end when nothing came since its last ask (that ask may have gone unanswered)', async () => {
    const s = scheduler([trace]);
    expect((await run(s, [span('r1', 's1', {}, T0)])).map((t) => t.final)).toEqual([false]);
    const end = await run(s, [runEnd('r1', 'ok', T0 + 100)]);
    expect(end.map((t) => [t.check.id, t.final, t.evidence.spans.map((x) => x.id)])).toEqual([['went-wrong', true, ['s1']]]);
  });

  it('counts as omitted the spans a question matches that the run no longer keeps, not every span that fell out', async () => {
    const tools = question({ id: 'tools', scope: 'trace', when: 'end', evidence: { spans: { type: 'tool' } } });
    // Sixty spans, every other one a tool call: the run keeps the last 40 spans, 20 of them calls.
    const envs = Array.from({ length: 60 }, (_, i) => (i % 2 ? span('r1', `l${i}`, { type: 'llm', tool: undefined, name: 'gpt' }, T0 + i) : span('r1', `t${i}`, {}, T0 + i)));
    const tasks = await run(scheduler([perCall, tools]), [...envs, runEnd('r1')]);
    const t = tasks.find((x) => x.check.id === 'tools')!;
    expect(t.evidence.spans).toHaveLength(20);
    expect(t.evidence.omitted).toBe(10);
    // A span question: the calls before it not shown (29 before t58, ten shown).
    const last = tasks.find((x) => x.anchor === 't58')!;
    expect(last.evidence.spans.map((x) => x.id)).toEqual(['t38', 't40', 't42', 't44', 't46', 't48', 't50', 't52', 't54', 't56', 't58']);
    expect(last.evidence.omitted).toBe(19);
  });

  it('keeps the evidence it was asked for: span filter, fields, last', async () => {
    const q = question({ id: 'q', scope: 'trace', when: 'end', evidence: { spans: { tool: ['pay'] }, fields: ['input'], last: 2 } });
    const s = scheduler([q]);
    const envs = [span('r1', 'a', { tool: 'pay' }), span('r1', 'b', { tool: 'search' }), span('r1', 'c', { tool: 'pay' }), span('r1', 'd', { tool: 'pay' }), runEnd('r1')];
    const [t] = await run(s, envs);
    expect(t.evidence.spans.map((x) => x.id)).toEqual(['c', 'd']);
    expect(t.evidence.spans[0].output).toBeUndefined();
    expect(t.evidence.spans[0].input).toBe('{"q":"c"}');
    expect(t.evidence.omitted).toBe(1);
    // The second look sees what came before.
    expect(t.context?.spans.map((x) => x.id)).toEqual(['a', 'b']);
  });

  it('shows a span question the last `last` earlier calls and gives the rest of the run before it as context', async () => {
    const q = question({ id: 'q', scope: 'span', evidence: { last: 2 } });
    const s = scheduler([q]);
    const llm = (id: string) => span('r1', id, { type: 'llm', tool: undefined, name: 'gpt' });
    const tasks = await run(s, [span('r1', 'a'), llm('m1'), span('r1', 'b'), span('r1', 'c'), llm('m2'), span('r1', 'd')]);
    const t = tasks.find((x) => x.anchor === 'd')!;
    expect(t.evidence.spans.map((x) => x.id)).toEqual(['b', 'c', 'd']);
    expect(t.evidence.omitted).toBe(1);
    // In the run's order: the call not shown and the model calls.
    expect(t.context?.spans.map((x) => x.id)).toEqual(['a', 'm1', 'm2']);
    const first = tasks.find((x) => x.anchor === 'a')!;
    expect(first.evidence.spans.map((x) => x.id)).toEqual(['a']);
    expect(first.evidence.omitted).toBeUndefined();
    expect(first.context?.spans).toEqual([]);
  });

  it("follows a reload of the checks, a new plan and a run's first tool call from the run's next span on", async () => {
    const always = question({ id: 'ignored-tool-error', scope: 'span', ask: 'Did a tool fail?' }, 'library');
    const picked = question({ id: 'wrong-tool-or-arguments', scope: 'span', ask: 'Wrong tool?' }, 'library');
    const added = question({ id: 'added', scope: 'span', ask: 'Added later?' });
    const plans = new MemoryPlanStore();
    let set = questionSet([always, picked]);
    const s = new QuestionScheduler({ windows: new MemoryWindowStore<SchedulerWindow>(), questions: () => set, plans, planCacheMs: 0 });
    const llm = (id: string) => span('r1', id, { type: 'llm', tool: undefined, name: 'gpt', workflow: 'w' });
    const call = (id: string) => span('r1', id, { workflow: 'w' });
    const asked = async (env: ReturnType<typeof span>) => (await run(s, [env])).map((t) => t.check.id).sort();
    // No tool call yet: the always-on question waits for one, nothing is picked.
    expect(await asked(llm('m1'))).toEqual([]);
    expect(await asked(call('s1'))).toEqual(['ignored-tool-error']);
    await plans.put({ project: 'p', workflow: 'w', tools: ['search'], picks: [{ id: 'wrong-tool-or-arguments' }], written: [], planned_by: 'local', at_ms: T0 });
    expect(await asked(call('s2'))).toEqual(['ignored-tool-error', 'wrong-tool-or-arguments']);
    set = questionSet([always, picked, added]);
    expect(await asked(call('s3'))).toEqual(['added', 'ignored-tool-error', 'wrong-tool-or-arguments']);
    await plans.put({ project: 'p', workflow: 'w', tools: ['search'], picks: [], written: [], planned_by: 'local', at_ms: T0 + 1 });
    expect(await asked(call('s4'))).toEqual(['added', 'ignored-tool-error']);
    // Another project of the same workflow: its own questions.
    set = questionSet([always, question({ id: 'elsewhere', scope: 'span', applies_to: { project: ['other'] } })]);
    expect(await asked(call('s5'))).toEqual(['ignored-tool-error']);
    expect((await run(s, [{ ...span('o1', 'x1', { workflow: 'w' }), project: 'other' }])).map((t) => t.check.id).sort()).toEqual(['elsewhere', 'ignored-tool-error']);
  });

  it('keeps as many of a run\'s spans as a question asks to be shown (evidence.last over the 40 kept otherwise)', async () => {
    const many = question({ id: 'many', scope: 'trace', when: 'end', evidence: { spans: { type: 'tool' }, last: 100 } });
    const envs = [...Array.from({ length: 60 }, (_, i) => span('r1', `t${i}`, {}, T0 + i)), runEnd('r1')];
    const [t] = await run(scheduler([many]), envs);
    expect(t.evidence.spans).toHaveLength(60);
    expect(t.evidence.spans[0].id).toBe('t0');
    expect(t.evidence.omitted ?? 0).toBe(0);
    // Without such a question the run keeps its last 40.
    const [d] = await run(scheduler([question({ id: 'few', scope: 'trace', when: 'end', evidence: { spans: { type: 'tool' } } })]), envs);
    expect(d.evidence.spans[0].id).toBe('t30');
    expect(d.evidence.omitted).toBe(30);
  });

  it('cuts long fields, keeping their head and tail', async () => {
    const s = scheduler([question({ id: 'q', scope: 'trace', when: 'end' })], undefined, { fieldChars: 200 });
    const [t] = await run(s, [span('r1', 'a', { output: `HEAD${'x'.repeat(5000)}TAIL` }), runEnd('r1')]);
    const out = t.evidence.spans[0].output!;
    expect(out.length).toBeLessThanOrEqual(200);
    expect(out.startsWith('HEAD')).toBe(true);
    expect(out.endsWith('TAIL')).toBe(true);
    expect(out).toMatch(/characters cut/);
  });
});

describe('the library and the planner', () => {
  const always = question({ id: 'ignored-tool-error', scope: 'trace', when: 'end', ask: 'Did a tool fail and the agent carry on?' }, 'library');
  const picked = question({ id: 'unfinished-task', scope: 'trace', when: 'end', ask: 'Did the run end before {task} was done?' }, 'library');

  it('runs the always-on library questions on agents that use tools, the others only when the plan picks them', async () => {
    const s = scheduler([always, picked]);
    const noTools = await run(s, [runStart('r0', { workflow: 'w' }), { ...span('r0', 'x', { type: 'llm', tool: undefined, name: 'gpt' }) }, runEnd('r0')]);
    expect(noTools).toEqual([]);
    const tools = await run(s, [runStart('r1', { workflow: 'w', tools: [{ name: 'search' }] }), span('r1', 's1'), runEnd('r1')]);
    expect(tools.map((t) => t.check.id)).toEqual(['ignored-tool-error']);
  });

  it('asks for a plan on a workflow\'s first run, uses it once stored, and asks again when new tools appear', async () => {
    const plans = new MemoryPlanStore();
    const s = scheduler([always, picked], undefined, { plans, planCacheMs: 0 });
    const first = await s.process([runStart('r1', { workflow: 'refunds', tools: [{ name: 'search' }], user_message: 'refund order 17' })]);
    await first.commit();
    const planTasks = first.tasks.filter((t): t is PlanTask => t.type === 'plan');
    expect(planTasks).toHaveLength(1);
    expect(planTasks[0].plan).toMatchObject({ workflow: 'refunds', tools: [{ name: 'search' }], user_message: 'refund order 17' });

    // The same workflow again before the plan is there: not asked twice.
    const again = await s.process([runStart('r2', { workflow: 'refunds', tools: [{ name: 'search' }] })]);
    expect(again.tasks.filter((t) => t.type === 'plan')).toHaveLength(0);

    const plan: Plan = { project: 'p', workflow: 'refunds', tools: ['search'], picks: [{ id: 'unfinished-task', params: { task: 'the refund of order 17' } }], written: [], planned_by: 'local', at_ms: T0 };
    await plans.put(plan);
    const withPlan = await run(s, [runStart('r3', { workflow: 'refunds', tools: [{ name: 'search' }] }), span('r3', 's1'), runEnd('r3')]);
    expect(withPlan.map((t) => t.check.id).sort()).toEqual(['ignored-tool-error', 'unfinished-task']);
    // The plan's parameters are filled in.
    expect(withPlan.find((t) => t.check.id === 'unfinished-task')!.check.ask).toBe('Did the run end before the refund of order 17 was done?');

    const newTool = await s.process([runStart('r4', { workflow: 'refunds', tools: [{ name: 'search' }, { name: 'issue_refund' }] })]);
    expect(newTool.tasks.filter((t) => t.type === 'plan')).toHaveLength(1);
  });

  it('plans from the tools spans show when runs have no run_start, and again when a span shows a tool the plan does not know', async () => {
    const plans = new MemoryPlanStore();
    const s = scheduler([always, picked], undefined, { plans, planCacheMs: 0 });
    // As OpenTelemetry sends a run without content capture: spans only, the workflow on them.
    const otel = (run: string, id: string, tool: string) => span(run, id, { tool, name: tool, workflow: 'support' });
    const first = await s.process([otel('r1', 's1', 'search'), otel('r1', 's2', 'search'), otel('r1', 's3', 'lookup_order')]);
    await first.commit();
    const planTasks = first.tasks.filter((t): t is PlanTask => t.type === 'plan');
    expect(planTasks).toHaveLength(1);
    expect(planTasks[0].plan).toEqual({ project: 'p', workflow: 'support', tools: [{ name: 'search' }, { name: 'lookup_order' }] });
    expect((await s.process([otel('r2', 's1', 'search')])).tasks.filter((t) => t.type === 'plan')).toHaveLength(0);

    await plans.put({ project: 'p', workflow: 'support', tools: ['search', 'lookup_order'], picks: [{ id: 'unfinished-task' }], written: [], planned_by: 'local', at_ms: T0 });
    const known = await s.process([otel('r3', 's1', 'lookup_order')]);
    expect(known.tasks.filter((t) => t.type === 'plan')).toHaveLength(0);
    // A tool the plan has not seen: planned again.
    const newTool = await s.process([otel('r4', 's1', 'issue_refund')]);
    expect(newTool.tasks.filter((t): t is PlanTask => t.type === 'plan').map((t) => t.plan.tools)).toEqual([[{ name: 'issue_refund' }]]);
  });

  it('asks one plan a step for a workflow, with the run_start tools and those spans show together', async () => {
    const plans = new MemoryPlanStore();
    const s = scheduler([always], undefined, { plans, planCacheMs: 0 });
    const out = await s.process([
      runStart('r1', { workflow: 'refunds', tools: [{ name: 'search', description: 'finds orders' }] }),
      span('r1', 's1', { tool: 'search', name: 'search' }),
      span('r1', 's2', { tool: 'issue_refund', name: 'issue_refund' }),
    ]);
    const planTasks = out.tasks.filter((t): t is PlanTask => t.type === 'plan');
    expect(planTasks.map((t) => t.plan.tools)).toEqual([[{ name: 'search', description: 'finds orders' }, { name: 'issue_refund' }]]);
  });

  it("asks the plan's written questions until their checks load, then as the checks loaded: a person's version once, as theirs", async () => {
    const plans = new MemoryPlanStore();
    const id = 'plan-refunds-double-refund';
    const yaml = (ask: string) => `id: ${id}\nkind: yes_no\nscope: trace\nask: ${ask}\napplies_to:\n  workflow: [refunds]\n  project: [p]\n`;
    await plans.put({ project: 'p', workflow: 'refunds', tools: ['search'], picks: [], written: [{ id, yaml: yaml('Did it refund twice?') }], planned_by: 'local', at_ms: T0 });
    let set = questionSet([always]);
    const s = new QuestionScheduler({ windows: new MemoryWindowStore<SchedulerWindow>(), questions: () => set, plans, planCacheMs: 0 });
    const whole = (r: string) => [runStart(r, { workflow: 'refunds', tools: [{ name: 'search' }] }), span(r, 's1'), runEnd(r)];
    // Not loaded yet (or no database: replay): asked from the plan.
    expect((await run(s, whole('r1'))).filter((t) => t.check.id === id).map((t) => t.check.ask)).toEqual(['Did it refund twice?']);
    // A person's version, loaded as a database check.
    set = questionSet([always, question({ id, scope: 'trace', ask: 'Did it refund one order twice, in any way?' }, 'database')]);
    expect((await run(s, whole('r2'))).filter((t) => t.check.id === id).map((t) => t.check.ask)).toEqual(['Did it refund one order twice, in any way?']);
    // Its check deleted: the plan no longer holds it (ChecksRepo.delete), and it is not asked.
    await plans.put({ ...(await plans.get('p', 'refunds'))!, written: [], deleted: [id] });
    set = questionSet([always]);
    expect((await run(s, whole('r3'))).map((t) => t.check.id)).toEqual(['ignored-tool-error']);
  });

  it("asks a plan's span questions from a workflow's first batch after a start, its written ones too", async () => {
    const plans = new MemoryPlanStore();
    const wrongTool = question({ id: 'wrong-tool-or-arguments', scope: 'span', when: 'live', ask: 'Did this call use the wrong tool or wrong arguments?' }, 'library');
    const id = 'plan-support-refund-twice';
    const yaml = `id: ${id}\nkind: yes_no\nscope: span\nask: Did this call refund an order already refunded?\napplies_to:\n  workflow: [support]\n  project: [p]\n`;
    await plans.put({ project: 'p', workflow: 'support', tools: ['search'], picks: [{ id: 'wrong-tool-or-arguments' }], written: [{ id, yaml }], planned_by: 'heuristic', at_ms: T0 });
    // A scheduler just started: the plan is in the store, not yet read. A short run comes in one batch.
    const s = scheduler([wrongTool], undefined, { plans });
    const tasks = await run(s, [span('r1', 's1', { workflow: 'support' }), span('r1', 's2', { workflow: 'support' })]);
    expect(tasks.map((t) => `${t.check.id}@${t.anchor}`)).toEqual([`wrong-tool-or-arguments@s1`, `wrong-tool-or-arguments@s2`, `${id}@s1`, `${id}@s2`]);
  });

  it('fills parameters from the run when there is no plan', async () => {
    const s = scheduler([question({ id: 'u', scope: 'trace', when: 'end', ask: 'Did it leave {task} unfinished?' })]);
    const [t] = await run(s, [runStart('r1', { user_message: 'book a flight to Oslo' }), runEnd('r1')]);
    expect(t.check.ask).toBe('Did it leave book a flight to Oslo unfinished?');
  });

  it('hands a filled question with its ask as written: every run of it has one classifier and agreement key', async () => {
    const u = question({ id: 'u', scope: 'trace', when: 'end', ask: 'Did it leave {task} unfinished?' });
    const s = scheduler([u]);
    const tasks: QuestionTask[] = [];
    for (let i = 0; i < 5; i++) tasks.push(...(await run(s, [runStart(`r${i}`, { user_message: `refund order ${1000 + i}` }), runEnd(`r${i}`)])));
    expect(new Set(tasks.map((t) => t.check.ask)).size).toBe(5);
    expect(tasks.map((t) => (t.check as FilledQuestion).ask_as_written)).toEqual(Array(5).fill(u.ask));
    expect([...new Set(tasks.map((t) => questionKey(t.check)))]).toEqual([questionKey(u)]);
  });

  // The questions topic writes what a record's tasks share once, found by identity.
  it('hands the same filled question and span summaries to every task that shows them', async () => {
    const s = scheduler([question({ id: 'u', scope: 'span', ask: 'Was this call right for {task}?', evidence: { fields: ['input', 'output', 'error'] } })]);
    const tasks = await run(s, [
      runStart('r1', { user_message: 'refund order 7' }),
      runStart('r2', { user_message: 'refund order 7' }),
      runStart('r3', { user_message: 'cancel order 9' }),
      span('r1', 's1'),
      span('r1', 's2'),
      span('r2', 's1'),
      span('r3', 's1'),
    ]);
    expect(tasks.map((t) => `${t.run_id}/${t.anchor}`)).toEqual(['r1/s1', 'r1/s2', 'r2/s1', 'r3/s1']);
    expect(tasks[1].check).toBe(tasks[0].check);
    expect(tasks[2].check).toBe(tasks[0].check);
    expect(tasks[3].check.ask).toBe('Was this call right for cancel order 9?');
    // s1 as the first task judged it and as the second shows it, one object.
    expect(tasks[1].evidence.spans[0]).toBe(tasks[0].evidence.spans[0]);
  });
});

describe('a filled question asked at every span', () => {
  it('takes its wording from the run\'s latest run_start, and from each run\'s own', async () => {
    const s = scheduler([question({ id: 'u', scope: 'span', ask: 'Was this call right for {task}?' })]);
    const first = await run(s, [runStart('r1', { user_message: 'refund order 7' }), runStart('r2', { user_message: 'cancel order 9' }), span('r1', 's1'), span('r2', 's1'), span('r1', 's2')]);
    expect(first.map((t) => `${t.run_id}/${t.anchor}: ${t.check.ask}`)).toEqual([
      'r1/s1: Was this call right for refund order 7?',
      'r1/s2: Was this call right for refund order 7?',
      'r2/s1: Was this call right for cancel order 9?',
    ]);
    expect(first[1].check).toBe(first[0].check);
    const later = await run(s, [runStart('r1', { user_message: 'refund order 8' }), span('r1', 's3'), span('r2', 's2')]);
    expect(later.map((t) => `${t.run_id}/${t.anchor}: ${t.check.ask}`)).toEqual([
      'r1/s3: Was this call right for refund order 8?',
      'r2/s2: Was this call right for cancel order 9?',
    ]);
    expect(later[1].check).toBe(first[2].check);
  });
});

describe('spans that come after the run ended', () => {
  it('ask the questions that judge the run\'s end again, as final, once a batch: OpenTelemetry sends the run\'s end with its root span, a child span may come later', async () => {
    const ignored = question({ id: 'ignored-tool-error', scope: 'trace', when: 'end', ask: 'Did a tool fail and the agent carry on?' }, 'library');
    const endCall = question({ id: 'end-call', scope: 'span', when: 'end', ask: 'Was this call needed?' });
    const sess = question({ id: 'sess', scope: 'session', ask: 'Did the agent contradict itself across the session?' });
    const s = scheduler([ignored, trace, endCall, sess]);
    const end = await run(s, [runStart('r1', { session_id: 'S', tools: [{ name: 'search' }] }), span('r1', 's1', {}, T0), runEnd('r1', 'Booked.', T0 + 100)]);
    expect(end.map((t) => t.check.id)).toEqual(['ignored-tool-error', 'went-wrong', 'end-call', 'sess']);
    // The failed call, exported after the root span: asked about, with the rest of the run.
    const late = await run(s, [span('r1', 's2', { status: 'error', error: 'timeout', output: undefined }, T0 + 200), span('r1', 's3', {}, T0 + 210)]);
    expect(late.map((t) => [t.check.id, t.anchor, t.final])).toEqual([
      ['ignored-tool-error', 'run', true],
      ['went-wrong', 'run', true],
      ['end-call', 's2', true],
      ['end-call', 's3', true],
      ['sess', 'run', true],
    ]);
    expect(late[0].evidence.spans.map((x) => x.id)).toEqual(['s1', 's2', 's3']);
    expect(new Set([...end, ...late].map((t) => t.id)).size).toBe(9);
    // A span sent again asks nothing.
    expect(await run(s, [span('r1', 's2', { status: 'error', error: 'timeout' }, T0 + 300)])).toEqual([]);
  });
});

describe('session-scope questions', () => {
  it('see the earlier runs of the session', async () => {
    const q = question({ id: 'sess', scope: 'session', ask: 'Did the agent contradict itself across the session?', evidence: { final_output: true } });
    const s = scheduler([q]);
    await run(s, [runStart('r1', { session_id: 'S' }), runEnd('r1', 'The price is 10.')]);
    const [t] = await run(s, [runStart('r2', { session_id: 'S' }), runEnd('r2', 'The price is 12.')]);
    expect(t.evidence.runs?.map((r) => [r.run_id, r.final_output])).toEqual([['r1', 'The price is 10.']]);
    expect(t.evidence.final_output).toBe('The price is 12.');
  });
});

describe('over the window journal (the embedded default)', () => {
  it('journals how each step moved the ring, re-exported spans and a step never committed included: the windows read back are the live ones', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-scheduler-'));
    try {
      const open = () => JournalWindowStore.open<SchedulerWindow>({ dir, name: 'questions', now: () => T0 });
      const a = open();
      const set = questionSet([perCall, trace]);
      const s = new QuestionScheduler({ windows: a, questions: () => set, ringSize: 4 });
      const step = async (envs: Parameters<QuestionScheduler['process']>[0], commit = true) => {
        const out = await s.process(envs);
        if (commit) await out.commit();
      };
      await step([runStart('r1'), span('r1', 's1'), span('r1', 's2')]);
      await step([span('r1', 's3'), span('r1', 's4'), span('r1', 's5')]); // the ring full: s1 dropped
      await step([span('r1', 's6'), span('r1', 's7'), span('r1', 's8'), span('r1', 's9'), span('r1', 's10')]); // more than it holds in one step
      await step([span('r1', 's9', { output: 'sent again, changed' })]); // a re-exported span replaces its summary
      await step([span('r1', 's11')], false); // never committed: the next step starts from the stored window
      await step([span('r1', 's11'), span('r1', 's12'), span('r2', 'x1')]);
      await step([runEnd('r1')]);
      const keys = [questionWindowKey('p', 'r1'), questionWindowKey('p', 'r2')];
      // As JSON: the stores' records of span ids have no prototype.
      const json = (m: Map<string, SchedulerWindow>) => JSON.parse(JSON.stringify([...m])) as [string, SchedulerWindow][];
      const live = new Map(json(await a.load(keys)));
      expect(live.size).toBe(2);
      const r1 = live.get(keys[0]) as QuestionWindow;
      expect(r1.ring.map((x) => x.id)).toEqual(['s9', 's10', 's11', 's12']);
      expect(r1.ring[0].output).toContain('sent again, changed');
      await a.close();
      const b = open();
      expect(json(await b.load(keys))).toEqual([...live]);
      await b.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
