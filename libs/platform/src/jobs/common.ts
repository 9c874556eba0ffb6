import { parseExpression } from 'cron-parser';

/** Defaults both drivers share, so a job behaves the same embedded and distributed. */
export const JOB_DEFAULTS = {
  attempts: 3,
  backoffMs: 1000,
  /** Finished jobs remembered per queue for deduplication by jobId. */
  keepFinished: 1000,
} as const;

/** Exponential backoff: `backoffMs` before the second try, doubled after each failed one. */
export function retryDelayMs(backoffMs: number, failedAttempt: number): number {
  return backoffMs * 2 ** (failedAttempt - 1);
}

/** The next time after `afterMs` that a five-field cron pattern fires, in UTC. Throws on a bad pattern, naming it. */
export function nextCronTime(pattern: string, afterMs: number): number {
  if (pattern.trim().split(/\s+/).length !== 5) throw new Error(`cron pattern "${pattern}" must have five fields (minute hour day month weekday)`);
  try {
    return parseExpression(pattern, { currentDate: new Date(afterMs), utc: true }).next().getTime();
  } catch (err) {
    throw new Error(`cron pattern "${pattern}": ${(err as Error).message}`);
  }
}

/** BullMQ's rules for a custom job id, checked by both drivers so a job id valid embedded is valid distributed. */
export function checkJobId(id: string): void {
  if (id.includes(':')) throw new Error(`job id "${id}" may not contain ":" (BullMQ keeps ids in ":"-separated keys)`);
  if (/^\d+$/.test(id)) throw new Error(`job id "${id}" may not be an integer (BullMQ numbers its own jobs)`);
}

/** An add's jobId and coalesce key, checked by both drivers. */
export function checkAddOptions(opts: { jobId?: string; coalesce?: string }): void {
  if (opts.jobId !== undefined) checkJobId(opts.jobId);
  if (opts.coalesce !== undefined) {
    if (opts.jobId !== undefined) throw new Error(`jobs: coalesce ("${opts.coalesce}") and jobId ("${opts.jobId}") may not be given together`);
    if (!opts.coalesce) throw new Error('jobs: a coalesce key may not be empty');
  }
}
