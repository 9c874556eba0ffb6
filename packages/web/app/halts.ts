import type { Finding, Problem } from './types';

/** One page of problems as `GET findings` answers it. */
export interface ProblemPage {
  findings: Problem[];
  next_cursor: string | null;
}

/** The runs a halt reached since a time, and whether the pages read stopped short of the end. */
export interface Halts {
  /** A halt finding per run, in the order read (newest problem first). */
  runs: Finding[];
  /** The cap was hit with problems left unread: an older problem may hold another of the day's halts. */
  partial: boolean;
}

/**
 * Runs a halt reached since `since` (ms): findings of halt checks whose halt was sent (not
 * suppressed), read from every problem, head or related, one per run. Problems come newest
 * head first, but a halt raised today can sit under a problem whose head was raised days ago
 * (a long run's group), so reading does not stop at the first older problem: it goes on to the
 * last page, or stops at `maxPages` and says the list is partial.
 */
export async function haltsSince(read: (cursor: string | null) => Promise<ProblemPage>, since: number, maxPages: number): Promise<Halts> {
  const runs = new Map<string, Finding>();
  let cursor: string | null = null;
  for (let page = 0; page < maxPages; page++) {
    const r = await read(cursor);
    for (const p of r.findings) {
      for (const f of [p, ...p.related]) {
        if (f.action === 'halt' && !f.halt_suppressed && Date.parse(f.raised_at) >= since && !runs.has(f.run_id)) runs.set(f.run_id, f);
      }
    }
    cursor = r.next_cursor;
    if (!cursor) return { runs: [...runs.values()], partial: false };
  }
  return { runs: [...runs.values()], partial: true };
}
