import type { Db } from '@neatroots/ports';
import { endEnv, finding, spanEnv, startEnv, T0 } from './fixtures.test';
import { FindingsRepo } from './findings.repo';
import { QuestionsRepo } from './questions.repo';
import { RunsRepo } from './runs.repo';
import { StoreInputError } from './sql';
import { openTestDb, resetDb } from './test-db.test';

let db: Db;
let runs: RunsRepo;

beforeAll(async () => {
  db = await openTestDb();
  runs = new RunsRepo(db);
}, 60_000);
afterAll(() => db.close());
beforeEach(() => resetDb(db));

describe('RunsRepo.writeEnvelopes', () => {
  it('records a run from run_start, spans and run_end', async () => {
    await runs.writeEnvelopes([
      startEnv('p1', { run_id: 'r1', workflow: 'refund-agent', session_id: 'sess', system_prompt: 'be nice', ts_ms: T0 }),
      spanEnv('p1', { run_id: 'r1', span_id: 's2', start_ms: T0 + 20, usage: { total_tokens: 30 } }),
      spanEnv('p1', { run_id: 'r1', span_id: 's1', start_ms: T0 + 10, status: 'error', error: 'timeout' }),
      spanEnv('p1', { run_id: 'r1', span_id: 's3', type: 'llm', name: 'chat', usage: { input_tokens: 5, output_tokens: 7 } }),
      endEnv('p1', { run_id: 'r1', status: 'ok', final_output: { answer: 'done' }, ts_ms: T0 + 500 }, T0 + 600),
    ]);
    const d = await runs.detail('p1', 'r1');
    expect(d).not.toBeNull();
    expect(d!.run).toMatchObject({
      project: 'p1', run_id: 'r1', workflow: 'refund-agent', session_id: 'sess',
      started_at: new Date(T0).toISOString(), ended_at: new Date(T0 + 500).toISOString(), end_status: 'ok',
      final_output: { answer: 'done' }, span_count: 3, error_count: 1, total_tokens: 42,
      last_seen_at: new Date(T0 + 600).toISOString(), open_findings: 0,
    });
    expect(d!.run.run_start).toMatchObject({ system_prompt: 'be nice' });
    // by start_ms, the span without one last
    expect(d!.spans.map((s) => s.span_id)).toEqual(['s1', 's2', 's3']);
    expect(d!.spans[0]).toMatchObject({ status: 'error', error: 'timeout' });
  });

  it('lists the questions no model answered on the run, less those answered since', async () => {
    await runs.writeEnvelopes([startEnv('p1', { run_id: 'r1', ts_ms: T0 }), spanEnv('p1', { run_id: 'r1', span_id: 's1', start_ms: T0 })]);
    const notChecked = (reason: string) => ({ status: 'not_checked' as const, flagged: false, reason });
    const answered = { status: 'answered' as const, flagged: false, probability: 0.1, answered_by: 'local' };
    await new QuestionsRepo(db).record([
      // asked about s1, timed out, asked again and answered: not listed
      { task_id: 't1', project: 'p1', run_id: 'r1', check_id: 'q-span', anchor: 's1', span_ids: ['s1'], answer: notChecked('timeout'), at_ms: T0 + 10 },
      { task_id: 't2', project: 'p1', run_id: 'r1', check_id: 'q-span', anchor: 's1', span_ids: ['s1'], answer: answered, at_ms: T0 + 20 },
      // the run's question, never answered
      { task_id: 't3', project: 'p1', run_id: 'r1', check_id: 'q-run', anchor: 'run', span_ids: [], answer: notChecked('the model gave a malformed answer'), at_ms: T0 + 30 },
      // another run's
      { task_id: 't4', project: 'p1', run_id: 'r2', check_id: 'q-run', anchor: 'run', span_ids: [], answer: notChecked('timeout'), at_ms: T0 + 30 },
    ] as never);
    const d = await runs.detail('p1', 'r1');
    expect(d!.not_checked).toEqual([{ check_id: 'q-run', anchor: 'run', span_ids: [], reason: 'the model gave a malformed answer', at: new Date(T0 + 30).toISOString() }]);
  });

  it('replaces a re-exported span and never counts it twice', async () => {
    await runs.writeEnvelopes([
      spanEnv('p1', { run_id: 'r1', span_id: 's1', start_ms: T0, status: 'error', error: 'x', usage: { total_tokens: 10 } }),
      spanEnv('p1', { run_id: 'r1', span_id: 's2', start_ms: T0 + 1, usage: { total_tokens: 5 } }),
      // the same export twice in one batch
      spanEnv('p1', { run_id: 'r1', span_id: 's2', start_ms: T0 + 1, usage: { total_tokens: 5 } }),
    ]);
    // a retry of the first span, now successful, in a later batch; and the whole batch redelivered
    await runs.writeEnvelopes([
      spanEnv('p1', { run_id: 'r1', span_id: 's1', start_ms: T0, status: 'ok', output: 'fine', usage: { total_tokens: 12 } }),
    ]);
    await runs.writeEnvelopes([
      spanEnv('p1', { run_id: 'r1', span_id: 's1', start_ms: T0, status: 'ok', output: 'fine', usage: { total_tokens: 12 } }),
    ]);
    const d = await runs.detail('p1', 'r1');
    expect(d!.run).toMatchObject({ span_count: 2, error_count: 0, total_tokens: 17 });
    expect(d!.spans.find((s) => s.span_id === 's1')).toMatchObject({ status: 'ok', output: 'fine' });
  });

  it('counts a span once when its batch is redelivered, whole or with new spans beside it', async () => {
    const first = [
      startEnv('p1', { run_id: 'r1', workflow: 'wf', ts_ms: T0 }),
      spanEnv('p1', { run_id: 'r1', span_id: 's1', start_ms: T0 + 1, status: 'error', error: 'x', usage: { total_tokens: 10 } }),
      spanEnv('p1', { run_id: 'r1', span_id: 's2', start_ms: T0 + 2, usage: { total_tokens: 5 } }),
      spanEnv('p1', { run_id: 'r2', span_id: 's1', start_ms: T0 + 3, usage: { total_tokens: 1 } }),
    ];
    // the consumer crashed before committing: the batch again, then a later one that carries
    // one of its spans again beside new ones, itself delivered twice
    const later = [first[2], spanEnv('p1', { run_id: 'r1', span_id: 's3', start_ms: T0 + 4, status: 'error', usage: { total_tokens: 7 } })];
    for (const batch of [first, first, later, later]) await runs.writeEnvelopes(batch);
    const counters = async (run: string) => {
      const r = await runs.get('p1', run);
      return { span_count: r!.span_count, error_count: r!.error_count, total_tokens: r!.total_tokens };
    };
    expect(await counters('r1')).toEqual({ span_count: 3, error_count: 2, total_tokens: 22 });
    expect(await counters('r2')).toEqual({ span_count: 1, error_count: 0, total_tokens: 1 });
    // and they agree with the spans stored
    const stored = await db.query<{ n: unknown }>(`SELECT count(*) AS n FROM spans WHERE project = 'p1' AND run_id = 'r1'`);
    expect(Number(stored.rows[0].n)).toBe(3);
    expect((await runs.spans('p1', 'r1'))!.items.map((s) => s.span_id)).toEqual(['s1', 's2', 's3']);
  });

  it('keeps run_start as the authority on workflow once it arrived, and the earliest start', async () => {
    await runs.writeEnvelopes([spanEnv('p1', { run_id: 'r1', span_id: 's1', start_ms: T0 + 100, workflow: 'from-span' }, T0 + 200)]);
    expect((await runs.get('p1', 'r1'))!.workflow).toBe('from-span');
    await runs.writeEnvelopes([startEnv('p1', { run_id: 'r1', workflow: 'from-start', ts_ms: T0 + 50 }, T0 + 300)]);
    await runs.writeEnvelopes([spanEnv('p1', { run_id: 'r1', span_id: 's2', start_ms: T0 + 150, workflow: 'other' }, T0 + 400)]);
    const r = await runs.get('p1', 'r1');
    expect(r).toMatchObject({ workflow: 'from-start', started_at: new Date(T0 + 50).toISOString(), span_count: 2 });
    expect(r!.last_seen_at).toBe(new Date(T0 + 400).toISOString());
  });

  it('keeps projects apart', async () => {
    await runs.writeEnvelopes([spanEnv('p1', { run_id: 'r1', span_id: 's1' }), spanEnv('p2', { run_id: 'r1', span_id: 's1' })]);
    expect((await runs.list('p1')).items).toHaveLength(1);
    expect((await runs.list('p2')).items).toHaveLength(1);
    expect(await runs.get('p3', 'r1')).toBeNull();
    expect(await runs.detail('p3', 'r1')).toBeNull();
  });

  it('stores text with NUL characters instead of failing the batch', async () => {
    await runs.writeEnvelopes([spanEnv('p1', { run_id: 'r1', span_id: 's\u0000', output: 'a\u0000b' })]);
    const d = await runs.detail('p1', 'r1');
    expect(d!.spans[0].output).toBe('a\uFFFDb');
  });

  it('writes large batches in several statements', async () => {
    const envs = Array.from({ length: 4203 }, (_, i) => spanEnv('p1', { run_id: `r${i % 7}`, span_id: `s${i}`, start_ms: T0 + i }));
    await runs.writeEnvelopes(envs);
    const page = await runs.list('p1', { limit: 10 });
    expect(page.items.reduce((n, r) => n + r.span_count, 0)).toBe(4203);
  });
});

describe('RunsRepo: a tool call traced at several layers', () => {
  // One failed MCP call: the framework's execute_tool span, the MCP client's under it, the server's under that.
  const root = { run_id: 'r1', span_id: 'root', type: 'agent' as const, name: 'invoke_agent' };
  const framework = { run_id: 'r1', span_id: 'et', parent_id: 'root', type: 'tool' as const, tool: 'search_docs', status: 'error' as const, error: 'down' };
  const client = { run_id: 'r1', span_id: 'cl', parent_id: 'et', type: 'mcp_tool' as const, tool: 'search_docs', status: 'error' as const, error: 'tool_error' };
  const server = { run_id: 'r1', span_id: 'sv', parent_id: 'cl', type: 'mcp_tool' as const, tool: 'search_docs', status: 'error' as const, error: 'tool_error' };
  const counts = async () => {
    const r = (await runs.get('p1', 'r1'))!;
    return { span_count: r.span_count, error_count: r.error_count, stored_span_count: r.stored_span_count };
  };
  const orders = [
    [framework, client, server], [framework, server, client], [client, framework, server],
    [client, server, framework], [server, framework, client], [server, client, framework],
  ];

  it.each(orders.map((o) => [o.map((s) => s.span_id).join(', '), o]))('counts it once whatever order its layers arrive in (%s), one batch each', async (_order, layers) => {
    await runs.writeEnvelopes([spanEnv('p1', root)]);
    for (const s of layers) await runs.writeEnvelopes([spanEnv('p1', s)]);
    expect(await counts()).toEqual({ span_count: 2, error_count: 1, stored_span_count: 4 });
    // the list says the same, and the run's pages hold every layer
    expect((await runs.list('p1', {})).items[0]).toMatchObject({ span_count: 2, error_count: 1, stored_span_count: 4 });
    expect((await runs.spans('p1', 'r1'))!.items).toHaveLength(4);
  });

  it('counts it once in one batch, redelivered, and beside a second call of the tool', async () => {
    const batch = [root, server, client, framework].map((s) => spanEnv('p1', s));
    await runs.writeEnvelopes(batch);
    await runs.writeEnvelopes(batch);
    expect(await counts()).toEqual({ span_count: 2, error_count: 1, stored_span_count: 4 });
    // A second call of the same tool beside it (a sibling under the root), traced at two layers, succeeding.
    await runs.writeEnvelopes([
      spanEnv('p1', { ...client, span_id: 'cl2', parent_id: 'et2', status: 'ok', error: undefined }),
      spanEnv('p1', { ...framework, span_id: 'et2', status: 'ok', error: undefined }),
    ]);
    expect(await counts()).toEqual({ span_count: 3, error_count: 1, stored_span_count: 6 });
  });

  it('counts it again when a layer is re-exported with another status', async () => {
    await runs.writeEnvelopes([root, framework, client, server].map((s) => spanEnv('p1', s)));
    // The framework's span re-exported: it succeeded after all (the layers under it still failed): one failed call still.
    await runs.writeEnvelopes([spanEnv('p1', { ...framework, status: 'ok', error: undefined })]);
    expect(await counts()).toEqual({ span_count: 2, error_count: 1, stored_span_count: 4 });
    // Then the server's too: the client's failure is the call's.
    await runs.writeEnvelopes([spanEnv('p1', { ...server, status: 'ok', error: undefined })]);
    expect(await counts()).toEqual({ span_count: 2, error_count: 1, stored_span_count: 4 });
    await runs.writeEnvelopes([spanEnv('p1', { ...client, status: 'ok', error: undefined })]);
    expect(await counts()).toEqual({ span_count: 2, error_count: 0, stored_span_count: 4 });
  });

  it('counts again a run whose layer a batch moves while it brings another, beside a run the batch counts as it goes', async () => {
    await runs.writeEnvelopes([root, framework, client].map((s) => spanEnv('p1', s)));
    expect(await counts()).toEqual({ span_count: 2, error_count: 1, stored_span_count: 3 });
    // One batch: the client's span re-exported under the root (no longer a layer of the framework's
    // call), the server's new under it, and a second run's call traced at two layers.
    await runs.writeEnvelopes([
      spanEnv('p1', { ...client, parent_id: 'root' }),
      spanEnv('p1', server),
      spanEnv('p1', { ...framework, run_id: 'r2' }),
      spanEnv('p1', { ...client, run_id: 'r2' }),
    ]);
    // r1: the framework's call, and the client's with the server's layer under it (both failed)
    expect(await counts()).toEqual({ span_count: 3, error_count: 2, stored_span_count: 4 });
    expect(await runs.get('p1', 'r2')).toMatchObject({ span_count: 1, error_count: 1, stored_span_count: 2 });
    // the same batch again changes nothing
    await runs.writeEnvelopes([spanEnv('p1', { ...client, parent_id: 'root' }), spanEnv('p1', server)]);
    expect(await counts()).toEqual({ span_count: 3, error_count: 2, stored_span_count: 4 });
  });

  it('keeps two calls of different tools, one inside the other, two calls', async () => {
    await runs.writeEnvelopes([
      spanEnv('p1', root),
      spanEnv('p1', { ...framework, span_id: 'outer', tool: 'research' }),
      spanEnv('p1', { ...framework, parent_id: 'outer' }),
    ]);
    expect(await counts()).toEqual({ span_count: 3, error_count: 2, stored_span_count: 3 });
  });
});

describe('RunsRepo.expireSpans (retention)', () => {
  const DAY = 24 * 60 * 60_000;
  async function fleet(): Promise<void> {
    // r-old: started and last seen 41 days before T0; r-long: started 40 days before, still seen 1 day before; r-new: 1 day before.
    await runs.writeEnvelopes([
      startEnv('p1', { run_id: 'r-old', ts_ms: T0 - 41 * DAY }, T0 - 41 * DAY),
      spanEnv('p1', { run_id: 'r-old', span_id: 's1', start_ms: T0 - 41 * DAY, status: 'error', error: 'x' }, T0 - 41 * DAY),
      spanEnv('p1', { run_id: 'r-old', span_id: 's2', start_ms: T0 - 41 * DAY }, T0 - 41 * DAY),
      startEnv('p1', { run_id: 'r-long', ts_ms: T0 - 40 * DAY }, T0 - 40 * DAY),
      spanEnv('p1', { run_id: 'r-long', span_id: 's1', start_ms: T0 - DAY }, T0 - DAY),
      startEnv('p2', { run_id: 'r-new', ts_ms: T0 - DAY }, T0 - DAY),
      spanEnv('p2', { run_id: 'r-new', span_id: 's1', start_ms: T0 - DAY }, T0 - DAY),
    ]);
    await new FindingsRepo(db).apply([finding({ id: 'f-old', run_id: 'r-old', span_ids: ['s1'] })]);
    const questions = new QuestionsRepo(db);
    for (const run_id of ['r-old', 'r-long']) {
      await questions.record([{ task_id: `t-${run_id}`, project: 'p1', run_id, check_id: 'q', anchor: 'run', span_ids: [], answer: { status: 'not_checked', flagged: false, reason: 'timeout' }, at_ms: T0 - 35 * DAY }] as never);
    }
  }

  it('deletes the spans of runs started and last seen before the cutoff, keeping the run, its counters and findings', async () => {
    await fleet();
    expect(await runs.expireSpans(T0 - 30 * DAY)).toEqual({ runs: 1, spans: 2 });
    const old = await runs.detail('p1', 'r-old');
    expect(old!.spans).toEqual([]);
    expect(old!.run).toMatchObject({ span_count: 2, error_count: 1, finding_count: 1 });
    expect(Date.parse(old!.run.spans_expired_at!)).toBeGreaterThan(Date.now() - 60_000);
    expect(old!.findings.map((f) => f.id)).toEqual(['f-old']);
    // Its question results went with its spans; the active run's stay.
    expect(old!.not_checked).toEqual([]);
    expect((await runs.detail('p1', 'r-long'))!.not_checked.map((n) => n.check_id)).toEqual(['q']);
    // A run that started before the cutoff but is still active keeps its spans, as does a recent one.
    expect((await runs.detail('p1', 'r-long'))!.spans).toHaveLength(1);
    expect((await runs.detail('p1', 'r-long'))!.run.spans_expired_at).toBeNull();
    expect((await runs.detail('p2', 'r-new'))!.spans).toHaveLength(1);
    // Done once: the next pass finds nothing, and lists still show the run.
    expect(await runs.expireSpans(T0 - 30 * DAY)).toEqual({ runs: 0, spans: 0 });
    expect((await runs.list('p1')).items.map((r) => [r.run_id, r.spans_expired_at !== null])).toEqual([['r-long', false], ['r-old', true]]);
  });

  it('takes a run again when spans came after its spans went, once they too are past the cutoff', async () => {
    await fleet();
    expect(await runs.expireSpans(T0 - 30 * DAY)).toEqual({ runs: 1, spans: 2 });
    // A late export of r-old, received after its spans went.
    const late = Date.now() + 60_000;
    await runs.writeEnvelopes([spanEnv('p1', { run_id: 'r-old', span_id: 's3', start_ms: T0 - 41 * DAY }, late)]);
    // Kept while it is newer than the cutoff (the pass takes the fleet's two other runs)...
    expect(await runs.expireSpans(late - DAY)).toEqual({ runs: 2, spans: 2 });
    expect((await runs.detail('p1', 'r-old'))!.spans.map((x) => x.span_id)).toEqual(['s3']);
    // ...and deleted once past it, the run marked again; later passes find nothing.
    expect(await runs.expireSpans(late + DAY)).toEqual({ runs: 1, spans: 1 });
    const old = await runs.detail('p1', 'r-old');
    expect(old!.spans).toEqual([]);
    expect(old!.run.span_count).toBe(3);
    expect(await runs.expireSpans(late + DAY)).toEqual({ runs: 0, spans: 0 });
  });

  it('takes a run again for a span received before its spans went but stored after (the writer behind)', async () => {
    await fleet();
    // Received a minute before the pass, stored after it (a bus backlog, the database down a while).
    const receivedBefore = Date.now() - 60_000;
    expect(await runs.expireSpans(T0 - 30 * DAY)).toEqual({ runs: 1, spans: 2 });
    await runs.writeEnvelopes([spanEnv('p1', { run_id: 'r-old', span_id: 's3', start_ms: T0 - 41 * DAY }, receivedBefore)]);
    expect((await runs.detail('p1', 'r-old'))!.spans.map((x) => x.span_id)).toEqual(['s3']);
    // Once it too is past the cutoff, it goes.
    await runs.expireSpans(Date.now() + DAY);
    expect((await runs.detail('p1', 'r-old'))!.spans).toEqual([]);
  });

  it('takes a run whose start, by its agent\'s clock, is in the future once it was last seen before the cutoff', async () => {
    // The agent's clock 400 days ahead (or microseconds sent as milliseconds): its start is
    // after the pass; it was received 40 days before it, and another 1 day before.
    const now = T0;
    for (const [run_id, seen] of [['r-ahead', now - 40 * DAY], ['r-ahead-live', now - DAY]] as const) {
      await runs.writeEnvelopes([
        startEnv('p1', { run_id, ts_ms: now + 400 * DAY }, seen),
        spanEnv('p1', { run_id, span_id: 's1', start_ms: now + 400 * DAY }, seen),
      ]);
    }
    expect(Date.parse((await runs.get('p1', 'r-ahead'))!.started_at)).toBe(now + 400 * DAY);
    expect(await runs.expireSpans(now - 30 * DAY, { now })).toEqual({ runs: 1, spans: 1 });
    expect((await runs.detail('p1', 'r-ahead'))!.spans).toEqual([]);
    expect((await runs.get('p1', 'r-ahead'))!.spans_expired_at).not.toBeNull();
    // Still receiving: kept, as any active run.
    expect((await runs.detail('p1', 'r-ahead-live'))!.spans).toHaveLength(1);
    expect(await runs.expireSpans(now - 30 * DAY, { now })).toEqual({ runs: 0, spans: 0 });
  });

  it('takes at most the runs asked for a statement, oldest first, and says when some are left', async () => {
    await fleet();
    expect(await runs.expireSpans(T0, { runs: 1 })).toEqual({ runs: 1, spans: 2, more: true });
    expect((await runs.detail('p1', 'r-old'))!.spans).toEqual([]);
    expect((await runs.detail('p2', 'r-new'))!.spans).toHaveLength(1);
    expect(await runs.expireSpans(T0, { runs: 5 })).toEqual({ runs: 2, spans: 2 });
  });

  it('takes runs until their spans reach the bound, and deletes a run over it over several calls, marked by the last', async () => {
    const old = T0 - 41 * DAY;
    const spans = (run_id: string, n: number) => Array.from({ length: n }, (_, i) => spanEnv('p1', { run_id, span_id: `s${i}`, start_ms: old + i }, old + i));
    // r-a and r-b fit a 10-span statement together (4 + 5); r-c (25) is over it alone; r-d after it.
    await runs.writeEnvelopes([...spans('r-a', 4), ...spans('r-b', 5), ...spans('r-c', 25), ...spans('r-d', 2)]);
    const expired = async () => (await runs.list('p1')).items.filter((r) => r.spans_expired_at !== null).map((r) => r.run_id).sort();
    expect(await runs.expireSpans(T0, { spans: 10 })).toEqual({ runs: 2, spans: 9, more: true });
    expect(await expired()).toEqual(['r-a', 'r-b']);
    expect(await runs.expireSpans(T0, { spans: 10 })).toEqual({ runs: 0, spans: 10, more: true });
    expect(await runs.expireSpans(T0, { spans: 10 })).toEqual({ runs: 0, spans: 10, more: true });
    // Its spans are not all gone yet: not marked, nothing to say they went.
    expect((await runs.get('p1', 'r-c'))!.spans_expired_at).toBeNull();
    expect(await runs.expireSpans(T0, { spans: 10 })).toEqual({ runs: 1, spans: 5, more: true });
    expect(await expired()).toEqual(['r-a', 'r-b', 'r-c']);
    expect(await runs.expireSpans(T0, { spans: 10 })).toEqual({ runs: 1, spans: 2 });
    expect((await runs.spans('p1', 'r-c'))!.items).toEqual([]);
    expect((await runs.get('p1', 'r-c'))!.span_count).toBe(25);
  });
});

describe('RunsRepo.list', () => {
  beforeEach(async () => {
    // r0 oldest ... r4 newest; r1 and r3 are support-agent runs
    await runs.writeEnvelopes(
      [0, 1, 2, 3, 4].map((i) => startEnv('p1', { run_id: `r${i}`, workflow: i % 2 ? 'support-agent' : 'refund-agent', ts_ms: T0 + i * 1000 })),
    );
  });

  it('lists newest first, page by page', async () => {
    const first = await runs.list('p1', { limit: 2 });
    expect(first.items.map((r) => r.run_id)).toEqual(['r4', 'r3']);
    expect(first.next_cursor).toEqual(expect.any(String));
    const second = await runs.list('p1', { limit: 2, cursor: first.next_cursor! });
    expect(second.items.map((r) => r.run_id)).toEqual(['r2', 'r1']);
    const third = await runs.list('p1', { limit: 2, cursor: second.next_cursor! });
    expect(third.items.map((r) => r.run_id)).toEqual(['r0']);
    expect(third.next_cursor).toBeNull();
  });

  it('orders runs started in the same millisecond by run_id and pages through them', async () => {
    await runs.writeEnvelopes(['a', 'b', 'c'].map((id) => startEnv('p2', { run_id: id, ts_ms: T0 })));
    const first = await runs.list('p2', { limit: 2 });
    const second = await runs.list('p2', { limit: 2, cursor: first.next_cursor! });
    expect([...first.items, ...second.items].map((r) => r.run_id)).toEqual(['c', 'b', 'a']);
  });

  it('pages through runs whose starts differ by less than a millisecond (the cursor keeps the exact start)', async () => {
    // Spans give starts to the fraction of a millisecond; the API shows milliseconds.
    await runs.writeEnvelopes(['a', 'b', 'c', 'd'].map((id, i) => startEnv('p3', { run_id: id, ts_ms: T0 + 0.2 * (i + 1) })));
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await runs.list('p3', { limit: 1, cursor });
      seen.push(...page.items.map((r) => r.run_id));
      cursor = page.next_cursor ?? undefined;
    } while (cursor && seen.length < 10);
    expect(seen).toEqual(['d', 'c', 'b', 'a']);
  });

  it('filters by workflow', async () => {
    const page = await runs.list('p1', { workflow: 'support-agent' });
    expect(page.items.map((r) => r.run_id)).toEqual(['r3', 'r1']);
  });

  it('filters by open findings, counting a group once and ignoring dismissed and quiet ones', async () => {
    const findings = new FindingsRepo(db);
    await findings.apply([
      finding({ id: 'f1', run_id: 'r2', check_id: 'a', group: 'loop' }),
      finding({ id: 'f2', run_id: 'r2', check_id: 'b', group: 'loop' }),
      finding({ id: 'f3', run_id: 'r2', check_id: 'c' }),
      finding({ id: 'f4', run_id: 'r0', check_id: 'c' }),
      finding({ id: 'f5', run_id: 'r1', check_id: 'c' }),
      finding({ id: 'f5', run_id: 'r1', check_id: 'c', status: 'resolved' }),
    ]);
    await findings.dismiss('p1', 'f4');
    const open = await runs.list('p1', { has_open_findings: true });
    expect(open.items.map((r) => [r.run_id, r.open_findings])).toEqual([['r2', 2]]);
    // what happened counts on the run after it resolved (r1); a dismissed one does not (r0)
    const all = await runs.list('p1');
    expect(all.items.map((r) => [r.run_id, r.open_findings, r.finding_count])).toEqual([
      ['r4', 0, 0], ['r3', 0, 0], ['r2', 2, 2], ['r1', 0, 1], ['r0', 0, 0],
    ]);
    const clean = await runs.list('p1', { has_open_findings: false });
    expect(clean.items.map((r) => r.run_id)).toEqual(['r4', 'r3', 'r1', 'r0']);
  });

  it('filters by session, end status (running: not ended) and start time, and pages within the filter', async () => {
    await runs.writeEnvelopes([
      startEnv('p4', { run_id: 'a', session_id: 's1', ts_ms: T0 }),
      endEnv('p4', { run_id: 'a', status: 'error', ts_ms: T0 + 10 }),
      startEnv('p4', { run_id: 'b', session_id: 's1', ts_ms: T0 + 1000 }),
      endEnv('p4', { run_id: 'b', status: 'ok', ts_ms: T0 + 1010 }),
      startEnv('p4', { run_id: 'c', session_id: 's2', ts_ms: T0 + 2000 }),
      startEnv('p4', { run_id: 'd', session_id: 's1', ts_ms: T0 + 3000 }),
    ]);
    const ids = async (q: Parameters<RunsRepo['list']>[1]) => (await runs.list('p4', q)).items.map((r) => r.run_id);
    expect(await ids({ session_id: 's1' })).toEqual(['d', 'b', 'a']);
    expect(await ids({ end_status: 'error' })).toEqual(['a']);
    expect(await ids({ end_status: 'running' })).toEqual(['d', 'c']);
    const iso = (ms: number) => new Date(ms).toISOString();
    expect(await ids({ from: iso(T0 + 1000), to: iso(T0 + 3000) })).toEqual(['c', 'b']);
    expect(await ids({ session_id: 's1', end_status: 'running', from: iso(T0) })).toEqual(['d']);
    const first = await runs.list('p4', { session_id: 's1', limit: 2 });
    expect(await ids({ session_id: 's1', limit: 2, cursor: first.next_cursor! })).toEqual(['a']);
    await expect(runs.list('p4', { from: 'yesterday' })).rejects.toBeInstanceOf(StoreInputError);
    await expect(runs.list('p4', { end_status: 'finished' as 'ok' })).rejects.toBeInstanceOf(StoreInputError);
  });

  it('rejects a cursor it did not make, and a bad limit', async () => {
    await expect(runs.list('p1', { cursor: 'nonsense' })).rejects.toBeInstanceOf(StoreInputError);
    await expect(runs.list('p1', { cursor: Buffer.from('["x","y"]').toString('base64url') })).rejects.toBeInstanceOf(StoreInputError);
    await expect(runs.list('p1', { limit: 0 })).rejects.toBeInstanceOf(StoreInputError);
    await expect(runs.list('p1', { limit: 501 })).rejects.toBeInstanceOf(StoreInputError);
  });
});

describe('RunsRepo.spans', () => {
  const ids = (spans: { span_id: string }[]) => spans.map((s) => s.span_id);

  it('orders spans by their exact start, then as they arrived, across batches', async () => {
    await runs.writeEnvelopes([
      spanEnv('p1', { run_id: 'r1', span_id: 'c', start_ms: T0 + 0.25 }),
      spanEnv('p1', { run_id: 'r1', span_id: 'a', start_ms: T0 + 0.5 }),
      spanEnv('p1', { run_id: 'r1', span_id: 'b', start_ms: T0 + 0.75 }),
      spanEnv('p1', { run_id: 'r1', span_id: 'z', start_ms: T0 + 2 }),
      spanEnv('p1', { run_id: 'r1', span_id: 'nostart' }),
    ]);
    // a later batch: received at the same millisecond, starting at the same time as z
    await runs.writeEnvelopes([spanEnv('p1', { run_id: 'r1', span_id: 'y', start_ms: T0 + 2 }), spanEnv('p1', { run_id: 'r1', span_id: 'x', start_ms: T0 + 2 })]);
    // a re-exported span keeps its place
    await runs.writeEnvelopes([spanEnv('p1', { run_id: 'r1', span_id: 'z', start_ms: T0 + 2, output: 'again' })]);
    const page = await runs.spans('p1', 'r1');
    expect(ids(page!.items)).toEqual(['c', 'a', 'b', 'z', 'y', 'x', 'nostart']);
    expect(page!.items[3].output).toBe('again');
    expect(page!.next_cursor).toBeNull();
    // the payload keeps the start as given
    expect(page!.items[0].start_ms).toBe(T0 + 0.25);
  });

  it('pages through a run in order, spans without a start included, and stops', async () => {
    await runs.writeEnvelopes([
      ...Array.from({ length: 9 }, (_, i) => spanEnv('p1', { run_id: 'r1', span_id: `s${i}`, start_ms: T0 + Math.floor(i / 3) })),
      spanEnv('p1', { run_id: 'r1', span_id: 'n1' }),
      spanEnv('p1', { run_id: 'r1', span_id: 'n2' }),
      spanEnv('p1', { run_id: 'other', span_id: 'o1', start_ms: T0 }),
    ]);
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await runs.spans('p1', 'r1', { limit: 4, cursor });
      expect(page!.items.length).toBeLessThanOrEqual(4);
      seen.push(...ids(page!.items));
      cursor = page!.next_cursor ?? undefined;
      pages++;
    } while (cursor);
    expect(seen).toEqual(['s0', 's1', 's2', 's3', 's4', 's5', 's6', 's7', 's8', 'n1', 'n2']);
    expect(pages).toBe(3);
  });

  it('gives the run page its first 500 spans and a cursor for the rest', async () => {
    await runs.writeEnvelopes(Array.from({ length: 501 }, (_, i) => spanEnv('p1', { run_id: 'r1', span_id: `s${i}`, start_ms: T0 + i })));
    const d = await runs.detail('p1', 'r1');
    expect(d!.run.span_count).toBe(501);
    expect(d!.spans).toHaveLength(500);
    const rest = await runs.spans('p1', 'r1', { cursor: d!.spans_next_cursor! });
    expect(ids(rest!.items)).toEqual(['s500']);
    expect(rest!.next_cursor).toBeNull();
  });

  it('stops a page at its bytes before its limit, saying so, and goes on from there; a span larger than them comes alone', async () => {
    const out = (n: number) => 'o'.repeat(n);
    await runs.writeEnvelopes([
      ...Array.from({ length: 6 }, (_, i) => spanEnv('p1', { run_id: 'r1', span_id: `s${i}`, start_ms: T0 + i, output: out(1_000) })),
      spanEnv('p1', { run_id: 'r1', span_id: 'huge', start_ms: T0 + 6, output: out(10_000) }),
      spanEnv('p1', { run_id: 'r1', span_id: 'last', start_ms: T0 + 7, output: out(1_000) }),
    ]);
    const bytes = (s: object) => Buffer.byteLength(JSON.stringify(s));
    const all = (await runs.spans('p1', 'r1'))!;
    expect(all.cut_at_bytes).toBeUndefined();
    const size = bytes(all.items[0]);
    // Room for two and a half spans of 1,000: two a page, then the large one alone, then the last.
    const budget = Math.floor(size * 2.5);
    const pages: { ids: string[]; cut?: number; bytes: number }[] = [];
    let cursor: string | undefined;
    do {
      const page = (await runs.spans('p1', 'r1', { limit: 10, cursor }, budget))!;
      pages.push({ ids: ids(page.items), cut: page.cut_at_bytes, bytes: page.items.reduce((n, s) => n + bytes(s), 0) });
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    expect(pages.map((p) => [p.ids, p.cut])).toEqual([
      [['s0', 's1'], budget],
      [['s2', 's3'], budget],
      [['s4', 's5'], budget],
      [['huge'], budget],
      [['last'], undefined],
    ]);
    expect(pages.slice(0, 3).every((p) => p.bytes <= budget)).toBe(true);
    // The limit reached first is no cut: the page says nothing.
    const two = (await runs.spans('p1', 'r1', { limit: 2 }, budget))!;
    expect([ids(two.items), two.cut_at_bytes, two.next_cursor]).toEqual([['s0', 's1'], undefined, expect.any(String)]);
    // The run page is cut the same way, and asked for fewer spans gives those.
    const d = (await runs.detail('p1', 'r1', { spans_limit: 3 }))!;
    expect([ids(d.spans), d.spans_cut_at_bytes]).toEqual([['s0', 's1', 's2'], undefined]);
    expect((await runs.spans('p1', 'r1', { cursor: d.spans_next_cursor! }))!.items[0].span_id).toBe('s3');
    expect('spans_cut_at_bytes' in (await runs.detail('p1', 'r1'))!).toBe(false);
    await expect(runs.detail('p1', 'r1', { spans_limit: 0 })).rejects.toBeInstanceOf(StoreInputError);
  });

  it('is null for an unknown run, empty for a run without spans, and refuses bad arguments', async () => {
    await runs.writeEnvelopes([startEnv('p1', { run_id: 'r1', ts_ms: T0 })]);
    expect(await runs.spans('p1', 'nope')).toBeNull();
    expect(await runs.spans('p2', 'r1')).toBeNull();
    expect(await runs.spans('p1', 'r1')).toEqual({ items: [], next_cursor: null });
    await expect(runs.spans('p1', 'r1', { limit: 2001 })).rejects.toBeInstanceOf(StoreInputError);
    await expect(runs.spans('p1', 'r1', { cursor: 'nonsense' })).rejects.toBeInstanceOf(StoreInputError);
    await expect(runs.spans('p1', 'r\u0000')).rejects.toBeInstanceOf(StoreInputError);
    await expect(runs.list('p1', { workflow: 'a\u0000' })).rejects.toBeInstanceOf(StoreInputError);
  });
});
