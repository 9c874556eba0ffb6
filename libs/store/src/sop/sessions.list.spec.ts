import type { Db } from '@neatroots/ports';
import { openTestDb, recordingDb, type Answered } from '../test-db.test';
import { SopSessionsRepo, type SessionInput } from './sessions.repo';

/**
 * The sessions list (GET …/sessions, 50 a page in the web app) shows no transcript, so it must
 * not read one: a page of long sessions read and parsed every body, megabytes each, and the
 * embedded process grew by gigabytes while ingest refused spans (429).
 */

let db: Db;
/** What the database answered to each statement run through `spied`. */
let answered: Answered[];
/** The test's database, every query's statement and rows recorded. */
let spied: Db;

beforeAll(async () => {
  db = await openTestDb();
  ({ db: spied, answered } = recordingDb(db));
}, 60_000);
afterAll(() => db.close());
beforeEach(() => db.exec('TRUNCATE sop_findings, sop_checks, sop_sessions, projects CASCADE'));

const LONG_TURN = 'x'.repeat(5_000);

/** A long session: 300 turns of 5,000 characters, about 1.5 MB of transcript. */
const longSession = (i: number): SessionInput => ({
  external_id: `long-${i}`,
  agent: 'phone-agent',
  release_id: null,
  started_at: '2026-11-30T10:00:00.000Z',
  transcript_ref: null,
  turns: Array.from({ length: 300 }, (_, t) => ({ role: t % 2 ? ('agent' as const) : ('user' as const), text: `${i}.${t} ${LONG_TURN}` })),
  tool_calls: [{ turn: 1, tool: 'lookup', input: { q: LONG_TURN }, output: null, error: null }],
});

describe('SopSessionsRepo.list with long sessions', () => {
  it('lists 20 sessions of 1.5 MB each without reading a single transcript', async () => {
    const repo = new SopSessionsRepo(spied);
    // One at a time: each insert is its own statement, not a 30 MB one.
    for (let i = 0; i < 20; i++) await repo.receive('w1', longSession(i));

    answered.length = 0;
    const page = await repo.list('w1', { limit: 50 });
    expect(page.items).toHaveLength(20);
    expect(page.next_cursor).toBeNull();
    expect(new Set(page.items.map((s) => s.external_id)).size).toBe(20);
    for (const s of page.items) {
      expect(s).toMatchObject({ workspace: 'w1', agent: 'phone-agent', status: 'queued' });
      expect(s).not.toHaveProperty('body');
    }
    // What the database sent back for the list: no body in any row, kilobytes, not 30 MB.
    expect(answered.length).toBeGreaterThan(0);
    for (const a of answered) {
      for (const row of a.rows) expect(Object.keys(row)).not.toContain('body');
    }
    const bytes = answered.reduce((n, a) => n + JSON.stringify(a.rows).length, 0);
    expect(bytes).toBeLessThan(100_000);

    // Paged and filtered the same way.
    answered.length = 0;
    const first = await repo.list('w1', { limit: 7, agent: 'phone-agent' });
    const second = await repo.list('w1', { limit: 7, cursor: first.next_cursor! });
    expect([...first.items, ...second.items].map((s) => s.id)).toEqual(page.items.slice(0, 14).map((s) => s.id));
    expect(answered.flatMap((a) => a.rows).some((row) => 'body' in row)).toBe(false);

    // The one session's read still has its whole transcript.
    const one = await repo.body('w1', page.items[0].id);
    expect(one?.body.turns).toHaveLength(300);
    expect(one?.body.turns[0].text).toContain(LONG_TURN);
  }, 120_000);
});
