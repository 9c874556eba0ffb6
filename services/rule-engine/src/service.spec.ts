import { compileRuleSet, parseCheck, windowKey, type FindingEvent, type RunWindow } from '@neatroots/checks';
import { makeTopics } from '@neatroots/messages';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LogBus, MemoryBus, MemoryWindowStore, until } from '@neatroots/platform';
import { observeFindingDelays, type BusRecord, type LogFields, type Topic } from '@neatroots/ports';
import type { Envelope } from '@neatroots/spans';
import { LOCAL_LLM_POLICY, QuestionScheduler, questionSet, type QuestionResult, type SchedulerWindow } from '@neatroots/questions';
import { dropTable, droppedTableRules } from '../../../libs/checks/src/engine/dropped-table.test';
import { question, runEnd, span } from '../../../libs/questions/src/fixtures.test';
import { startRuleEngine } from './service';

/** The run windows, unavailable while `down` is set. */
class FlakyWindows extends MemoryWindowStore<RunWindow> {
  down = true;
  override async load(keys: readonly string[]): Promise<Map<string, RunWindow>> {
    if (this.down) throw Object.assign(new Error('window store down'), { code: 'ECONNREFUSED' }); // a dependency down: retried, never set aside
    return super.load(keys);
  }
}

/** A log bus of one partition in a folder of its own, its topics, and its close with the folder's removal. */
function tempLogBus(prefix: string): { bus: LogBus; topics: ReturnType<typeof makeTopics>; removeBus(): Promise<void> } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const bus = new LogBus({ dir, partitions: 1, commitIntervalMs: 5, onError: () => undefined });
  return {
    bus,
    topics: makeTopics('t'),
    removeBus: async () => {
      await bus.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('rule-engine service logs', () => {
  it('a failed batch is logged with its project and run, once while it fails alike, and delivered again', async () => {
    // the bus's own line about the retry says nothing of the run: not asserted, kept quiet
    const bus = new MemoryBus({ partitions: 1, retryDelayMs: 5, onError: () => undefined });
    const windows = new FlakyWindows();
    const topics = makeTopics('t');
    const logged: { msg: string; err?: unknown; fields?: LogFields }[] = [];
    const engine = await startRuleEngine({
      bus, windows, topics, rules: () => compileRuleSet([], () => ({ test: () => false })),
      log: (msg, err, fields) => logged.push({ msg, err, fields }),
    });
    const span = (id: string): Envelope => ({ project: 'p', received_ms: 1, item: { kind: 'span', span: { run_id: 'r1', span_id: id, type: 'llm', name: 'x', status: 'ok' } } });
    await bus.publish(topics.events, [{ key: 'r1', value: span('s1') }, { key: 'r1', value: span('s2') }]);
    let tries = 0;
    const load = windows.load.bind(windows);
    windows.load = (keys) => (tries++, load(keys));
    // retried while the store is down: logged once, not at every try
    await until('six tries of the batch', () => tries >= 6, 30_000, 5);
    expect(logged).toHaveLength(1);
    windows.down = false;
    await bus.idle();
    await engine.close();
    await bus.close();
    expect(logged[0]).toEqual({ msg: 'a batch of 2 events failed', err: expect.objectContaining({ message: 'window store down' }), fields: { project: 'p', run_id: 'r1' } });
    expect(engine.metrics.consumed).toBe(2);
  });
});

/** The run windows; a save of `key` waits for `release` while armed (a slow sync). */
class HeldWindows extends MemoryWindowStore<RunWindow> {
  // A held save is made only once released (as Redis's would be seen only once it returned).
  override readonly appliedAtCall = false;
  hold?: { key: string; reached: () => void; release: Promise<void> };
  override async save(entries: readonly { key: string; window: RunWindow; ttlMs?: number; expectRev?: number }[]): Promise<void> {
    const h = this.hold;
    if (h && entries.some((e) => e.key === h.key)) {
      h.reached();
      await h.release;
    }
    return super.save(entries);
  }
}

describe('rule-engine service steps', () => {
  it("a tick still saving one run's windows does not hold back the findings of another run", async () => {
    const bus = new MemoryBus({ partitions: 1 });
    const windows = new HeldWindows();
    const topics = makeTopics('t');
    const checks = [
      parseCheck({ id: 'refund-without-lookup', kind: 'rule', title: 'Refund without lookup', rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } } }, 'mine.yaml', 'user'),
      parseCheck({ id: 'dropped-table', kind: 'rule', title: 'Dropped a table', rule: { type: 'count', span: { tool: ['drop_table'] }, at_least: 1 } }, 'mine.yaml', 'user'),
    ];
    const rules = compileRuleSet(checks, () => ({ test: () => false }));
    const engine = await startRuleEngine({ bus, windows, topics, rules: () => rules, tickMs: 5 });
    const found: string[] = [];
    await bus.subscribe(topics.findings, { group: 'test' }, async (b) => {
      for (const r of b.records) found.push(`${r.value.run_id} ${r.value.check_id}`);
    });
    const tool = (run: string, id: string, name: string): Envelope => ({ project: 'p', received_ms: Date.now(), item: { kind: 'span', span: { run_id: run, span_id: id, type: 'tool', name, tool: name, status: 'ok', start_ms: Date.now(), end_ms: Date.now() } } });
    // The refund's wait (250 ms) fires from a tick, whose save of run `slow` is held.
    await bus.publish(topics.events, [{ key: 'slow', value: tool('slow', 's1', 'issue_refund') }]);
    await bus.idle();
    let release = () => undefined as void;
    const reached = new Promise<void>((resolve) => (windows.hold = { key: windowKey('p', 'slow'), reached: resolve, release: new Promise<void>((r) => (release = r)) }));
    await reached;
    await bus.publish(topics.events, [{ key: 'fast', value: tool('fast', 'f1', 'drop_table') }]);
    await until("the fast run's finding", () => found.includes('fast dropped-table'), 30_000, 5);
    const whileHeld = [...found];
    release();
    await bus.idle();
    await engine.close();
    await bus.close();
    expect(whileHeld).toEqual(['slow refund-without-lookup', 'fast dropped-table']);
  });

  it('a stop waits for the tick under way: its saves are made before it returns (the bus closes after)', async () => {
    const bus = new MemoryBus({ partitions: 1 });
    const windows = new HeldWindows();
    const topics = makeTopics('t');
    const checks = [parseCheck({ id: 'refund-without-lookup', kind: 'rule', title: 'Refund without lookup', rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } } }, 'mine.yaml', 'user')];
    const rules = compileRuleSet(checks, () => ({ test: () => false }));
    const logged: string[] = [];
    const engine = await startRuleEngine({ bus, windows, topics, rules: () => rules, tickMs: 5, log: (msg) => logged.push(msg) });
    const now = Date.now();
    await bus.publish(topics.events, [{ key: 'slow', value: { project: 'p', received_ms: now, item: { kind: 'span', span: { run_id: 'slow', span_id: 's1', type: 'tool', name: 'issue_refund', tool: 'issue_refund', status: 'ok', start_ms: now, end_ms: now } } } }]);
    await bus.idle();
    // The refund's wait fires from a tick, whose save is held: the stop comes meanwhile.
    let release = () => undefined as void;
    const reached = new Promise<void>((resolve) => (windows.hold = { key: windowKey('p', 'slow'), reached: resolve, release: new Promise<void>((r) => (release = r)) }));
    await reached;
    let stopped = false;
    const stopping = engine.close().then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(stopped).toBe(false);
    release();
    await stopping;
    // The tick's save was made (the span's step saved revision 1, the tick 2) and nothing failed.
    expect((await windows.load([windowKey('p', 'slow')])).get(windowKey('p', 'slow'))?.rev).toBe(2);
    await bus.close();
    expect(logged).toEqual([]);
  });
});

/** A bus whose publishes to one topic fail while `failing` is set (a broker that does not acknowledge). */
class RefusingBus extends MemoryBus {
  failing = true;
  refusals = 0;
  constructor(private readonly refused: string) {
    super({ partitions: 1, retryDelayMs: 5, onError: () => undefined });
  }
  override async publish<T>(topic: Topic<T>, records: BusRecord<T>[]): Promise<void> {
    if (this.failing && topic.name === this.refused) {
      this.refusals++;
      throw new Error('not acknowledged');
    }
    return super.publish(topic, records);
  }
}

describe('rule-engine service: receipt to finding', () => {
  it('reports a finding once its publish was acknowledged, with its receipt time; a publish that failed reports nothing', async () => {
    const topics = makeTopics('t');
    const bus = new RefusingBus(topics.findings.name);
    const check = parseCheck({ id: 'dropped-table', kind: 'rule', title: 'Dropped a table', rule: { type: 'count', span: { tool: ['drop_table'] }, at_least: 1 }, action: 'halt' }, 'mine.yaml', 'user');
    const rules = compileRuleSet([check], () => ({ test: () => false }));
    const published: { at: number; findings: readonly FindingEvent[] }[] = [];
    const engine = await startRuleEngine({
      bus, windows: new MemoryWindowStore(), topics, rules: () => rules, steering: () => true,
      log: () => undefined,
      onFindingsPublished: (findings) => published.push({ at: Date.now(), findings }),
    });
    const received = Date.now() - 40;
    await bus.publish(topics.events, [{ key: 'r1', value: { project: 'p', received_ms: received, item: { kind: 'span', span: { run_id: 'r1', span_id: 's1', type: 'tool', name: 'drop_table', tool: 'drop_table', status: 'ok' } } } }]);
    await until('two refused publishes', () => bus.refusals >= 2, 30_000, 5);
    const whileRefused = published.length;
    bus.failing = false;
    await bus.idle();
    await engine.close();
    await bus.close();
    expect(bus.refusals).toBeGreaterThanOrEqual(2);
    expect(whileRefused).toBe(0);
    // Delivered again after the failures, the batch raises the same finding (same id) once acknowledged.
    expect(published.map((p) => p.findings.map((f) => [f.check_id, f.status, f.action, f.received_ms]))).toEqual([[['dropped-table', 'raised', 'halt', received]]]);
    // What the module observes: seconds from the receipt to the acknowledgement.
    const observed: { labels: Record<string, string>; value: number }[] = [];
    observeFindingDelays({ observe: (labels, value) => observed.push({ labels: labels as Record<string, string>, value }) }, published[0].findings, published[0].at);
    expect(observed).toEqual([{ labels: { kind: 'rule', action: 'halt' }, value: (published[0].at - received) / 1000 }]);
    expect(observed[0].value).toBeGreaterThanOrEqual(0.04);
  });
});

/** The run windows, counting the loads (each one a round trip on Redis). */
class CountedWindows extends MemoryWindowStore<RunWindow> {
  override readonly appliedAtCall = false;
  loads = 0;
  override async load(keys: readonly string[]): Promise<Map<string, RunWindow>> {
    this.loads++;
    return super.load(keys);
  }
}

describe('rule-engine service: batches that come together (mergeBatches, the distributed deployment)', () => {
  const run = async (mergeBatches: boolean) => {
    // The embedded log delivers a topic's partitions side by side, as Kafka does (the memory bus one after the other).
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'merge-'));
    const bus = new LogBus({ dir, partitions: 4 });
    const windows = new CountedWindows();
    const topics = makeTopics('t');
    const checks = [parseCheck({ id: 'dropped-table', kind: 'rule', title: 'Dropped a table', rule: { type: 'count', span: { tool: ['drop_table'] }, at_least: 1 } }, 'mine.yaml', 'user')];
    const rules = compileRuleSet(checks, () => ({ test: () => false }));
    const found: string[] = [];
    await bus.subscribe(topics.findings, { group: 'test' }, async (b) => {
      for (const r of b.records) found.push(r.value.run_id);
    });
    const engine = await startRuleEngine({ bus, windows, topics, rules: () => rules, tickMs: 1000, mergeBatches });
    const tool = (run: string): Envelope => ({ project: 'p', received_ms: Date.now(), item: { kind: 'span', span: { run_id: run, span_id: 's1', type: 'tool', name: 'drop_table', tool: 'drop_table', status: 'ok', start_ms: Date.now(), end_ms: Date.now() } } });
    const runs = Array.from({ length: 12 }, (_, i) => `r${i}`);
    await bus.publish(topics.events, runs.map((r) => ({ key: r, value: tool(r) })));
    await until('a finding of every run', () => found.length >= runs.length, 30_000, 5);
    await engine.close();
    await bus.close();
    fs.rmSync(dir, { recursive: true, force: true });
    return { loads: windows.loads, found: found.sort(), runs: runs.sort() };
  };

  it('takes the partitions delivered side by side as one step: one windows read for all, the same findings', async () => {
    const merged = await run(true);
    const apart = await run(false);
    expect(merged.found).toEqual(merged.runs);
    expect(apart.found).toEqual(apart.runs);
    expect(apart.loads).toBeGreaterThan(1); // one per partition that held records
    expect(merged.loads).toBe(1);
  });
});

describe('rule-engine service: a question service far behind', () => {
  it('hands it no new question tasks past questions.maxBacklog on the embedded log (plans and findings go on), and takes them again once it caught up', async () => {
    const { bus, topics, removeBus } = tempLogBus('neatroots-shed-');
    const set = questionSet([question({ id: 'dropped-what', scope: 'span', ask: 'Was the table dropped by mistake?' })]);
    const logged: string[] = [];
    const engine = await startRuleEngine({
      bus,
      windows: new MemoryWindowStore<RunWindow>(),
      topics,
      rules: droppedTableRules,
      tickMs: 60_000,
      questions: { scheduler: new QuestionScheduler({ windows: new MemoryWindowStore<SchedulerWindow>(), questions: () => set }), topic: topics.questions, maxBacklog: 3 },
      log: (m) => logged.push(m),
    });
    // The question service: its model hangs, so it takes one batch and holds it.
    let release!: () => void;
    const hung = new Promise<void>((r) => (release = r));
    let hangs = true;
    let answered = 0;
    const questionService = await bus.subscribe(topics.questions, { group: 'question' }, async (b) => {
      if (hangs) await hung;
      answered += b.records.length;
    });
    const findings: string[] = [];
    const sub = await bus.subscribe(topics.findings, { group: 'test' }, async (b) => {
      for (const r of b.records) findings.push(r.value.run_id);
    });
    try {
      // Eight runs, a step each: two drops (a question task each, and a finding).
      for (let i = 0; i < 8; i++) {
        await bus.publish(topics.events, [dropTable(`r${i}`, `a${i}`), dropTable(`r${i}`, `b${i}`)]);
        await until(`batch ${i + 1} done`, () => engine.metrics.batches === i + 1, 5_000, 5);
      }
      await until("8 findings", () => findings.length === 8, 5_000, 5);
      // One record a step: the first is in hand, three wait, then the bound holds.
      expect(bus.backlog(topics.questions.name)).toBe(4);
      expect(engine.metrics.questions).toBe(8);
      expect(engine.metrics.questionsShed).toBe(8);
      expect(logged.filter((m) => m.includes('new questions are not asked until it catches up'))).toHaveLength(1);

      // Caught up: the next step's questions are handed over again.
      hangs = false;
      release();
      await until("no question records waiting", () => bus.backlog(topics.questions.name) === 0, 5_000, 5);
      await bus.publish(topics.events, [dropTable('r9', 'a9')]);
      await until("batch 9 done", () => engine.metrics.batches === 9, 5_000, 5);
      await until("5 question records taken", () => answered === 5, 5_000, 5);
      expect(engine.metrics).toMatchObject({ questions: 9, questionsShed: 8 });
    } finally {
      release();
      await engine.close();
      await questionService.close();
      await sub.close();
      await removeBus();
    }
  });

  it('records each question it did not hand over as not checked, saying why, and counts none of them as asked: the cap and the end question are left for later', async () => {
    const { bus, topics, removeBus } = tempLogBus('neatroots-shed-');
    // The local LLM's cost control: a span question is asked at most four times a run.
    const set = questionSet([
      question({ id: 'wrong-search', scope: 'span', ask: 'Was this search the wrong one?' }),
      question({ id: 'task-left-undone', scope: 'trace', when: 'end', ask: 'Did the run leave its task undone?' }),
    ]);
    const recorded: QuestionResult[] = [];
    const logged: string[] = [];
    const engine = await startRuleEngine({
      bus,
      windows: new MemoryWindowStore<RunWindow>(),
      topics,
      rules: droppedTableRules,
      tickMs: 60_000,
      questions: {
        scheduler: new QuestionScheduler({ windows: new MemoryWindowStore<SchedulerWindow>(), questions: () => set, policy: LOCAL_LLM_POLICY }),
        topic: topics.questions,
        maxBacklog: 1,
        results: { record: async (r) => void recorded.push(...r) },
      },
      log: (m) => logged.push(m),
    });
    // The question service: its model hangs, so it takes one record and holds it.
    let release!: () => void;
    const hung = new Promise<void>((r) => (release = r));
    const handed: { run: string; check: string; anchor: string; final: boolean }[] = [];
    const questionService = await bus.subscribe(topics.questions, { group: 'question' }, async (b) => {
      await hung;
      for (const r of b.records) for (const t of r.value) if (t.type === 'question') handed.push({ run: t.run_id, check: t.check.id, anchor: t.anchor, final: t.final });
    });
    let steps = 0;
    const step = async (...envs: Envelope[]) => {
      await bus.publish(topics.events, envs.map((e) => ({ key: 'run', value: e })));
      steps++;
      await until(`step ${steps} done`, () => engine.metrics.batches === steps, 10_000, 5);
    };
    const T = 1_000_000;
    try {
      // Two other runs' questions: one record in the question service's hands, one waiting.
      await step({ ...span('other-1', 'o1', {}, T) });
      await step({ ...span('other-2', 'o2', {}, T) });
      expect(bus.backlog(topics.questions.name)).toBe(2);
      // Six searches of `r`, ten seconds apart (past the local LLM's gap), then its end: all shed.
      for (let i = 1; i <= 6; i++) await step(span('r', `s${i}`, {}, T + i * 10_000));
      await step(runEnd('r', 'done', T + 70_000));
      const reason = 'not asked: the question service was 2 question task records behind (NEATROOTS_MAX_QUESTION_BACKLOG=1)';
      expect(recorded.map((r) => [r.run_id, r.check_id, r.anchor, r.answer.status, r.answer.reason])).toEqual([
        ...[1, 2, 3, 4, 5, 6].map((i) => ['r', 'wrong-search', `s${i}`, 'not_checked', reason]),
        ['r', 'task-left-undone', 'run', 'not_checked', reason],
      ]);
      expect(recorded.map((r) => r.span_ids)).toEqual([['s1'], ['s2'], ['s3'], ['s4'], ['s5'], ['s6'], ['s1', 's2', 's3', 's4', 's5', 's6']]);
      expect(engine.metrics).toMatchObject({ questions: 2, questionsShed: 7 });
      expect(logged.filter((m) => m.startsWith('2 question task records wait for the question service'))).toHaveLength(1);

      // Caught up: a search that came after the end is asked about (the six shed asks used none
      // of the four), and so is the end question, never asked.
      release();
      await until('no question records waiting', () => bus.backlog(topics.questions.name) === 0, 10_000, 5);
      await step(span('r', 's7', {}, T + 80_000));
      await until('the late step\'s questions handed over', () => handed.some((h) => h.run === 'r'), 10_000, 5);
      expect(handed.filter((h) => h.run === 'r')).toEqual([
        { run: 'r', check: 'wrong-search', anchor: 's7', final: true },
        { run: 'r', check: 'task-left-undone', anchor: 'run', final: true },
      ]);
      expect(recorded).toHaveLength(7);
    } finally {
      release();
      await engine.close();
      await questionService.close();
      await removeBus();
    }
  });

  it('records the question tasks handed over as waiting for their answers beside its steps, one write at a time, never holding a step for it', async () => {
    const { bus, topics, removeBus } = tempLogBus('neatroots-handed-');
    const set = questionSet([question({ id: 'wrong-search', scope: 'span', ask: 'Was this search the wrong one?' })]);
    // The database is slow: the first write is held until the test lets it go.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const writes: string[][] = [];
    const engine = await startRuleEngine({
      bus,
      windows: new MemoryWindowStore<RunWindow>(),
      topics,
      rules: droppedTableRules,
      tickMs: 60_000,
      questions: {
        scheduler: new QuestionScheduler({ windows: new MemoryWindowStore<SchedulerWindow>(), questions: () => set, policy: LOCAL_LLM_POLICY }),
        topic: topics.questions,
        results: {
          record: async () => undefined,
          handed: async (tasks) => {
            writes.push(tasks.map((t) => t.run_id));
            await held;
          },
        },
      },
      log: () => undefined,
    });
    const T = 1_000_000;
    try {
      // Three runs' searches, each a step that hands a question over.
      for (const run of ['r1', 'r2', 'r3']) await bus.publish(topics.events, [{ key: run, value: span(run, 's1', {}, T) }]);
      // Every step done and its batch's position moved on while the first write is held.
      await until('the three steps done', () => engine.metrics.batches >= 1 && bus.backlog(topics.events.name) === 0 && engine.metrics.questions === 3, 10_000, 5);
      expect(writes).toEqual([['r1']]);
      release();
      // What was handed over meanwhile goes in one write once the first is done.
      await until('the tasks handed over meanwhile written', () => writes.length === 2, 10_000, 5);
      expect(writes[1].sort()).toEqual(['r2', 'r3']);
    } finally {
      release();
      await engine.close();
      await removeBus();
    }
  });
});

/** A question scheduler whose steps wait at `gate` (while it is set) and then fail `failing` times. */
class HeldScheduler extends QuestionScheduler {
  gate: Promise<void> | undefined;
  failing = 0;
  calls = 0;
  override async process(...args: Parameters<QuestionScheduler['process']>): ReturnType<QuestionScheduler['process']> {
    this.calls++;
    if (this.gate) await this.gate;
    if (this.failing > 0) {
      this.failing--;
      throw new Error('the scheduler failed');
    }
    return super.process(...args);
  }
}

describe('rule-engine service: findings not held behind the question scheduler', () => {
  it("publishes a batch's findings while its question scheduler's step still runs; the batch's position moves once that step is done, and a step that failed sends the same findings again", async () => {
    const { bus, topics, removeBus } = tempLogBus('neatroots-early-findings-');
    const set = questionSet([question({ id: 'wrong-search', scope: 'span', ask: 'Was this search the wrong one?' })]);
    const scheduler = new HeldScheduler({ windows: new MemoryWindowStore<SchedulerWindow>(), questions: () => set, policy: LOCAL_LLM_POLICY });
    let release!: () => void;
    scheduler.gate = new Promise<void>((r) => (release = r));
    scheduler.failing = 1;
    const errors: string[] = [];
    const engine = await startRuleEngine({
      bus,
      windows: new MemoryWindowStore<RunWindow>(),
      topics,
      rules: droppedTableRules,
      tickMs: 60_000,
      questions: { scheduler, topic: topics.questions },
      log: (msg) => errors.push(msg),
    });
    const findings: string[] = [];
    const sub = await bus.subscribe(topics.findings, { group: 'test', fromBeginning: true }, async (b) => {
      for (const r of b.records) findings.push(r.value.id);
    });
    try {
      // One batch of a run that drops a table twice: one finding.
      await bus.publish(topics.events, [dropTable('r1', 's1'), dropTable('r1', 's2')]);
      // Published while the scheduler's step on the same batch is held.
      await until('the finding published', () => findings.length === 1, 10_000, 5);
      expect(scheduler.calls).toBe(1);
      // The batch is not past: its step is not done.
      expect(bus.backlog(topics.events.name)).toBe(2);
      // The scheduler's step fails: the batch comes again and raises the same finding (same id).
      release();
      scheduler.gate = undefined;
      await until('the batch done', () => bus.backlog(topics.events.name) === 0, 10_000, 5);
      await bus.idle();
      expect(scheduler.calls).toBe(2);
      expect(errors.some((m) => /a batch of 2 events failed/.test(m))).toBe(true);
      expect(findings.length).toBe(2);
      expect(new Set(findings).size).toBe(1);
    } finally {
      release();
      await sub.close();
      await engine.close();
      await removeBus();
    }
  });
});
