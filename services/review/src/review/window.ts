import { SopError, type ReviewWindow, type WindowQuery } from '@neatroots/store';
import { parseIsoTime } from '@neatroots/ports';

/** Insights and the patterns list look back this far unless asked. */
export const DEFAULT_WINDOW_DAYS = 365;
export const MAX_WINDOW_DAYS = 3650;
const DAY_MS = 86_400_000;

/** [from, to) from the query: `to` defaults to now, `from` to `days` (365) before `to`. */
export function resolveWindow(q: WindowQuery, nowMs: number = Date.now()): ReviewWindow {
  const to = q.to !== undefined ? time('to', q.to) : nowMs;
  if (q.days !== undefined && !(Number.isInteger(q.days) && q.days >= 1 && q.days <= MAX_WINDOW_DAYS)) {
    throw new SopError(400, 'invalid_query', `days must be an integer from 1 to ${MAX_WINDOW_DAYS}`);
  }
  if (q.from !== undefined && q.days !== undefined) throw new SopError(400, 'invalid_query', 'give from or days, not both');
  const from = q.from !== undefined ? time('from', q.from) : to - (q.days ?? DEFAULT_WINDOW_DAYS) * DAY_MS;
  if (from >= to) throw new SopError(400, 'invalid_query', 'from must be before to');
  return { from: new Date(from).toISOString(), to: new Date(to).toISOString() };
}

export { parseIsoTime } from '@neatroots/ports';

function time(name: string, v: string): number {
  const ms = parseIsoTime(v);
  if (ms === null) throw new SopError(400, 'invalid_query', `${name} must be an ISO-8601 date or time from 0001-01-01 to 9999-12-31 UTC (e.g. 2026-11-30 or 2026-11-30T10:00:00Z; a time without an offset is UTC)`);
  return ms;
}

/** Monday (UTC, YYYY-MM-DD) of each week the window touches, oldest first. */
export function weeksOf(w: ReviewWindow): string[] {
  const out: string[] = [];
  const start = new Date(w.from);
  const monday = Date.UTC(start.getUTCFullYear(), start.getUTCMonth(), start.getUTCDate()) - ((start.getUTCDay() + 6) % 7) * DAY_MS;
  for (let t = monday; t < Date.parse(w.to); t += 7 * DAY_MS) out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}
