import { deadLetterTopic, type Bus, type BusBatch, type DeadLetter, type Db, type LogFields, type Queryable, type Subscription, type Topic } from '@neatroots/ports';
import { MemoryBus, migrate, openPglite } from '@neatroots/platform';
import { QuestionsRepo } from '@neatroots/store';
import { DELIVERIES_TOPIC, EVENTS_TOPIC, FINDINGS_TOPIC, type FindingMessage } from '@neatroots/messages';
import { type Envelope } from '@neatroots/spans';
import { REVIEW_GROUPS, startReview, type Review } from './review';

const T0 = Date.parse('2025-01-01T00:00:00.000Z');

const span = (run_id: string, span_id: string, start_ms: number, extra: Record<string, unknown> = {}): Envelope => ({
  project: 'p1', received_ms: T0, item: { kind: 'span', span: { run_id, span_id, type: 'tool', name: 'search', tool: 'search', status: 'ok', start_ms, ...extra } },
});

const raised = (id: string, over: Partial<FindingMessage> = {}): FindingMessage => ({
  id, check_id: 'repeated-tool-call', run_id: 'r1', project: 'p1', status: 'raised', span_ids: ['s1', 's2', 's3'], count: 3,
  action: 'flag', title: 'Same tool called repeatedly', guidance: 'You have called search 3 times', at_ms: T0 + 100,
  kind: 'rule', source: 'library', ...over,
});

let db: Db;

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
}, 60_000);
afterAll(() => db.close());
beforeEach(() => db.exec('TRUNCATE runs, spans, findings, note_deliveries, check_stats, api_keys, projects CASCADE'));

describe('review service on the in-process bus', () => {
  let bus: MemoryBus;
  let review: Review;

  beforeEach(async () => {
    bus = new MemoryBus({ partitions: 2, retryDelayMs: 5 });
    review = await startReview({ bus, db, writer: { flushMs: 5 } });
  });
  afterEach(async () => {
    await review.close();
    await bus.close();
  });

  it('stores runs, spans, findings and deliveries from the three topics', async () => {
    await bus.publish(EVENTS_TOPIC, [
      { key: 'r1', value: { project: 'p1', received_ms: T0, item: { kind: 'run_start', run: { event: 'run_start', run_id: 'r1', workflow: 'refund-agent', ts_ms: T0 } } } },
      { key: 'r1', value: span('r1', 's2', T0 + 20) },
      { key: 'r1', value: span('r1', 's1', T0 + 10, { status: 'error', error: 'boom' }) },
      { key: 'r1', value: span('r1', 's3', T0 + 30) },
      { key: 'r1', value: { project: 'p1', received_ms: T0 + 50, item: { kind: 'run_end', run: { event: 'run_end', run_id: 'r1', status: 'ok', final_output: 'done' } } } },
    ]);
    await bus.publish(FINDINGS_TOPIC, [{ key: 'r1', value: raised('f1') }]);
    await bus.publish(DELIVERIES_TOPIC, [{ key: 'f1', value: { note_id: 'n1', finding_id: 'f1', project: 'p1', at_ms: T0 + 200 } }]);
    await bus.idle();

    const runs = await review.queries.listRuns('p1');
    expect(runs.items.map((r) => [r.run_id, r.workflow, r.span_count, r.error_count, r.end_status, r.open_findings])).toEqual([
      ['r1', 'refund-agent', 3, 1, 'ok', 1],
    ]);
    const run = await review.queries.getRun('p1', 'r1');
    expect(run!.spans.map((s) => s.span_id)).toEqual(['s1', 's2', 's3']);
    expect(run!.findings.map((f) => [f.id, f.state])).toEqual([['f1', 'active']]);
    expect((await review.queries.listFindings('p1', { state: 'active' })).items.map((f) => f.id)).toEqual(['f1']);
  });

  it('changes nothing when the same batches are delivered again', async () => {
    const events = [span('r1', 's1', T0), span('r1', 's2', T0 + 1)].map((value) => ({ key: 'r1', value }));
    const findings = [raised('f1'), raised('f1', { status: 'updated', count: 4, span_ids: ['s1', 's2', 's3', 's4'] })].map((value) => ({ key: 'r1', value }));
    for (let i = 0; i < 3; i++) {
      await bus.publish(EVENTS_TOPIC, events);
      await bus.publish(FINDINGS_TOPIC, findings);
    }
    await bus.idle();
    const run = await review.queries.getRun('p1', 'r1');
    expect(run!.run.span_count).toBe(2);
    expect(run!.findings.map((f) => [f.id, f.count])).toEqual([['f1', 4]]);
    expect(await review.queries.checkStats('p1')).toEqual([
      expect.objectContaining({ check_id: 'repeated-tool-call', findings: 1, dismissals: 0 }),
    ]);
  });

  it('makes a check quiet after 3 dismissals, seen at once by isQuiet, and counts it again after a reopen', async () => {
    await bus.publish(FINDINGS_TOPIC, ['a', 'b', 'c'].map((id) => ({ key: 'r1', value: raised(id) })));
    await bus.idle();
    expect(await review.isQuiet('p1', 'repeated-tool-call')).toBe(false);
    for (const id of ['a', 'b', 'c']) {
      expect(await review.queries.dismiss('p1', id, { by: 'ana', note: 'fine' })).toMatchObject({ state: 'dismissed', dismissed_by: 'ana' });
    }
    expect(await review.isQuiet('p1', 'repeated-tool-call')).toBe(true);
    expect(await review.queries.reopen('p1', 'b')).toMatchObject({ state: 'open' });
    expect(await review.isQuiet('p1', 'repeated-tool-call')).toBe(false);
    expect(await review.queries.dismiss('p1', 'nope')).toBeNull();
    expect(await review.queries.reopen('p1', 'nope')).toBeNull();
  });
});

/** A bus that hands batches to the test, so it can see when a handler resolves. */
class HandBus implements Bus {
  handlers = new Map<string, (batch: BusBatch<unknown>) => Promise<void>>();
  groups = new Map<string, string>();
  heartbeats = 0;
  async publish(): Promise<void> {}
  async subscribe<T>(topic: Topic<T>, opts: { group: string }, handler: (batch: BusBatch<T>) => Promise<void>): Promise<Subscription> {
    this.handlers.set(topic.name, handler as (batch: BusBatch<unknown>) => Promise<void>);
    this.groups.set(topic.name, opts.group);
    return { close: async () => undefined };
  }
  deliver<T>(topic: Topic<T>, values: T[]): Promise<void> {
    const h = this.handlers.get(topic.name);
    if (!h) throw new Error(`no consumer on ${topic.name}`);
    return h({ topic: topic.name, partition: 0, records: values.map((value) => ({ key: 'k', value })), heartbeat: async () => void this.heartbeats++ });
  }
  async close(): Promise<void> {}
}

/** As the bus log's: a subscription's close waits for the batches in hand. */
class WaitingBus extends HandBus {
  private readonly inHand = new Set<Promise<void>>();
  override deliver<T>(topic: Topic<T>, values: T[]): Promise<void> {
    const p = super.deliver(topic, values);
    this.inHand.add(p);
    p.then(
      () => this.inHand.delete(p),
      () => this.inHand.delete(p),
    );
    return p;
  }
  override async subscribe<T>(topic: Topic<T>, opts: { group: string }, handler: (batch: BusBatch<T>) => Promise<void>): Promise<Subscription> {
    await super.subscribe(topic, opts, handler);
    return { close: async () => void (await Promise.allSettled([...this.inHand])) };
  }
}

describe('review service: what it sets aside', () => {
  it('logs the item with its project and run, for a log pipeline to filter on', async () => {
    const bus = new MemoryBus({ partitions: 1, retryDelayMs: 5 });
    const logged: { msg: string; fields?: LogFields }[] = [];
    const review = await startReview({ bus, db, writer: { flushMs: 5 }, log: (msg, _err, fields) => logged.push({ msg, fields }) });
    // Each span alone fits a bigint; the run's total of both does not: the database refuses the
    // second (SQLSTATE class 22), so it is set aside.
    const huge = (id: string, at: number) => span('r9', id, at, { usage: { total_tokens: 5e18 } });
    await bus.publish(EVENTS_TOPIC, [{ key: 'r9', value: huge('s1', T0) }, { key: 'r9', value: huge('s2', T0 + 1) }]);
    await bus.idle();
    await review.close();
    await bus.close();
    expect(logged).toContainEqual({
      msg: expect.stringMatching(/^set aside span s2 of project "p1"/),
      fields: { project: 'p1', run_id: 'r9', kind: 'span', source: 'store.events' },
    });
  });
});

describe('review service: question tasks set aside', () => {
  it('a record of question tasks too large to travel whole still names its tasks: listed under their project, each not checked with why, none left waiting', async () => {
    const bus = new MemoryBus({ partitions: 1, retryDelayMs: 5 });
    const review = await startReview({ bus, db, writer: { flushMs: 5 } });
    try {
      const run = `r-cut-${Date.now().toString(36)}`;
      await bus.publish(EVENTS_TOPIC, [{ key: run, value: { project: 'p1', received_ms: T0, item: { kind: 'run_start', run: { event: 'run_start', run_id: run, workflow: 'w', ts_ms: T0 } } } }]);
      await bus.idle();
      // two questions handed to the question service, which kept failing on their record
      const task = (n: number) => ({
        type: 'question', id: `${run}-t${n}`, project: 'p1', run_id: run, anchor: `s${n}`, span_ids: [`s${n}`], at_ms: T0 + n,
        check: { id: `tone-${n}`, question: 'Was the agent rude?' },
        // the evidence of a long run: the record is past what a letter carries whole
        evidence: 'x'.repeat(400_000),
      });
      await new QuestionsRepo(db).handed([1, 2].map((n) => ({ task_id: `${run}-t${n}`, project: 'p1', run_id: run })));
      expect((await review.queries.getRun('p1', run))!.questions_pending).toBe(2);
      const letter: DeadLetter = { project: '', source: 'bus:neatroots.questions/neatroots.question', kind: 'message', reason: 'the findings window cannot be read', payload: [task(1), task(2)] };
      // as it reaches the review service over Kafka: cut to travel
      const topic = deadLetterTopic();
      const arrived = topic.decode(topic.encode(letter));
      expect(arrived.payload).toBeNull();
      expect(typeof arrived.payload_cut).toBe('string');
      await bus.publish(topic, [{ key: 'p1', value: arrived }]);
      await bus.idle();

      const listed = (await review.queries.listDeadLetters('p1')).items.filter((l) => l.source === letter.source && l.reason === letter.reason);
      expect(listed).toEqual([expect.objectContaining({ project: 'p1', kind: 'message', truncated: true })]);
      const page = (await review.queries.getRun('p1', run))!;
      expect(page.questions_pending).toBe(0);
      const why = 'the question service set this question aside after repeated failures: the findings window cannot be read';
      expect(page.not_checked.map((n) => [n.check_id, n.span_ids, n.reason]).sort()).toEqual([['tone-1', ['s1'], why], ['tone-2', ['s2'], why]]);
    } finally {
      await review.close();
      await bus.close();
    }
  });
});

describe('review service: acknowledging only what is stored', () => {
  it('subscribes with its consumer groups', async () => {
    const bus = new HandBus();
    const review = await startReview({ bus, db });
    expect(Object.fromEntries(bus.groups)).toEqual({
      [EVENTS_TOPIC.name]: REVIEW_GROUPS.events, [FINDINGS_TOPIC.name]: REVIEW_GROUPS.findings, [DELIVERIES_TOPIC.name]: REVIEW_GROUPS.deliveries,
      // what the buses set aside, stored in dead_letters
      'neatroots.dead-letters': REVIEW_GROUPS.deadLetters,
    });
    await review.close();
  });

  it('resolves a handler only after its batch is committed, retrying while the database fails', async () => {
    let failures = 3;
    const flaky: Db = {
      kind: db.kind,
      query: db.query.bind(db),
      exec: db.exec.bind(db),
      close: async () => undefined,
      transaction: <T>(fn: (tx: Queryable) => Promise<T>): Promise<T> => {
        if (failures > 0) {
          failures--;
          return Promise.reject(new Error('database unavailable'));
        }
        return db.transaction(fn);
      },
    };
    const bus = new HandBus();
    const errors: string[] = [];
    const review = await startReview({
      bus, db: flaky, heartbeatMs: 5, log: (msg) => errors.push(msg), writer: { flushMs: 1, retryBaseMs: 10 },
    });
    let acked = false;
    const handled = bus.deliver(EVENTS_TOPIC, [span('r9', 's1', T0)]).then(() => (acked = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(acked).toBe(false);
    expect((await review.queries.listRuns('p1')).items).toEqual([]);
    await handled;
    expect(failures).toBe(0); // tried three times, failing alike: logged once
    expect(errors).toEqual(['storing 1 items failed (attempt 1); retrying']);
    expect(bus.heartbeats).toBeGreaterThan(0);
    expect((await review.queries.listRuns('p1')).items.map((r) => r.run_id)).toEqual(['r9']);
    await review.close();
  });

  it('closed with no grace (the process failing), does not wait for a batch whose store keeps failing: it is not acknowledged', async () => {
    const down: Db = {
      kind: db.kind,
      query: db.query.bind(db),
      exec: db.exec.bind(db),
      close: async () => undefined,
      transaction: () => Promise.reject(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' })),
    };
    const bus = new WaitingBus();
    const review = await startReview({ bus, db: down, log: () => undefined, writer: { flushMs: 1, retryBaseMs: 10 }, closeGraceMs: 30_000 });
    let acked: boolean | undefined;
    const handled = bus.deliver(EVENTS_TOPIC, [span('r8', 's1', T0)]).then(() => (acked = true), () => (acked = false));
    await new Promise((r) => setTimeout(r, 50));
    const t0 = Date.now();
    await review.close({ graceMs: 0 }).catch(() => undefined);
    expect(Date.now() - t0).toBeLessThan(5_000); // not the 30 s grace
    await handled;
    expect(acked).toBe(false);
  });

  it('flushes what it holds on close', async () => {
    const bus = new HandBus();
    const review = await startReview({ bus, db, writer: { flushMs: 60_000 } });
    const handled = bus.deliver(FINDINGS_TOPIC, [raised('late')]);
    await review.close();
    await handled;
    expect((await review.queries.listFindings('p1')).items.map((f) => f.id)).toEqual(['late']);
  });
});
