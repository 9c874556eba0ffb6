/**
 * The run page's findings are bounded: a run of 50,000 slow tool calls (one finding a span) was
 * an answer of 75 MB, more than the distributed api takes from the review service, and a page
 * following a run of 15,000 findings got all 22.7 MB of them every 3 s with nothing new. The
 * first answer carries the newest RUN_PAGE_FINDINGS with how many there are in all; a `since`
 * answer carries only the findings written since the answer it follows.
 */
import type { Db } from '@neatroots/ports';
import { finding, spanEnv, T0 } from './fixtures.test';
import { FindingsRepo } from './findings.repo';
import { RUN_PAGE_FINDINGS } from './records';
import { RunsRepo } from './runs.repo';
import { openTestDb, resetDb } from './test-db.test';

const MORE = 20;
let db: Db;
let runs: RunsRepo;
let findings: FindingsRepo;

const slow = (i: number) =>
  finding({ id: `f${String(i).padStart(5, '0')}`, run_id: 'big', check_id: 'slow-tool-call', span_ids: [`s${i}`], count: 1, at_ms: T0 + i });

beforeAll(async () => {
  db = await openTestDb();
  runs = new RunsRepo(db);
  findings = new FindingsRepo(db);
}, 60_000);
afterAll(() => db.close());
beforeEach(async () => {
  await resetDb(db);
  await runs.writeEnvelopes([spanEnv('p1', { run_id: 'big', span_id: 's0', start_ms: T0 })]);
  await findings.apply(Array.from({ length: RUN_PAGE_FINDINGS + MORE }, (_, i) => slow(i)));
});

describe('the run page with more findings than it carries', () => {
  it('carries the newest 500, oldest first, with how many there are in all; the list pages the rest', async () => {
    const d = (await runs.detail('p1', 'big'))!;
    expect(d.findings_scope).toBe('newest');
    expect(d.findings_total).toBe(RUN_PAGE_FINDINGS + MORE);
    expect(d.findings).toHaveLength(RUN_PAGE_FINDINGS);
    expect(d.findings[0]!.id).toBe(`f${String(MORE).padStart(5, '0')}`);
    expect(d.findings.at(-1)!.id).toBe(`f${String(RUN_PAGE_FINDINGS + MORE - 1).padStart(5, '0')}`);
    expect(d.problems).toHaveLength(RUN_PAGE_FINDINGS);
    // The older ones through the findings list of the run, newest first.
    const page = await findings.list('p1', { run_id: 'big', include_quiet: true, limit: 500 });
    const cursor = page.next_cursor!;
    const rest = await findings.list('p1', { run_id: 'big', include_quiet: true, limit: 500, cursor });
    expect(rest.items.map((p) => p.id)).toEqual(Array.from({ length: MORE }, (_, i) => `f${String(MORE - 1 - i).padStart(5, '0')}`));
  });

  it('a since answer carries no finding when none was written since, and just the one written or changed since', async () => {
    const first = (await runs.detail('p1', 'big', { bodies: 'preview' }))!;
    const idle = (await runs.detail('p1', 'big', { bodies: 'preview', since: first.spans_since }))!;
    expect(idle.findings_scope).toBe('changed');
    expect(idle.findings).toEqual([]);
    expect(idle.problems).toEqual([]);
    expect(idle.findings_total).toBe(RUN_PAGE_FINDINGS + MORE);

    await findings.apply([slow(9000)]);
    const one = (await runs.detail('p1', 'big', { bodies: 'preview', since: idle.spans_since }))!;
    expect(one.findings_scope).toBe('changed');
    expect(one.findings.map((f) => f.id)).toEqual(['f09000']);
    expect(one.findings_total).toBe(RUN_PAGE_FINDINGS + MORE + 1);

    // A finding dismissed (an old one, not among the newest) is given again, as it is now.
    await findings.dismiss('p1', 'f00003', { by: 'ann' });
    const dismissed = (await runs.detail('p1', 'big', { bodies: 'preview', since: one.spans_since }))!;
    expect(dismissed.findings.map((f) => [f.id, f.state])).toEqual([['f00003', 'dismissed']]);

    const after = (await runs.detail('p1', 'big', { bodies: 'preview', since: dismissed.spans_since }))!;
    expect(after.findings).toEqual([]);
  });

  it('a since answer with more changed than it carries gives the newest again', async () => {
    const first = (await runs.detail('p1', 'big'))!;
    await findings.apply(Array.from({ length: RUN_PAGE_FINDINGS + 1 }, (_, i) => slow(10_000 + i)));
    const d = (await runs.detail('p1', 'big', { since: first.spans_since }))!;
    expect(d.findings_scope).toBe('newest');
    expect(d.findings).toHaveLength(RUN_PAGE_FINDINGS);
    expect(d.findings.at(-1)!.id).toBe(`f${10_000 + RUN_PAGE_FINDINGS}`);
    expect(d.findings_total).toBe(2 * RUN_PAGE_FINDINGS + MORE + 1);
  });
});
