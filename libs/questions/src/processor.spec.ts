import { MemoryWindowStore } from '@neatroots/platform';
import type { QuestionAnswerer } from './answerer';
import { ModelQueueClosedError } from './batcher';
import type { QuestionFindingsWindow } from './findings';
import { MemoryPlanStore, plannedId, Planner } from './planner';
import { QuestionProcessor, type DbCheckSink } from './processor';
import type { PlanTask } from './types';

const T0 = 1_700_000_000_000;

const planTask = (tools: string[]): PlanTask => ({
  id: `plan-${tools.join('-')}`,
  type: 'plan',
  project: 'p',
  run_id: 'r',
  workflow: 'w',
  span_ids: [],
  final: false,
  at_ms: T0,
  plan: { project: 'p', workflow: 'w', tools: tools.map((name) => ({ name })) },
});

describe('the question processor planning a workflow', () => {
  it('saves only the questions a plan wrote new or reworded: not one carried forward unchanged, nor one deleted while it planned', async () => {
    const plans = new MemoryPlanStore();
    const saved: string[] = [];
    const checks: DbCheckSink = { put: async (c) => void saved.push(`${c.id} ${c.origin}`) };
    const x = { id: 'x', ask: 'Did it refund twice?' };
    const y = { id: 'y', ask: 'Did it refund a closed order?' };
    let writes: unknown[] = [x, y];
    let duringPlan = async () => undefined as void;
    const planner = new Planner({
      library: [],
      onError: () => undefined,
      chat: async () => {
        await duringPlan();
        return { text: JSON.stringify({ pick: [], new: writes }), answered_by: 'local' };
      },
    });
    const processor = new QuestionProcessor({ answerer: {} as QuestionAnswerer, windows: new MemoryWindowStore<QuestionFindingsWindow>(), plans, planner, checks, awaitPlans: true });
    const [X, Y, Z] = ['x', 'y', 'z'].map((id) => plannedId('w', id));

    await processor.process([planTask(['a'])]);
    expect(saved).toEqual([`${X} planner`, `${Y} planner`]);

    // A new tool: y written again as it was, z new, x not written (carried forward).
    saved.length = 0;
    writes = [y, { id: 'z', ask: 'Did it refund without a lookup?' }];
    await processor.process([planTask(['a', 'b'])]);
    expect(saved).toEqual([`${Z} planner`]);
    expect((await plans.get('p', 'w'))!.written.map((w) => w.id)).toEqual([Y, Z, X]);

    // x's check deleted while the LLM plans (ChecksRepo.delete moves it to `deleted` in the stored plan); the LLM writes it again.
    saved.length = 0;
    writes = [{ ...x, ask: 'Did it refund one order twice?' }];
    duringPlan = async () => {
      const stored = (await plans.get('p', 'w'))!;
      await plans.put({ ...stored, written: stored.written.filter((w) => w.id !== X), deleted: [X] });
    };
    await processor.process([planTask(['a', 'b', 'c'])]);
    expect(saved).toEqual([]);
    expect(await plans.get('p', 'w')).toMatchObject({ tools: ['a', 'b', 'c'], written: [{ id: Y }, { id: Z }], deleted: [X] });
  });
});

describe('the question processor at a stop', () => {
  const planning = (chat: () => Promise<never>, plans = new MemoryPlanStore()) => {
    const logged: string[] = [];
    const planner = new Planner({ library: [], onError: () => undefined, onWarn: () => undefined, chat });
    const processor = new QuestionProcessor({
      answerer: {} as QuestionAnswerer, windows: new MemoryWindowStore<QuestionFindingsWindow>(), plans, planner, awaitPlans: true,
      log: (msg) => void logged.push(msg),
    });
    return { processor, logged };
  };

  it('logs nothing when the stop closes the model queue while the LLM plans a workflow', async () => {
    const { processor, logged } = planning(() => Promise.reject(new ModelQueueClosedError('local')));
    await processor.process([planTask(['a'])]);
    await processor.idle();
    expect(logged).toEqual([]);
  });

  it('still says a plan that failed otherwise', async () => {
    const plans = new MemoryPlanStore();
    plans.put = () => Promise.reject(new Error('the database is read-only'));
    const { processor, logged } = planning(() => Promise.reject(new TypeError('a bug')), plans);
    await processor.process([planTask(['a'])]);
    await processor.idle();
    expect(logged).toEqual(['planning workflow w failed; the next run asks again']);
  });
});
