import type { Db } from '@neatroots/ports';
import { InlineJobs } from '@neatroots/platform';
import { checkSession, noModelDecider } from '@neatroots/sop';
import type { Envelope } from '@neatroots/spans';
import { RunsRepo } from '@neatroots/store';
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
useMigratedDb((d) => (db = d), 'sop_findings, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files, projects, runs, spans');

const DAY = 24 * 60 * 60_000;

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

  it('leaves a session made from a run as it is when the run ends again after retention deleted its spans', async () => {
    const jobs = new InlineJobs();
    try {
      const { workspaces, sessions } = await startLuigis(db, jobs, async ({ lock, releaseId, session }) =>
        checkSession(lock, session, { decider: noModelDecider('no model'), releaseId }),
      );
      const runs = new RunSessions(db, workspaces, sessions, jobs);
      await runs.start();
      // A call the phone agent answered 40 days ago.
      const at = Date.now() - 40 * DAY;
      const run_id = 'call-7';
      const env = (item: Envelope['item']): Envelope => ({ project: 'luigis', received_ms: at, item });
      const end = env({ kind: 'run_end', run: { event: 'run_end', run_id, ts_ms: at + 9, status: 'ok', final_output: 'Your pizza is on its way.' } });
      await new RunsRepo(db).writeEnvelopes([
        env({ kind: 'run_start', run: { event: 'run_start', run_id, ts_ms: at, workflow: 'phone-agent', user_message: 'One margherita, please.' } }),
        env({ kind: 'span', span: { run_id, span_id: 's1', type: 'llm', name: 'chat', status: 'ok', output: 'Sure: one margherita.', start_ms: at + 1 } }),
        env({ kind: 'span', span: { run_id, span_id: 's2', type: 'tool', name: 'place_order', tool: 'place_order', status: 'ok', input: { item: 'margherita' }, start_ms: at + 2 } }),
        end,
      ]);
      const id = await jobs.run<RunEnded, string | null>(SOP_RUN_QUEUE, { project: 'luigis', run_id });
      expect(id).not.toBeNull();
      const checkedOnce = await checked(sessions, id!);
      const transcript = await sessions.transcript('luigis', id!);
      expect(transcript.turns.map((t) => t.text)).toEqual(['One margherita, please.', 'Sure: one margherita.', 'Your pizza is on its way.']);
      expect(transcript.tool_calls.map((c) => c.tool)).toEqual(['place_order']);

      // Its spans go with the retention; then its run_end comes again (a redelivery, a late export).
      expect(await new RunsRepo(db).expireSpans(Date.now() - 30 * DAY)).toEqual({ runs: 1, spans: 2 });
      await new RunsRepo(db).writeEnvelopes([{ ...end, received_ms: Date.now() }]);
      const again = await jobs.run<RunEnded, string | null>(SOP_RUN_QUEUE, { project: 'luigis', run_id }, { jobId: 'again' });
      // The session, its transcript and its checks as they were: nothing was made again.
      expect(await sessions.get('luigis', id!)).toEqual(checkedOnce);
      expect(await sessions.transcript('luigis', id!)).toEqual(transcript);
      expect(again).toBeNull();
    } finally {
      await jobs.close();
    }
  });
});

async function checked(sessions: Awaited<ReturnType<typeof startLuigis>>['sessions'], id: string) {
  // up to 30 s: the check is a job, and the machine may be loaded
  for (let i = 0; i < 3000; i++) {
    const s = await sessions.get('luigis', id);
    if (s.status !== 'queued') return s;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`session ${id} was never checked`);
}
