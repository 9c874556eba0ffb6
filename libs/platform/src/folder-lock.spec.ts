import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Logger } from '@neatroots/ports';
import { loadConfig } from './config';
import { lockFolder } from './folder-lock';
import { embeddedPlatform } from './runtime/platforms';

const linux = fs.existsSync('/proc/self/stat');

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
    children.find((c) => c.pid === pid)!.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 200));
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
    lockFolder(reused, 'x')();
    const rebooted = tmp();
    fs.writeFileSync(path.join(rebooted, 'LOCK'), JSON.stringify({ ...identityOf(1), boot: 'another-boot' }));
    lockFolder(rebooted, 'x')();
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
