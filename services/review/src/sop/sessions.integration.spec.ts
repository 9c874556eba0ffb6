import { BullJobs, openAiChatModel, serviceOrSkip, until } from '@neatroots/platform';
import type { Db, FailedJob, RetriedJob } from '@neatroots/ports';
import { QuestionAnswerer } from '@neatroots/questions';
import { checkSession, createCheckSession, noModelDecider } from '@neatroots/sop';
import { Redis } from 'ioredis';
import { startFakeOpenAI } from '../../../../libs/platform/src/models/fake-openai.test';
import { answererGateway, fixtureSession, luigisFiles, useMigratedDb } from '../sop-fixtures.test';
import { REQUEUE_WINDOW_MS, SOP_CHECK_QUEUE, SopSessions, type CheckSession } from './sessions';
import { SopWorkspaces } from './workspaces';

/**
 * A session's check on BullMQ with the real Redis (the distributed deployment): a check whose
 * process dies mid-way, one whose process stops mid-way, and a session left queued with its
 * requeued job kept as failed.
 */
const SUITE = 'SOP session checks on BullMQ';
const redis = serviceOrSkip('redis', SUITE);

(redis ? describe : describe.skip)(SUITE, () => {
  let db: Db;
  useMigratedDb((d) => (db = d), 'sop_findings, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files, projects');
  const opened: BullJobs[] = [];
  const prefixes: string[] = [];
  afterEach(async () => {
    await Promise.allSettled(opened.splice(0).map((j) => j.close()));
    const r = new Redis(redis!.url);
    try {
      for (const p of prefixes.splice(0)) {
        const keys = await r.keys(`${p}:*`);
        if (keys.length) await r.del(...keys);
      }
    } finally {
      r.disconnect();
    }
  });

  /** A review replica's jobs, with what it logs as failed and retried. */
  const replica = (prefix: string, stalls?: { lockDurationMs: number; stalledIntervalMs: number; maxStalledCount: number }, closeGraceMs = 0, abortGraceMs?: number) => {
    const failed: FailedJob[] = [];
    const retried: RetriedJob[] = [];
    const jobs = new BullJobs({ url: redis!.url, prefix, closeGraceMs, abortGraceMs, onFailed: (f) => failed.push(f), onRetry: (r) => retried.push(r), stalls });
    opened.push(jobs);
    return { jobs, failed, retried };
  };
  const published = async () => {
    const workspaces = new SopWorkspaces(db);
    await workspaces.push('luigis', luigisFiles());
    await workspaces.publish('luigis');
    return workspaces;
  };
  const status = async (id: string) => (await db.query<{ status: string; error: string | null }>('SELECT status, error FROM sop_sessions WHERE id = $1', [id])).rows[0];

  it('a check whose process dies mid-way ends failed: the session is marked failed, the failure logged once, not as a retry', async () => {
    const prefix = `it_sop_stall_${process.pid}_${Date.now().toString(36)}`;
    prefixes.push(prefix);
    const workspaces = await published();
    // BullMQ's stall watch made quick: a lock of 1 s, checked every 0.5 s, no stall forgiven
    const stalls = { lockDurationMs: 1_000, stalledIntervalMs: 500, maxStalledCount: 0 };
    const replicas = [replica(prefix, stalls), replica(prefix, stalls)];
    const running: number[] = [];
    // a check that never ends (a model call hanging when the pod is killed)
    const hangs = (i: number): CheckSession => () => {
      running.push(i);
      return new Promise(() => undefined);
    };
    const sessions = await Promise.all(replicas.map(async (r, i) => {
      const s = new SopSessions(db, workspaces, r.jobs, hangs(i));
      await s.start();
      return s;
    }));
    const sent = await sessions[0].receive('luigis', fixtureSession('payment-skipped'));
    expect(sent.status).toBe('queued');
    await until('a replica running the check', () => running.length > 0, 15_000);
    const dead = running[0];
    const alive = 1 - dead;
    // the replica running it dies (its worker stops at once, its lock is no longer renewed; a
    // stop, close(), would put the job back instead)
    await replicas[dead].jobs.crash();

    const got = await until('the session marked failed', async () => {
      const s = await status(sent.id);
      return s.status === 'failed' ? s : undefined;
    }, 30_000, 200);
    expect(got.error).toMatch(/^not checked after 1 try: job stalled more than allowable limit \(the process running it stopped or stalled mid-job\)$/);
    expect(running).toEqual([dead]); // the survivor never ran the check: BullMQ failed it
    expect(replicas[alive].failed).toEqual([expect.objectContaining({ queue: SOP_CHECK_QUEUE, attempts: 1, reason: expect.stringContaining('job stalled more than allowable limit') })]);
    expect(replicas[alive].retried).toEqual([]);
    expect(replicas[dead].failed).toEqual([]);
  }, 60_000);

  it('two replicas check a session sent twice while its check runs once: the model is not asked twice, and the hold a dead replica leaves lasts a minute', async () => {
    const prefix = `it_sop_once_${process.pid}_${Date.now().toString(36)}`;
    prefixes.push(prefix);
    const workspaces = await published();
    const replicas = [replica(prefix), replica(prefix)];
    let release!: () => void;
    const answering = new Promise<void>((r) => (release = r));
    const ran: number[] = [];
    const slow = (i: number): CheckSession => async ({ lock, releaseId, session }) => {
      ran.push(i);
      await answering;
      return checkSession(lock, session, { decider: noModelDecider('no model is configured for sopops check'), releaseId });
    };
    const sessions = await Promise.all(replicas.map(async (r, i) => {
      const s = new SopSessions(db, workspaces, r.jobs, slow(i));
      await s.start();
      return s;
    }));
    const body = fixtureSession('payment-skipped');
    const sent = await sessions[0].receive('luigis', body);
    await until('a replica checking the session', () => ran.length > 0, 15_000);
    // sent again to each replica while the check is under way: its check is queued again each time
    expect(await sessions[1].receive('luigis', body)).toMatchObject({ id: sent.id, status: 'queued' });
    expect(await sessions[0].receive('luigis', body)).toMatchObject({ id: sent.id, status: 'queued' });
    // the session is held in Redis for a minute at most, renewed while its check runs
    const r = new Redis(redis!.url);
    try {
      const keys = await r.keys(`${prefix}:${SOP_CHECK_QUEUE}:serialize:*`);
      expect(keys).toHaveLength(1);
      const ttl = await r.pttl(keys[0]);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(60_000);
    } finally {
      r.disconnect();
    }
    await new Promise((res) => setTimeout(res, 1_500)); // the jobs queued again are taken (and put aside)
    release();
    await until('the session checked', async () => (await status(sent.id)).status === 'checked', 15_000, 100);
    await new Promise((res) => setTimeout(res, 1_500)); // the jobs put aside have run
    expect(ran).toHaveLength(1);
    expect(replicas.flatMap((x) => x.failed)).toEqual([]);
  }, 60_000);

  it('a stop cuts a check waiting on the model: it asks nothing more and writes nothing, and the next replica checks the session once', async () => {
    const prefix = `it_sop_cut_${process.pid}_${Date.now().toString(36)}`;
    prefixes.push(prefix);
    const workspaces = await published();
    // the decision model: holds its answers until told (a slow model), then answers every
    // question of a request yes; each replica asks it under its own model name
    let holding = true;
    let answer!: () => void;
    const held = new Promise<void>((r) => (answer = r));
    const model = await startFakeOpenAI(async (call) => {
      if (holding) await held;
      const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
      const ids = [...user.matchAll(/^q(\d+) \(about subject/gm)].map((m) => `q${m[1]}`);
      return { json: { answers: ids.map((id) => ({ id, p: 0.95, reason: 'Yes.', evidence: [] })) } };
    });
    const answerers: QuestionAnswerer[] = [];
    const checked: string[] = [];
    // a review replica (a stop waits 300 ms for its jobs, then up to 30 s for a handler it cut
    // short to end: far above what heeding the signal takes), asking its own question service
    const start = async (name: string) => {
      const r = replica(prefix, undefined, 300, 30_000);
      const answerer = new QuestionAnswerer({
        decision: openAiChatModel({ role: 'decision', baseURL: model.url, model: `decider-${name}`, timeoutMs: 60_000 }),
        queue: { maxWaitMs: 10, retries: 0 },
        cache: false,
        onError: () => undefined,
      });
      answerers.push(answerer);
      const sessions = new SopSessions(db, workspaces, r.jobs, createCheckSession({ gateway: answererGateway(answerer) }));
      sessions.useReview({ onChecked: async (_ws, id) => void checked.push(`${name}:${id}`), overlay: async (_ws, v) => v });
      await sessions.start();
      return { ...r, sessions };
    };
    try {
      const a = await start('a');
      // a phone call: take-order applies when the caller orders, so its rules are asked once
      // that first answer came (a check asks the model more than once, one after the other)
      const sent = await a.sessions.receive('luigis', fixtureSession('phone-followed-pickup'));
      await until('replica a asking the model', () => model.calls.length > 0, 15_000);
      // the first requests all sent: the count still for 500 ms (a loaded machine sends late)
      let inFlight = model.calls.length;
      for (let still = 0; still < 5; ) {
        await new Promise((res) => setTimeout(res, 100));
        still = model.calls.length === inFlight ? still + 1 : 0;
        inFlight = model.calls.length;
      }
      const t0 = Date.now();
      await a.jobs.close(); // a rolling update: replica a stops while the model has not answered
      const stopMs = Date.now() - t0;
      holding = false;
      answer(); // the model answers replica a's requests now, after its stop
      const b = await start('b');
      await until('the session checked', async () => (await status(sent.id)).status === 'checked', 30_000, 100);
      await new Promise((res) => setTimeout(res, 1_500)); // what replica a would still ask or write
      const asked = (name: string) => model.calls.filter((c) => c.body.model === `decider-${name}`).length;
      // replica a asked nothing after its stop; b asked every question of the check
      expect({ a: asked('a'), inFlight }).toEqual({ a: inFlight, inFlight });
      expect(asked('b')).toBeGreaterThan(inFlight);
      // saved once, by b, with no error, and no try spent or failure on either replica
      expect(checked).toEqual([`b:${sent.id}`]);
      expect(await status(sent.id)).toEqual({ status: 'checked', error: null });
      expect([...a.failed, ...a.retried, ...b.failed, ...b.retried]).toEqual([]);
      // the stop did not wait for the model, nor the abort grace: the check heard it and ended
      expect(stopMs).toBeLessThan(15_000);
    } finally {
      answer();
      for (const x of answerers) x.close();
      await model.close();
    }
  }, 90_000);

  it('a session left queued while its requeued job is kept as failed is queued again by a later start', async () => {
    const prefix = `it_sop_requeue_${process.pid}_${Date.now().toString(36)}`;
    prefixes.push(prefix);
    const workspaces = await published();
    const r = replica(prefix);
    let away = true;
    const checker: CheckSession = async ({ lock, releaseId, session }) => {
      if (away) throw new Error('question service: connect ECONNREFUSED 127.0.0.1:7071');
      return checkSession(lock, session, { decider: noModelDecider('no model is configured for sopops check'), releaseId });
    };
    const sessions = new SopSessions(db, workspaces, r.jobs, checker, { attempts: 1, backoffMs: 10 });
    await sessions.start();
    const sent = await sessions.receive('luigis', fixtureSession('payment-skipped'));
    await until('the first check failed', async () => (await status(sent.id)).status === 'failed', 15_000, 100);
    // left queued (a stop before marking it failed reached the database), and requeued at a start: fails again
    const leftQueued = () => db.query(`UPDATE sop_sessions SET status = 'queued', error = NULL WHERE id = $1`, [sent.id]);
    await leftQueued();
    const t0 = Date.now();
    expect(await sessions.requeue(1000, t0)).toBe(1);
    await until('the requeued check failed', async () => (await status(sent.id)).status === 'failed', 15_000, 100);
    await leftQueued();
    // the question service is back; a later start queues the session again and it is checked
    away = false;
    expect(await sessions.requeue(1000, t0 + REQUEUE_WINDOW_MS)).toBe(1);
    const checked = await until('the session checked', async () => {
      const s = await status(sent.id);
      return s.status === 'checked' ? s : undefined;
    }, 15_000, 100).catch((e: Error) => e);
    expect(checked).toEqual({ status: 'checked', error: null });
  }, 60_000);
});
