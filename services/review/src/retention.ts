import type { Db, Jobs } from '@neatroots/ports';
import { RunsRepo } from '@neatroots/store';

/** The repeatable job that deletes spans past their retention (NEATROOTS_RETENTION_CRON). */
export const RETENTION_QUEUE = 'neatroots_span_retention';
export const RETENTION_SCHEDULE = 'neatroots_span_retention';
export const DEFAULT_RETENTION_CRON = '23 * * * *';
export const DEFAULT_SPAN_RETENTION_DAYS = 30;
const DAY_MS = 24 * 60 * 60_000;

export interface RetentionOptions {
  db: Db;
  /** Spans of runs that started and were last seen longer ago than this are deleted; 0 keeps them. */
  days: number;
  /** Runs a statement (one transaction) takes: a pass never holds many rows' locks at once. */
  runsPerStatement?: number;
  /** A pass stops after this long, the rest left to the next. Default 5 minutes. */
  maxPassMs?: number;
  now?: () => number;
}

export interface RetentionReport {
  runs: number;
  spans: number;
  /** Runs past the cutoff still holding spans when the pass stopped for time. */
  more: boolean;
}

/**
 * Embedded, the space of deleted rows is made reusable here: PGlite runs Postgres as a single
 * user, with no autovacuum, so without a VACUUM the tables would grow as if nothing had been
 * deleted. A Postgres server's autovacuum does it there. Each VACUUM alone: it cannot run in a
 * transaction. Pages untouched since the last one are skipped (the visibility map), so after the
 * first pass it reads what changed in the hour.
 */
async function reclaim(db: Db): Promise<void> {
  if (db.kind !== 'pglite') return;
  await db.exec('VACUUM spans');
  await db.exec('VACUUM question_results');
  await db.exec('VACUUM runs');
}

/**
 * One retention pass: the spans of every run that started and was last seen before the cutoff,
 * oldest first, a bounded number of runs a transaction, so the writer's transactions never wait
 * long behind it. Run rows, counters and findings stay (the run says `spans_expired_at`).
 */
export async function expireSpans(opts: RetentionOptions): Promise<RetentionReport> {
  const report: RetentionReport = { runs: 0, spans: 0, more: false };
  if (!(opts.days > 0)) return report;
  const now = opts.now ?? Date.now;
  const per = opts.runsPerStatement ?? 200;
  const until = now() + (opts.maxPassMs ?? 5 * 60_000);
  const cutoff = now() - opts.days * DAY_MS;
  const runs = new RunsRepo(opts.db);
  for (;;) {
    const done = await runs.expireSpans(cutoff, per);
    report.runs += done.runs;
    report.spans += done.spans;
    if (done.runs < per || now() >= until) {
      if (report.runs) await reclaim(opts.db);
      return done.runs < per ? report : { ...report, more: true };
    }
  }
}

/**
 * Registers the hourly pass (once, however many replicas call this) and its handler. With
 * `days` 0 the pass deletes nothing: the schedule stays registered and idle, so setting a
 * retention later needs no other change.
 */
export async function scheduleRetention(jobs: Jobs, cron: string, opts: RetentionOptions & { log?: (msg: string) => void }): Promise<void> {
  await jobs.schedule(RETENTION_QUEUE, RETENTION_SCHEDULE, cron, {});
  await jobs.work(RETENTION_QUEUE, async () => {
    const report = await expireSpans(opts);
    if (report.runs) opts.log?.(`retention: deleted ${report.spans} spans of ${report.runs} runs older than ${opts.days} days${report.more ? ' (more next pass)' : ''}`);
    return report;
  });
}
