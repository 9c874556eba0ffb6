import * as fs from 'node:fs';
import * as path from 'node:path';
import { syncDir } from './sync-dir';

/**
 * One process at a time in a folder: a `LOCK` file naming the process that holds it. A lock
 * left by a process that is gone (killed, or the machine restarted) is taken over; one whose
 * process still runs refuses, saying `<what> is in use by process N`.
 *
 * A process id alone is not enough to tell: after a restart another program may have the old
 * number. So the lock also records the machine's boot id and the process's start time (Linux,
 * /proc); a lock from another boot, or whose number now belongs to a process started at another
 * time, is stale. Where /proc is not there, a live process with the number holds it.
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
    if (held && holds(held)) throw new Error(`${what} is in use by process ${held.pid}; stop it first or use another NEATROOTS_DATA_DIR`);
    // Stale: gone, so try again to make it (another process may win the race; the loop reads its lock).
    fs.rmSync(file, { force: true });
  }
  return () => {
    try {
      const held = readLock(file);
      if (held && held.pid === process.pid) fs.rmSync(file, { force: true });
    } catch {
      // already gone
    }
  };
}

interface LockIdentity {
  pid: number;
  /** The machine's boot (Linux: /proc/sys/kernel/random/boot_id). */
  boot?: string;
  /** The process's start, in clock ticks since boot (Linux: /proc/<pid>/stat, field 22). */
  start?: string;
}

function identity(pid: number): LockIdentity {
  const id: LockIdentity = { pid };
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
