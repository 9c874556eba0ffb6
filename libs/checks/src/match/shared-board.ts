import { randomBytes } from 'node:crypto';
import * as os from 'node:os';
import type { SharedBoard } from '@neatroots/ports';
import type { DisabledCheck, DisabledChecks } from './disabled';

/**
 * The distributed deployment's way of telling the api which checks the rule engines disabled:
 * each rule engine keeps its list on a board the deployment shares (Redis), rewritten on every
 * change and again every `everyMs` for `ttlMs`, so the entry of a rule engine that stopped
 * without taking it off (a crash, a lost pod) goes on its own: a restart clears the list, as it
 * does embedded. The api reads every entry. (Embedded, one process knows its own list, and
 * `neatroots checks list` reads the state files: state-file.ts.)
 */
export const DISABLED_CHECKS_BOARD = 'disabled-checks';

export interface ShareOptions {
  /** How often the entry is written again while nothing changes (default 10 s). */
  everyMs?: number;
  /** How long an entry stands unless written again (default 30 s: three periods). */
  ttlMs?: number;
  /** What goes wrong writing (the board itself never throws; this is for a list that cannot be encoded). */
  onError?: (err: unknown) => void;
}

interface Entry {
  member: string;
  host: string;
  pid: number;
  started_at: string;
  checks: DisabledCheck[];
}

/** Keeps this process's entry on `board` in step with `list`; returns the function that stops and takes it off. */
export function shareDisabledChecks(board: SharedBoard, list: DisabledChecks, opts: ShareOptions = {}): () => Promise<void> {
  const everyMs = opts.everyMs ?? 10_000;
  const ttlMs = opts.ttlMs ?? 30_000;
  const host = os.hostname();
  const member = `${host}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const started_at = new Date().toISOString();
  let stopped = false;
  // Writes one at a time, in order: a slow write is not overtaken by an older list.
  let last: Promise<void> = Promise.resolve();
  const put = () => {
    last = last.then(async () => {
      if (stopped) return;
      try {
        const entry: Entry = { member, host, pid: process.pid, started_at, checks: list.list() };
        await board.put(member, JSON.stringify(entry), ttlMs);
      } catch (err) {
        opts.onError?.(err);
      }
    });
  };
  put();
  const unwatch = list.onChange(put);
  const timer = setInterval(put, everyMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    unwatch();
    await last;
    stopped = true;
    await board.remove(member);
  };
}

/** Every check the board's entries list, or undefined when the board cannot be read. An entry that does not parse is passed over. */
export async function sharedDisabledChecks(board: SharedBoard): Promise<DisabledCheck[] | undefined> {
  const entries = await board.entries();
  if (!entries) return undefined;
  const out: DisabledCheck[] = [];
  for (const raw of entries) {
    try {
      const e = JSON.parse(raw) as Partial<Entry>;
      for (const c of Array.isArray(e.checks) ? e.checks : []) if (c && typeof c.check_id === 'string' && typeof c.pattern === 'string') out.push(c);
    } catch {
      // Not an entry this version wrote: passed over.
    }
  }
  return out;
}
