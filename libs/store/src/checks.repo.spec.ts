import { parseDatabaseCheck, type Check } from '@neatroots/checks';
import type { Db } from '@neatroots/ports';
// The store's specs run on the real adapters.
import { MemoryWindowStore } from '@neatroots/platform';
import {
  plannedId,
  Planner,
  QuestionProcessor,
  QuestionScheduler,
  questionSet,
  type PlanTask,
  type QuestionAnswerer,
  type QuestionFindingsWindow,
  type QuestionSet,
  type QuestionTask,
  type SchedulerWindow,
} from '@neatroots/questions';
import type { Envelope, ToolInfo } from '@neatroots/spans';
import { AgentChecksFullError, ChecksRepo } from './checks.repo';
import { QuestionsRepo } from './questions.repo';
import { openTestDb, resetDb } from './test-db.test';

/**
 * The planner's questions as database checks, end to end on the real tables: the question
 * service plans (QuestionProcessor, with ChecksRepo and QuestionsRepo as its stores), the
 * scheduler asks from the checks loaded (as the check set loads the database checks) and the plan.
 */

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
}, 60_000);
afterAll(() => db.close());
beforeEach(async () => {
  await resetDb(db);
  await db.exec('DELETE FROM question_plans');
});

const T0 = 1_700_000_000_000;
const WORKFLOW = 'refunds';
const ID = plannedId(WORKFLOW, 'double-refund');
const WRITTEN = { id: 'double-refund', title: 'Refunded twice', ask: 'Did the agent call issue_refund twice for one order?', scope: 'trace' };
const PERSONS_YAML = `id: ${ID}\nkind: yes_no\ntitle: Refunded twice (mine)\nscope: trace\nask: Did the agent refund one order twice, in any way?\napplies_to:\n  project: [p]\n`;

function setup() {
  const checks = new ChecksRepo(db);
  const plans = new QuestionsRepo(db);
  // What the LLM writes on each plan: the same question unless a test says otherwise.
  let writes: Record<string, unknown>[] = [WRITTEN];
  const planner = new Planner({ library: [], chat: async () => ({ text: JSON.stringify({ pick: [], new: writes }), answered_by: 'local' }), onError: () => undefined });
  const processor = new QuestionProcessor({
    answerer: {} as QuestionAnswerer, // only plan tasks here: nothing is answered
    windows: new MemoryWindowStore<QuestionFindingsWindow>(),
    plans,
    planner,
    checks,
    awaitPlans: true,
    log: (m, e) => {
      throw new Error(`${m}: ${String(e)}`);
    },
  });
  // The check set's database source, read again as after a write (runtime.ts reloads on a change).
  let set: QuestionSet = questionSet([]);
  const reload = async () => {
    const loaded: Check[] = (await checks.list()).map((r) => parseDatabaseCheck({ id: r.id, yaml: r.yaml, origin: r.origin }));
    set = questionSet(loaded);
  };
  const scheduler = new QuestionScheduler({ windows: new MemoryWindowStore<SchedulerWindow>(), questions: () => set, plans, planCacheMs: 0, planRetryMs: 0 });
  /** One whole run of the workflow: its plan task, if any, handed to the question service; the questions asked. */
  const runOf = async (run: string, tools: ToolInfo[]): Promise<QuestionTask[]> => {
    const envs: Envelope[] = [
      { project: 'p', received_ms: T0, item: { kind: 'run_start', run: { event: 'run_start', run_id: run, workflow: WORKFLOW, tools } } },
      { project: 'p', received_ms: T0 + 1, item: { kind: 'span', span: { run_id: run, span_id: `${run}-s1`, type: 'tool', name: tools[0].name, tool: tools[0].name, status: 'ok', input: {}, output: 'ok', start_ms: T0, end_ms: T0 + 1 } } },
      { project: 'p', received_ms: T0 + 2, item: { kind: 'run_end', run: { event: 'run_end', run_id: run, status: 'ok', final_output: 'done', ts_ms: T0 + 2 } } },
    ];
    const out = await scheduler.process(envs);
    await out.commit();
    const planTasks = out.tasks.filter((t): t is PlanTask => t.type === 'plan');
    if (planTasks.length) {
      await processor.process(planTasks);
      await reload();
    }
    return out.tasks.filter((t): t is QuestionTask => t.type === 'question');
  };
  return { checks, plans, processor, reload, runOf, write: (w: Record<string, unknown>[]) => void (writes = w) };
}

const planTask = (tools: string[]): PlanTask => ({
  id: `plan-${tools.join('-')}`,
  type: 'plan',
  project: 'p',
  run_id: 'r',
  workflow: WORKFLOW,
  span_ids: [],
  final: false,
  at_ms: T0,
  plan: { project: 'p', workflow: WORKFLOW, tools: tools.map((name) => ({ name })) },
});

describe("the planner's questions as database checks", () => {
  it('keeps the version a person edited when a new tool re-plans the workflow, and asks it once, as theirs', async () => {
    const h = setup();
    await h.processor.process([planTask(['lookup_order'])]);
    expect(await h.checks.get('p', ID)).toMatchObject({ origin: 'planner', workflow: WORKFLOW, saved: false });
    // A person saves their version (as the authoring API does: origin app, saved, no workflow).
    await h.checks.put({ id: ID, yaml: PERSONS_YAML, origin: 'app', project: 'p', saved: true });

    // The LLM writes the question again, reworded, on the re-plan for a new tool...
    h.write([{ ...WRITTEN, ask: 'Did the agent issue two refunds for the same order?' }]);
    await h.processor.process([planTask(['lookup_order', 'issue_refund'])]);
    expect(await h.checks.get('p', ID)).toMatchObject({ yaml: PERSONS_YAML, origin: 'app', saved: true });
    // ...or not at all, and the plan carries it forward.
    h.write([]);
    await h.processor.process([planTask(['lookup_order', 'issue_refund', 'send_email'])]);
    expect(await h.checks.get('p', ID)).toMatchObject({ yaml: PERSONS_YAML, origin: 'app', saved: true });
    expect((await h.plans.get('p', WORKFLOW))!.written.map((w) => w.id)).toEqual([ID]);

    await h.reload();
    const asked = (await h.runOf('r1', [{ name: 'lookup_order' }, { name: 'issue_refund' }, { name: 'send_email' }])).filter((t) => t.check.id === ID);
    expect(asked.map((t) => t.check.ask)).toEqual(['Did the agent refund one order twice, in any way?']);
  });

  it("writes nothing for a question carried forward that is stored as the planner's own, unchanged", async () => {
    const h = setup();
    await h.processor.process([planTask(['lookup_order'])]);
    const first = (await h.checks.get('p', ID))!;
    await h.processor.process([planTask(['lookup_order', 'issue_refund'])]); // written again, the same
    h.write([]);
    await h.processor.process([planTask(['lookup_order', 'issue_refund', 'send_email'])]); // carried forward
    expect(await h.checks.get('p', ID)).toEqual(first);
  });

  it('no longer asks a planner question once its check is deleted, and a re-plan does not write it again', async () => {
    const h = setup();
    // The workflow's first run asks for the plan; the next one asks the planner's question.
    await h.runOf('r1', [{ name: 'lookup_order' }]);
    expect((await h.runOf('r2', [{ name: 'lookup_order' }])).map((t) => t.check.id)).toContain(ID);

    expect(await h.checks.delete('p', ID)).toBe(true);
    await h.reload();
    const next = await h.runOf('r3', [{ name: 'lookup_order' }]);
    expect(next.map((t) => t.check.id)).not.toContain(ID);
    expect(next).toEqual([]);
    expect(await h.plans.get('p', WORKFLOW)).toMatchObject({ written: [], deleted: [ID] });

    // A new tool: the workflow is planned again and the LLM writes the same question again.
    const replanned = await h.runOf('r4', [{ name: 'lookup_order' }, { name: 'issue_refund' }]);
    expect(replanned.map((t) => t.check.id)).not.toContain(ID);
    expect(await h.checks.get('p', ID)).toBeNull();
    expect(await h.plans.get('p', WORKFLOW)).toMatchObject({ tools: ['lookup_order', 'issue_refund'], written: [], deleted: [ID] });
    expect((await h.runOf('r5', [{ name: 'lookup_order' }, { name: 'issue_refund' }])).map((t) => t.check.id)).not.toContain(ID);
  });
});

describe("ChecksRepo and the planner's questions", () => {
  const yaml = (ask: string) => `id: q\nkind: yes_no\nask: ${ask}\n`;

  it("replaces only the planner's own unsaved version, and only when it changed", async () => {
    const checks = new ChecksRepo(db);
    const first = await checks.put({ id: 'q', yaml: yaml('One?'), origin: 'planner', project: 'p', workflow: 'w' });
    expect(await checks.put({ id: 'q', yaml: yaml('One?'), origin: 'planner', project: 'p', workflow: 'w' })).toEqual(first);
    const changed = await checks.put({ id: 'q', yaml: yaml('Two?'), origin: 'planner', project: 'p', workflow: 'w' });
    expect(changed).toMatchObject({ yaml: yaml('Two?'), origin: 'planner', created_at: first.created_at });

    // A person's version stays theirs, whatever the planner writes; a person's own writes replace as before.
    const mine = await checks.put({ id: 'q', yaml: yaml('Mine?'), origin: 'cli', project: 'p', saved: true });
    expect(await checks.put({ id: 'q', yaml: yaml('Three?'), origin: 'planner', project: 'p', workflow: 'w' })).toEqual(mine);
    expect(await checks.get('p', 'q')).toEqual(mine);
    expect(await checks.put({ id: 'q', yaml: yaml('Mine again?'), origin: 'app', project: 'p', saved: true })).toMatchObject({ yaml: yaml('Mine again?'), origin: 'app' });

    // One the planner wrote that a person marked saved is theirs too.
    await checks.put({ id: 'r', yaml: 'id: r\n', origin: 'planner', project: 'p', workflow: 'w' });
    await checks.markSaved('p', 'r');
    expect(await checks.put({ id: 'r', yaml: 'id: r\ntitle: again\n', origin: 'planner', project: 'p', workflow: 'w' })).toMatchObject({ yaml: 'id: r\n', saved: true });
  });

  it("saves a coding agent's new check only while its project has fewer than the bound, many saved at once included", async () => {
    const checks = new ChecksRepo(db);
    const agent = (id: string) => ({ id, yaml: `id: ${id}\n`, origin: 'agent' as const, project: 'p', agent_checks_max: 3 });
    await checks.put(agent('a-0'));
    await checks.put({ id: 'mine', yaml: 'id: mine\n', origin: 'app', project: 'p', saved: true }); // a person's: not counted
    // On a Postgres server, its pool's connections open first, so the saves below run side by side.
    await Promise.all(Array.from({ length: 4 }, () => db.transaction((tx) => tx.query('SELECT pg_sleep(0.05)'))));
    const all = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => checks.put(agent(`a-${i + 1}`))));
    expect(all.filter((r) => r.status === 'fulfilled')).toHaveLength(2);
    for (const r of all.filter((x): x is PromiseRejectedResult => x.status === 'rejected')) {
      expect(r.reason).toBeInstanceOf(AgentChecksFullError);
      expect(r.reason).toMatchObject({ code: 'too_many_checks', project: 'p', agents: 3, max: 3 });
    }
    const agents = (await checks.list({ project: 'p', origin: 'agent' })).map((c) => c.id);
    expect(agents).toHaveLength(3);
    // replacing one is not a new one; another project has its own bound
    expect(await checks.put({ ...agent(agents[2]), yaml: `id: ${agents[2]}\n# again\n` })).toMatchObject({ yaml: `id: ${agents[2]}\n# again\n` });
    await checks.put({ ...agent('elsewhere'), project: 'q' });
  });

  it("deletes a check that is in no plan without touching the plans; one in a plan leaves only its own project's", async () => {
    const checks = new ChecksRepo(db);
    const plans = new QuestionsRepo(db);
    const plan = (project: string) => ({ project, workflow: 'w', tools: ['t'], picks: [], written: [{ id: 'plan-w-x', yaml: 'id: plan-w-x\n' }, { id: 'plan-w-y', yaml: 'id: plan-w-y\n' }], planned_by: 'local' as const, at_ms: 1 });
    await plans.put(plan('p'));
    await plans.put(plan('other'));
    await checks.put({ id: 'plan-w-x', yaml: 'id: plan-w-x\n', origin: 'planner', project: 'p', workflow: 'w' });
    await checks.put({ id: 'mine', yaml: 'id: mine\n', origin: 'app', project: 'p' });
    expect(await checks.delete('p', 'mine')).toBe(true);
    expect(await plans.get('p', 'w')).toEqual(plan('p'));
    expect(await checks.delete('p', 'plan-w-x')).toBe(true);
    expect(await plans.get('p', 'w')).toEqual({ ...plan('p'), written: [{ id: 'plan-w-y', yaml: 'id: plan-w-y\n' }], deleted: ['plan-w-x'] });
    expect(await plans.get('other', 'w')).toEqual(plan('other'));
    expect(await checks.delete('p', 'plan-w-x')).toBe(false);
  });

  it('deletes a written question whose check is already gone (deleted before plans kept deleted ones) from its plan', async () => {
    const checks = new ChecksRepo(db);
    const plans = new QuestionsRepo(db);
    // As a version before deleted ids left the plan kept it: in written, with no check row.
    await plans.put({ project: 'p', workflow: 'w', tools: ['t'], picks: [], written: [{ id: 'plan-w-x', yaml: 'id: plan-w-x\n' }], planned_by: 'local', at_ms: 1 });
    expect(await checks.get('p', 'plan-w-x')).toBeNull();
    expect(await checks.delete('p', 'plan-w-x')).toBe(true);
    expect(await plans.get('p', 'w')).toMatchObject({ written: [], deleted: ['plan-w-x'] });
    expect(await checks.delete('p', 'plan-w-x')).toBe(false);
    expect(await checks.delete('p', 'never-written')).toBe(false);
  });
});
