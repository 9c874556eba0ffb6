import { until } from '@neatroots/platform';
import type { Clock, Db } from '@neatroots/ports';
import { finding, spanEnv, T0 } from './fixtures.test';
import { FindingsRepo } from './findings.repo';
import { QuietChecks } from './quiet';
import { RunsRepo } from './runs.repo';
import { openTestDb, resetDb } from './test-db.test';

let db: Db;
const now = T0 + 10_000;
const clock: Clock = { now: () => now };
let repo: FindingsRepo;

beforeAll(async () => {
  db = await openTestDb();
  repo = new FindingsRepo(db, clock);
}, 60_000);
afterAll(() => db.close());
beforeEach(() => resetDb(db));

async function stats(check: string) {
  return (await repo.checkStats('p1')).find((s) => s.check_id === check);
}

describe('applying finding events', () => {
  it('inserts a raised finding once, however often it is delivered', async () => {
    const ev = finding({ id: 'f1', group: 'loop', priority: 2, halt_suppressed: true, workflow: 'wf' });
    await repo.apply([ev]);
    await repo.apply([ev]);
    await repo.apply([ev, ev]);
    const f = await repo.get('p1', 'f1');
    expect(f).toMatchObject({
      id: 'f1', project: 'p1', run_id: 'r1', workflow: 'wf', check_id: 'repeated-tool-call', check_source: 'library',
      kind: 'rule', action: 'flag', halt_suppressed: true, group: 'loop', priority: 2, span_ids: ['s1', 's2', 's3'],
      count: 3, status: 'open', state: 'open', quiet: false, raised_at: new Date(T0 + 1000).toISOString(),
      resolved_at: null, active_at: null, dismissed_at: null,
    });
    expect(await stats('repeated-tool-call')).toMatchObject({ findings: 1, dismissals: 0, precision: 1 });
  });

  it('takes the new count and spans only when the count grew', async () => {
    await repo.apply([finding({ id: 'f1' })]);
    await repo.apply([finding({ id: 'f1', status: 'updated', count: 5, span_ids: ['s1', 's2', 's3', 's4', 's5'], guidance: 'five', at_ms: T0 + 2000 })]);
    // an older update redelivered late
    await repo.apply([finding({ id: 'f1', status: 'updated', count: 4, span_ids: ['s1', 's2', 's3', 's4'], guidance: 'four', at_ms: T0 + 1500 })]);
    const f = await repo.get('p1', 'f1');
    expect(f).toMatchObject({ count: 5, span_ids: ['s1', 's2', 's3', 's4', 's5'], guidance: 'five', updated_at: new Date(T0 + 2000).toISOString() });
  });

  it('resolves once, and a redelivered raise does not reopen it', async () => {
    await repo.apply([finding({ id: 'f1' })]);
    await repo.apply([finding({ id: 'f1', status: 'resolved', at_ms: T0 + 3000 })]);
    await repo.apply([finding({ id: 'f1', status: 'resolved', at_ms: T0 + 4000 })]);
    await repo.apply([finding({ id: 'f1' })]);
    const f = await repo.get('p1', 'f1');
    expect(f).toMatchObject({ status: 'resolved', state: 'resolved', resolved_at: new Date(T0 + 3000).toISOString() });
    expect(await stats('repeated-tool-call')).toMatchObject({ findings: 1 });
  });

  it('keeps a question finding\'s quote, probability and confidence, which a resolution does not erase', async () => {
    const q = { kind: 'yes_no', check_id: 'ignored-tool-error', quote: 'I have emailed you the invoice.', probability: 0.9, confidence: 'Very likely (LLM judgment)', answered_by: 'local' };
    await repo.apply([finding({ id: 'q1', ...q })]);
    await repo.apply([finding({ id: 'q1', kind: 'yes_no', check_id: 'ignored-tool-error', status: 'resolved', at_ms: T0 + 5000 })]);
    expect(await repo.get('p1', 'q1')).toMatchObject({
      status: 'resolved', quote: 'I have emailed you the invoice.', probability: 0.9, confidence: 'Very likely (LLM judgment)', answered_by: 'local',
    });
    // a rule finding has none
    await repo.apply([finding({ id: 'r1' })]);
    expect(await repo.get('p1', 'r1')).toMatchObject({ quote: null, probability: null, confidence: null, answered_by: null });
  });

  it('folds a finding\'s events within one batch', async () => {
    await repo.apply([
      finding({ id: 'f1' }),
      finding({ id: 'f1', status: 'updated', count: 4, span_ids: ['a', 'b', 'c', 'd'], at_ms: T0 + 2000 }),
      finding({ id: 'f1', status: 'resolved', count: 4, span_ids: ['a', 'b', 'c', 'd'], at_ms: T0 + 3000 }),
    ]);
    expect(await repo.get('p1', 'f1')).toMatchObject({
      count: 4, span_ids: ['a', 'b', 'c', 'd'], status: 'resolved', raised_at: new Date(T0 + 1000).toISOString(),
      resolved_at: new Date(T0 + 3000).toISOString(),
    });
  });

  it('stores an update whose raise it never saw', async () => {
    await repo.apply([finding({ id: 'f9', status: 'updated', count: 4 })]);
    expect(await repo.get('p1', 'f9')).toMatchObject({ status: 'open', count: 4 });
  });
});

describe('active: a note reached the agent', () => {
  it('marks an open finding active, keeping the first delivery', async () => {
    await repo.apply([finding({ id: 'f1' })]);
    await repo.markActive([{ finding_id: 'f1', project: 'p1', at_ms: T0 + 5000, note_id: 'n1' }]);
    await repo.markActive([{ finding_id: 'f1', project: 'p1', at_ms: T0 + 6000 }]);
    expect(await repo.get('p1', 'f1')).toMatchObject({ state: 'active', active_at: new Date(T0 + 5000).toISOString() });
  });

  it('inserts a finding active when its delivery was stored first', async () => {
    await repo.markActive([{ finding_id: 'f2', project: 'p1', at_ms: T0 + 5000 }]);
    await repo.apply([finding({ id: 'f2' })]);
    expect(await repo.get('p1', 'f2')).toMatchObject({ state: 'active', active_at: new Date(T0 + 5000).toISOString() });
  });
});

describe('listing by state', () => {
  beforeEach(async () => {
    await repo.apply([
      finding({ id: 'open', at_ms: T0 + 1 }),
      finding({ id: 'active', at_ms: T0 + 2 }),
      finding({ id: 'resolved', at_ms: T0 + 3 }),
      finding({ id: 'resolved', status: 'resolved', at_ms: T0 + 4 }),
      finding({ id: 'dismissed', at_ms: T0 + 5 }),
    ]);
    await repo.markActive([{ finding_id: 'active', project: 'p1', at_ms: T0 + 10 }]);
    await repo.dismiss('p1', 'dismissed', { by: 'ana', note: 'expected retries' });
  });

  const ids = async (state: 'open' | 'active' | 'resolved' | 'dismissed' | 'all') =>
    (await repo.list('p1', { state })).items.map((p) => p.id);

  it('lists each state, newest first; open includes active ones', async () => {
    expect(await ids('open')).toEqual(['active', 'open']);
    expect(await ids('active')).toEqual(['active']);
    expect(await ids('resolved')).toEqual(['resolved']);
    expect(await ids('dismissed')).toEqual(['dismissed']);
    expect(await ids('all')).toEqual(['dismissed', 'resolved', 'active', 'open']);
    expect((await repo.list('p1')).items.map((p) => p.id)).toEqual(['active', 'open']);
  });

  it('lists everything that happened in one run by default, each with its state', async () => {
    await repo.apply([finding({ id: 'elsewhere', run_id: 'r2', at_ms: T0 + 6 })]);
    const run = (await repo.list('p1', { run_id: 'r1' })).items.map((p) => [p.id, p.state]);
    expect(run).toEqual([['dismissed', 'dismissed'], ['resolved', 'resolved'], ['active', 'active'], ['open', 'open']]);
    expect((await repo.list('p1', { run_id: 'r1', state: 'open' })).items.map((p) => p.id)).toEqual(['active', 'open']);
  });

  it('says who dismissed and why', async () => {
    expect(await repo.get('p1', 'dismissed')).toMatchObject({
      state: 'dismissed', dismissed_by: 'ana', dismiss_note: 'expected retries', dismissed_at: new Date(now).toISOString(),
    });
  });

  it('rejects an unknown state', async () => {
    await expect(repo.list('p1', { state: 'closed' as never })).rejects.toThrow(/state must be one of/);
  });
});

describe('quiet checks: dismissed 3 times in a project', () => {
  const noisy = (id: string, run = 'r1') => finding({ id, run_id: run, check_id: 'noisy' });

  it('records later findings as quiet, leaves them out of counts and lists, and counts again after a reopen', async () => {
    const quiet = new QuietChecks(db, { ttlMs: 60_000 });
    await repo.apply([noisy('n1'), noisy('n2'), noisy('n3'), finding({ id: 'other', check_id: 'noisy', project: 'p2' })]);
    await repo.dismiss('p1', 'n1');
    await repo.dismiss('p1', 'n2');
    // dismissing twice counts once
    await repo.dismiss('p1', 'n2');
    expect(await quiet.isQuiet('p1', 'noisy')).toBe(false);
    await repo.dismiss('p1', 'n3');
    // cached: the dismissal made here is not seen until invalidated
    expect(await quiet.isQuiet('p1', 'noisy')).toBe(false);
    quiet.invalidate('p1');
    expect(await quiet.isQuiet('p1', 'noisy')).toBe(true);
    // only in p1
    expect(await quiet.isQuiet('p2', 'noisy')).toBe(false);
    expect(await stats('noisy')).toMatchObject({ findings: 3, dismissals: 3, quiet: true });

    await repo.apply([noisy('n4', 'r2')]);
    expect(await repo.get('p1', 'n4')).toMatchObject({ quiet: true, state: 'open' });
    // not in the default lists, not counted on its run, not counted for precision
    expect((await repo.list('p1')).items.map((p) => p.id)).toEqual([]);
    expect((await repo.list('p1', { include_quiet: true })).items.map((p) => p.id)).toEqual(['n4']);
    await new RunsRepo(db).writeEnvelopes([spanEnv('p1', { run_id: 'r2', span_id: 's1' })]);
    const run = await new RunsRepo(db).detail('p1', 'r2');
    expect(run!.run.open_findings).toBe(0);
    // still recorded on the run page
    expect(run!.findings.map((f) => [f.id, f.quiet])).toEqual([['n4', true]]);
    expect(run!.problems).toEqual([]);
    expect(await stats('noisy')).toMatchObject({ findings: 3, dismissals: 3 });

    // reopening one brings the dismissals below 3: the check counts again
    const reopened = await repo.reopen('p1', 'n1');
    expect(reopened).toMatchObject({ state: 'open', dismissed_at: null, dismissed_by: null });
    quiet.invalidate('p1');
    expect(await quiet.isQuiet('p1', 'noisy')).toBe(false);
    await repo.apply([noisy('n5', 'r3')]);
    expect(await repo.get('p1', 'n5')).toMatchObject({ quiet: false });
    expect(await stats('noisy')).toMatchObject({ findings: 4, dismissals: 2, quiet: false });
    // reopening a finding that is not dismissed changes nothing
    await repo.reopen('p1', 'n5');
    expect(await stats('noisy')).toMatchObject({ findings: 4, dismissals: 2 });
  });

  it('gives null for findings of another project or unknown ids', async () => {
    await repo.apply([noisy('n1')]);
    expect(await repo.dismiss('p2', 'n1')).toBeNull();
    expect(await repo.reopen('p1', 'nope')).toBeNull();
    expect(await stats('noisy')).toMatchObject({ dismissals: 0 });
  });

  it('caches a project\'s quiet set for ttlMs, then refreshes it without making callers wait', async () => {
    let t = 0;
    const quiet = new QuietChecks(db, { ttlMs: 1000, clock: { now: () => t } });
    await repo.apply([noisy('n1'), noisy('n2'), noisy('n3')]);
    expect(await quiet.isQuiet('p1', 'noisy')).toBe(false);
    for (const id of ['n1', 'n2', 'n3']) await repo.dismiss('p1', id);
    t = 999;
    expect(await quiet.isQuiet('p1', 'noisy')).toBe(false);
    t = 1000;
    // expired: the caller gets the last answer at once, and a refresh starts
    expect(await quiet.lookup('p1', 'noisy')).toBe(false);
    await until('the refreshed quiet set', async () => (await quiet.lookup('p1', 'noisy')) || undefined, 30_000, 10);
    expect(await quiet.lookup('p1', 'noisy')).toBe(true);
  });
});

describe('precision and the retire flag', () => {
  it('is 1 - dismissed / findings, flagged at 5 findings and precision under 0.5', async () => {
    const ev = (check: string, i: number) => finding({ id: `${check}-${i}`, check_id: check, run_id: `r${i}` });
    await repo.apply([1, 2, 3, 4, 5, 6].map((i) => ev('bad', i)));
    await repo.apply([1, 2, 3, 4, 5].map((i) => ev('fair', i)));
    await repo.apply([1, 2, 3, 4].map((i) => ev('young', i)));
    for (const id of ['bad-1', 'bad-2', 'bad-3', 'bad-4', 'fair-1', 'fair-2', 'young-1', 'young-2', 'young-3']) {
      await repo.dismiss('p1', id);
    }
    const all = await repo.checkStats('p1');
    expect(all).toEqual([
      { check_id: 'bad', findings: 6, dismissals: 4, precision: 1 - 4 / 6, quiet: true, retire_suggested: true },
      { check_id: 'fair', findings: 5, dismissals: 2, precision: 0.6, quiet: false, retire_suggested: false },
      { check_id: 'young', findings: 4, dismissals: 3, precision: 0.25, quiet: true, retire_suggested: false },
    ]);
  });
});

describe('groups: one problem per group and run', () => {
  it('heads a group by the most specific finding, then the earliest, and nests the others', async () => {
    await repo.apply([
      finding({ id: 'loop-low', check_id: 'runaway', group: 'loop', priority: 1, at_ms: T0 + 1 }),
      finding({ id: 'loop-high', check_id: 'repeated-tool-call', group: 'loop', priority: 5, at_ms: T0 + 3 }),
      finding({ id: 'loop-high-later', check_id: 'errors', group: 'loop', priority: 5, at_ms: T0 + 4 }),
      finding({ id: 'alone', check_id: 'slow', at_ms: T0 + 2 }),
      // the same group in another run is another problem
      finding({ id: 'loop-r2', check_id: 'runaway', group: 'loop', run_id: 'r2', priority: 1, at_ms: T0 + 5 }),
    ]);
    const page = await repo.list('p1');
    expect(page.items.map((p) => [p.id, p.related.map((r) => r.id)])).toEqual([
      ['loop-r2', []],
      ['loop-high', ['loop-high-later', 'loop-low']],
      ['alone', []],
    ]);
    const d = await new RunsRepo(db).detail('p1', 'r1');
    expect(d).toBeNull(); // no run row without spans or run events
    await new RunsRepo(db).writeEnvelopes([spanEnv('p1', { run_id: 'r1', span_id: 's1' })]);
    const run = await new RunsRepo(db).detail('p1', 'r1');
    expect(run!.run.open_findings).toBe(2);
    expect(run!.problems.map((p) => [p.id, p.related.map((r) => r.id).sort()])).toEqual([
      ['alone', []],
      ['loop-high', ['loop-high-later', 'loop-low']],
    ]);
  });

  it('groups within the state asked for, and pages by problem', async () => {
    await repo.apply([
      finding({ id: 'a1', check_id: 'x', group: 'g', priority: 9, at_ms: T0 + 1 }),
      finding({ id: 'a2', check_id: 'y', group: 'g', priority: 1, at_ms: T0 + 2 }),
      finding({ id: 'b', check_id: 'z', at_ms: T0 + 3 }),
      finding({ id: 'c', check_id: 'z', run_id: 'r2', at_ms: T0 + 4 }),
    ]);
    await repo.dismiss('p1', 'a1');
    const open = await repo.list('p1', { limit: 2 });
    expect(open.items.map((p) => [p.id, p.related.map((r) => r.id)])).toEqual([['c', []], ['b', []]]);
    const next = await repo.list('p1', { limit: 2, cursor: open.next_cursor! });
    expect(next.items.map((p) => [p.id, p.related.map((r) => r.id)])).toEqual([['a2', []]]);
    expect(next.next_cursor).toBeNull();
    const byRun = await repo.list('p1', { run_id: 'r2' });
    expect(byRun.items.map((p) => p.id)).toEqual(['c']);
  });
});
