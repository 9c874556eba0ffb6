import type { Db } from '@neatroots/ports';
import { migrate, openPglite, serviceOrSkip } from '@neatroots/platform';
import { SopSessionsRepo, sopFindingId } from '@neatroots/store';
import { Queue } from 'bullmq';
import { bullReplicas } from '../bull-replicas.test';
import { RECLUSTER_DAILY_QUEUE, RECLUSTER_QUEUE, type ReclusterResult } from './recluster';
import { ReviewSop } from './service';

/**
 * The recluster jobs on BullMQ, on the real Redis (the distributed deployment): the daily
 * sopops_recluster_daily job is one repeatable job however many replicas start; a replica
 * started with another SOPOPS_RECLUSTER_CRON replaces it; the daily pass queues a
 * sopops_recluster run per workspace, and the endpoint's run comes back through the queue.
 */
const redis = serviceOrSkip('redis', 'sopops recluster jobs on BullMQ');
const prefix = `rc-test-${process.pid}-${Date.now()}`;

async function schedulers(): Promise<{ key: string; pattern?: string | null }[]> {
  const q = new Queue(RECLUSTER_DAILY_QUEUE, { connection: { url: redis!.url }, prefix });
  try {
    return (await q.getJobSchedulers()).map((s) => ({ key: s.key, pattern: s.pattern }));
  } finally {
    await q.close();
  }
}

(redis ? describe : describe.skip)('recluster jobs on BullMQ', () => {
  let db: Db;
  const { replica, replicas, close: closeReplicas } = bullReplicas(redis?.url ?? '', prefix);

  beforeAll(async () => {
    db = await openPglite();
    await migrate(db);
  }, 60_000);
  afterAll(async () => {
    await closeReplicas();
    await db.close();
  });

  it('registers the daily job once however many replicas start, on SOPOPS_RECLUSTER_CRON', async () => {
    for (let i = 0; i < 3; i++) await new ReviewSop({ db, jobs: replica() }).start();
    expect(await schedulers()).toEqual([{ key: 'sopops_recluster_daily', pattern: '0 6 * * *' }]);
    await new ReviewSop({ db, jobs: replica(), reclusterCron: '30 5 * * *' }).start();
    expect(await schedulers()).toEqual([{ key: 'sopops_recluster_daily', pattern: '30 5 * * *' }]);
    await expect(new ReviewSop({ db, jobs: replica(), reclusterCron: '0 25 * * *' }).start()).rejects.toThrow(/cron pattern "0 25 \* \* \*"/);
  }, 30_000);

  it('the daily pass queues a recluster per workspace; a recluster asked for runs through the queue', async () => {
    const sessions = new SopSessionsRepo(db);
    for (let i = 1; i <= 8; i++) {
      const r = await sessions.receive('luigis', { external_id: `call-${i}`, agent: 'a', release_id: null, started_at: null, transcript_ref: null, turns: [{ role: 'agent', text: 'hi' }], tool_calls: [] });
      const rule = { procedure_id: 'take-order', rule_id: 'never-price', kind: 'never' as const, index: 1, text: 'Volunteer a price.', status: 'violated' as const, evidence: [], reason: null };
      await sessions.saveOutcome(r.id, r.content_hash, { release_id: null, result: 'deviated', checked_result: 'deviated', checks: [{ procedure_id: 'take-order', result: 'deviated', checked_result: 'deviated', body: {} }], findings: [{ id: sopFindingId(r.id, 'take-order', 'never-price'), ...rule }] });
    }
    const jobs = replicas[0];
    // Asked for (the endpoint): assigns the 8 findings, and says no model could split them.
    expect(await jobs.run<unknown, ReclusterResult>(RECLUSTER_QUEUE, { workspace: 'luigis', by: 'request' }, { timeoutMs: 20_000 })).toEqual({
      assigned: 8,
      reclustered: 0,
      themed: 0,
      reason: 'no reasoning model is configured: 1 rule due for a split stays whole, and themes were not grouped',
    });
    expect(await jobs.run(RECLUSTER_DAILY_QUEUE, {}, { timeoutMs: 20_000 })).toEqual({ queued: 1 });
  }, 60_000);
});
