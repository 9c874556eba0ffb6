import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { syncDir } from './sync-dir';

/** How often the holder touches its `LOCK` (its modification time): the proof that it still runs. */
export const LOCK_REFRESH_MS = 2_000;
/** A lock touched within this long is held, whatever the process checks say (5 refreshes). */
export const LOCK_FRESH_MS = 10_000;

/**
 * One process at a time in a folder: a `LOCK` file naming the process that holds it. A lock
 * left by a process that is gone (killed, or the machine restarted) is taken over; one whose
 * process still runs refuses, saying `<what> is in use by process N`.
 *
 * A process id alone is not enough to tell: after a restart another program may have the old
 * number. So the lock also records the machine's boot id and the process's start time (Linux,
 * /proc); a lock from another boot, or whose number now belongs to a process started at another
 * time, is stale. Where /proc is not there, a live process with the number holds it.
 *
 * Those checks only see the processes of this machine and this PID namespace: a holder in
 * another container on the same volume, or on another machine (a network file system), has a
 * number that here is nobody's or another process's. So the holder also touches the file every
 * LOCK_REFRESH_MS, and a lock touched within LOCK_FRESH_MS is held whatever the process checks
 * say. When they say its holder is gone but it is fresh, this waits (at most LOCK_FRESH_MS):
 * touched again meanwhile, it is held elsewhere and refused; not touched, its holder is gone (it
 * was killed moments ago) and it is taken over. (An OS lock, flock, was not used: node has none,
 * and over a network file system it is not reliable.) The times compared are the file system's
 * modification time and this machine's clock: machines sharing a folder keep their clocks
 * synchronised (NTP).
 */
export function lockFolder(dir: string, what: string): () => void {
  const file = path.join(dir, 'LOCK');
  const mine = identity(process.pid);
  for (let tries = 0; ; tries++) {
    try {
      // Created only if absent: of two processes starting at once, one makes it.
      const fd = fs.openSync(file, 'wx');
      try {
        fs.writeSync(fd, `${JSON.stringify(mine)}\n`);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      syncDir(dir);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || tries >= 2) throw e;
    }
    const held = readLock(file);
    if (held && held.pid === process.pid && sameIdentity(held, mine)) break; // this process's own (opened again)
    if (held && holds(held)) throw inUse(what, held, undefined);
    const busy = held && touchedElsewhere(file);
    if (busy) throw inUse(what, busy.held, busy.at);
    // Stale: gone, so try again to make it (another process may win the race; the loop reads its lock).
    fs.rmSync(file, { force: true });
  }
  // Touch it while this process holds it; stop once it names another (taken over after a stall).
  const refresh = setInterval(() => {
    try {
      const held = readLock(file);
      if (!held || !sameIdentity(held, mine)) return clearInterval(refresh);
      const now = new Date();
      fs.utimesSync(file, now, now);
    } catch {
      // gone, or the disk failing: the next tick tries again
    }
  }, LOCK_REFRESH_MS);
  refresh.unref();
  return () => {
    clearInterval(refresh);
    try {
      const held = readLock(file);
      if (held && held.pid === process.pid) fs.rmSync(file, { force: true });
    } catch {
      // already gone
    }
  };
}

function inUse(what: string, held: LockIdentity, at: number | undefined): Error {
  const where = held.host && held.host !== os.hostname() ? ` on ${held.host}` : '';
  const ago = at === undefined ? '' : ` (its LOCK was refreshed ${Math.max(0, Math.round((Date.now() - at) / 1000))} s ago)`;
  return new Error(`${what} is in use by process ${held.pid}${where}${ago}; stop it first or use another NEATROOTS_DATA_DIR`);
}

/** The lock file's modification time (ms), or undefined once it is gone. */
function touchedAt(file: string): number | undefined {
  try {
    return fs.statSync(file).mtimeMs;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/**
 * A lock the process checks call stale but that was touched within LOCK_FRESH_MS: held by a
 * process these checks cannot see, or left by one killed moments ago. Watch it until it is
 * touched again (held: returned) or is older than LOCK_FRESH_MS (stale: undefined).
 */
function touchedElsewhere(file: string): { held: LockIdentity; at: number } | undefined {
  const first = touchedAt(file);
  if (first === undefined || Date.now() - first >= LOCK_FRESH_MS) return undefined;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    const at = touchedAt(file);
    if (at === undefined) return undefined; // removed: its holder stopped
    const held = readLock(file);
    if (!held) return undefined;
    if (at !== first) return { held, at }; // touched again (or taken by another): it runs
    const age = Date.now() - at;
    if (age >= LOCK_FRESH_MS) return undefined;
    // Synchronous (this runs at start, before anything is served): a quarter of a refresh at a time.
    Atomics.wait(pause, 0, 0, Math.min(LOCK_REFRESH_MS / 4, LOCK_FRESH_MS - age + 50));
  }
}

interface LockIdentity {
  pid: number;
  /** The machine's name, to say where the holder runs (a container's is its id). */
  host?: string;
  /** The machine's boot (Linux: /proc/sys/kernel/random/boot_id). */
  boot?: string;
  /** The process's start, in clock ticks since boot (Linux: /proc/<pid>/stat, field 22). */
  start?: string;
}

function identity(pid: number): LockIdentity {
  const id: LockIdentity = { pid, host: os.hostname() };
  const boot = readText('/proc/sys/kernel/random/boot_id');
  const start = startOf(pid);
  if (boot) id.boot = boot;
  if (start) id.start = start;
  return id;
}

function sameIdentity(a: LockIdentity, b: LockIdentity): boolean {
  return a.pid === b.pid && (a.boot === undefined || b.boot === undefined || a.boot === b.boot) && (a.start === undefined || b.start === undefined || a.start === b.start);
}

/** Whether the process a lock names still runs: the same boot, and its number not taken by another. */
function holds(held: LockIdentity): boolean {
  if (!alive(held.pid)) return false;
  const now = identity(held.pid);
  if (held.boot && now.boot && held.boot !== now.boot) return false;
  if (held.start && now.start && held.start !== now.start) return false;
  return true;
}

/** The lock's holder: `{pid, boot, start}` JSON, or a bare process id (written by earlier versions). */
function readLock(file: string): LockIdentity | undefined {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8').trim();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  if (/^\d+$/.test(text)) return { pid: Number(text) };
  try {
    const v = JSON.parse(text) as LockIdentity;
    return Number.isInteger(v.pid) && v.pid > 0 ? v : undefined;
  } catch {
    return undefined; // torn by a crash while written: nobody holds it
  }
}

function startOf(pid: number): string | undefined {
  const stat = readText(`/proc/${pid}/stat`);
  if (!stat) return undefined;
  // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return rest[19]; // field 22
}

function readText(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
