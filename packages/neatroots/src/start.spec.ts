import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { main, type Io } from './cli';
import { cannotServe, servedUntil } from './start';
import { testEnv } from './test-app.test';

const never = new Promise<never>(() => undefined);

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
  afterEach(() => fs.rmSync(home, { recursive: true, force: true }));

  const envOf = (more: Record<string, string> = {}): NodeJS.ProcessEnv => testEnv(home, { NEATROOTS_LOG_LEVEL: 'error', ...more });

  async function start(env: NodeJS.ProcessEnv): Promise<{ code: number; out: string[]; err: string[] }> {
    const out: string[] = [];
    const err: string[] = [];
    const io: Io = { out: (l) => out.push(l), err: (l) => err.push(l), env, cwd: home };
    return { code: await main(['start', '--no-demo'], io), out, err };
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
  });

  it('a second start on a data folder in use: names the folder and the other process, exit 2', async () => {
    const env = envOf();
    const first = spawn(process.execPath, [path.join(__dirname, 'cli-from-source.test.js'), 'start', '--no-demo'], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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
  }, 60_000);
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
  afterEach(() => fs.rmSync(home, { recursive: true, force: true }));

  function launch(args: string[]): { proc: ReturnType<typeof spawn>; said: () => string; once: (text: string) => Promise<void>; exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }> } {
    const env = testEnv(home, { NEATROOTS_LOG_LEVEL: 'error' });
    const proc = spawn(process.execPath, [path.join(__dirname, 'cli-from-source.test.js'), ...args], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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
  }, 90_000);

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
  }, 90_000);
});
