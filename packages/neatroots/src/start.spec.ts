import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { main, type Io } from './cli';
import { cannotServe, cannotWrite, servedUntil } from './start';
import { testEnv } from './test-app.test';

const never = new Promise<never>(() => undefined);

/** A start (in this process or a child) can take a minute on a loaded machine: tests that start one get three. */
const STARTS = 180_000;

/**
 * What the tests started and has not ended: a start in this process, a child process. A test
 * that timed out goes on running, writing into its data folder; `ended` (in afterEach) waits for
 * it (a child still running is killed) before the folder is removed.
 */
const running = new Set<Promise<unknown>>();
const children = new Set<ChildProcess>();
function tracked<T>(p: Promise<T>): Promise<T> {
  running.add(p);
  const done = () => void running.delete(p);
  p.then(done, done);
  return p;
}
/** `proc`, killed by `ended` if it is still running then; its exit is awaited there. */
function child(proc: ChildProcess): ChildProcess {
  children.add(proc);
  void tracked(new Promise((r) => proc.once('exit', r)));
  return proc;
}
async function ended(): Promise<void> {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  children.clear();
  await Promise.allSettled([...running]);
}

describe('neatroots start, once serving', () => {
  it('NEATROOTS_ON_FAILING=exit: a part that stopped for good (a disk error) stops it, exit 1, saying why', async () => {
    const said: string[] = [];
    const code = await servedUntil(never, Promise.resolve('the bus log cannot be written (ENOSPC: no space left on device, write)'), 'exit', { err: (l) => void said.push(l) });
    expect(code).toBe(1);
    expect(said).toEqual(['neatroots start: the bus log cannot be written (ENOSPC: no space left on device, write): stopping, to exit 1 (NEATROOTS_ON_FAILING=exit)']);
  });

  it('stay (the default): it keeps serving after such a failure until a signal, then exits 0', async () => {
    let signal!: () => void;
    const stopped = new Promise<void>((r) => (signal = r));
    let code: number | undefined;
    const serving = servedUntil(stopped, Promise.resolve('the bus log cannot be written (ENOSPC)'), 'stay', { err: () => undefined }).then((c) => (code = c));
    await new Promise((r) => setTimeout(r, 50));
    expect(code).toBeUndefined();
    signal();
    await serving;
    expect(code).toBe(0);
  });
});

/**
 * `neatroots start` that cannot serve: said in one plain line, exit 2 (in this process, as the
 * CLI runs it; the data folder's other user is a real `neatroots start` in a process of its own).
 */
describe('neatroots start, when it cannot serve', () => {
  let home: string;
  beforeEach(() => (home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-start-'))));
  afterEach(async () => {
    await ended();
    fs.rmSync(home, { recursive: true, force: true });
  }, STARTS);

  const envOf = (more: Record<string, string> = {}): NodeJS.ProcessEnv => testEnv(home, { NEATROOTS_LOG_LEVEL: 'error', ...more });

  async function start(env: NodeJS.ProcessEnv): Promise<{ code: number; out: string[]; err: string[] }> {
    const out: string[] = [];
    const err: string[] = [];
    const io: Io = { out: (l) => out.push(l), err: (l) => err.push(l), env, cwd: home };
    return { code: await tracked(main(['start', '--no-demo'], io)), out, err };
  }

  async function takePort(): Promise<{ port: number; close(): Promise<void> }> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { port: (server.address() as net.AddressInfo).port, close: () => new Promise((r) => server.close(() => r())) };
  }

  it.each(['NEATROOTS_OTLP_PORT', 'NEATROOTS_GRPC_PORT', 'NEATROOTS_HTTP_PORT'])('%s taken: names the port and its variable, exit 2', async (variable) => {
    const taken = await takePort();
    try {
      const r = await start(envOf({ [variable]: String(taken.port) }));
      expect(r.code).toBe(2);
      expect(r.err).toEqual([
        `neatroots start: port ${taken.port} (${variable}) is already in use, by another program or another neatroots; stop it, or set ${variable} to a free port`,
      ]);
      expect(r.out).toEqual([]);
    } finally {
      await taken.close();
    }
  }, STARTS);

  it.each(['NEATROOTS_GRPC_PORT', 'NEATROOTS_OTLP_PORT'])("%s taken, as a command: standard error holds the one line, not grpc-js's own 'E No address added'", async (variable) => {
    const taken = await takePort();
    try {
      const proc = child(
        spawn(process.execPath, [path.join(__dirname, 'cli-from-source.test.js'), 'start', '--no-demo'], {
          env: { PATH: process.env.PATH, ...envOf({ [variable]: String(taken.port) }) },
          stdio: ['ignore', 'pipe', 'pipe'],
        }),
      );
      let out = '';
      let err = '';
      proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      const code = await new Promise<number | null>((r) => proc.once('close', r));
      expect(err.split('\n').filter((l) => /^E No address/.test(l))).toEqual([]);
      expect({ code, out, err }).toEqual({
        code: 2,
        out: '',
        err: `neatroots start: port ${taken.port} (${variable}) is already in use, by another program or another neatroots; stop it, or set ${variable} to a free port\n`,
      });
    } finally {
      await taken.close();
    }
  }, STARTS);

  it('a second start on a data folder in use: names the folder and the other process, exit 2', async () => {
    const env = envOf();
    const first = child(spawn(process.execPath, [path.join(__dirname, 'cli-from-source.test.js'), 'start', '--no-demo'], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }));
    try {
      let said = '';
      await new Promise<void>((resolve, reject) => {
        first.stdout!.on('data', (d: Buffer) => (said += d.toString()).includes('Serving') && resolve());
        first.stderr!.on('data', (d: Buffer) => (said += d.toString()));
        first.once('exit', (code) => reject(new Error(`the first start exited ${code}:\n${said}`)));
      });
      const second = await start(env);
      expect(second.code).toBe(2);
      expect(second.err).toEqual([
        `neatroots start: the data folder ${path.join(home, 'data')} is in use by process ${first.pid} (another neatroots start?); stop it first, or set NEATROOTS_DATA_DIR to another folder`,
      ]);
    } finally {
      const exited = new Promise((r) => first.once('exit', r));
      first.kill('SIGTERM');
      await exited;
    }
  }, STARTS);
});

describe('cannotServe: what start says for a port or data folder in use', () => {
  const config = { NEATROOTS_OTLP_PORT: 4317, NEATROOTS_OTLP_HTTP_PORT: 4318, NEATROOTS_GRPC_PORT: 4317, NEATROOTS_HTTP_PORT: 8080, NEATROOTS_ADMIN_PORT: 9464, dataDir: '/srv/nr/data' };
  const listenError = (port: number) => Object.assign(new Error(`listen EADDRINUSE: address already in use 127.0.0.1:${port}`), { code: 'EADDRINUSE', port });

  it('names every variable set to the port (one gRPC server for both), from node\'s error or grpc-js\'s message', () => {
    expect(cannotServe(new Error('No address added out of total 2 resolved errors: [listen EADDRINUSE: address already in use 127.0.0.1:4317,listen EADDRINUSE: address already in use ::1:4317]'), config)).toBe(
      'port 4317 (NEATROOTS_OTLP_PORT, NEATROOTS_GRPC_PORT) is already in use, by another program or another neatroots; stop it, or set NEATROOTS_OTLP_PORT or NEATROOTS_GRPC_PORT to a free port',
    );
    expect(cannotServe(listenError(9464), config)).toMatch(/^port 9464 \(NEATROOTS_ADMIN_PORT\) is already in use/);
    // a port none of them names: every variable
    expect(cannotServe(listenError(1234), config)).toMatch(/^a port is already in use \(listen EADDRINUSE.*\); set NEATROOTS_OTLP_PORT, .* or NEATROOTS_ADMIN_PORT$/);
  });

  it('names the data folder and its process, from the folder\'s lock or its bus log\'s', () => {
    const said = 'the data folder /srv/nr/data is in use by process 42 (another neatroots start?); stop it first, or set NEATROOTS_DATA_DIR to another folder';
    expect(cannotServe(new Error('the data folder /srv/nr/data is in use by process 42; stop it first or use another NEATROOTS_DATA_DIR'), config)).toBe(said);
    expect(cannotServe(new Error('the bus log in /srv/nr/data/bus is in use by process 42; stop it first or use another NEATROOTS_DATA_DIR'), config)).toBe(said);
  });

  it('leaves any other error alone', () => {
    expect(cannotServe(new Error('boom'), config)).toBeUndefined();
    expect(cannotServe(Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' }), config)).toBeUndefined();
    expect(cannotServe(undefined, config)).toBeUndefined();
  });
});

/**
 * A stop by signal, as a supervisor or a terminal sends it, to the CLI in a process of its own:
 * the stop sequence runs (the window journals and the database closed, the data folder's lock
 * released) and the exit status is 0, whenever the signal comes.
 */
describe('neatroots start, stopped by a signal', () => {
  let home: string;
  beforeEach(() => (home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-stop-'))));
  afterEach(async () => {
    await ended();
    fs.rmSync(home, { recursive: true, force: true });
  }, STARTS);

  function launch(args: string[]): { proc: ReturnType<typeof spawn>; said: () => string; once: (text: string) => Promise<void>; exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }> } {
    const env = testEnv(home, { NEATROOTS_LOG_LEVEL: 'error' });
    const proc = child(spawn(process.execPath, [path.join(__dirname, 'cli-from-source.test.js'), ...args], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }));
    let said = '';
    proc.stdout!.on('data', (d: Buffer) => (said += d.toString()));
    proc.stderr!.on('data', (d: Buffer) => (said += d.toString()));
    const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
    const once = (text: string) =>
      new Promise<void>((resolve, reject) => {
        const look = () => said.includes(text) && (proc.stdout!.off('data', look), resolve());
        proc.stdout!.on('data', look);
        void exit.then((e) => reject(new Error(`start exited (${e.code ?? e.signal}) before "${text}":\n${said}`)));
      });
    return { proc, said: () => said, once, exit };
  }

  it('SIGHUP while serving (a closed terminal, or what the command passes on): the stop sequence, exit 0, the lock released', async () => {
    const s = launch(['start', '--no-demo']);
    try {
      await s.once('Serving; Ctrl-C to stop.');
      expect(fs.existsSync(path.join(home, 'data', 'LOCK'))).toBe(true);
      s.proc.kill('SIGHUP');
      expect(await s.exit).toEqual({ code: 0, signal: null });
      expect(s.said()).toContain('stopping...');
      expect(fs.existsSync(path.join(home, 'data', 'LOCK'))).toBe(false);
    } finally {
      s.proc.kill('SIGKILL');
    }
  }, STARTS);

  it('SIGINT during start-up (the demo replaying its fleet): the replay ends, then the stop sequence, exit 0, never "Serving"', async () => {
    const s = launch(['start']);
    try {
      await s.once('Replaying the sample fleet');
      s.proc.kill('SIGINT');
      expect(await s.exit).toEqual({ code: 0, signal: null });
      expect(s.said()).toContain('stopping...');
      expect(s.said()).not.toContain('Serving');
      expect(fs.existsSync(path.join(home, 'data', 'LOCK'))).toBe(false);
    } finally {
      s.proc.kill('SIGKILL');
    }
  }, STARTS);
});

/**
 * `neatroots start` on a data folder whose disk is full or read-only: one line naming the folder,
 * what failed and the room left, exit 1 (not a stack). The disk is a tmpfs this test mounts
 * (root only: chmod does not stop root, and mounting needs it).
 */
describe('neatroots start, on a disk it cannot write', () => {
  const root = process.getuid?.() === 0;
  if (!root) it.skip('needs root to mount a tmpfs as the data folder (skipped: not root)', () => undefined);
  const rootIt = root ? it : it.skip;
  let home: string;
  let data: string;
  let mounted = false;
  beforeEach(() => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-disk-'));
    data = path.join(home, 'data');
    fs.mkdirSync(data);
  });
  afterEach(async () => {
    await ended();
    if (mounted) execFileSync('umount', [data]);
    mounted = false;
    fs.rmSync(home, { recursive: true, force: true });
  }, STARTS);
  const mount = (options: string) => {
    execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', data]);
    mounted = true;
  };
  async function start(): Promise<{ code: number; out: string[]; err: string[] }> {
    const out: string[] = [];
    const err: string[] = [];
    const io: Io = { out: (l) => out.push(l), err: (l) => err.push(l), env: testEnv(home, { NEATROOTS_LOG_LEVEL: 'error' }), cwd: home };
    return { code: await tracked(main(['start', '--no-demo'], io)), out, err };
  }

  rootIt('a full disk: says the folder, what failed and that no room is left, exit 1', async () => {
    mount('size=1m');
    const fd = fs.openSync(path.join(data, 'filler'), 'w');
    try {
      for (;;) fs.writeSync(fd, Buffer.alloc(64 * 1024));
    } catch (e) {
      expect((e as NodeJS.ErrnoException).code).toBe('ENOSPC');
    } finally {
      fs.closeSync(fd);
    }
    const r = await start();
    expect(r.code).toBe(1);
    expect(r.err).toEqual([
      `neatroots start: the data folder ${data} cannot be written (its LOCK: ENOSPC: no space left on device, write); the disk holding it has 0.0 MB free: make room (or set NEATROOTS_DATA_DIR to a folder on another disk), then start again`,
    ]);
    expect(r.out).toEqual([]);
  }, STARTS);

  rootIt('a first start that fills the disk: one line, exit 1; once there is room, a start serves', async () => {
    mount('size=4m');
    const r = await start();
    expect(r.code).toBe(1);
    expect(r.err).toEqual([expect.stringMatching(/^neatroots start: the embedded database in \S+\/data\/pg cannot be opened: .*\(the disk holding it has 0\.0 MB free: make room, then start again\)$/)]);
    // the database the full disk interrupted is made afresh (its initdb marker left behind)
    expect(fs.existsSync(path.join(data, 'pg.initdb'))).toBe(true);
    execFileSync('mount', ['-o', 'remount,size=256m', data]);
    const env = testEnv(home, { NEATROOTS_LOG_LEVEL: 'error' });
    const again = child(spawn(process.execPath, [path.join(__dirname, 'cli-from-source.test.js'), 'start', '--no-demo'], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }));
    let said = '';
    const exit = new Promise<number | null>((resolve) => again.once('exit', (code) => resolve(code)));
    try {
      await new Promise<void>((resolve, reject) => {
        again.stdout!.on('data', (d: Buffer) => (said += d.toString()).includes('Serving') && resolve());
        again.stderr!.on('data', (d: Buffer) => (said += d.toString()));
        void exit.then((code) => reject(new Error(`the start with room exited ${code}:\n${said}`)));
      });
      again.kill('SIGTERM');
      expect(await exit).toBe(0);
    } finally {
      again.kill('SIGKILL');
    }
  }, 2 * STARTS);

  rootIt('a read-only disk: says so, exit 1', async () => {
    mount('ro,size=1m');
    const r = await start();
    expect(r.code).toBe(1);
    expect(r.err).toEqual([
      `neatroots start: the data folder ${data} cannot be written (EROFS: read-only file system, open '${path.join(data, 'LOCK')}'): the disk is read-only: set NEATROOTS_DATA_DIR to a folder on a writable disk, then start again`,
    ]);
  }, STARTS);
});

describe('cannotWrite: a disk error from any part of the data folder', () => {
  it('finds the code in a wrapped message or a cause, and leaves other errors alone', () => {
    const dir = os.tmpdir();
    expect(cannotWrite(new Error('saving consumer positions failed (retried): ENOSPC: no space left on device, write'), dir)).toMatch(
      new RegExp(`^the data folder ${dir} cannot be written \\(saving consumer positions failed \\(retried\\): ENOSPC: no space left on device, write\\); the disk holding it has [\\d.]+ MB free: make room`),
    );
    expect(cannotWrite(new Error('the bus is unavailable', { cause: Object.assign(new Error('EDQUOT: disk quota exceeded, write'), { code: 'EDQUOT' }) }), dir)).toMatch(/cannot be written \(EDQUOT: disk quota exceeded, write\)/);
    // permission denied on a file outside the data folder is not the disk's
    expect(cannotWrite(Object.assign(new Error("EACCES: permission denied, open '/etc/neatroots/checks.yaml'"), { code: 'EACCES', path: '/etc/neatroots/checks.yaml' }), dir)).toBeUndefined();
    expect(cannotWrite(new Error('something else'), dir)).toBeUndefined();
  });
});
