import type { Db } from '@neatroots/ports';
import { openTestDb, recordingDb, type Answered } from '../test-db.test';
import { SopSessionsRepo, type SessionInput } from './sessions.repo';

/**
 * A session's own GET (GET …/sessions/{id}) shows no transcript (docs/contracts.md: the
 * transcript is GET …/sessions/{id}/transcript), so it must not read one: it read and parsed
 * the whole body, megabytes for a long session, and dropped it.
 */
let db: Db;
/** What the database answered to each statement run through `spied`. */
let answered: Answered[];
let spied: Db;

beforeAll(async () => {
  db = await openTestDb();
  ({ db: spied, answered } = recordingDb(db));
}, 60_000);
afterAll(() => db.close());
beforeEach(() => db.exec('TRUNCATE sop_findings, sop_checks, sop_sessions, projects CASCADE'));

const LONG_TURN = 'x'.repeat(5_000);

/** A long session: 300 turns of 5,000 characters, about 1.5 MB of transcript. */
const longSession = (): SessionInput => ({
  external_id: 'long-1',
  agent: 'phone-agent',
  release_id: null,
  started_at: '2026-11-30T10:00:00.000Z',
  transcript_ref: 'https://calls.example/long-1',
  turns: Array.from({ length: 300 }, (_, t) => ({ role: t % 2 ? ('agent' as const) : ('user' as const), text: `${t} ${LONG_TURN}` })),
  tool_calls: [{ turn: 1, tool: 'lookup', input: { q: LONG_TURN }, output: null, error: null }],
});

describe('SopSessionsRepo.get of a long session', () => {
  it('answers the session and its checks without reading its transcript', async () => {
    const repo = new SopSessionsRepo(spied);
    const got = await repo.receive('w1', longSession());
    await repo.saveOutcome(got.id, got.content_hash, {
      release_id: null,
      result: 'deviated',
      checked_result: 'deviated',
      checks: [{ procedure_id: 'take-order', result: 'deviated', checked_result: 'deviated', body: { procedure_id: 'take-order', rules: [] } }],
      findings: [],
    });

    answered.length = 0;
    const one = await repo.get('w1', got.id);
    expect(one?.session).toMatchObject({ id: got.id, workspace: 'w1', external_id: 'long-1', agent: 'phone-agent', status: 'checked', result: 'deviated', transcript_ref: 'https://calls.example/long-1' });
    expect(one?.session).not.toHaveProperty('body');
    expect(one?.checks).toEqual([{ procedure_id: 'take-order', result: 'deviated', checked_result: 'deviated', body: { procedure_id: 'take-order', rules: [] } }]);
    // What the database sent back for the session: no body; for it and its checks, kilobytes, not 1.5 MB.
    const sessionReads = answered.filter((a) => /FROM sop_sessions/.test(a.sql));
    expect(sessionReads).toHaveLength(1);
    for (const row of sessionReads[0].rows) expect(Object.keys(row)).not.toContain('body');
    expect(JSON.stringify(answered.map((a) => a.rows)).length).toBeLessThan(10_000);

    // No such session: null, as before.
    expect(await repo.get('w1', 'ses_none')).toBeNull();
    expect(await repo.get('w2', got.id)).toBeNull();

    // The transcript's own read still has it whole.
    const body = await repo.body('w1', got.id);
    expect(body?.body.turns).toHaveLength(300);
    expect(body?.body.turns[0].text).toContain(LONG_TURN);
  }, 120_000);
});
