import type { Db } from '@neatroots/ports';
import { SopSessionsRepo, type SessionInput } from '../sop/sessions.repo';
import { openTestDb } from '../test-db.test';
import { ReviewReadRepo } from './review-read.repo';

/**
 * Checks carry their session's workspace and time (0017_check_windows.sql), so Insights counts
 * them without joining the sessions: the copy must equal the session's through every write
 * that touches either (a check saved, saved again, content re-sent with another time, a
 * session deleted), and the counts must be the ones the join gives.
 */
let db: Db;
beforeAll(async () => {
  db = await openTestDb();
}, 60_000);
afterAll(() => db.close());
beforeEach(() => db.exec('TRUNCATE sop_findings, sop_checks, sop_sessions, projects CASCADE'));

const session = (over: Partial<SessionInput> = {}): SessionInput => ({
  external_id: 'call-1', agent: 'phone-agent', release_id: null, started_at: '2026-11-30T10:00:00.000Z', transcript_ref: null,
  turns: [{ role: 'user', text: 'Hi' }, { role: 'agent', text: 'Hello.' }], tool_calls: [], ...over,
});
const outcome = (result: 'deviated' | 'followed') => ({
  release_id: null, result, checked_result: result, findings: [],
  checks: [
    { procedure_id: 'take-order', result, checked_result: result, body: {} },
    { procedure_id: 'card-payment', result: 'followed' as const, checked_result: 'followed' as const, body: {} },
  ],
});

/** Checks whose copy differs from their session's (none may). */
const stale = async () =>
  (await db.query(`SELECT c.session_id FROM sop_checks c JOIN sop_sessions s ON s.id = c.session_id WHERE c.workspace IS DISTINCT FROM s.workspace OR c.at IS DISTINCT FROM s.at`)).rows;
/** The join's counts per procedure, week (its Monday, from the session's time) and result. */
const joined = async (from: string, to: string) =>
  (
    await db.query<{ procedure_id: string; week: string; result: string; n: unknown }>(
      `SELECT c.procedure_id, to_char(date_trunc('week', s.at AT TIME ZONE 'UTC'), 'YYYY-MM-DD') AS week, c.result, count(*) AS n
         FROM sop_sessions s JOIN sop_checks c ON c.session_id = s.id
        WHERE s.workspace = 'w1' AND s.status = 'checked' AND s.at >= $1::timestamptz AND s.at < $2::timestamptz AND c.checked_result IS NOT NULL
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
      [from, to],
    )
  ).rows.map((r) => ({ procedure_id: r.procedure_id, week: r.week, result: r.result, n: Number(r.n) }));
const order = (x: { procedure_id: string; week: string; result: string | null }, y: typeof x) =>
  `${x.procedure_id} ${x.week} ${x.result}` < `${y.procedure_id} ${y.week} ${y.result}` ? -1 : 1;
/** Rows summed over their weeks: per procedure and result. */
const summed = (rows: { procedure_id: string; result: string | null; n: number }[]) => {
  const by = new Map<string, { procedure_id: string; result: string | null; n: number }>();
  for (const r of rows) {
    const k = `${r.procedure_id} ${r.result}`;
    const cur = by.get(k);
    if (cur) cur.n += r.n;
    else by.set(k, { procedure_id: r.procedure_id, result: r.result, n: r.n });
  }
  return [...by.values()].sort((x, y) => (`${x.procedure_id} ${x.result}` < `${y.procedure_id} ${y.result}` ? -1 : 1));
};

describe("checks carry their session's workspace and time", () => {
  it('through saves, re-sent content with another time, and deletes; Insights counts equal the join', async () => {
    const repo = new SopSessionsRepo(db);
    const read = new ReviewReadRepo(db);
    const a = await repo.receive('w1', session());
    const b = await repo.receive('w1', session({ external_id: 'call-2', started_at: null }));
    const c = await repo.receive('w2', session({ external_id: 'call-3' }));
    await repo.saveOutcome(a.id, a.content_hash, outcome('deviated'));
    await repo.saveOutcome(b.id, b.content_hash, outcome('followed'));
    await repo.saveOutcome(c.id, c.content_hash, outcome('followed'));
    await repo.saveOutcome(a.id, a.content_hash, outcome('deviated')); // a job run twice
    expect(await stale()).toEqual([]);

    const window = { from: '2026-11-01T00:00:00.000Z', to: '2026-12-31T00:00:00.000Z' };
    const counts = async () => (await read.checkResults('w1', window)).sort(order);
    expect(await counts()).toEqual(await joined(window.from, window.to));
    expect(summed(await counts())).toEqual([
      { procedure_id: 'card-payment', result: 'followed', n: 2 },
      { procedure_id: 'take-order', result: 'deviated', n: 1 },
      { procedure_id: 'take-order', result: 'followed', n: 1 },
    ]);

    // new content with an earlier time: the old checks go, the new ones carry the new time
    const a2 = await repo.receive('w1', session({ started_at: '2026-10-01T10:00:00.000Z', turns: [{ role: 'user', text: 'Hello?' }] }));
    expect(await counts()).toEqual(await joined(window.from, window.to));
    await repo.saveOutcome(a2.id, a2.content_hash, outcome('followed'));
    expect(await stale()).toEqual([]);
    expect(await counts()).toEqual(await joined(window.from, window.to));
    const october = (await read.checkResults('w1', { from: '2026-09-01T00:00:00.000Z', to: '2026-11-01T00:00:00.000Z' })).map((r) => `${r.procedure_id} ${r.week} ${r.result} ${r.n}`).sort();
    // 2026-10-01 was a Thursday: its week is the Monday before
    expect(october).toEqual(['card-payment 2026-09-28 followed 1', 'take-order 2026-09-28 followed 1']);
    expect(await read.sessionResults('w1', window, ['take-order'])).toEqual([{ result: 'followed', n: 1 }]);

    await db.query('DELETE FROM sop_sessions WHERE id = $1', [b.id]);
    expect(await counts()).toEqual(await joined(window.from, window.to));
    expect(await counts()).toEqual([]);
  });
});
