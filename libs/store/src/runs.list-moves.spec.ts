/**
 * The runs list's documented behaviour when a run's start moves earlier between two page reads
 * (docs/api.md, GET runs): OpenTelemetry exports a parent span after its children, so a run's
 * start often moves earlier once it is listed. The list is newest first by start, paged on that
 * order as it is at each read: a run listed on page 1 whose start moved earlier comes again on
 * page 2, and no run is left out (clients key runs by run_id).
 */
import type { Db } from '@neatroots/ports';
import { spanEnv, T0 } from './fixtures.test';
import { RunsRepo } from './runs.repo';
import { openTestDb, resetDb } from './test-db.test';

let db: Db;
let runs: RunsRepo;

beforeAll(async () => {
  db = await openTestDb();
  runs = new RunsRepo(db);
}, 60_000);
afterAll(() => db.close());
beforeEach(() => resetDb(db));

describe('GET runs while a listed run gets an earlier span', () => {
  it('lists the run again on the next page in its new place, and leaves no run out', async () => {
    // r0 .. r5, r5 the newest; each starts with a child span 10 s after the one before.
    await runs.writeEnvelopes(Array.from({ length: 6 }, (_, i) => spanEnv('p1', { run_id: `r${i}`, span_id: 'child', start_ms: T0 + 10_000 * (i + 1) })));
    const first = await runs.list('p1', { limit: 3 });
    expect(first.items.map((r) => r.run_id)).toEqual(['r5', 'r4', 'r3']);

    // r4's root span arrives: it started before every other run, so r4 is now the oldest.
    await runs.writeEnvelopes([spanEnv('p1', { run_id: 'r4', span_id: 'root', start_ms: T0 })]);
    const second = await runs.list('p1', { limit: 3, cursor: first.next_cursor! });
    const third = second.next_cursor ? await runs.list('p1', { limit: 3, cursor: second.next_cursor }) : { items: [] };
    const later = [...second.items, ...third.items];
    expect(later.map((r) => r.run_id)).toEqual(['r2', 'r1', 'r0', 'r4']);
    expect(later.find((r) => r.run_id === 'r4')!.started_at).toBe(new Date(T0).toISOString());

    // Keyed by run_id, the pages hold every run once, the later copy of r4 with its new start.
    const byId = new Map([...first.items, ...later].map((r) => [r.run_id, r]));
    expect([...byId.keys()].sort()).toEqual(['r0', 'r1', 'r2', 'r3', 'r4', 'r5']);
    expect(byId.get('r4')!.started_at).toBe(new Date(T0).toISOString());
  });
});
