import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { semiSpaceMb, serverNodeFlags, sizeThreadpool } from './relaunch';

const BIN = path.resolve(__dirname, '../bin/neatroots.js');
const PORTS = { NEATROOTS_OTLP_PORT: '0', NEATROOTS_OTLP_HTTP_PORT: '0', NEATROOTS_GRPC_PORT: '0', NEATROOTS_HTTP_PORT: '0', NEATROOTS_ADMIN_PORT: '0' };

/** `neatroots start --no-demo` from the built CLI, resolved once it serves. */
async function start(env: Record<string, string> = {}): Promise<{ proc: ChildProcess; home: string; out: () => string }> {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-relaunch-'));
  const proc = spawn(process.execPath, [BIN, 'start', '--no-demo'], { env: { PATH: process.env.PATH, NEATROOTS_HOME: home, ...PORTS, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no "Serving" in 60 s:\n${out}`)), 60_000);
    proc.stdout!.on('data', () => out.includes('Serving; Ctrl-C to stop.') && (clearTimeout(t), resolve()));
    proc.once('exit', (code) => (clearTimeout(t), reject(new Error(`start exited ${code}:\n${out}`))));
  });
  return { proc, home, out: () => out };
}

/** The processes whose parent is `pid`, with their command lines. */
function children(pid: number): { pid: number; cmdline: string[] }[] {
  const out: { pid: number; cmdline: string[] }[] = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push({ pid: Number(d), cmdline: fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').filter(Boolean) });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const exited = (proc: ChildProcess) => new Promise<number | null>((r) => (proc.exitCode !== null ? r(proc.exitCode) : proc.once('exit', (code) => r(code))));

describe('the server flags (NEATROOTS_SEMI_SPACE_MB)', () => {
  it('a server command gets a pool of 16 threads unless UV_THREADPOOL_SIZE is set; other commands keep node\'s', () => {
    const env: NodeJS.ProcessEnv = {};
    sizeThreadpool(['serve', '--target', 'all'], env);
    expect(env.UV_THREADPOOL_SIZE).toBe('16');
    const mine: NodeJS.ProcessEnv = { UV_THREADPOOL_SIZE: '64' };
    sizeThreadpool(['start'], mine);
    expect(mine.UV_THREADPOOL_SIZE).toBe('64');
    const other: NodeJS.ProcessEnv = {};
    sizeThreadpool(['replay', 'runs.jsonl'], other);
    expect(other.UV_THREADPOOL_SIZE).toBeUndefined();
  });

  it('are 32 MB semi-spaces by default, none at 0, and a bad value is named', () => {
    expect(serverNodeFlags({})).toEqual(['--min-semi-space-size=32', '--max-semi-space-size=32']);
    expect(serverNodeFlags({ NEATROOTS_SEMI_SPACE_MB: '16' })).toEqual(['--min-semi-space-size=16', '--max-semi-space-size=16']);
    expect(serverNodeFlags({ NEATROOTS_SEMI_SPACE_MB: '0' })).toEqual([]);
    expect(() => semiSpaceMb({ NEATROOTS_SEMI_SPACE_MB: '64MB' })).toThrow('NEATROOTS_SEMI_SPACE_MB: expected a whole number of MB from 0');
    expect(() => semiSpaceMb({ NEATROOTS_SEMI_SPACE_MB: '5000' })).toThrow('got "5000"');
  });
});

describe('an invalid NEATROOTS_SEMI_SPACE_MB', () => {
  it.each([
    ['start', 'abc'],
    ['start', '-1'],
    ['serve', '2000'],
  ])('makes `neatroots %s` exit 2 naming it (%s), with no stack trace', (command, value) => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-relaunch-'));
    try {
      const args = command === 'serve' ? ['serve', '--target', 'api'] : ['start', '--no-demo'];
      const r = spawnSync(process.execPath, [BIN, ...args], {
        env: { PATH: process.env.PATH, NEATROOTS_HOME: home, ...PORTS, NEATROOTS_SEMI_SPACE_MB: value },
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect({ status: r.status, stderr: r.stderr, stdout: r.stdout }).toEqual({
        status: 2,
        stderr: `neatroots ${command}: invalid configuration:\n  NEATROOTS_SEMI_SPACE_MB: expected a whole number of MB from 0 (node's default young generation) to 1024, got "${value}"\n`,
        stdout: '',
      });
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
    }
  }, 40_000);

  it('leaves `neatroots start --help` working', () => {
    const r = spawnSync(process.execPath, [BIN, 'start', '--help'], { env: { PATH: process.env.PATH, NEATROOTS_SEMI_SPACE_MB: 'abc' }, encoding: 'utf8', timeout: 30_000 });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    expect(r.stdout).toMatch(/^Usage: neatroots start/);
  }, 40_000);
});

describe('neatroots start runs its server in a process with the flags', () => {
  it('the server process has them; SIGTERM to the command stops it and the command exits 0', async () => {
    const { proc, home, out } = await start();
    try {
      const kids = children(proc.pid!);
      expect(kids).toHaveLength(1);
      expect(kids[0].cmdline).toEqual(expect.arrayContaining(['--min-semi-space-size=32', '--max-semi-space-size=32', BIN, 'start', '--no-demo']));
      // and libuv's pool of 16 threads (read from the environment it started with)
      expect(fs.readFileSync(`/proc/${kids[0].pid}/environ`, 'utf8').split('\0')).toContain('UV_THREADPOOL_SIZE=16');
      proc.kill('SIGTERM');
      expect({ code: await exited(proc), out: out() }).toEqual({ code: 0, out: expect.any(String) });
      await until(() => !alive(kids[0].pid), 10_000, 'the server process ended');
    } finally {
      proc.kill('SIGKILL');
      fs.rmSync(home, { recursive: true, force: true });
    }
  }, 90_000);

  it('SIGHUP to the command is passed on and stops the server in order: both exit 0', async () => {
    const { proc, home, out } = await start();
    try {
      const [server] = children(proc.pid!);
      expect(server).toBeDefined();
      proc.kill('SIGHUP');
      expect(await exited(proc)).toBe(0);
      expect(out()).toContain('stopping...');
      await until(() => !alive(server.pid), 10_000, 'the server process ended');
      expect(fs.existsSync(path.join(home, 'data', 'LOCK'))).toBe(false);
    } finally {
      proc.kill('SIGKILL');
      fs.rmSync(home, { recursive: true, force: true });
    }
  }, 90_000);

  it('a command killed outright (SIGKILL) leaves no server running', async () => {
    const { proc, home } = await start();
    try {
      const [server] = children(proc.pid!);
      expect(server).toBeDefined();
      proc.kill('SIGKILL');
      await exited(proc);
      await until(() => !alive(server.pid), 15_000, 'the orphaned server stopped');
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
    }
  }, 90_000);

  it('with NEATROOTS_SEMI_SPACE_MB=0 the command is the server itself', async () => {
    const { proc, home, out } = await start({ NEATROOTS_SEMI_SPACE_MB: '0' });
    try {
      expect(children(proc.pid!).filter((c) => c.cmdline.includes(BIN))).toEqual([]);
      proc.kill('SIGINT');
      expect({ code: await exited(proc), out: out() }).toEqual({ code: 0, out: expect.any(String) });
    } finally {
      proc.kill('SIGKILL');
      fs.rmSync(home, { recursive: true, force: true });
    }
  }, 90_000);
});
