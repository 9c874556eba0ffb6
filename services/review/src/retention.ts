import type { Db, Jobs } from '@neatroots/ports';
import { DeadLettersRepo, RunsRepo, SopSessionsRepo } from '@neatroots/store';

/** The repeatable job that deletes spans, and empties SOP transcripts, past their retention (NEATROOTS_RETENTION_CRON). */
export const RETENTION_QUEUE = 'neatroots_span_retention';
export const RETENTION_SCHEDULE = 'neatroots_span_retention';
export const DEFAULT_RETENTION_CRON = '23 * * * *';
export const DEFAULT_SPAN_RETENTION_DAYS = 30;
const DAY_MS = 24 * 60 * 60_000;

export interface RetentionOptions {
  db: Db;
  /**
   * Spans of runs that started and were last seen longer ago than this are deleted (a run
   * whose start, by its agent's clock, is in the future: last seen); 0 keeps them.
   */
  days: number;
  /** Runs a statement (one transaction) takes at most: a pass never holds many rows' locks at once. Default 200. */
  runsPerStatement?: number;
  /**
   * Spans (and question results) a statement deletes at most, default 20,000: however many
   * spans a run has, no transaction holds the database long (embedded, the writer waits
   * behind it; on a server, statement_timeout). A run over it is deleted over several.
   */
  spansPerStatement?: number;
  /** Dead letters a statement deletes. */
  deadLettersPerStatement?: number;
  /** A pass stops after this long, the rest left to the next. Default 5 minutes. */
  maxPassMs?: number;
  now?: () => number;
}

export interface RetentionReport {
  runs: number;
  spans: number;
  /** Dead letters last set aside before the cutoff, deleted (one may hold a span's content). */
  dead_letters: number;
  /** Runs or dead letters past the cutoff left when the pass stopped for time. */
  more: boolean;
}

/**
 * Embedded, the space of deleted rows is made reusable here: PGlite runs Postgres as a single
 * user, with no autovacuum, so without a VACUUM the tables would grow as if nothing had been
 * deleted. A Postgres server's autovacuum does it there. Each VACUUM alone: it cannot run in a
 * transaction. Pages untouched since the last one are skipped (the visibility map), so after the
 * first pass it reads what changed in the hour.
 */
async function reclaim(db: Db, report: RetentionReport): Promise<void> {
  if (report.runs) await vacuum(db, 'spans', 'question_results', 'runs');
  if (report.dead_letters) await vacuum(db, 'dead_letters');
}

/**
 * Embedded, every pass ends with a VACUUM of the whole database, whatever it deleted: every
 * table that is updated or deleted from grows without one (the classifier's models saved every
 * few seconds, the shared answer cache's expired rows, the runs' counters updated per batch),
 * not only those retention deletes from. After the first, it reads only the pages changed since.
 */
async function vacuumAll(db: Db): Promise<void> {
  if (db.kind === 'pglite') await db.exec('VACUUM');
}

/** VACUUMs the tables on PGlite (see reclaim); a Postgres server's autovacuum does it there. */
async function vacuum(db: Db, ...tables: string[]): Promise<void> {
  if (db.kind !== 'pglite') return;
  for (const t of tables) await db.exec(`VACUUM ${t}`);
}

/**
 * Takes bounded steps until one leaves nothing or the pass's time is up (checked between
 * steps: each is one short statement); returns whether some is left for the next pass. `step`
 * returns whether it left some.
 */
async function drain(pass: { until: number; now: () => number }, step: () => Promise<boolean>): Promise<boolean> {
  for (;;) {
    if (!(await step())) return false;
    if (pass.now() >= pass.until) return true;
  }
}

/**
 * One retention pass: the spans of every run that started and was last seen before the cutoff,
 * oldest first, a bounded number of spans (and runs) a transaction, so the writer's
 * transactions never wait long behind it. Run rows, counters and findings stay (the run says `spans_expired_at`). Then
 * the dead letters last set aside before the cutoff: a refused span's content must not outlive
 * the spans' retention there.
 */
export async function expireSpans(opts: RetentionOptions): Promise<RetentionReport> {
  const report: RetentionReport = { runs: 0, spans: 0, dead_letters: 0, more: false };
  if (!(opts.days > 0)) return report;
  const now = opts.now ?? Date.now;

  const perLetters = opts.deadLettersPerStatement ?? 1_000;
  const until = now() + (opts.maxPassMs ?? 5 * 60_000);
  const cutoff = now() - opts.days * DAY_MS;
  const limits = { runs: opts.runsPerStatement, spans: opts.spansPerStatement, now: cutoff + opts.days * DAY_MS };
  const runs = new RunsRepo(opts.db);
  const letters = new DeadLettersRepo(opts.db);
  const pass = { until, now };
  const moreSpans = await drain(pass, async () => {
    const step = await runs.expireSpans(cutoff, limits);
    report.runs += step.runs;
    report.spans += step.spans;
    return step.more === true;
  });
  // Dead letters take at least a step even when the spans used the pass's time (a backlog of
  // spans after the retention was lowered): a refused span's content must not wait for it.
  const moreLetters = await drain(pass, async () => {
    const n = await letters.expire(cutoff, perLetters);
    report.dead_letters += n;
    return n >= perLetters;
  });
  const more = moreSpans || moreLetters;
  await reclaim(opts.db, report);
  return more ? { ...report, more } : report;
}

export interface TranscriptRetentionOptions {
  db: Db;
  /** SOP sessions received longer ago than this lose their turns and tool calls; 0 keeps them. */
  days: number;
  /** Sessions a statement (one transaction) takes. */
  perStatement?: number;
  /** A pass stops after this long, the rest left to the next. Default 5 minutes. */
  maxPassMs?: number;
  now?: () => number;
}

/**
 * One transcript retention pass: the turns and tool calls of every checked SOP session
 * received before the cutoff are emptied, oldest first, a bounded number a transaction
 * (SopSessionsRepo.expireTranscripts). Embedded, sop_sessions is then vacuumed, as the spans are.
 */
export async function expireTranscripts(opts: TranscriptRetentionOptions): Promise<{ sessions: number; more: boolean }> {
  const out = { sessions: 0, more: false };
  if (!(opts.days > 0)) return out;
  const now = opts.now ?? Date.now;
  const per = opts.perStatement ?? 500;
  const until = now() + (opts.maxPassMs ?? 5 * 60_000);
  const cutoff = now() - opts.days * DAY_MS;
  const sessions = new SopSessionsRepo(opts.db);
  out.more = await drain({ until, now }, async () => {
    const n = await sessions.expireTranscripts(cutoff, per);
    out.sessions += n;
    return n >= per;
  });
  if (out.sessions) await vacuum(opts.db, 'sop_sessions');
  return out;
}

/**
 * The retention in effect, in one line, logged at start-up: a setting read wrong (a blank
 * value, a typo'd name) shows there, not months later as a full disk or spans kept for good.
 */
export function retentionInEffect(days: number, transcriptDays: number, cron: string): string {
  const kept = (n: number, what: string, name: string) =>
    n > 0 ? `${what} kept ${n} day${n === 1 ? '' : 's'} (${name})` : `${what} kept for good (${name}=0)`;
  return `retention: ${kept(days, 'spans', 'NEATROOTS_SPAN_RETENTION_DAYS')}, ${kept(transcriptDays, 'session transcripts', 'NEATROOTS_TRANSCRIPT_RETENTION_DAYS')}; a pass at "${cron}" (UTC, NEATROOTS_RETENTION_CRON)`;
}

/**
 * Registers the hourly pass (once, however many replicas call this) and its handler: the
 * spans' retention, then the transcripts'. With both retentions 0 the pass deletes nothing:
 * the schedule stays registered and idle, so setting a retention later needs no other change.
 * Logs the retention in effect once (retentionInEffect).
 */
export async function scheduleRetention(
  jobs: Jobs,
  cron: string,
  opts: RetentionOptions & { transcriptDays?: number; log?: (msg: string) => void },
): Promise<void> {
  await jobs.schedule(RETENTION_QUEUE, RETENTION_SCHEDULE, cron, {});
  opts.log?.(retentionInEffect(opts.days, opts.transcriptDays ?? 0, cron));
  await jobs.work(RETENTION_QUEUE, async () => {
    const report = await expireSpans(opts);
    const what = [report.runs && `${report.spans} spans of ${report.runs} runs`, report.dead_letters && `${report.dead_letters} dead letters`].filter(Boolean);
    if (what.length) opts.log?.(`retention: deleted ${what.join(' and ')} older than ${opts.days} days${report.more ? ' (more next pass)' : ''}`);
    const transcriptDays = opts.transcriptDays ?? 0;
    const transcripts = await expireTranscripts({ db: opts.db, days: transcriptDays, maxPassMs: opts.maxPassMs, now: opts.now });
    if (transcripts.sessions) {
      opts.log?.(`retention: emptied the transcripts of ${transcripts.sessions} sessions received over ${transcriptDays} days ago${transcripts.more ? ' (more next pass)' : ''}`);
    }
    await vacuumAll(opts.db);
    return transcriptDays > 0 ? { ...report, transcripts: transcripts.sessions, more: report.more || transcripts.more } : report;
  });
}
