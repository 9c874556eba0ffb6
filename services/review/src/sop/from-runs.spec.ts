import type { Db } from '@neatroots/ports';
import { InlineJobs } from '@neatroots/platform';
import { checkSession, noModelDecider } from '@neatroots/sop';
import { RunSessions, SOP_RUN_QUEUE, type RunEnded } from './from-runs';
import { luigisFiles, startLuigis, useMigratedDb } from '../sop-fixtures.test';

/** Inline jobs that also list what was queued. */
class ListedJobs extends InlineJobs {
  readonly added: RunEnded[] = [];
  override async add<T>(queue: string, data: T, opts?: Parameters<InlineJobs['add']>[2]): Promise<string> {
    if (queue === SOP_RUN_QUEUE) this.added.push(data as RunEnded);
    return super.add(queue, data, opts);
  }
}

let db: Db;
useMigratedDb((d) => (db = d), 'sop_findings, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files, projects');

describe('runs that end become SOP sessions', () => {
  it('queues a job only for the runs of projects with a live release', async () => {
    const jobs = new ListedJobs();
    try {
      const { workspaces, sessions } = await startLuigis(db, jobs, async ({ lock, releaseId, session }) =>
        checkSession(lock, session, { decider: noModelDecider('no model'), releaseId }),
      );
      // Pushed, never published: no live release.
      await workspaces.push('drafts', luigisFiles());
      const runs = new RunSessions(db, workspaces, sessions, jobs);
      await runs.ended([
        { project: 'luigis', run_id: 'r1' },
        { project: 'no-sop', run_id: 'r2' },
        { project: 'drafts', run_id: 'r3' },
        { project: 'luigis', run_id: 'r4' },
        { project: 'no-sop', run_id: 'r5' },
      ]);
      expect(jobs.added).toEqual([
        { project: 'luigis', run_id: 'r1' },
        { project: 'luigis', run_id: 'r4' },
      ]);
      // Published now: its runs that end from now on are queued too.
      await workspaces.publish('drafts');
      await runs.ended([{ project: 'drafts', run_id: 'r6' }]);
      expect(jobs.added.map((r) => r.run_id)).toEqual(['r1', 'r4', 'r6']);
    } finally {
      await jobs.close();
    }
  });
});
