import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * A CLI whose standard output is piped into a reader that stops early (`neatroots replay FILE |
 * head -3`): its next write fails with EPIPE, which used to end it with node's "Unhandled 'error'
 * event ... Error: write EPIPE" stack trace and exit 1. It now stops quietly, exit 0
 * (bin/failure.js, shared by neatroots, sopc and sopops).
 */
const pkg = path.resolve(__dirname, '..');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the bins' own plain JS, as they load it
const { exitOnClosedPipe } = require(path.join(pkg, 'bin', 'failure.js')) as {
  exitOnClosedPipe(proc: unknown): void;
};

let dir: string;
let spans: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-closed-pipe-'));
  // 200 runs of the library's repeated-call example: findings well past a pipe's buffer (64 KiB),
  // so the replay is still writing when the reader has gone.
  const example = fs.readFileSync(path.join(pkg, 'library/examples/repeated-tool-call/fires.jsonl'), 'utf8').trimEnd();
  const runs = Array.from({ length: 200 }, (_, i) => example.replaceAll('repeat-fires-1', `run-${i}`));
  spans = path.join(dir, 'spans.jsonl');
  fs.writeFileSync(spans, `${runs.join('\n')}\n`);
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The CLI with its standard output read until the first line, then closed. */
function runIntoEarlyClose(args: string[]): Promise<{ status: number | null; signal: NodeJS.Signals | null; stderr: string; first: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, NEATROOTS_HOME: path.join(dir, 'home') };
  for (const k of ['NEATROOTS_LLM_URL', 'NEATROOTS_DECISION_MODEL_URL']) delete env[k];
  const child = spawn(process.execPath, [path.join(pkg, 'bin', 'neatroots.js'), ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let first = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    first += d;
    if (first.includes('\n')) child.stdout.destroy();
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('error', reject);
    child.once('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, stderr, first: first.split('\n')[0] });
    });
  });
}

it('neatroots replay FILE | head -1: stops quietly, exit 0, no stack trace', async () => {
  const r = await runIntoEarlyClose(['replay', spans]);
  expect(JSON.parse(r.first)).toMatchObject({ check_id: 'repeated-tool-call', run_id: 'run-0', status: 'raised' });
  expect(r.stderr).not.toMatch(/EPIPE|Unhandled 'error' event|\n\s+at /);
  expect(r.stderr).toBe('');
  expect([r.status, r.signal]).toEqual([0, null]);
}, 90_000);

describe('exitOnClosedPipe', () => {
  function fakeProcess(opts: { server?: boolean; exitCode?: number } = {}) {
    const proc = Object.assign(new EventEmitter(), {
      stdout: new EventEmitter(),
      stderr: new EventEmitter(),
      exitCode: opts.exitCode,
      exits: [] as number[],
      exit(code: number) {
        this.exits.push(code);
      },
    });
    const sigterms: string[] = [];
    if (opts.server) proc.on('SIGTERM', (s: string) => sigterms.push(s));
    exitOnClosedPipe(proc);
    return { proc, sigterms };
  }
  const epipe = () => Object.assign(new Error('write EPIPE'), { code: 'EPIPE' });

  it('exits a command at once, 0, or with the status it already set; once', () => {
    const { proc } = fakeProcess();
    proc.stdout.emit('error', epipe());
    proc.stderr.emit('error', epipe());
    expect(proc.exits).toEqual([0]);
    const failed = fakeProcess({ exitCode: 1 }).proc;
    failed.stderr.emit('error', epipe());
    expect(failed.exits).toEqual([1]);
  });

  it('stops a server (a process listening for SIGTERM) as on SIGTERM, in order, once', () => {
    const { proc, sigterms } = fakeProcess({ server: true });
    proc.stdout.emit('error', epipe());
    proc.stdout.emit('error', epipe());
    expect(sigterms).toEqual(['SIGTERM']);
    expect(proc.exits).toEqual([]);
  });

  it('throws any other error of the streams, as before', () => {
    const { proc } = fakeProcess();
    const other = Object.assign(new Error('write EIO'), { code: 'EIO' });
    expect(() => proc.stdout.emit('error', other)).toThrow(other);
    expect(proc.exits).toEqual([]);
  });
});
