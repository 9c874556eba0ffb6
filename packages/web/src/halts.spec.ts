import type { Db } from '@neatroots/ports';
import { FindingsRepo } from '@neatroots/store';
import { finding } from '../../../libs/store/src/fixtures.test';
import { openTestDb } from '../../../libs/store/src/test-db.test';
import { haltsSince, type ProblemPage } from '../app/halts';

/**
 * Home's "Runs halted today", read from the store's real problem pages (GET findings answers
 * FindingsRepo.list's page and cursor as they are), a small page size standing in for 500.
 */
const HOUR = 3_600_000;
const since = Date.parse('2026-03-10T00:00:00.000Z');

describe("Home's runs halted today", () => {
  let db: Db;
  let repo: FindingsRepo;
  const read = (limit: number) => async (cursor: string | null): Promise<ProblemPage> => {
    const page = await repo.list('p1', { state: 'all', limit, ...(cursor ? { cursor } : {}) });
    return { findings: page.items, next_cursor: page.next_cursor };
  };

  beforeAll(async () => {
    db = await openTestDb();
    repo = new FindingsRepo(db, { now: () => since + 20 * HOUR });
    await repo.apply([
      // Newest problem: a flag today.
      finding({ id: 'today-flag', run_id: 'r-new', at_ms: since + 9 * HOUR }),
      // A halt today, a problem of its own: found on any reading.
      finding({ id: 'today-halt', run_id: 'r-short', check_id: 'refund-without-lookup', action: 'halt', at_ms: since + 8 * HOUR }),
      // A problem from yesterday, newer than the long run's.
      finding({ id: 'old-flag', run_id: 'r-old', at_ms: since - 2 * HOUR }),
      // A long run: its group was headed yesterday; the halt under it was raised today.
      finding({ id: 'long-head', run_id: 'r-long', check_id: 'repeated-tool-call', group: 'loop', priority: 5, at_ms: since - 5 * HOUR }),
      finding({ id: 'long-halt', run_id: 'r-long', check_id: 'stop-the-loop', group: 'loop', priority: 1, action: 'halt', at_ms: since + 7 * HOUR }),
      // Neither counts: a halt yesterday, and one today whose halt was suppressed (steering off).
      finding({ id: 'old-halt', run_id: 'r-yesterday', check_id: 'refund-without-lookup', action: 'halt', at_ms: since - 6 * HOUR }),
      finding({ id: 'quiet-halt', run_id: 'r-steering-off', check_id: 'refund-without-lookup', action: 'halt', halt_suppressed: true, at_ms: since + 6 * HOUR }),
    ]);
  }, 60_000);
  afterAll(() => db.close());

  it('finds a halt raised today under a problem headed before today, on a page after an older problem', async () => {
    // Newest head first: today-flag, today-halt, quiet-halt, old-flag, long-head (long-halt under it), old-halt.
    const long = (await repo.list('p1', { state: 'all', limit: 10 })).items.find((p) => p.id === 'long-head')!;
    expect(long.related.map((f) => f.id)).toEqual(['long-halt']);
    const halts = await haltsSince(read(1), since, 10);
    expect(halts.runs.map((f) => [f.run_id, f.id])).toEqual([
      ['r-short', 'today-halt'],
      ['r-long', 'long-halt'],
    ]);
    expect(halts.partial).toBe(false);
  });

  it('says the list is partial when the page cap stops it with problems left to read', async () => {
    const two = await haltsSince(read(1), since, 2);
    expect(two).toEqual({ runs: [expect.objectContaining({ id: 'today-halt' })], partial: true });
    // All six problems in two pages of 3: the last page has no cursor, nothing is partial.
    expect((await haltsSince(read(3), since, 2)).partial).toBe(false);
  });
});
