import { migrate, openPostgres, scratchDatabase, serviceOrSkip, type ScratchDatabase } from '@neatroots/platform';
import type { Db } from '@neatroots/ports';
import { RunsRepo } from '@neatroots/store';
import type { Envelope } from '@neatroots/spans';
import { Queue } from 'bullmq';
import { bullReplicas } from './bull-replicas.test';
import { RETENTION_QUEUE, scheduleRetention } from './retention';

/**
 * Span retention in the distributed deployment: the repeatable job on BullMQ with the real
 * Redis, registered once however many review replicas start, deleting on the real Postgres.
 */
const SUITE = 'span retention on BullMQ and Postgres';
const redis = serviceOrSkip('redis', SUITE);
const pg = serviceOrSkip('postgres', SUITE);
const prefix = `ret-test-${process.pid}-${Date.now()}`;
const DAY = 24 * 60 * 60_000;

(redis && pg ? describe : describe.skip)(SUITE, () => {
  let scratch: ScratchDatabase;
  let db: Db;
  const { replica, close: closeReplicas } = bullReplicas(redis?.url ?? '', prefix);

  beforeAll(async () => {
    scratch = await scratchDatabase(pg!.url, `retention_${process.pid}_${Date.now().toString(36)}`);
    db = await openPostgres({ url: scratch.url, max: 4 });
    await migrate(db);
  }, 60_000);
  afterAll(async () => {
    await closeReplicas();
    await db?.close();
    await scratch?.drop();
  });

  it('is one job scheduler for three replicas, and the job deletes the old runs\' spans in Postgres', async () => {
    const old = Date.now() - 45 * DAY;
    const recent = Date.now() - DAY;
    const envs: Envelope[] = [];
    for (const [run_id, at] of [['old', old], ['recent', recent]] as const) {
      envs.push({ project: 'p', received_ms: at, item: { kind: 'run_start', run: { event: 'run_start', run_id, ts_ms: at } } });
      for (let i = 0; i < 4; i++) envs.push({ project: 'p', received_ms: at, item: { kind: 'span', span: { run_id, span_id: `s${i}`, type: 'tool', name: 'search', tool: 'search', status: 'ok', start_ms: at + i } } });
    }
    const runs = new RunsRepo(db);
    await runs.writeEnvelopes(envs);

    const replicas = [replica(), replica(), replica()];
    for (const jobs of replicas) await scheduleRetention(jobs, '23 * * * *', { db, days: 30 });
    const q = new Queue(RETENTION_QUEUE, { connection: { url: redis!.url }, prefix });
    try {
      expect((await q.getJobSchedulers()).map((s) => ({ key: s.key, pattern: s.pattern }))).toEqual([{ key: 'neatroots_span_retention', pattern: '23 * * * *' }]);
    } finally {
      await q.close();
    }
    // The pass as the scheduler starts it, taken by whichever replica is free.
    expect(await replicas[0].run(RETENTION_QUEUE, {}, { timeoutMs: 30_000 })).toEqual({ runs: 1, spans: 4, dead_letters: 0, more: false });
    expect((await runs.detail('p', 'old'))!.spans).toEqual([]);
    expect((await runs.detail('p', 'old'))!.run).toMatchObject({ span_count: 4, spans_expired_at: expect.any(String) });
    expect((await runs.detail('p', 'recent'))!.spans).toHaveLength(4);
  }, 60_000);

  it('deletes a run of many spans in statements of a bounded number of spans on Postgres, marking it by the last', async () => {
    const at = Date.now() - 40 * DAY;
    const envs: Envelope[] = [{ project: 'p', received_ms: at, item: { kind: 'run_start', run: { event: 'run_start', run_id: 'big', ts_ms: at } } }];
    for (let i = 0; i < 250; i++) envs.push({ project: 'p', received_ms: at, item: { kind: 'span', span: { run_id: 'big', span_id: `s${i}`, type: 'llm', name: 'chat', status: 'ok', start_ms: at + i } } });
    const runs = new RunsRepo(db);
    await runs.writeEnvelopes(envs);
    expect(await runs.expireSpans(Date.now() - 30 * DAY, { spans: 100 })).toEqual({ runs: 0, spans: 100, more: true });
    expect((await runs.get('p', 'big'))!.spans_expired_at).toBeNull();
    expect(await runs.expireSpans(Date.now() - 30 * DAY, { spans: 100 })).toEqual({ runs: 0, spans: 100, more: true });
    expect(await runs.expireSpans(Date.now() - 30 * DAY, { spans: 100 })).toEqual({ runs: 1, spans: 50 });
    expect((await runs.detail('p', 'big'))!.spans).toEqual([]);
    expect((await runs.get('p', 'big'))!.spans_expired_at).toEqual(expect.any(String));
  }, 60_000);
});
