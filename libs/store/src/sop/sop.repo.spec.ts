import type { Db } from '@neatroots/ports';
import { openTestDb } from '../test-db.test';
import { SopSessionsRepo, sopFindingId, type SessionInput } from './sessions.repo';
import { WorkspaceRepo, type SopFile } from './workspace.repo';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
}, 60_000);
afterAll(() => db.close());
beforeEach(() => db.exec('TRUNCATE sop_findings, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files, projects CASCADE'));

const file = (path: string, text: string): SopFile => ({ path, text, version: `v-${text.length}-${text.charCodeAt(text.length - 1)}` });

describe('WorkspaceRepo', () => {
  it('saves head only when the check accepts the head it would become', async () => {
    const ws = new WorkspaceRepo(db);
    await ws.updateHead('w1', { put: [file('procedures/a.md', '# A\n')] }, () => undefined);
    await expect(
      ws.updateHead('w1', { put: [file('agents/x.yaml', 'procedures: [missing]\n')] }, (head) => {
        expect(head.map((f) => f.path)).toEqual(['agents/x.yaml', 'procedures/a.md']);
        throw new Error('agents/x.yaml:1: no procedure "missing"');
      }),
    ).rejects.toThrow('no procedure');
    expect((await ws.headFiles('w1')).map((f) => f.path)).toEqual(['procedures/a.md']);
    await ws.updateHead('w1', { remove: ['procedures/a.md'], put: [file('procedures/b.md', '# B\n')] }, () => undefined);
    expect((await ws.headFiles('w1')).map((f) => f.path)).toEqual(['procedures/b.md']);
    await ws.updateHead('w1', { replaceAll: true, put: [file('procedures/c.md', '# C\n')] }, () => undefined);
    expect((await ws.headFiles('w1')).map((f) => f.path)).toEqual(['procedures/c.md']);
    expect(await ws.headFiles('w2')).toEqual([]);
  });

  it('publishes numbered releases, one live, keeping their files as they were', async () => {
    const ws = new WorkspaceRepo(db);
    await ws.updateHead('w1', { put: [file('procedures/a.md', '# A\n')] }, () => undefined);
    const r1 = await ws.publish('w1', (head, prev) => ({ files: head.map((f) => f.path), prev: prev?.number ?? null }));
    expect(r1).toMatchObject({ number: 1, live: true, lock: { files: ['procedures/a.md'], prev: null } });
    await ws.updateHead('w1', { put: [file('procedures/a.md', '# A, reworded\n')] }, () => undefined);
    const r2 = await ws.publish('w1', (_head, prev) => ({ prev: prev?.number ?? null }));
    expect(r2).toMatchObject({ number: 2, live: true, lock: { prev: 1 } });
    expect((await ws.release('w1', '1'))?.live).toBe(false);
    expect((await ws.release('w1', 'live'))?.id).toBe(r2.id);
    expect((await ws.release('w1', r1.id))?.number).toBe(1);
    expect(await ws.release('w1', '9')).toBeNull();
    expect((await ws.releases('w1')).map((r) => r.number)).toEqual([2, 1]);
    expect((await ws.releaseFiles(r1.id))[0].text).toBe('# A\n');
    expect((await ws.releaseFiles(r2.id))[0].text).toBe('# A, reworded\n');
    await expect(ws.publish('w1', () => { throw new Error('head does not compile'); })).rejects.toThrow('compile');
    expect((await ws.releases('w1')).length).toBe(2);
  });
});

const session = (over: Partial<SessionInput> = {}): SessionInput => ({
  external_id: 'call-1',
  agent: 'phone-agent',
  release_id: null,
  started_at: '2026-11-30T10:00:00.000Z',
  transcript_ref: null,
  turns: [{ role: 'user', text: 'Hi' }, { role: 'agent', text: "Luigi's, how can I help?" }],
  tool_calls: [],
  ...over,
});

describe('SopSessionsRepo', () => {
  it('writes nothing for re-sent content and replaces results for new content', async () => {
    const repo = new SopSessionsRepo(db);
    const a = await repo.receive('w1', session());
    expect(a.status).toBe('queued');
    const finding = { id: sopFindingId(a.id, 'take-order', 'r1'), procedure_id: 'take-order', rule_id: 'r1', kind: 'step' as const, index: 2, text: 'Look up the account.', status: 'skipped' as const, evidence: [], reason: 'not called' };
    const outcome = { release_id: null, result: 'deviated' as const, checked_result: 'deviated' as const, checks: [{ procedure_id: 'take-order', result: 'deviated' as const, checked_result: 'deviated' as const, body: { procedure_id: 'take-order' } }], findings: [finding] };
    expect(await repo.saveOutcome(a.id, a.content_hash, outcome)).toBe(true);
    expect((await repo.get('w1', a.id))?.session).toMatchObject({ status: 'checked', result: 'deviated' });
    expect(await repo.receive('w1', session())).toMatchObject({ id: a.id, status: 'unchanged' });
    // the same outcome saved again (a job run twice) leaves one finding
    expect(await repo.saveOutcome(a.id, a.content_hash, outcome)).toBe(true);
    expect((await db.query('SELECT id FROM sop_findings')).rows).toHaveLength(1);

    const b = await repo.receive('w1', session({ turns: [{ role: 'user', text: 'Hello?' }] }));
    expect(b).toMatchObject({ id: a.id, status: 'queued' });
    const got = await repo.get('w1', a.id);
    expect(got?.session).toMatchObject({ status: 'queued', result: null });
    expect(got?.checks).toEqual([]);
    expect((await db.query('SELECT id FROM sop_findings')).rows).toHaveLength(0);
    // a check of the old content finishing late writes nothing
    expect(await repo.saveOutcome(a.id, a.content_hash, outcome)).toBe(false);
    expect((await repo.get('w1', a.id))?.session.status).toBe('queued');
    expect(await repo.get('w2', a.id)).toBeNull();
  });

  it('queues a failed session again when its same content is sent again, as it was sent; a checked one stays unchanged', async () => {
    const repo = new SopSessionsRepo(db);
    const a = await repo.receive('w1', session());
    // still queued: the same content answers queued (the caller queues its check again), writing nothing
    const receivedAt = (await repo.get('w1', a.id))!.session.received_at;
    expect(await repo.receive('w1', session())).toEqual({ id: a.id, status: 'queued', content_hash: a.content_hash, bytes: a.bytes });
    expect((await repo.get('w1', a.id))!.session.received_at).toBe(receivedAt);
    await repo.markFailed(a.id, a.content_hash, 'workspace w1 has no live release yet: publish one, then send the session again');
    // and its transcript let go since (retention empties failed sessions' too)
    await db.query(`UPDATE sop_sessions SET received_at = now() - interval '100 days' WHERE id = $1`, [a.id]);
    expect(await repo.expireTranscripts(Date.now() - 90 * 24 * 60 * 60_000)).toBe(1);
    expect((await repo.get('w1', a.id))?.session).toMatchObject({ status: 'failed', error: expect.stringContaining('no live release') });
    expect((await repo.body('w1', a.id))?.body).toMatchObject({ turns: [] });

    // sent again, the same: queued again, without its error, with its transcript as sent
    const again = await repo.receive('w1', session(), { runId: 'run-9' });
    expect(again).toEqual({ id: a.id, status: 'queued', content_hash: a.content_hash, bytes: a.bytes });
    const got = await repo.get('w1', a.id);
    expect(got?.session).toMatchObject({ status: 'queued', error: null, result: null, release_id: null, checked_at: null, run_id: 'run-9' });
    expect((await repo.body('w1', a.id))?.body).toMatchObject({ turns: session().turns });
    expect(Date.parse(got!.session.received_at)).toBeGreaterThan(Date.now() - 60_000);
    expect(await repo.body('w1', a.id)).toMatchObject({ transcript_expired_at: null });
    expect(await repo.queued()).toEqual([{ workspace: 'w1', id: a.id, content_hash: a.content_hash }]);
    // queued again: sent again at once, twice, it is queued both times, as it is
    expect((await Promise.all([repo.receive('w1', session()), repo.receive('w1', session())])).map((r) => r.status)).toEqual(['queued', 'queued']);
    expect((await repo.get('w1', a.id))?.session).toMatchObject({ status: 'queued', run_id: 'run-9' });

    // checked: unchanged
    const outcome = { release_id: null, result: 'followed' as const, checked_result: 'followed' as const, checks: [{ procedure_id: 'p', result: 'followed' as const, checked_result: 'followed' as const, body: {} }], findings: [] };
    expect(await repo.saveOutcome(a.id, a.content_hash, outcome)).toBe(true);
    expect(await repo.receive('w1', session())).toMatchObject({ status: 'unchanged' });
    expect((await repo.get('w1', a.id))?.session).toMatchObject({ status: 'checked', result: 'followed' });

    // failed, then sent again twice at once: queued (once; the other finds it queued)
    const b = await repo.receive('w1', session({ external_id: 'call-2' }));
    await repo.markFailed(b.id, b.content_hash, 'not checked after 6 tries: the model is away');
    const both = await Promise.all([repo.receive('w1', session({ external_id: 'call-2' })), repo.receive('w1', session({ external_id: 'call-2' }))]);
    expect(both.map((r) => r.status)).toEqual(['queued', 'queued']);
    expect((await repo.get('w1', b.id))?.session).toMatchObject({ status: 'queued', error: null });
  });

  it('a session checked while the model failed (saved with an error) is queued again when its same content is sent again', async () => {
    const repo = new SopSessionsRepo(db);
    const a = await repo.receive('w1', session());
    const finding = { id: sopFindingId(a.id, 'take-order', 'r1'), procedure_id: 'take-order', rule_id: 'r1', kind: 'step' as const, index: 2, text: 'Look up the account.', status: 'skipped' as const, evidence: [], reason: 'not called' };
    const partly = {
      release_id: null, result: 'deviated' as const, checked_result: 'deviated' as const,
      checks: [{ procedure_id: 'take-order', result: 'deviated' as const, checked_result: 'deviated' as const, body: { rules: ['not_checked'] } }], findings: [finding],
      error: '1 question not checked because the model failed (the decision model (m) could not decide whether the step was done: the model server: 500 boom)',
    };
    expect(await repo.saveOutcome(a.id, a.content_hash, partly)).toBe(true);
    expect((await repo.get('w1', a.id))?.session).toMatchObject({ status: 'checked', result: 'deviated', error: partly.error });

    // the same content sent again: queued again, its results cleared until its check is done
    expect(await repo.receive('w1', session())).toEqual({ id: a.id, status: 'queued', content_hash: a.content_hash, bytes: a.bytes });
    expect(await repo.get('w1', a.id)).toMatchObject({ session: { status: 'queued', error: null, result: null, checked_at: null }, checks: [] });
    expect((await db.query('SELECT id FROM sop_findings')).rows).toHaveLength(0);
    // checked whole this time: no error, and the same content is unchanged again
    const whole = { ...partly, result: 'followed' as const, checked_result: 'followed' as const, findings: [], error: null };
    expect(await repo.saveOutcome(a.id, a.content_hash, whole)).toBe(true);
    expect((await repo.get('w1', a.id))?.session).toMatchObject({ status: 'checked', result: 'followed', error: null });
    expect(await repo.receive('w1', session())).toMatchObject({ status: 'unchanged' });
  });

  it('re-checks a session as stored: its results cleared and it is queued, received_at kept; one queued as it is; none with its transcript let go', async () => {
    const repo = new SopSessionsRepo(db);
    const a = await repo.receive('w1', session(), { runId: 'run-1' });
    // still queued: answered as it is
    expect(await repo.recheck('w1', a.id)).toEqual({ id: a.id, external_id: 'call-1', status: 'queued', content_hash: a.content_hash });
    const finding = { id: sopFindingId(a.id, 'take-order', 'r1'), procedure_id: 'take-order', rule_id: 'r1', kind: 'step' as const, index: 2, text: 'Look up the account.', status: 'skipped' as const, evidence: [], reason: 'not called' };
    const outcome = { release_id: null, result: 'deviated' as const, checked_result: 'deviated' as const, checks: [{ procedure_id: 'take-order', result: 'deviated' as const, checked_result: 'deviated' as const, body: {} }], findings: [finding] };
    expect(await repo.saveOutcome(a.id, a.content_hash, outcome)).toBe(true);
    const before = (await repo.get('w1', a.id))!.session;

    expect(await repo.recheck('w1', a.id)).toEqual({ id: a.id, external_id: 'call-1', status: 'queued', content_hash: a.content_hash });
    const got = await repo.get('w1', a.id);
    expect(got).toMatchObject({ session: { status: 'queued', error: null, result: null, checked_result: null, release_id: null, checked_at: null, received_at: before.received_at, run_id: 'run-1' }, checks: [] });
    expect((await repo.body('w1', a.id))?.body).toMatchObject({ turns: session().turns });
    expect((await db.query('SELECT id FROM sop_findings')).rows).toHaveLength(0);
    expect(await repo.queued()).toEqual([{ workspace: 'w1', id: a.id, content_hash: a.content_hash }]);
    // a failed one too
    await repo.markFailed(a.id, a.content_hash, 'not checked after 6 tries: question service away');
    expect(await repo.recheck('w1', a.id)).toMatchObject({ status: 'queued' });
    expect((await repo.get('w1', a.id))?.session).toMatchObject({ status: 'queued', error: null });

    // its transcript let go: nothing to check
    expect(await repo.saveOutcome(a.id, a.content_hash, outcome)).toBe(true);
    await db.query(`UPDATE sop_sessions SET received_at = now() - interval '100 days' WHERE id = $1`, [a.id]);
    expect(await repo.expireTranscripts(Date.now() - 90 * 24 * 60 * 60_000)).toBe(1);
    expect(await repo.recheck('w1', a.id)).toBe('transcript_expired');
    expect((await repo.get('w1', a.id))?.session).toMatchObject({ status: 'checked', result: 'deviated' });
    // no such session, or another workspace's
    expect(await repo.recheck('w1', 'ses_nope')).toBeNull();
    expect(await repo.recheck('w2', a.id)).toBeNull();
  });

  it('empties the transcripts of checked sessions received before the cutoff, oldest first, a bounded number a statement', async () => {
    const repo = new SopSessionsRepo(db);
    const outcome = { release_id: null, result: 'followed' as const, checked_result: 'followed' as const, checks: [{ procedure_id: 'p', result: 'followed' as const, checked_result: 'followed' as const, body: { quoted: 'kept' } }], findings: [] };
    const at = async (external_id: string, daysAgo: number, checked = true) => {
      const r = await repo.receive('w1', session({ external_id, tool_calls: [{ turn: 1, tool: 'lookup', input: { phone: '555' }, output: null, error: null }] }));
      if (checked) await repo.saveOutcome(r.id, r.content_hash, outcome);
      await db.query(`UPDATE sop_sessions SET received_at = now() - make_interval(days => $2) WHERE id = $1`, [r.id, daysAgo]);
      return r;
    };
    const old1 = await at('old-1', 100);
    const old2 = await at('old-2', 95);
    const waiting = await at('old-queued', 99, false);
    const recent = await at('recent', 10);
    const cutoff = Date.now() - 90 * 24 * 60 * 60_000;
    // one a statement: the oldest first
    expect(await repo.expireTranscripts(cutoff, 1)).toBe(1);
    expect((await repo.body('w1', old1.id))?.body).toMatchObject({ external_id: 'old-1', agent: 'phone-agent', turns: [], tool_calls: [] });
    expect((await repo.body('w1', old2.id))?.body.turns).toHaveLength(2);
    expect(await repo.expireTranscripts(cutoff, 10)).toBe(1);
    expect(await repo.expireTranscripts(cutoff, 10)).toBe(0);
    const gone = await repo.body('w1', old2.id);
    expect(gone).toMatchObject({ body: { turns: [], tool_calls: [] } });
    expect(Date.parse(gone!.transcript_expired_at!)).toBeGreaterThan(Date.now() - 60_000);
    // its check and result stay; a session waiting for its check and a recent one keep theirs
    expect(await repo.get('w1', old2.id)).toMatchObject({ session: { status: 'checked', result: 'followed' }, checks: [{ body: { quoted: 'kept' } }] });
    expect((await repo.body('w1', waiting.id))?.body.turns).toHaveLength(2);
    expect(await repo.body('w1', recent.id)).toMatchObject({ transcript_expired_at: null, body: { tool_calls: [{ tool: 'lookup' }] } });
    // the same content sent again is still unchanged; new content is received whole and kept again
    expect(await repo.receive('w1', session({ external_id: 'old-1', tool_calls: [{ turn: 1, tool: 'lookup', input: { phone: '555' }, output: null, error: null }] }))).toMatchObject({ status: 'unchanged' });
    expect(await repo.receive('w1', session({ external_id: 'old-1', turns: [{ role: 'user', text: 'Again' }] }))).toMatchObject({ status: 'queued' });
    expect(await repo.body('w1', old1.id)).toMatchObject({ transcript_expired_at: null, body: { turns: [{ text: 'Again' }] } });
  });

  it('lists newest first with filters and cursor paging', async () => {
    const repo = new SopSessionsRepo(db);
    for (let i = 0; i < 5; i++) {
      const r = await repo.receive('w1', session({ external_id: `c${i}`, agent: i % 2 ? 'odd' : 'even' }));
      await repo.saveOutcome(r.id, r.content_hash, {
        release_id: null,
        result: i === 3 ? 'deviated' : 'followed',
        checked_result: i === 3 ? 'deviated' : 'followed',
        checks: [{ procedure_id: 'p', result: 'followed', checked_result: 'followed', body: {} }],
        findings: i === 3 ? [{ id: sopFindingId(r.id, 'p', 'rx'), procedure_id: 'p', rule_id: 'rx', kind: 'never', index: 1, text: 'x', status: 'violated', evidence: [], reason: null }] : [],
      });
      await new Promise((res) => setTimeout(res, 3));
    }
    const page1 = await repo.list('w1', { limit: 2 });
    expect(page1.items.map((s) => s.external_id)).toEqual(['c4', 'c3']);
    const page2 = await repo.list('w1', { limit: 2, cursor: page1.next_cursor! });
    expect(page2.items.map((s) => s.external_id)).toEqual(['c2', 'c1']);
    const page3 = await repo.list('w1', { limit: 2, cursor: page2.next_cursor! });
    expect(page3.items.map((s) => s.external_id)).toEqual(['c0']);
    expect(page3.next_cursor).toBeNull();
    expect((await repo.list('w1', { agent: 'odd' })).items.map((s) => s.external_id)).toEqual(['c3', 'c1']);
    expect((await repo.list('w1', { result: 'deviated' })).items.map((s) => s.external_id)).toEqual(['c3']);
    expect((await repo.list('w1', { rule: 'rx' })).items.map((s) => s.external_id)).toEqual(['c3']);
    expect((await repo.list('w1', { procedure: 'nope' })).items).toEqual([]);
    await expect(repo.list('w1', { cursor: 'garbage' })).rejects.toThrow('cursor');
  });
});
