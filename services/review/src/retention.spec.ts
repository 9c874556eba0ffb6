import type { Db } from '@neatroots/ports';
import { InlineJobs } from '@neatroots/platform';
import { DeadLettersRepo, RunsRepo, SopSessionsRepo } from '@neatroots/store';
import type { Envelope } from '@neatroots/spans';
import { recordSchedules, useMigratedDb } from './sop-fixtures.test';
import { expireSpans, expireTranscripts, RETENTION_QUEUE, RETENTION_SCHEDULE, scheduleRetention } from './retention';

const DAY = 24 * 60 * 60_000;
const NOW = Date.parse('2026-06-01T12:00:00Z');

let db: Db;
useMigratedDb((d) => (db = d), 'runs, spans, findings, dead_letters, sop_sessions, question_results');

/** `n` runs of project p, each of 3 spans, started and last seen `daysAgo` days before NOW. */
async function runs(prefix: string, n: number, daysAgo: number): Promise<void> {
  const at = NOW - daysAgo * DAY;
  const envs: Envelope[] = [];
  for (let i = 0; i < n; i++) {
    const run_id = `${prefix}-${i}`;
    envs.push({ project: 'p', received_ms: at, item: { kind: 'run_start', run: { event: 'run_start', run_id, ts_ms: at } } });
    for (let s = 0; s < 3; s++) envs.push({ project: 'p', received_ms: at, item: { kind: 'span', span: { run_id, span_id: `s${s}`, type: 'tool', name: 'search', tool: 'search', status: 'ok', start_ms: at + s } } });
  }
  await new RunsRepo(db).writeEnvelopes(envs);
}

/** `n` runs of project p, each of `spans` spans and as many question results, received `daysAgo` days before NOW. */
async function bigRuns(prefix: string, n: number, spans: number, daysAgo: number): Promise<void> {
  const at = NOW - daysAgo * DAY;
  for (let i = 0; i < n; i++) {
    const run_id = `${prefix}-${i}`;
    const envs: Envelope[] = [{ project: 'p', received_ms: at, item: { kind: 'run_start', run: { event: 'run_start', run_id, ts_ms: at } } }];
    for (let s = 0; s < spans; s++) envs.push({ project: 'p', received_ms: at, item: { kind: 'span', span: { run_id, span_id: `s${s}`, type: 'llm', name: 'chat', status: 'ok', start_ms: at + s } } });
    await new RunsRepo(db).writeEnvelopes(envs);
    await db.query(
      `INSERT INTO question_results (task_id, project, run_id, check_id, anchor, status, at)
       SELECT $1 || '-' || g, 'p', $1, 'q', 's' || g, 'answered', $2::timestamptz FROM generate_series(0, $3::int - 1) g`,
      [run_id, new Date(at).toISOString(), spans],
    );
  }
}

/** The runs of project p whose spans retention marked as gone. */
async function marked(): Promise<string[]> {
  const res = await db.query<{ run_id: string }>(`SELECT run_id FROM runs WHERE spans_expired_at IS NOT NULL ORDER BY run_id`);
  return res.rows.map((r) => r.run_id);
}

const rowsOf = async (table: string) => Number((await db.query<{ n: unknown }>(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);

/**
 * The database, each statement that deletes spans watched: how many spans and question
 * results it deleted, counted before and after it.
 */
function watchDeletes(deleted: { spans: number; results: number }[]): Db {
  return {
    kind: db.kind,
    exec: (sql) => db.exec(sql),
    transaction: (fn) => db.transaction(fn),
    close: () => db.close(),
    query: async <R,>(sql: string, params?: readonly unknown[]) => {
      if (!/DELETE\s+FROM\s+(spans|question_results)/i.test(sql)) return db.query<R>(sql, params);
      const spans = await rowsOf('spans');
      const results = await rowsOf('question_results');
      const out = await db.query<R>(sql, params);
      deleted.push({ spans: spans - (await rowsOf('spans')), results: results - (await rowsOf('question_results')) });
      return out;
    },
  };
}

async function spansLeft(): Promise<Record<string, number>> {
  const res = await db.query<{ prefix: string; n: number }>(`SELECT split_part(run_id, '-', 1) AS prefix, count(*)::int AS n FROM spans GROUP BY 1 ORDER BY 1`);
  return Object.fromEntries(res.rows.map((r) => [r.prefix, r.n]));
}

describe('span retention', () => {
  it('deletes the spans of runs older than the retention, a bounded number of runs a statement, until none is left', async () => {
    await runs('old', 7, 31);
    await runs('new', 2, 29);
    const report = await expireSpans({ db, days: 30, runsPerStatement: 3, now: () => NOW });
    expect(report).toEqual({ runs: 7, spans: 21, dead_letters: 0, more: false });
    expect(await spansLeft()).toEqual({ new: 6 });
  });

  it('deletes runs of many spans a bounded number of spans a statement, marking each run once all its spans are gone', async () => {
    await bigRuns('big', 3, 250, 40);
    await runs('old', 4, 31);
    await runs('new', 1, 1);
    const deleted: { spans: number; results: number }[] = [];
    const report = await expireSpans({ db: watchDeletes(deleted), days: 30, spansPerStatement: 100, now: () => NOW });
    expect(report).toEqual({ runs: 7, spans: 3 * 250 + 4 * 3, dead_letters: 0, more: false });
    // No statement deleted more than the bound, of spans or of question results: a run of
    // 250 spans took three statements at least.
    expect(Math.max(...deleted.map((d) => d.spans))).toBeLessThanOrEqual(100);
    expect(Math.max(...deleted.map((d) => d.results))).toBeLessThanOrEqual(100);
    expect(deleted.reduce((n, d) => n + d.spans, 0)).toBe(762);
    expect(deleted.length).toBeGreaterThanOrEqual(9);
    expect(await spansLeft()).toEqual({ new: 3 });
    expect(await rowsOf('question_results')).toBe(0);
    expect(await marked()).toEqual(['big-0', 'big-1', 'big-2', 'old-0', 'old-1', 'old-2', 'old-3']);
  });

  it('leaves a run cut midway by the end of a pass unmarked, and the next pass finishes it', async () => {
    await bigRuns('big', 1, 250, 40);
    let t = NOW;
    // Each statement "takes" a minute of a one-minute pass: the pass stops after its first.
    const now = () => (t += 60_000);
    expect(await expireSpans({ db, days: 30, spansPerStatement: 100, maxPassMs: 60_000, now })).toEqual({ runs: 0, spans: 100, dead_letters: 0, more: true });
    expect(await marked()).toEqual([]);
    expect(await spansLeft()).toEqual({ big: 150 });
    expect(await expireSpans({ db, days: 30, spansPerStatement: 100, now: () => NOW })).toEqual({ runs: 1, spans: 150, dead_letters: 0, more: false });
    expect(await marked()).toEqual(['big-0']);
    expect(await spansLeft()).toEqual({});
  });

  it('makes the space of the deleted spans reusable (PGlite has no autovacuum): new spans take it instead of growing the table', async () => {
    const size = async () => Number((await db.query<{ n: unknown }>(`SELECT pg_relation_size('spans') AS n`)).rows[0].n);
    await runs('old', 300, 40);
    const full = await size();
    expect(await expireSpans({ db, days: 30, now: () => NOW })).toMatchObject({ runs: 300, spans: 900 });
    await runs('new', 300, 1);
    expect(await size()).toBeLessThanOrEqual(full);
  });

  it('deletes the spans of a run whose agent clock is ahead (its start after the pass) once it was last seen before the cutoff', async () => {
    const seen = NOW - 40 * DAY;
    // Started 100 days after the pass by the agent's clock; received 40 days before it.
    const start = NOW + 100 * DAY;
    await new RunsRepo(db).writeEnvelopes([
      { project: 'p', received_ms: seen, item: { kind: 'run_start', run: { event: 'run_start', run_id: 'future-0', ts_ms: start } } },
      { project: 'p', received_ms: seen, item: { kind: 'span', span: { run_id: 'future-0', span_id: 's0', type: 'tool', name: 'search', tool: 'search', status: 'ok', start_ms: start } } },
    ]);
    await runs('new', 1, 1);
    expect(await expireSpans({ db, days: 30, now: () => NOW })).toEqual({ runs: 1, spans: 1, dead_letters: 0, more: false });
    expect(await spansLeft()).toEqual({ new: 3 });
    expect(await marked()).toEqual(['future-0']);
  });

  it('keeps every span with 0 days', async () => {
    await runs('old', 2, 400);
    expect(await expireSpans({ db, days: 0, now: () => NOW })).toEqual({ runs: 0, spans: 0, dead_letters: 0, more: false });
    expect(await spansLeft()).toEqual({ old: 6 });
  });

  it('stops a pass that runs out of time and leaves the rest to the next', async () => {
    await runs('old', 5, 60);
    let t = NOW;
    // Each statement "takes" a minute of a one-minute pass.
    const now = () => (t += 60_000);
    expect(await expireSpans({ db, days: 30, runsPerStatement: 2, maxPassMs: 60_000, now })).toEqual({ runs: 2, spans: 6, dead_letters: 0, more: true });
    expect(await expireSpans({ db, days: 30, runsPerStatement: 2, now: () => NOW })).toEqual({ runs: 3, spans: 9, dead_letters: 0, more: false });
  });

  it('deletes the dead letters last set aside before the cutoff: a refused span\'s content goes with the spans\' retention', async () => {
    const letters = new DeadLettersRepo(db);
    const aside = (item: string) => ({ source: 'store.events', project: 'p', kind: 'span', run_id: 'r', item_id: item, reason: 'refused', payload: { span_id: item, input: 'a secret' } });
    await letters.setAside([aside('old-1'), aside('old-2'), aside('old-again'), aside('new')]);
    const dated = (item: string, createdDaysAgo: number, lastDaysAgo: number) =>
      db.query(`UPDATE dead_letters SET created_at = $2::timestamptz, last_at = $3::timestamptz WHERE item_id = $1`, [
        item, new Date(NOW - createdDaysAgo * DAY).toISOString(), new Date(NOW - lastDaysAgo * DAY).toISOString(),
      ]);
    await dated('old-1', 40, 40);
    await dated('old-2', 31, 31);
    // First set aside long ago, set aside again yesterday (a redelivered batch): kept.
    await dated('old-again', 90, 1);
    await dated('new', 2, 2);
    await runs('old', 1, 31);
    expect(await expireSpans({ db, days: 30, deadLettersPerStatement: 1, now: () => NOW })).toEqual({ runs: 1, spans: 3, dead_letters: 2, more: false });
    expect((await letters.list('p')).items.map((l) => l.item_id).sort()).toEqual(['new', 'old-again']);
    // With 0 days nothing goes.
    await dated('new', 400, 400);
    expect(await expireSpans({ db, days: 0, now: () => NOW })).toMatchObject({ dead_letters: 0 });
    expect((await letters.list('p')).items).toHaveLength(2);
  });

  it('empties the transcripts of SOP sessions older than their retention, and keeps them all with 0 days', async () => {
    const sessions = new SopSessionsRepo(db);
    const received = async (external_id: string, daysAgo: number) => {
      const r = await sessions.receive('p', { external_id, agent: 'a', release_id: null, started_at: null, transcript_ref: null, turns: [{ role: 'agent', text: 'my card is 4111' }], tool_calls: [] });
      await sessions.markFailed(r.id, r.content_hash, 'no procedures');
      await db.query(`UPDATE sop_sessions SET received_at = $2::timestamptz WHERE id = $1`, [r.id, new Date(NOW - daysAgo * DAY).toISOString()]);
      return r.id;
    };
    const ids = [await received('s-old-1', 100), await received('s-old-2', 91), await received('s-old-3', 120), await received('s-new', 80)];
    const turns = async () => Promise.all(ids.map(async (id) => (await sessions.body('p', id))!.body.turns.length));
    expect(await expireTranscripts({ db, days: 0, now: () => NOW })).toEqual({ sessions: 0, more: false });
    expect(await turns()).toEqual([1, 1, 1, 1]);
    let t = NOW;
    expect(await expireTranscripts({ db, days: 90, perStatement: 2, maxPassMs: 1, now: () => (t += 1) })).toEqual({ sessions: 2, more: true });
    expect(await expireTranscripts({ db, days: 90, perStatement: 2, now: () => NOW })).toEqual({ sessions: 1, more: false });
    expect(await turns()).toEqual([0, 0, 0, 1]);
  });

  it('ends each pass with a VACUUM of the whole embedded database: a table retention never deletes from reuses its dead rows\' space', async () => {
    const size = async () => Number((await db.query<{ n: unknown }>(`SELECT pg_relation_size('shared_cache') AS n`)).rows[0].n);
    const fill = (tag: string) =>
      db.query(`INSERT INTO shared_cache (name, key, value, expires_at) SELECT 'test', $1 || g, repeat('x', 200), 0 FROM generate_series(1, 3000) g`, [tag]);
    const jobs = new InlineJobs();
    recordSchedules(jobs);
    try {
      await scheduleRetention(jobs, '23 * * * *', { db, days: 0 });
      await fill('a');
      const full = await size();
      await db.query(`DELETE FROM shared_cache WHERE name = 'test'`); // expired answers, as the cache deletes them
      await jobs.run(RETENTION_QUEUE, {});
      await fill('b');
      expect(await size()).toBeLessThanOrEqual(full);
    } finally {
      await db.query(`DELETE FROM shared_cache WHERE name = 'test'`);
      await jobs.close();
    }
  });

  it('runs on its schedule as a repeatable job, and refuses a bad cron pattern', async () => {
    await runs('old', 2, 45);
    const jobs = new InlineJobs();
    const scheduled = recordSchedules(jobs);
    const logged: string[] = [];
    try {
      await scheduleRetention(jobs, '23 * * * *', { db, days: 30, log: (m) => logged.push(m) });
      expect(scheduled).toEqual([[RETENTION_QUEUE, RETENTION_SCHEDULE, '23 * * * *']]);
      expect(await jobs.run(RETENTION_QUEUE, {})).toEqual({ runs: 2, spans: 6, dead_letters: 0, more: false });
      expect(logged).toEqual([
        'retention: spans kept 30 days (NEATROOTS_SPAN_RETENTION_DAYS), session transcripts kept for good (NEATROOTS_TRANSCRIPT_RETENTION_DAYS=0); a pass at "23 * * * *" (UTC, NEATROOTS_RETENTION_CRON)',
        'retention: deleted 6 spans of 2 runs older than 30 days',
      ]);
      // with a transcript retention, the same pass empties old transcripts and says so
      const sessions = new SopSessionsRepo(db);
      const r = await sessions.receive('p', { external_id: 'call-9', agent: 'a', release_id: null, started_at: null, transcript_ref: null, turns: [{ role: 'user', text: 'hi' }], tool_calls: [] });
      await sessions.markFailed(r.id, r.content_hash, 'no procedures');
      await db.query(`UPDATE sop_sessions SET received_at = now() - interval '8 days' WHERE id = $1`, [r.id]);
      const withTranscripts = new InlineJobs();
      recordSchedules(withTranscripts);
      try {
        await scheduleRetention(withTranscripts, '23 * * * *', { db, days: 30, transcriptDays: 7, log: (m) => logged.push(m) });
        expect(await withTranscripts.run(RETENTION_QUEUE, {})).toEqual({ runs: 0, spans: 0, dead_letters: 0, transcripts: 1, more: false });
        expect(logged.slice(2)).toEqual([
          'retention: spans kept 30 days (NEATROOTS_SPAN_RETENTION_DAYS), session transcripts kept 7 days (NEATROOTS_TRANSCRIPT_RETENTION_DAYS); a pass at "23 * * * *" (UTC, NEATROOTS_RETENTION_CRON)',
          'retention: emptied the transcripts of 1 sessions received over 7 days ago',
        ]);
        expect((await sessions.body('p', r.id))!.body.turns).toEqual([]);
      } finally {
        await withTranscripts.close();
      }
      const other = new InlineJobs();
      await expect(scheduleRetention(other, 'hourly', { db, days: 30 })).rejects.toThrow(/five fields/);
      await other.close();
    } finally {
      await jobs.close();
    }
  });
});
