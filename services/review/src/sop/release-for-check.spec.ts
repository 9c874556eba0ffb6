import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Db } from '@neatroots/ports';
import { InlineJobs, migrate, openPglite } from '@neatroots/platform';
import { createCheckSession, readFolder } from '@neatroots/sop';
import { SopSessions, type CheckSession } from './sessions';
import { SopWorkspaces } from './workspaces';

// The check job reads a release's lock once per process (it never changes once published),
// and the live release with every session (it changes at each publish, on any replica).
const FIXTURES = path.resolve(__dirname, '../../../../libs/sop/fixtures');
const files = [...readFolder(path.join(FIXTURES, 'luigis')).entries()].map(([p, text]) => ({ path: p, text }));

let raw: Db;
let statements: number;
/** The database, counting the statements sent to it. */
let db: Db;
beforeAll(async () => {
  raw = await openPglite();
  await migrate(raw);
  db = {
    kind: raw.kind,
    query: (sql, params) => (statements++, raw.query(sql, params)),
    exec: (sql) => raw.exec(sql),
    transaction: (fn) => raw.transaction(fn),
    close: () => raw.close(),
  };
}, 60_000);
afterAll(() => raw.close());
beforeEach(() => raw.exec('TRUNCATE sop_findings, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files, projects CASCADE'));

describe('the release a session is checked on', () => {
  it('is read once by id, and never from another workspace', async () => {
    const ws = new SopWorkspaces(db);
    await ws.push('luigis', files);
    const r1 = await ws.publish('luigis');
    statements = 0;
    const first = await ws.releaseForCheck('luigis', r1.id);
    expect(first).toMatchObject({ id: r1.id, number: 1, workspace: 'luigis' });
    expect(statements).toBe(1);
    const again = await Promise.all([ws.releaseForCheck('luigis', r1.id), ws.releaseForCheck('luigis', r1.id)]);
    expect(again.map((r) => r?.id)).toEqual([r1.id, r1.id]);
    expect(statements).toBe(1);
    expect(await ws.releaseForCheck('elsewhere', r1.id)).toBeNull();
    expect(await ws.releaseForCheck('luigis', null)).toBeNull();
    expect((await ws.releaseForCheck('luigis', '1'))?.id).toBe(r1.id);
  });

  it('is the live one as of the check: a publish is seen by the next session, by any process', async () => {
    const jobs = new InlineJobs();
    try {
      const used: string[] = [];
      const check = createCheckSession({});
      const checker: CheckSession = (args) => (used.push(args.releaseId), check(args));
      // Two processes' worth: one publishes, the other checks (each with its own kept locks).
      const publisher = new SopWorkspaces(db);
      const sessions = new SopSessions(db, new SopWorkspaces(db), jobs, checker);
      await sessions.start();
      await publisher.push('luigis', files);
      const r1 = await publisher.publish('luigis');
      const base = readSession();
      const a = await sessions.receive('luigis', { ...base, external_id: 'a' });
      await until(async () => (await sessions.get('luigis', a.id)).status !== 'queued');
      const r2 = await publisher.publish('luigis');
      const b = await sessions.receive('luigis', { ...base, external_id: 'b' });
      const c = await sessions.receive('luigis', { ...base, external_id: 'c', release_id: '1' });
      await until(async () => (await sessions.get('luigis', b.id)).status !== 'queued' && (await sessions.get('luigis', c.id)).status !== 'queued');
      expect((await sessions.get('luigis', a.id)).release_id).toBe(r1.id);
      expect((await sessions.get('luigis', b.id)).release_id).toBe(r2.id);
      expect((await sessions.get('luigis', c.id)).release_id).toBe(r1.id);
      expect(used.sort()).toEqual([r1.id, r1.id, r2.id].sort());
    } finally {
      await jobs.close();
    }
  });
});

function readSession(): Record<string, unknown> {
  return JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', 'payment-followed', 'session.json'), 'utf8'));
}

async function until(done: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (await done()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('the sessions were never checked');
}
