import type { Db } from '@neatroots/ports';
import { InlineJobs, migrate, openPglite } from '@neatroots/platform';
import { SopError } from '@neatroots/store';
import { Calibration } from '../calibration/service';
import { waitedFor } from './still-running';

/**
 * A request that waits for its job says when the job outlived the wait (504 still_running, the
 * job going on) instead of failing with a bare internal error. Recluster: recluster.spec.ts and
 * the api's review.controller.spec.ts; calibration here, with no process taking its job (a
 * distributed api whose workers are all down).
 */
let db: Db;
let jobs: InlineJobs;
beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  jobs = new InlineJobs();
}, 60_000);
afterAll(async () => {
  await jobs.close();
  await db.close();
});

it('a calibration nobody takes up within the wait answers 504 still_running, saying what happens to it', async () => {
  const calibration = new Calibration({ db, jobs, timeoutMs: 150 });
  await expect(calibration.calibrate('luigis', {})).rejects.toMatchObject({
    status: 504,
    code: 'still_running',
    message: 'the calibration of luigis is still running after 150 ms: it goes on; its bands are stored when it is done',
  });
  await expect(calibration.calibrate('luigis', { dry_run: true })).rejects.toMatchObject({ message: expect.stringMatching(/it is a dry run: nothing is stored$/) });
  // a refused body is refused at once, never waited for
  await expect(calibration.calibrate('luigis', { dryrun: true } as never)).rejects.toMatchObject({ status: 400, code: 'invalid_body' });
});

it('passes any other failure through as it is, and says minutes for a long wait', async () => {
  const boom = new SopError(409, 'busy', 'no');
  await expect(waitedFor('x', 10, 'y', () => Promise.reject(boom))).rejects.toBe(boom);
  await expect(waitedFor('the recluster of w', 600_000, 'later', async () => 7)).resolves.toBe(7);
  const slow = new InlineJobs();
  try {
    await expect(waitedFor('the recluster of w', 120_000, 'look later', (timeoutMs) => slow.run('nobody', {}, { timeoutMs: Math.min(timeoutMs, 50) }))).rejects.toThrow(
      'the recluster of w is still running after 2 minutes: it goes on; look later',
    );
  } finally {
    await slow.close();
  }
});
