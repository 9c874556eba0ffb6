import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { testEnv } from './test-app.test';

/**
 * Two `neatroots start` on one data folder from two PID namespaces (two containers on one volume:
 * each sees a process number in the other's LOCK that is nobody's, or another process's, there).
 * Real CLI processes; the namespace is made by `unshare --pid --fork --mount-proc` (needs root).
 */
const CLI = path.join(__dirname, 'cli-from-source.test.js');
const unshare = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true'], { stdio: 'ignore' });
const canUnshare = unshare.status === 0;
if (!canUnshare) {
  console.warn(`data-lock-namespace.spec: skipped, \`unshare --pid --fork --mount-proc\` fails here (${unshare.error?.message ?? `exit ${unshare.status}`}; it needs root)`);
}

interface Started {
  proc: ChildProcess;
  said: () => string;
  /** Resolves at "Serving", rejects if the process exits first. */
  serving: Promise<void>;
  exited: Promise<number | null>;
}

function start(home: string, inNamespace: boolean): Started {
  const env = { PATH: process.env.PATH, ...testEnv(home, { NEATROOTS_LOG_LEVEL: 'warn' }) };
  const args = [CLI, 'start', '--no-demo'];
  const proc = inNamespace
    ? spawn('unshare', ['--pid', '--fork', '--mount-proc', '--kill-child', process.execPath, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let said = '';
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  const serving = new Promise<void>((resolve, reject) => {
    proc.stdout!.on('data', (d: Buffer) => (said += d.toString()).includes('Serving') && resolve());
    proc.stderr!.on('data', (d: Buffer) => (said += d.toString()));
    void exited.then((code) => reject(new Error(`neatroots start exited ${code} before serving:\n${said}`)));
  });
  serving.catch(() => undefined);
  return { proc, said: () => said, serving, exited };
}

/** Exit code within `ms`, or 'still running'. */
async function exitWithin(s: Started, ms: number): Promise<number | null | 'still running'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still running'>((r) => (timer = setTimeout(() => r('still running'), ms)));
  try {
    return await Promise.race([s.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

(canUnshare ? describe : describe.skip)('neatroots start on a data folder held from another PID namespace', () => {
  let home: string;
  const started: Started[] = [];
  beforeEach(() => (home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-nslock-'))));
  afterEach(async () => {
    for (const s of started.splice(0)) {
      s.proc.kill('SIGKILL');
      await s.exited;
    }
    fs.rmSync(home, { recursive: true, force: true });
  });
  const run = (inNamespace: boolean) => {
    const s = start(home, inNamespace);
    started.push(s);
    return s;
  };
  const lockOf = () => JSON.parse(fs.readFileSync(path.join(home, 'data', 'LOCK'), 'utf8')) as { pid: number };

  it.each([
    ['the first here, the second in a PID namespace of its own', false, true],
    ['the first in a PID namespace of its own, the second here', true, false],
  ])('%s: the second stops with exit 2, naming the folder', async (_name, firstInNamespace, secondInNamespace) => {
    const first = run(firstInNamespace);
    await first.serving;
    const holder = lockOf().pid;
    const second = run(secondInNamespace);
    const code = await exitWithin(second, 30_000);
    expect({ code, said: second.said() }).toEqual({
      code: 2,
      said: expect.stringContaining(`neatroots start: the data folder ${path.join(home, 'data')} is in use by process ${holder} (another neatroots start?)`),
    });
    expect(await exitWithin(first, 0)).toBe('still running');
  }, 90_000);

  it('a lock no longer refreshed (its holder in another namespace killed) is taken over within LOCK_FRESH_MS', async () => {
    const first = run(true);
    await first.serving;
    first.proc.kill('SIGKILL'); // unshare --kill-child: the namespace's processes die with it
    await first.exited;
    const t0 = Date.now();
    const second = run(false);
    await second.serving;
    expect(Date.now() - t0).toBeLessThan(30_000);
    expect(lockOf().pid).toBe(second.proc.pid);
  }, 90_000);
});
