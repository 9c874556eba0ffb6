import { Queue } from 'bullmq';
import type { Db } from '@neatroots/ports';
import { InlineJobs, migrate, openPglite, serviceOrSkip } from '@neatroots/platform';
import { bullReplicas } from '../bull-replicas.test';
import { startSop } from '../sop/service';
import { calibrationChecker, labelForCalibration } from './labels.test';
import { Calibration, CALIBRATE_QUEUE } from './service';

/**
 * The sopops_calibrate job on BullMQ with a real Redis: the replica that takes the request
 * (the api's, over gRPC) only queues the job and waits; a replica with the job's worker fits
 * and stores. The labels are fixture sessions checked in-process, judged by a reviewer.
 */
const redis = serviceOrSkip('redis', 'sopops_calibrate on BullMQ');
const prefix = `nr-calibrate-${process.pid}`;

(redis ? describe : describe.skip)('sopops_calibrate on BullMQ', () => {
  let db: Db;
  let inline: InlineJobs;
  const { replica: bull, close: closeReplicas } = bullReplicas(redis?.url ?? '', prefix, 2_000);

  beforeAll(async () => {
    db = await openPglite();
    await migrate(db);
    inline = new InlineJobs();
    const sop = await startSop({ db, jobs: inline, checkSession: calibrationChecker });
    await labelForCalibration(sop, db);
  }, 60_000);

  afterAll(async () => {
    await closeReplicas();
    await inline.close();
    await db.close();
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
