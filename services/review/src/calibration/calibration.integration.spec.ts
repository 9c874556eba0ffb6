import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { Db } from '@neatroots/ports';
import { BullJobs, InlineJobs, migrate, openPglite, serviceOrSkip } from '@neatroots/platform';
import { checkSession, readFolder, recordedDecider, type Recorded } from '@neatroots/sop';
import { startSop } from '../sop/service';
import { Calibration, CALIBRATE_QUEUE } from './service';

/**
 * The sopops_calibrate job on BullMQ with a real Redis: the replica that takes the request
 * (the api's, over gRPC) only queues the job and waits; a replica with the job's worker fits
 * and stores. The labels are fixture sessions checked in-process, judged by a reviewer.
 */
const redis = serviceOrSkip('redis', 'sopops_calibrate on BullMQ');
const FIXTURES = path.resolve(__dirname, '../../../../libs/sop/fixtures');
const fixture = JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', 'phone-never-violated', 'session.json'), 'utf8'));
const recorded: Recorded = JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', 'phone-never-violated', 'decisions.json'), 'utf8'));
const prefix = `nr-calibrate-${process.pid}`;

(redis ? describe : describe.skip)('sopops_calibrate on BullMQ', () => {
  let db: Db;
  let inline: InlineJobs;
  const opened: BullJobs[] = [];
  const bull = () => {
    const j = new BullJobs({ url: redis!.url, prefix, closeGraceMs: 2_000 });
    opened.push(j);
    return j;
  };

  beforeAll(async () => {
    db = await openPglite();
    await migrate(db);
    inline = new InlineJobs();
    const sop = await startSop({
      db,
      jobs: inline,
      checkSession: ({ lock, releaseId, session, onDecision }) => {
        const p = Number((session.external_id ?? '').split('@')[1]);
        const base = recordedDecider(recorded);
        return checkSession(lock, session, { releaseId, onDecision, decider: { ...base, decide: async (q) => ((a) => (a.decided && q.kind === 'never' ? { ...a, probability: p } : a))(await base.decide(q)) } });
      },
    });
    await sop.queries.pushHead('luigis', [...readFolder(path.join(FIXTURES, 'luigis')).entries()].map(([f, text]) => ({ path: f, text })));
    await sop.queries.publish('luigis');
    const ids: string[] = [];
    for (const [i, p] of [0.91, 0.92, 0.93, 0.98, 0.99].entries()) ids.push((await sop.queries.receiveSession('luigis', { ...fixture, external_id: `call-8#${i}@${p}` })).id);
    for (let i = 0; i < 500; i++) {
      const waiting = await db.query<{ n: number }>(`SELECT (SELECT count(*) FROM sop_sessions WHERE status = 'queued') + (SELECT count(*) FROM sop_findings WHERE pattern_id IS NULL) AS n`);
      if (Number(waiting.rows[0].n) === 0) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const findings = (await Promise.all(ids.map((id) => sop.queries.getSession('luigis', id)))).map((v) => v.checks.flatMap((c) => c.rules).find((r) => r.finding)!);
    await sop.review.giveVerdict('luigis', findings[0].pattern_id!, { verdict: 'real' });
    for (const f of findings.slice(0, 3)) await sop.review.overrideFinding('luigis', f.finding_id!, { correct: false });
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled(opened.map((j) => j.close()));
    await inline.close();
    await db.close();
    const r = new Redis(redis!.url);
    try {
      const keys = await r.keys(`${prefix}:*`);
      if (keys.length) await r.del(...keys);
    } finally {
      r.disconnect();
    }
  });

  it('the api replica waits while the worker replica fits and stores; the answer is the job result', async () => {
    const worker = new Calibration({ db, jobs: bull() });
    await worker.start();
    const api = new Calibration({ db, jobs: bull() }); // queues and waits: no worker of its own

    const dry = await api.calibrate('luigis', { procedure: 'take-order', dry_run: true });
    expect(dry.procedures[0]).toMatchObject({ procedure_id: 'take-order', labels: 5, negative_labels: 3, saved: false, skipped: null });
    expect(dry.procedures[0].rules.find((r) => r.kind === 'never')!.after).toEqual([0.1, 0.955, 0.5]);

    const [a, b] = await Promise.all([api.calibrate('luigis', {}), api.calibrate('luigis', { procedure: 'take-order' })]);
    expect(a.procedures.find((p) => p.procedure_id === 'take-order')!.saved).toBe(true);
    expect(b.procedures[0].saved).toBe(true);
    // run one at a time (serialized by workspace): the second saw the first one's band as before
    const befores = [a.procedures.find((p) => p.procedure_id === 'take-order')!, b.procedures[0]].map((p) => p.rules.find((r) => r.kind === 'never')!.before[1]).sort();
    expect(befores).toEqual([0.9, 0.955]);
    expect((await db.query('SELECT band_yes FROM sop_calibration_bands')).rows).toEqual([{ band_yes: 0.955 }]);

    const q = new Queue(CALIBRATE_QUEUE, { connection: { url: redis!.url }, prefix });
    try {
      expect(await q.getCompletedCount()).toBe(3);
    } finally {
      await q.close();
    }
  });

  it('a refused body never reaches the queue', async () => {
    const api = new Calibration({ db, jobs: bull() });
    await expect(api.calibrate('luigis', { dry_run: 1 } as never)).rejects.toThrow('"dry_run" must be true or false, got 1');
  });
});
