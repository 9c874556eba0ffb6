import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Db } from '@neatroots/ports';
import { InlineJobs } from '@neatroots/platform';
import { checkSession, createCheckSession, noModelDecider, readFolder, recordedDecider, type DecisionGateway, type DecisionReply } from '@neatroots/sop';
import { SopError, sessionId } from '@neatroots/store';
import { SopSessions, type CheckSession } from './sessions';
import { FIXTURES, fixtureSession, luigisFiles, recordedDecisions, startLuigis, useMigratedDb } from '../sop-fixtures.test';
import { SopWorkspaces } from './workspaces';

const sessionIdOf = (body: { external_id: string }) => sessionId('luigis', body.external_id);
const fixtureExpected = (name: string) => JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', name, 'expected.json'), 'utf8'));

// The fixtures whose rules a model decided keep its answers (decisions.json): replayed here.
const recorded = recordedDecisions();

let db: Db;
let jobs: InlineJobs;
let checks: number;
const checker: CheckSession = async ({ lock, releaseId, session }) => {
  checks++;
  const rec = session.external_id ? recorded.get(session.external_id) : undefined;
  return checkSession(lock, session, { decider: rec ? recordedDecider(rec) : noModelDecider('no model is configured for sopops check'), releaseId });
};

useMigratedDb((d) => (db = d), 'sop_findings, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files, projects');
beforeEach(async () => {
  jobs = new InlineJobs();
  checks = 0;
});
afterEach(() => jobs.close());

async function setUp(): Promise<{ sessions: SopSessions; workspaces: SopWorkspaces }> {
  const { sessions, workspaces } = await startLuigis(db, jobs, checker);
  return { sessions, workspaces };
}

async function checked(sessions: SopSessions, ws: string, id: string) {
  // up to 30 s: a check tried again waits out its backoff, and the machine may be loaded
  for (let i = 0; i < 3000; i++) {
    const s = await sessions.get(ws, id);
    if (s.status !== 'queued') return s;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`session ${id} was never checked`);
}

describe('SopSessions', () => {
  it('checks each fixture session as a job and serves the same body sopops check prints, with its finding ids', async () => {
    const { sessions } = await setUp();
    const names = readdirSync(path.join(FIXTURES, 'sessions')).filter((n) => !n.includes('offline'));
    expect(names.length).toBeGreaterThan(5);
    for (const name of names) {
      const sent = await sessions.receive('luigis', fixtureSession(name));
      expect(sent.status).toBe('queued');
      const got = await checked(sessions, 'luigis', sent.id);
      const want = fixtureExpected(name);
      expect({ name, result: got.result }).toEqual({ name, result: want.result });
      expect(got.checks.map((c) => [c.procedure_id, c.result, c.rules.map((r) => r.status)])).toEqual(
        want.checks.map((c: { procedure_id: string; result: string; rules: { status: string }[] }) => [c.procedure_id, c.result, c.rules.map((r) => r.status)]),
      );
      expect(got.release_id).toMatch(/^rel_/);
      for (const r of got.checks.flatMap((c) => c.rules)) expect(r.finding_id !== null).toBe(r.finding);
    }
    const findings = await db.query<{ status: string }>('SELECT status FROM sop_findings');
    expect(findings.rows.length).toBeGreaterThan(0);
    expect(new Set(findings.rows.map((f) => f.status))).toEqual(new Set(['skipped', 'violated', 'out_of_order', 'unheeded'].filter((s) => findings.rows.some((f) => f.status === s))));
  });

  it('re-sent content writes nothing and is not checked again; new content replaces the results', async () => {
    const { sessions } = await setUp();
    const body = fixtureSession('payment-skipped');
    const first = await sessions.receive('luigis', body);
    await checked(sessions, 'luigis', first.id);
    const before = await db.query('SELECT id, created_at FROM sop_findings ORDER BY id');
    expect(await sessions.receive('luigis', body)).toMatchObject({ id: first.id, status: 'unchanged' });
    await new Promise((r) => setTimeout(r, 50));
    expect(checks).toBe(1);
    expect((await db.query('SELECT id, created_at FROM sop_findings ORDER BY id')).rows).toEqual(before.rows);

    const followed = fixtureSession('payment-followed');
    const resent = await sessions.receive('luigis', { ...followed, external_id: body.external_id });
    expect(resent).toMatchObject({ id: first.id, status: 'queued' });
    const got = await checked(sessions, 'luigis', first.id);
    expect(got.result).toBe(fixtureExpected('payment-followed').result);
    expect((await db.query('SELECT id FROM sop_findings')).rows).toHaveLength(0);
  });

  it('content sent again after other content is checked again (A, B, then A)', async () => {
    const { sessions } = await setUp();
    const a = fixtureSession('payment-skipped');
    const b = { ...fixtureSession('payment-followed'), external_id: a.external_id };
    const first = await sessions.receive('luigis', a);
    expect((await checked(sessions, 'luigis', first.id)).result).toBe('deviated');
    await sessions.receive('luigis', b);
    expect((await checked(sessions, 'luigis', first.id)).result).toBe('followed');
    expect(await sessions.receive('luigis', a)).toMatchObject({ status: 'queued' });
    expect((await checked(sessions, 'luigis', first.id)).result).toBe('deviated');
    expect(checks).toBe(3);
  });

  it('the same session sent twice at once, then re-checked while still queued, is checked once: the model is not asked again for content being checked', async () => {
    // A check that takes a while (a model answering): the jobs queued meanwhile run beside it.
    let release!: () => void;
    const answering = new Promise<void>((r) => (release = r));
    let running = 0;
    let most = 0;
    const slow: CheckSession = async (args) => {
      running++;
      most = Math.max(most, running);
      try {
        await answering;
        return await checker(args);
      } finally {
        running--;
      }
    };
    const { sessions } = await startLuigis(db, jobs, slow);
    const body = fixtureSession('payment-skipped');
    const [a, b] = await Promise.all([sessions.receive('luigis', body), sessions.receive('luigis', body)]);
    expect([a.status, b.status]).toEqual(['queued', 'queued']);
    expect(b.id).toBe(a.id);
    await new Promise((r) => setTimeout(r, 20)); // the first job's check has begun
    expect(await sessions.receive('luigis', body)).toMatchObject({ id: a.id, status: 'queued' });
    expect(await sessions.recheck('luigis', a.id)).toMatchObject({ id: a.id, status: 'queued' });
    await new Promise((r) => setTimeout(r, 50));
    release();
    expect((await checked(sessions, 'luigis', a.id)).result).toBe('deviated');
    await new Promise((r) => setTimeout(r, 100)); // the other jobs have run
    expect({ checks, most }).toEqual({ checks: 1, most: 1 });
    // other sessions are still checked side by side
    const others = await Promise.all(['payment-followed', 'payment-out-of-order'].map((n) => sessions.receive('luigis', fixtureSession(n))));
    await new Promise((r) => setTimeout(r, 50));
    expect(most).toBe(2);
    for (const o of others) await checked(sessions, 'luigis', o.id);
  });

  it('a check job run twice writes the same rows', async () => {
    const { sessions } = await setUp();
    const sent = await sessions.receive('luigis', fixtureSession('payment-out-of-order'));
    await checked(sessions, 'luigis', sent.id);
    const rows = await db.query('SELECT * FROM sop_findings ORDER BY id');
    const hash = (await db.query<{ content_hash: string }>('SELECT content_hash FROM sop_sessions')).rows[0].content_hash;
    await db.query(`UPDATE sop_sessions SET status = 'queued'`);
    await sessions.runCheck({ workspace: 'luigis', session_id: sent.id, content_hash: hash });
    expect((await db.query('SELECT * FROM sop_findings ORDER BY id')).rows.map((r) => ({ ...r, created_at: null }))).toEqual(
      rows.rows.map((r) => ({ ...r, created_at: null })),
    );
  });

  it('refuses a malformed session naming the field, and says why a session could not be checked', async () => {
    const { sessions } = await setUp();
    const bad = await sessions.receive('luigis', { external_id: 'x', agent: 'phone-agent', turns: [{ role: 'bot', text: 'hi' }] }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(SopError);
    expect((bad as SopError).status).toBe(400);
    expect((bad as SopError).message).toContain('turns[0].role');
    const noAgent = await sessions.receive('luigis', { external_id: 'x', turns: [] }).catch((e: unknown) => e);
    expect((noAgent as SopError).message).toContain('agent: required');
    // A start time the store could not keep is the sender's mistake (400), not the server's.
    // Year 0000 does not exist (the database refuses it); nor does the year before year 1, nor year 10000 reached by an offset.
    for (const started_at of ['not a date', 'Nov 30 2026', '2026-02-30T10:00:00Z', '2026-11-30T10:00:00', '0000-01-01T00:00:00Z', '0001-01-01T00:30:00+01:00', '9999-12-31T23:30:00-01:00', '2025-02-29T10:00:00Z']) {
      const when = await sessions.receive('luigis', { ...fixtureSession('payment-followed'), external_id: `when-${started_at}`, started_at }).catch((e: unknown) => e);
      expect(when).toMatchObject({ status: 400, code: 'invalid_session', message: expect.stringContaining(`started_at: expected an ISO 8601 date and time with its offset`) });
    }
    const offset = await sessions.receive('luigis', { ...fixtureSession('payment-followed'), external_id: 'when-offset', started_at: '2026-11-30T10:00:00.250+05:30' });
    expect((await checked(sessions, 'luigis', offset.id)).started_at).toEqual(new Date('2026-11-30T04:30:00.250Z').toISOString());
    const leapDay = await sessions.receive('luigis', { ...fixtureSession('payment-followed'), external_id: 'when-leap', started_at: '2024-02-29T23:30:00-01:00' });
    expect((await checked(sessions, 'luigis', leapDay.id)).started_at).toEqual('2024-03-01T00:30:00.000Z');

    const stranger = await sessions.receive('luigis', { ...fixtureSession('payment-followed'), external_id: 'stranger', agent: 'night-bot' });
    const failed = await checked(sessions, 'luigis', stranger.id);
    expect(failed).toMatchObject({ status: 'failed', error: expect.stringContaining('agent "night-bot" is not in the procedures folder') });

    const other = new SopSessions(db, new SopWorkspaces(db), jobs, checker);
    const sent = await other.receive('empty-ws', { ...fixtureSession('payment-followed') });
    const got = await checked(other, 'empty-ws', sent.id);
    expect(got.status).toBe('failed');
    expect(got.error).toContain('no live release');
  });

  it('checks a session on the release it names by number, given as the API writes release numbers (a JSON number) or as text', async () => {
    const { sessions, workspaces } = await setUp();
    const first = (await workspaces.releases('luigis')).find((r) => r.number === 1)!;
    for (const [external_id, release_id] of [['by-number', 1], ['by-text', '1']] as const) {
      const sent = await sessions.receive('luigis', { ...fixtureSession('payment-followed'), external_id, release_id });
      expect(await checked(sessions, 'luigis', sent.id)).toMatchObject({ status: 'checked', release_id: first.id });
    }
    for (const release_id of [0, 1.5, -2, true]) {
      const bad = await sessions.receive('luigis', { ...fixtureSession('payment-followed'), external_id: `bad-${release_id}`, release_id }).catch((e: unknown) => e);
      expect(bad).toMatchObject({ status: 400, code: 'invalid_session', message: expect.stringContaining("release_id: expected a release's id, its number or null") });
    }
  });

  it('a session re-sent naming the same release by its id instead of its number, or the reverse, is unchanged and not checked again', async () => {
    const { sessions, workspaces } = await setUp();
    const first = (await workspaces.releases('luigis')).find((r) => r.number === 1)!;
    // release 2 live: the sessions name release 1, which is not the live one
    expect(await workspaces.publish('luigis')).toMatchObject({ number: 2, live: true });
    const body = fixtureSession('payment-skipped');
    const cases: [string, string | number, (string | number)[]][] = [
      ['number-then-id', 1, [first.id, '1', 1]],
      ['text-then-id', '1', [first.id]],
      ['id-then-number', first.id, [1, '1', first.id]],
    ];
    for (const [external_id, sentAs, resentAs] of cases) {
      const sent = await sessions.receive('luigis', { ...body, external_id, release_id: sentAs });
      expect(sent.status).toBe('queued');
      const done = await checked(sessions, 'luigis', sent.id);
      expect(done).toMatchObject({ status: 'checked', error: null, release_id: first.id, result: fixtureExpected('payment-skipped').result });
      for (const release_id of resentAs) {
        expect({ release_id, answer: await sessions.receive('luigis', { ...body, external_id, release_id }) }).toEqual({ release_id, answer: { id: sent.id, external_id, status: 'unchanged' } });
        // nothing written: still checked, at the same time, with the same results
        expect(await sessions.get('luigis', sent.id)).toEqual(done);
      }
    }
    expect(checks).toBe(cases.length);
  });

  it('a session failed for want of a live release is checked when sent again, the same, after a publish', async () => {
    const workspaces = new SopWorkspaces(db);
    const sessions = new SopSessions(db, workspaces, jobs, checker);
    await sessions.start();
    const body = fixtureSession('payment-skipped');
    const sent = await sessions.receive('luigis', body);
    expect(sent.status).toBe('queued');
    expect(await checked(sessions, 'luigis', sent.id)).toMatchObject({ status: 'failed', error: expect.stringContaining('no live release yet: publish one, then send the session again') });
    expect(checks).toBe(0);

    await workspaces.push('luigis', luigisFiles());
    await workspaces.publish('luigis');
    // as the error says: the same session sent again is queued again, and checked
    expect(await sessions.receive('luigis', body)).toEqual({ id: sent.id, external_id: body.external_id, status: 'queued' });
    const got = await checked(sessions, 'luigis', sent.id);
    expect(got).toMatchObject({ status: 'checked', error: null, result: fixtureExpected('payment-skipped').result, release_id: expect.stringMatching(/^rel_/) });
    expect(checks).toBe(1);
    // checked now: sent again, it is unchanged and not checked again
    expect(await sessions.receive('luigis', body)).toMatchObject({ id: sent.id, status: 'unchanged' });
    await new Promise((r) => setTimeout(r, 50));
    expect(checks).toBe(1);
  });

  it('marks a session failed with the reason when every try to check it failed (a model service away)', async () => {
    const workspaces = new SopWorkspaces(db);
    const files = [...readFolder(path.join(FIXTURES, 'luigis')).entries()].map(([p, text]) => ({ path: p, text }));
    await workspaces.push('luigis', files);
    await workspaces.publish('luigis');
    let tries = 0;
    let back = false;
    const away: CheckSession = async (args) => {
      tries++;
      if (back) return checker(args);
      throw new Error('question service: No connection established (ECONNREFUSED)');
    };
    const sessions = new SopSessions(db, workspaces, jobs, away, { attempts: 3, backoffMs: 5 });
    await sessions.start();
    const sent = await sessions.receive('luigis', fixtureSession('payment-followed'));
    const got = await checked(sessions, 'luigis', sent.id);
    expect(tries).toBe(3);
    expect(got).toMatchObject({ status: 'failed', error: expect.stringContaining('not checked after 3 tries: question service: No connection') });
    // the model service back, the same session sent again is queued again, and checked
    back = true;
    expect(await sessions.receive('luigis', fixtureSession('payment-followed'))).toMatchObject({ id: sent.id, status: 'queued' });
    expect(await checked(sessions, 'luigis', sent.id)).toMatchObject({ status: 'checked', error: null, result: 'followed' });
    expect(tries).toBe(4);
    // sent again with other content, it is queued again
    const again = fixtureSession('payment-followed');
    again.turns[0].text += ' (again)';
    expect((await sessions.receive('luigis', again)).status).toBe('queued');
  });

  it('a session whose check could not be queued (a Redis blip) is queued when sent again, the same, and checked', async () => {
    const { workspaces } = await setUp();
    let refuse = 1;
    const added: string[] = [];
    const blips = Object.assign(Object.create(jobs) as InlineJobs, {
      add: (queue: string, data: unknown, opts?: { jobId?: string }) => {
        if (refuse-- > 0) return Promise.reject(new Error('Redis: connection lost'));
        added.push(opts?.jobId ?? '');
        return jobs.add(queue, data, opts);
      },
    });
    const sessions = new SopSessions(db, workspaces, blips, checker);
    const body = { ...fixtureSession('payment-skipped'), external_id: 'blip-1' };
    // stored, but its check not queued: the sender is told (an error), and sends it again
    await expect(sessions.receive('luigis', body)).rejects.toThrow('Redis: connection lost');
    expect((await sessions.get('luigis', sessionIdOf(body))).status).toBe('queued');
    const again = await sessions.receive('luigis', body);
    expect(again).toEqual({ id: sessionIdOf(body), external_id: 'blip-1', status: 'queued' });
    expect(added).toHaveLength(1);
    expect(await checked(sessions, 'luigis', again.id)).toMatchObject({ status: 'checked', result: fixtureExpected('payment-skipped').result });
    expect(checks).toBe(1);
    // checked: the same content sent again is unchanged, and queues nothing
    expect(await sessions.receive('luigis', body)).toMatchObject({ status: 'unchanged' });
    expect(added).toHaveLength(1);
  });

  describe('while the model fails', () => {
    // A decision gateway (the question service) over a model that answers, or fails as told.
    let failing: string | null;
    let asked: number;
    const gateway: DecisionGateway = {
      decisionModels: async () => ({ decision: 'decider-test', reasoning: null }),
      decide: async (_endpoint, item): Promise<DecisionReply> => {
        asked++;
        if (failing) return { ok: false, reason: failing };
        const no = /break this rule|situation come up/i.test(item.ask);
        return { ok: true, answer: { p: no ? 0.02 : 0.95, evidence: [], reason: 'The fake model says so.' }, model: 'decider-test', cached: false };
      },
    };
    const models = createCheckSession({ gateway });
    let tries: number;
    const counted: CheckSession = (args) => {
      tries++;
      return models(args);
    };
    const notChecked = (s: { checks: { rules: { status: string; reason: string }[] }[] }) => s.checks.flatMap((c) => c.rules).filter((r) => r.status === 'not_checked').map((r) => r.reason);
    beforeEach(() => {
      failing = null;
      asked = 0;
      tries = 0;
    });

    async function started(check: CheckSession = counted) {
      const workspaces = new SopWorkspaces(db);
      await workspaces.push('luigis', luigisFiles());
      await workspaces.publish('luigis');
      const sessions = new SopSessions(db, workspaces, jobs, check, { attempts: 3, backoffMs: 5 });
      await sessions.start();
      return sessions;
    }

    it('tries the check again; on the last try saves what was decided, says why on the session, and the same content sent again is checked again', async () => {
      const sessions = await started();
      failing = 'the model server: 500 Internal Server Error';
      const body = fixtureSession('phone-followed-pickup');
      const sent = await sessions.receive('luigis', body);
      const got = await checked(sessions, 'luigis', sent.id);
      expect(tries).toBe(3);
      expect(got).toMatchObject({
        status: 'checked',
        result: 'not_measurable',
        error: expect.stringMatching(/^the model failed on \d+ questions \(the decision model \(decider-test\) could not decide .*: the model server: 500 Internal Server Error; and \d+ more\), so their rules are not checked: send the session again, or POST …\/sessions\/ses_\S+\/recheck, once the model is back$/),
      });
      // the tool steps are decided; every rule the model decides says why it is not checked
      expect(notChecked(got).length).toBeGreaterThan(0);
      for (const reason of notChecked(got)) expect(reason).toContain('the model server: 500 Internal Server Error');
      expect(got.checks.flatMap((c) => c.rules).some((r) => r.status === 'done')).toBe(true);

      // the model back: the same content sent again is queued, checked again, its results replaced
      failing = null;
      expect(await sessions.receive('luigis', body)).toEqual({ id: sent.id, external_id: body.external_id, status: 'queued' });
      const again = await checked(sessions, 'luigis', sent.id);
      expect(again).toMatchObject({ status: 'checked', error: null, result: expect.stringMatching(/^(followed|partial|deviated)$/) });
      expect(notChecked(again)).toEqual([]);
      expect(tries).toBe(4);
      // checked whole: sent again, unchanged
      expect(await sessions.receive('luigis', body)).toMatchObject({ status: 'unchanged' });
    });

    it('a failure on one try only: the next try checks the session whole', async () => {
      // the model times out on the first try, and is back for the second
      const backAfterOne: CheckSession = async (args) => {
        const out = await counted(args);
        failing = null;
        return out;
      };
      const sessions = await started(backAfterOne);
      failing = 'the model timed out: no answer within 2000 ms';
      const sent = await sessions.receive('luigis', fixtureSession('phone-followed-pickup'));
      const got = await checked(sessions, 'luigis', sent.id);
      expect(got).toMatchObject({ status: 'checked', error: null });
      expect(notChecked(got)).toEqual([]);
      expect(tries).toBe(2);
    });

    it('a model that refuses the request (a 4xx) is not tried again: the rules say why, and the session has no error', async () => {
      const sessions = await started();
      failing = 'the model rejected: 401 Incorrect API key provided';
      const sent = await sessions.receive('luigis', fixtureSession('phone-followed-pickup'));
      const got = await checked(sessions, 'luigis', sent.id);
      expect(tries).toBe(1);
      expect(got).toMatchObject({ status: 'checked', error: null });
      for (const reason of notChecked(got)) expect(reason).toContain('the model rejected: 401');
      expect(asked).toBeGreaterThan(0);
    });

    it('re-checks a session as stored (one made from a run cannot be sent again): its results replaced', async () => {
      const sessions = await started();
      failing = 'the model gave a malformed answer (not a JSON object)';
      const sent = await sessions.receive('luigis', fixtureSession('phone-followed-pickup'));
      expect((await checked(sessions, 'luigis', sent.id)).error).toContain('the model gave a malformed answer');
      failing = null;
      expect(await sessions.recheck('luigis', sent.id)).toEqual({ id: sent.id, external_id: fixtureSession('phone-followed-pickup').external_id, status: 'queued' });
      const again = await checked(sessions, 'luigis', sent.id);
      expect(again).toMatchObject({ status: 'checked', error: null });
      expect(notChecked(again)).toEqual([]);
      // any checked session may be re-checked; none that is not there
      expect(await sessions.recheck('luigis', sent.id)).toMatchObject({ status: 'queued' });
      expect((await checked(sessions, 'luigis', sent.id)).status).toBe('checked');
      await expect(sessions.recheck('luigis', 'ses_nope')).rejects.toMatchObject({ status: 404, code: 'not_found' });
      await expect(sessions.recheck('other', sent.id)).rejects.toMatchObject({ status: 404 });
      // its transcript let go: nothing to check (sending it again still works)
      await db.query(`UPDATE sop_sessions SET transcript_expired_at = now(), body = body || '{"turns":[],"tool_calls":[]}'::jsonb WHERE id = $1`, [sent.id]);
      await expect(sessions.recheck('luigis', sent.id)).rejects.toMatchObject({ status: 409, code: 'transcript_expired' });
    });
  });

  it('a start checks every session a stop left queued, a page at a time, and two starts queue each once', async () => {
    const workspaces = new SopWorkspaces(db);
    const files = [...readFolder(path.join(FIXTURES, 'luigis')).entries()].map(([p, text]) => ({ path: p, text }));
    await workspaces.push('luigis', files);
    await workspaces.publish('luigis');
    // Received while no job ran them (the process stopped before their jobs did).
    const stopped = new InlineJobs();
    const before = new SopSessions(db, workspaces, stopped, checker);
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await before.receive('luigis', { ...fixtureSession('payment-followed'), external_id: `left-${i}` })).id);
    await stopped.close();

    const added: string[] = [];
    const counting = Object.assign(Object.create(jobs) as InlineJobs, {
      add: (queue: string, data: unknown, opts?: { jobId?: string }) => {
        added.push(opts?.jobId ?? '');
        return jobs.add(queue, data, opts);
      },
    });
    const after = new SopSessions(db, workspaces, counting, checker);
    // Two replicas starting together, each reading the queued sessions in pages of 3.
    expect(await after.requeue(3)).toBe(7);
    expect(await after.requeue(3)).toBeGreaterThanOrEqual(0);
    await after.start();
    for (const id of ids) expect((await checked(after, 'luigis', id)).status).toBe('checked');
    // the same job id for a session and its content, whoever queued it
    expect(new Set(added).size).toBe(7);
  });

  it('lists sessions newest first with filters', async () => {
    const { sessions } = await setUp();
    const a = await sessions.receive('luigis', fixtureSession('payment-skipped'));
    const b = await sessions.receive('luigis', fixtureSession('payment-followed'));
    await checked(sessions, 'luigis', a.id);
    await checked(sessions, 'luigis', b.id);
    expect((await sessions.list('luigis', {})).items.map((s) => s.id)).toEqual([b.id, a.id]);
    expect((await sessions.list('luigis', { result: 'deviated' })).items.map((s) => s.id)).toEqual([a.id]);
    expect((await sessions.list('luigis', { procedure: 'card-payment' })).items).toHaveLength(2);
    expect((await sessions.list('luigis', { agent: 'phone-agent' })).items).toHaveLength(0);
    await expect(sessions.list('luigis', { cursor: '!!' })).rejects.toMatchObject({ status: 400 });
  });
});
