import type { Db } from '@neatroots/ports';
import { InlineJobs } from '@neatroots/platform';
import { checkSession, noModelDecider } from '@neatroots/sop';
import type { Envelope } from '@neatroots/spans';
import { RunsRepo } from '@neatroots/store';
import { RunSessions, SOP_RUN_QUEUE, type RunEnded } from './from-runs';
import { SopSessions, type CheckSession } from './sessions';
import { SopWorkspaces } from './workspaces';
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

const noModel: CheckSession = async ({ lock, releaseId, session }) => checkSession(lock, session, { decider: noModelDecider('no model'), releaseId });

/** A run of `workflow` in `project` that started at `at`: one LLM span, ended (at `endMs`, default 9 ms after it started) unless `ended` is false; received at `receivedMs` (default `at`). */
function runEnvelopes(project: string, run_id: string, workflow: string, at: number, { ended = true, receivedMs = at, endMs = at + 9 } = {}): Envelope[] {
  const env = (item: Envelope['item']): Envelope => ({ project, received_ms: receivedMs, item });
  return [
    env({ kind: 'run_start', run: { event: 'run_start', run_id, ts_ms: at, workflow, user_message: `call ${run_id}` } }),
    env({ kind: 'span', span: { run_id, span_id: 's1', type: 'llm', name: 'chat', status: 'ok', output: `Sure (${run_id}).`, start_ms: at + 1 } }),
    ...(ended ? [env({ kind: 'run_end', run: { event: 'run_end', run_id, ts_ms: endMs, status: 'ok', final_output: 'Bye.' } })] : []),
  ];
}

/** The external ids of the workspace's sessions made from runs, once `n` of them are there (up to 30 s: the jobs make them, and the machine may be loaded). */
async function runSessions(sessions: SopSessions, workspace: string, n: number): Promise<string[]> {
  let ids: string[] = [];
  for (let i = 0; i < 3000; i++) {
    ids = (await sessions.list(workspace, { limit: 500 })).items.flatMap((s) => (s.external_id?.startsWith('run:') ? [s.external_id] : []));
    if (ids.length >= n) return ids.sort();
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`${ids.length} sessions made from runs in ${workspace}, not ${n}: ${ids.join(', ')}`);
}

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

describe('runs that ended just before a stop', () => {
  it('become sessions at the next start, when the stop dropped their jobs', async () => {
    const now = Date.now();
    const repo = new RunsRepo(db);
    // Received before luigis had a live release: such a run never became a session, and does not now.
    await repo.writeEnvelopes(runEnvelopes('luigis', 'before-publish', 'phone-agent', now - 60_000));

    // The first process: luigis published, then runs end. Their jobs are queued, and held (the
    // job's handler is not registered, as a handler busy with others holds them), when it stops.
    const jobs = new InlineJobs();
    const { workspaces, sessions } = await startLuigis(db, jobs, noModel);
    const first = new RunSessions(db, workspaces, sessions, jobs);
    // Received after the publish (the database's clock keeps microseconds, Date.now() milliseconds).
    const at = Date.now() + 1;
    const calls = ['call-1', 'call-2', 'call-3', 'call-4', 'call-5'];
    await repo.writeEnvelopes([
      ...calls.flatMap((id, i) => runEnvelopes('luigis', id, id === 'call-5' ? 'payments-bot' : 'phone-agent', at - 10 + i, { receivedMs: at })),
      // no agent of the release, still running, longer ago than the look back, no release at all
      ...runEnvelopes('luigis', 'kitchen', 'kitchen-bot', at - 10, { receivedMs: at }),
      ...runEnvelopes('luigis', 'running', 'phone-agent', at - 10, { ended: false, receivedMs: at }),
      ...runEnvelopes('luigis', 'old', 'phone-agent', at - 2 * DAY, { receivedMs: at }),
      ...runEnvelopes('no-sop', 'elsewhere', 'phone-agent', at - 10, { receivedMs: at }),
    ]);
    await first.ended([...calls, 'kitchen', 'old'].map((run_id) => ({ project: 'luigis', run_id })).concat([{ project: 'no-sop', run_id: 'elsewhere' }]));
    await jobs.close(); // the stop: the jobs waiting are dropped
    expect((await sessions.list('luigis', {})).items).toEqual([]);

    // The next start, on the same database: the runs owed their sessions are queued again, a page at a time.
    const { jobs: jobs2, sessions: sessions2, runs: second } = await nextStart(2);
    try {
      expect(await second.rebuilt()).toBe(5);
      expect(await runSessions(sessions2, 'luigis', 5)).toEqual(calls.map((id) => `run:${id}`));
      // Made once: a start after that finds nothing owed, and a rebuild run again queues nothing.
      expect(await second.rebuild()).toBe(0);
      expect((await sessions2.list('luigis', {})).items.map((s) => s.external_id).sort()).toEqual(calls.map((id) => `run:${id}`));
      expect((await sessions2.list('no-sop', {})).items).toEqual([]);
    } finally {
      await jobs2.close();
    }
  });
});

/**
 * The next start on the same database (after a stop): review's sessions started, then the runs'
 * sessions, whose start queues the runs owed theirs a page of `pageSize` at a time.
 */
async function nextStart(pageSize: number): Promise<{ jobs: InlineJobs; sessions: SopSessions; runs: RunSessions }> {
  const jobs = new InlineJobs();
  try {
    const workspaces = new SopWorkspaces(db);
    const sessions = new SopSessions(db, workspaces, jobs, noModel);
    await sessions.start();
    const runs = new RunSessions(db, workspaces, sessions, jobs, { pageSize });
    await runs.start();
    return { jobs, sessions, runs };
  } catch (err) {
    await jobs.close();
    throw err;
  }
}

describe('runs longer than the look back that ended just before a stop', () => {
  it('become sessions at the next start too; one that ended before the look back does not', async () => {
    const repo = new RunsRepo(db);
    const jobs = new InlineJobs();
    const { workspaces, sessions } = await startLuigis(db, jobs, noModel);
    const first = new RunSessions(db, workspaces, sessions, jobs);
    const at = Date.now() + 1;
    await repo.writeEnvelopes([
      // started three days ago, ended a moment before the stop
      ...runEnvelopes('luigis', 'long', 'phone-agent', at - 3 * DAY, { receivedMs: at, endMs: at - 5 }),
      // started three days ago, ended two days ago: before the look back
      ...runEnvelopes('luigis', 'long-ago', 'phone-agent', at - 3 * DAY, { receivedMs: at, endMs: at - 2 * DAY }),
      // a long run of no agent of the release, and one still going
      ...runEnvelopes('luigis', 'long-kitchen', 'kitchen-bot', at - 3 * DAY, { receivedMs: at, endMs: at - 5 }),
      ...runEnvelopes('luigis', 'long-running', 'phone-agent', at - 3 * DAY, { ended: false, receivedMs: at }),
      ...runEnvelopes('luigis', 'short', 'phone-agent', at - 10, { receivedMs: at }),
    ]);
    await first.ended(['long', 'long-ago', 'long-kitchen', 'short'].map((run_id) => ({ project: 'luigis', run_id })));
    await jobs.close(); // the stop: the jobs waiting are dropped
    expect((await sessions.list('luigis', {})).items).toEqual([]);

    const { jobs: jobs2, sessions: sessions2, runs: second } = await nextStart(1);
    try {
      expect(await second.rebuilt()).toBe(2);
      expect(await runSessions(sessions2, 'luigis', 2)).toEqual(['run:long', 'run:short']);
      expect(await second.rebuild()).toBe(0);
    } finally {
      await jobs2.close();
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
