import type { Db } from '@neatroots/ports';
import { openTestDb } from '../test-db.test';
import { SopSessionsRepo, sessionContentHash, sopFindingId, type CheckOutcome, type SessionInput } from './sessions.repo';
import { WorkspaceRepo } from './workspace.repo';

// Many callers at once, as the api and the check jobs call the repository: their statements
// are coalesced (see Coalescer), and each caller still gets what it would have alone.
let db: Db;
beforeAll(async () => {
  db = await openTestDb();
}, 60_000);
afterAll(() => db.close());
beforeEach(() => db.exec('TRUNCATE sop_findings, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files, projects CASCADE'));

const session = (externalId: string, over: Partial<SessionInput> = {}): SessionInput => ({
  external_id: externalId,
  agent: 'phone-agent',
  release_id: null,
  started_at: '2026-11-30T10:00:00.000Z',
  transcript_ref: null,
  turns: [{ role: 'user', text: `Hi, this is ${externalId}` }],
  tool_calls: [],
  ...over,
});

function outcome(sessionId: string, releaseId: string | null, rules: string[]): CheckOutcome {
  return {
    release_id: releaseId,
    result: rules.length ? 'deviated' : 'followed',
    checked_result: rules.length ? 'deviated' : 'followed',
    checks: [
      { procedure_id: 'take-order', result: rules.length ? 'deviated' : 'followed', checked_result: rules.length ? 'deviated' : 'followed', body: { procedure_id: 'take-order', n: rules.length } },
      { procedure_id: 'payment', result: 'followed', checked_result: 'followed', body: { procedure_id: 'payment' } },
    ],
    findings: rules.map((r, i) => ({ id: sopFindingId(sessionId, 'take-order', r), procedure_id: 'take-order', rule_id: r, kind: 'step' as const, index: i + 1, text: `Rule ${r}`, status: 'skipped' as const, evidence: [{ turn: 0 }], reason: `${r} not done` })),
  };
}

describe('SopSessionsRepo under concurrent callers', () => {
  it('stores sessions received at once, and the same session sent twice at once as it would one after the other', async () => {
    const repo = new SopSessionsRepo(db);
    const many = await Promise.all(Array.from({ length: 20 }, (_, i) => repo.receive(i % 2 ? 'w1' : 'w2', session(`c${i}`))));
    expect(many.every((r) => r.status === 'queued')).toBe(true);
    expect(Number((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM sop_sessions')).rows[0].n)).toBe(20);
    expect((await db.query<{ name: string }>('SELECT name FROM projects ORDER BY name')).rows.map((r) => r.name)).toEqual(['w1', 'w2']);

    // other content for one external id, sent together: the later replaces the earlier
    const a = session('twice');
    const b = session('twice', { turns: [{ role: 'user', text: 'Other words' }] });
    const [ra, rb] = await Promise.all([repo.receive('w1', a), repo.receive('w1', b)]);
    expect([ra.status, rb.status]).toEqual(['queued', 'queued']);
    expect((await repo.get('w1', ra.id))?.session.content_hash).toBe(sessionContentHash(b));
    // the same content sent together: stored once; the second finds it queued (and its caller queues the check again)
    const [rc, rd] = await Promise.all([repo.receive('w1', session('same')), repo.receive('w1', session('same'))]);
    expect([rc.status, rd.status]).toEqual(['queued', 'queued']);
    expect(Number((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM sop_sessions WHERE external_id = 'same'`)).rows[0].n)).toBe(1);
  });

  it('refuses a bad session sent among good ones without losing the good ones', async () => {
    const repo = new SopSessionsRepo(db);
    const got = await Promise.allSettled([
      repo.receive('w1', session('ok-1')),
      repo.receive('w1', session('bad', { started_at: 'not a time' })),
      repo.receive('w1', session('ok-2')),
    ]);
    expect(got.map((g) => g.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((await db.query<{ external_id: string }>('SELECT external_id FROM sop_sessions ORDER BY external_id')).rows.map((r) => r.external_id)).toEqual(['ok-1', 'ok-2']);
  });

  it('saves outcomes that finish together, each with its own checks and findings, and none for replaced content', async () => {
    const repo = new SopSessionsRepo(db);
    const ws = new WorkspaceRepo(db);
    await ws.updateHead('w1', { put: [{ path: 'procedures/a.md', text: '# A\n', version: 'v1' }] }, () => undefined);
    const rel = await ws.publish('w1', () => ({ procedures: [] }));
    const sent = await Promise.all(Array.from({ length: 8 }, (_, i) => repo.receive('w1', session(`s${i}`))));
    // s7 gets other content before its check of the first content is saved
    await repo.receive('w1', session('s7', { turns: [{ role: 'user', text: 'changed' }] }));
    const wrote = await Promise.all(sent.map((s, i) => repo.saveOutcome(s.id, s.content_hash, outcome(s.id, rel.id, i % 3 ? ['r1', 'r2'] : []))));
    expect(wrote).toEqual([true, true, true, true, true, true, true, false]);
    for (const [i, s] of sent.entries()) {
      const got = await repo.get('w1', s.id);
      const findings = await db.query<{ rule_id: string; session_id: string; release_id: string; started_at: unknown; workspace: string }>(
        'SELECT rule_id, session_id, release_id, started_at, workspace FROM sop_findings WHERE session_id = $1 ORDER BY rule_id',
        [s.id],
      );
      if (i === 7) {
        expect(got?.session).toMatchObject({ status: 'queued', result: null });
        expect(got?.checks).toEqual([]);
        expect(findings.rows).toEqual([]);
        continue;
      }
      expect(got?.session).toMatchObject({ status: 'checked', release_id: rel.id, result: i % 3 ? 'deviated' : 'followed' });
      expect(got?.checks.map((c) => c.procedure_id)).toEqual(['take-order', 'payment']);
      expect(got?.checks[0].body).toEqual({ procedure_id: 'take-order', n: i % 3 ? 2 : 0 });
      expect(findings.rows.map((f) => f.rule_id)).toEqual(i % 3 ? ['r1', 'r2'] : []);
      for (const f of findings.rows) expect(f).toMatchObject({ release_id: rel.id, workspace: 'w1' });
    }
    // saved again together (jobs run twice): the same rows, not more
    expect(await Promise.all(sent.slice(0, 3).map((s, i) => repo.saveOutcome(s.id, s.content_hash, outcome(s.id, rel.id, i % 3 ? ['r1', 'r2'] : []))))).toEqual([true, true, true]);
    expect(Number((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM sop_findings')).rows[0].n)).toBe(2 * 4); // s1, s2, s4, s5
  });

  it("reads a session for its check with the workspace's live release as of now", async () => {
    const repo = new SopSessionsRepo(db);
    const ws = new WorkspaceRepo(db);
    const r = await repo.receive('w1', session('x'));
    expect((await repo.forCheck('w1', r.id))?.live_release_id).toBeNull();
    await ws.updateHead('w1', { put: [{ path: 'procedures/a.md', text: '# A\n', version: 'v1' }] }, () => undefined);
    const r1 = await ws.publish('w1', () => ({}));
    const [got, none, elsewhere] = await Promise.all([repo.forCheck('w1', r.id), repo.forCheck('w1', 'ses_nope'), repo.forCheck('w2', r.id)]);
    expect(got).toMatchObject({ live_release_id: r1.id, session: { id: r.id, status: 'queued', body: { external_id: 'x' } } });
    expect(none).toBeNull();
    expect(elsewhere).toBeNull();
    const r2 = await ws.publish('w1', () => ({}));
    expect((await repo.forCheck('w1', r.id))?.live_release_id).toBe(r2.id);
  });
});
