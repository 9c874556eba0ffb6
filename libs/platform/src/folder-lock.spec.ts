import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Logger } from '@neatroots/ports';
import { loadConfig } from './config';
import { LOCK_FRESH_MS, LOCK_REFRESH_MS, lockFolder } from './folder-lock';
import { embeddedPlatform } from './runtime/platforms';

const linux = fs.existsSync('/proc/self/stat');

/** Makes a lock look last refreshed `ms` ago. */
function touchedAgo(file: string, ms: number): void {
  const t = new Date(Date.now() - ms);
  fs.utimesSync(file, t, t);
}

/** What a lock written by process `pid` holds (as lockFolder writes it). */
function identityOf(pid: number): { pid: number; boot?: string; start?: string } {
  if (!linux) return { pid };
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  return { pid, boot: fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(), start };
}

describe('lockFolder: one process at a time in a data folder', () => {
  const dirs: string[] = [];
  const children: ChildProcess[] = [];
  const tmp = () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'nr-lock-'));
    dirs.push(d);
    return d;
  };
  /** Another process that keeps running (the lock's holder). */
  const other = async () => {
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    children.push(child);
    await new Promise((r) => child.once('spawn', r));
    return child.pid!;
  };
  afterAll(() => {
    for (const c of children) c.kill('SIGKILL');
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('refuses a folder another running process holds, naming it; takes it once that process is gone', async () => {
    const dir = tmp();
    const pid = await other();
    fs.writeFileSync(path.join(dir, 'LOCK'), JSON.stringify(identityOf(pid)));
    expect(() => lockFolder(dir, `the data folder ${dir}`)).toThrow(`the data folder ${dir} is in use by process ${pid}; stop it first or use another NEATROOTS_DATA_DIR`);
    const holder = children.find((c) => c.pid === pid)!;
    const gone = new Promise((r) => holder.once('exit', r));
    holder.kill('SIGKILL');
    await gone; // reaped: no longer a process
    touchedAgo(path.join(dir, 'LOCK'), LOCK_FRESH_MS + 1_000); // its holder stopped refreshing it
    const unlock = lockFolder(dir, 'x');
    expect(JSON.parse(fs.readFileSync(path.join(dir, 'LOCK'), 'utf8'))).toMatchObject({ pid: process.pid });
    unlock();
    expect(fs.existsSync(path.join(dir, 'LOCK'))).toBe(false);
  });

  it('refuses a bare process id of a running process (a lock of an earlier version)', async () => {
    const dir = tmp();
    const pid = await other();
    fs.writeFileSync(path.join(dir, 'LOCK'), `${pid}\n`);
    expect(() => lockFolder(dir, 'the bus log')).toThrow(`the bus log is in use by process ${pid}`);
  });

  (linux ? it : it.skip)('takes over a lock whose process number now belongs to another process, or was written before the machine restarted', () => {
    // Process 1 always runs, but it is not the one that wrote these (another start time, another boot).
    const reused = tmp();
    fs.writeFileSync(path.join(reused, 'LOCK'), JSON.stringify({ ...identityOf(1), start: '1' }));
    touchedAgo(path.join(reused, 'LOCK'), LOCK_FRESH_MS + 1_000);
    lockFolder(reused, 'x')();
    const rebooted = tmp();
    fs.writeFileSync(path.join(rebooted, 'LOCK'), JSON.stringify({ ...identityOf(1), boot: 'another-boot' }));
    touchedAgo(path.join(rebooted, 'LOCK'), LOCK_FRESH_MS + 1_000);
    lockFolder(rebooted, 'x')();
  });

  it('the holder refreshes its lock; one refreshed lately is held though its process number is nobody\'s here (another PID namespace or machine)', async () => {
    const dir = tmp();
    const file = path.join(dir, 'LOCK');
    const unlock = lockFolder(dir, 'x');
    try {
      touchedAgo(file, 60_000);
      const before = fs.statSync(file).mtimeMs;
      await new Promise((r) => setTimeout(r, LOCK_REFRESH_MS + 500));
      expect(fs.statSync(file).mtimeMs).toBeGreaterThan(before + 50_000);
    } finally {
      unlock();
    }
    // A process on another host, refreshing its lock while this one looks: refused, saying where and when.
    const other = tmp();
    const lock = path.join(other, 'LOCK');
    fs.writeFileSync(lock, JSON.stringify({ pid: 999_999_999, host: 'elsewhere', boot: 'another-boot', start: '1' }));
    touchedAgo(lock, 1_000);
    const refresher = spawn(process.execPath, ['-e', `setTimeout(() => { const t = new Date(); require('fs').utimesSync(${JSON.stringify(lock)}, t, t); }, 300)`], { stdio: 'ignore' });
    children.push(refresher);
    const t0 = Date.now();
    // Refused once the refresh is seen: looking every half second, it is seen up to half a
    // second after (more on a loaded machine), so "0 s" or "1 s" ago. Unseen, the lock would be
    // taken over once stale, LOCK_FRESH_MS after it was touched (9 s from here).
    expect(() => lockFolder(other, 'the data folder')).toThrow(/^the data folder is in use by process 999999999 on elsewhere \(its LOCK was refreshed [01] s ago\); stop it first/);
    expect(Date.now() - t0).toBeLessThan(LOCK_FRESH_MS - 2_000);
  });

  (linux ? it : it.skip)('a lock its process checks call stale but refreshed lately is taken over only once it is older than LOCK_FRESH_MS (its holder killed moments ago)', () => {
    const dir = tmp();
    const file = path.join(dir, 'LOCK');
    fs.writeFileSync(file, JSON.stringify({ ...identityOf(1), start: '1' }));
    touchedAgo(file, LOCK_FRESH_MS - 1_500);
    const t0 = Date.now();
    lockFolder(dir, 'x')();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1_000);
    expect(Date.now() - t0).toBeLessThan(4_000);
  });

  it('takes over a lock torn by a crash while it was written, and a lock of its own process again', () => {
    const dir = tmp();
    fs.writeFileSync(path.join(dir, 'LOCK'), '{"pid": 12');
    const unlock = lockFolder(dir, 'x');
    expect(() => lockFolder(dir, 'x')).not.toThrow(); // the same process opening it again
    unlock();
  });

  it('the embedded platform takes the data folder before it opens anything in it: a second process is refused before the database is touched', async () => {
    const home = tmp();
    const config = loadConfig({ NEATROOTS_HOME: home });
    fs.mkdirSync(config.dataDir, { recursive: true });
    const pid = await other();
    fs.writeFileSync(path.join(config.dataDir, 'LOCK'), JSON.stringify(identityOf(pid)));
    const log: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {}, child: () => log };
    expect(() => embeddedPlatform({ config, log, drainTopic: 'x' })).toThrow(`the data folder ${config.dataDir} is in use by process ${pid}`);
    expect(fs.readdirSync(config.dataDir)).toEqual(['LOCK']); // no database, bus or journal opened
  });
});
