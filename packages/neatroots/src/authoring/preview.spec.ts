import { parseCheck } from '@neatroots/checks';
import { migrate, openPglite } from '@neatroots/platform';
import type { Db } from '@neatroots/ports';
import { createReviewQueries } from '@neatroots/review';
import type { Envelope } from '@neatroots/spans';
import { RunsRepo } from '@neatroots/store';
import { recentTools } from './authoring';
import { previewCheck } from './preview';

/**
 * A preview, and a draft's list of the project's tools, on runs whose spans retention deleted:
 * such a run has nothing left to replay (every rule would pass it), so it is reported as not
 * checked, never counted as checked and not flagged.
 */
const DAY = 24 * 60 * 60_000;
const NOW = Date.now();

let db: Db;
beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
}, 60_000);
afterAll(() => db.close());
beforeEach(() => db.exec('TRUNCATE runs, spans, findings, question_results CASCADE'));

/** A run calling `tool` three times, started `startDaysAgo` and last seen `seenDaysAgo` days before now. */
async function run(run_id: string, tool: string, startDaysAgo: number, seenDaysAgo = startDaysAgo): Promise<void> {
  const at = NOW - startDaysAgo * DAY;
  const seen = NOW - seenDaysAgo * DAY;
  const envs: Envelope[] = [{ project: 'p', received_ms: at, item: { kind: 'run_start', run: { event: 'run_start', run_id, ts_ms: at, workflow: 'refunds' } } }];
  for (let i = 0; i < 3; i++) envs.push({ project: 'p', received_ms: seen, item: { kind: 'span', span: { run_id, span_id: `s${i}`, type: 'tool', name: tool, tool, status: 'ok', start_ms: at + i } } });
  envs.push({ project: 'p', received_ms: seen, item: { kind: 'run_end', run: { event: 'run_end', run_id, ts_ms: at + 9, status: 'ok', final_output: 'done' } } });
  await new RunsRepo(db).writeEnvelopes(envs);
}

const REFUNDS = parseCheck(
  { id: 'refunds', kind: 'rule', title: 'Refund issued', rule: { type: 'count', span: { tool: 'issue_refund' }, at_least: 1 }, guidance: 'Say so.', action: 'flag' },
  'inline',
  'project',
);

const preview = () => previewCheck({ project: 'p', check: REFUNDS, warnings: [], runs: 20, modelCalls: 0, queries: createReviewQueries(db), timeMs: 30_000 });

describe('check preview on runs whose spans retention deleted', () => {
  it('reports them as not checked, with the day their spans went, instead of checked and not flagged', async () => {
    await run('old-1', 'issue_refund', 41);
    await run('old-2', 'issue_refund', 40);
    await run('new', 'issue_refund', 1);
    const before = await preview();
    expect(before.runs).toMatchObject({ checked: 3, flagged: 3 });
    expect(before.not_checked).toEqual([]);

    expect(await new RunsRepo(db).expireSpans(NOW - 30 * DAY)).toEqual({ runs: 2, spans: 6 });
    const after = await preview();
    expect(after.runs).toMatchObject({ checked: 1, flagged: 1, more: false });
    expect(after.flagged.map((r) => r.run_id)).toEqual(['new']);
    const day = (await new RunsRepo(db).get('p', 'old-1'))!.spans_expired_at!.slice(0, 10);
    expect(after.not_checked).toEqual([
      { run_id: 'old-1', reason: `its spans were deleted by retention on ${day} (NEATROOTS_SPAN_RETENTION_DAYS): not replayed` },
      { run_id: 'old-2', reason: `its spans were deleted by retention on ${day} (NEATROOTS_SPAN_RETENTION_DAYS): not replayed` },
    ]);
    expect(after.bounds).toBe(
      'Previewed on the 3 most recent runs of project p; 2 of them not replayed: their spans were deleted by retention (in not_checked); at most 0 model calls (0 made).',
    );
  });

  it('drafts with the tools of the most recent runs whose spans are kept', async () => {
    // A run still going after 60 days calls lookup_order; the five runs started after it ended 40 days ago.
    await run('live', 'lookup_order', 60, 1);
    for (let i = 0; i < 5; i++) await run(`done-${i}`, 'issue_refund', 40);
    await new RunsRepo(db).expireSpans(NOW - 30 * DAY);
    expect(await recentTools(createReviewQueries(db), 'p')).toEqual(['lookup_order']);
  });
});
