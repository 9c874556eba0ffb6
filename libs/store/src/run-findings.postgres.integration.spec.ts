/**
 * The run page's since look on Postgres, a server other transactions share: a look carries the
 * findings written after the answer it follows, and no others, while another transaction that
 * took a transaction id stays open (a long batch, a retention step, another database's writer
 * on the same server). Taken as "written by the oldest transaction running or a later one", a
 * look carried every finding written since that transaction began, on every look until it ended.
 */
import type { Db } from '@neatroots/ports';
import { migrate, openPostgres, scratchDatabase, serviceOrSkip, type ScratchDatabase } from '@neatroots/platform';
import { finding, spanEnv, T0 } from './fixtures.test';
import { FindingsRepo } from './findings.repo';
import { RunsRepo } from './runs.repo';

const pg = serviceOrSkip('postgres', 'the run page since look on Postgres');

(pg ? describe : describe.skip)('the run page since look on Postgres with another transaction open', () => {
  let scratch: ScratchDatabase;
  let db: Db;
  let other: Db;

  beforeAll(async () => {
    scratch = await scratchDatabase(pg!.url, `nr_run_findings_${process.pid}`);
    db = await openPostgres({ url: scratch.url, max: 4 });
    other = await openPostgres({ url: scratch.url, max: 1 });
    await migrate(db);
  }, 120_000);

  afterAll(async () => {
    await other?.close();
    await db?.close();
    await scratch?.drop();
  });

  it('carries only the findings written since, not those written since the other transaction began', async () => {
    const runs = new RunsRepo(db);
    const findings = new FindingsRepo(db);
    const slow = (i: number) => finding({ id: `f${i}`, run_id: 'r1', check_id: 'slow-tool-call', span_ids: [`s${i}`], count: 1, at_ms: T0 + i });
    await runs.writeEnvelopes([spanEnv('p1', { run_id: 'r1', span_id: 's0', start_ms: T0 })]);

    // Another transaction takes a transaction id and stays open.
    let end!: () => void;
    const ended = new Promise<void>((r) => (end = r));
    let begun!: () => void;
    const open = new Promise<void>((r) => (begun = r));
    const held = other.transaction(async (tx) => {
      await tx.query('SELECT pg_current_xact_id()');
      begun();
      await ended;
    });
    await open;
    try {
      await findings.apply([1, 2, 3, 4, 5].map(slow));
      const first = (await runs.detail('p1', 'r1'))!;
      expect(first.findings.map((f) => f.id)).toEqual(['f1', 'f2', 'f3', 'f4', 'f5']);
      const idle = (await runs.detail('p1', 'r1', { since: first.spans_since }))!;
      expect([idle.findings_scope, idle.findings.map((f) => f.id)]).toEqual(['changed', []]);
      await findings.apply([slow(6)]);
      const one = (await runs.detail('p1', 'r1', { since: idle.spans_since }))!;
      expect([one.findings_scope, one.findings.map((f) => f.id), one.findings_total]).toEqual(['changed', ['f6'], 6]);
    } finally {
      end();
      await held;
    }
  }, 60_000);
});
