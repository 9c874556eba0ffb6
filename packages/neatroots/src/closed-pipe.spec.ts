import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * A CLI whose standard output is piped into a reader that stops early (`neatroots replay FILE |
 * head -3`): its next write fails with EPIPE, which used to end it with node's "Unhandled 'error'
 * event ... Error: write EPIPE" stack trace and exit 1. It now goes on quietly, its later output
 * dropped, and exits with its own status: 0 when it succeeded, 1 for `sopc compile` of a folder
 * that does not compile, 2 for `checks validate` of an invalid file, for `set -o pipefail` and CI
 * to see (bin/failure.js, shared by neatroots, sopc and sopops).
 */
const pkg = path.resolve(__dirname, '..');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the bins' own plain JS, as they load it
const { exitOnClosedPipe } = require(path.join(pkg, 'bin', 'failure.js')) as {
  exitOnClosedPipe(proc: unknown): void;
};

let dir: string;
let spans: string;
let procs: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-closed-pipe-'));
  // 200 runs of the library's repeated-call example: findings well past a pipe's buffer (64 KiB),
  // so the replay is still writing when the reader has gone.
  const example = fs.readFileSync(path.join(pkg, 'library/examples/repeated-tool-call/fires.jsonl'), 'utf8').trimEnd();
  const runs = Array.from({ length: 200 }, (_, i) => example.replaceAll('repeat-fires-1', `run-${i}`));
  spans = path.join(dir, 'spans.jsonl');
  fs.writeFileSync(spans, `${runs.join('\n')}\n`);
  // A procedures folder with 3,000 errors, one a line: ~240 KiB, well past a pipe's buffer too.
  procs = path.join(dir, 'procs');
  fs.mkdirSync(path.join(procs, 'procedures'), { recursive: true });
  for (let i = 0; i < 1000; i++) {
    fs.writeFileSync(path.join(procs, 'procedures', `p${i}.md`), '# P\n## Steps\n1. A. [tool: x, sometimes]\n2.\n## Never\n- N. [when: y]\n');
  }
  fs.writeFileSync(path.join(dir, 'bad.yaml'), 'id: bad\nkind: rule\ntitle: Bad\n');
  fs.writeFileSync(path.join(dir, 'good.yaml'), 'id: good\nkind: rule\ntitle: Good\nrule: { type: repeat, span: { tool: search }, same: [tool], at_least: 2 }\n');
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/**
 * The CLI (neatroots unless said) with its standard output read until the first line, then
 * closed; or closed before it writes anything (`atOnce`: `... | true`).
 */
function runIntoEarlyClose(
  args: string[],
  opts: { bin?: 'neatroots' | 'sopc'; atOnce?: boolean } = {},
): Promise<{ status: number | null; signal: NodeJS.Signals | null; stderr: string; first: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, NEATROOTS_HOME: path.join(dir, 'home') };
  for (const k of ['NEATROOTS_LLM_URL', 'NEATROOTS_DECISION_MODEL_URL']) delete env[k];
  const child = spawn(process.execPath, [path.join(pkg, 'bin', `${opts.bin ?? 'neatroots'}.js`), ...args], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let first = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  if (opts.atOnce) child.stdout.destroy();
  else
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

it('neatroots replay FILE | true stops reading FILE once its reader has gone: a bad line at its end is never reached, exit 0', async () => {
  // The reader gone before the first finding; 200 runs (~720 KiB) before the bad line.
  const bad = path.join(dir, 'spans-bad-end.jsonl');
  fs.writeFileSync(bad, `${fs.readFileSync(spans, 'utf8')}{"run_id":"r","type":"tool"}\n`);
  const r = await runIntoEarlyClose(['replay', bad], { atOnce: true });
  expect([r.status, r.signal, r.stderr]).toEqual([0, null, '']);
}, 90_000);

it('sopc compile DIR | head -1 of a folder that does not compile still exits 1, as without the pipe', async () => {
  const r = await runIntoEarlyClose(['compile', procs], { bin: 'sopc' });
  expect(r.first).toMatch(/^procedures\/p\d+\.md:3: unknown annotation "sometimes"/);
  expect(r.stderr).toBe('');
  expect([r.status, r.signal]).toEqual([1, null]);
}, 90_000);

it('neatroots checks validate FILE | true exits with its own status: 2 for an invalid file, 0 for a valid one', async () => {
  const bad = await runIntoEarlyClose(['checks', 'validate', 'bad.yaml'], { atOnce: true });
  expect(bad.stderr).toContain('bad.yaml: check bad: rule: is required for a rule check');
  expect(bad.stderr).not.toMatch(/EPIPE|Unhandled 'error' event|\n\s+at /);
  expect([bad.status, bad.signal]).toEqual([2, null]);
  const good = await runIntoEarlyClose(['checks', 'validate', 'good.yaml'], { atOnce: true });
  expect([good.status, good.signal, good.stderr]).toEqual([0, null, '']);
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

  it('leaves a command to finish and exit with its own status: no exit of its own, nothing thrown', () => {
    const { proc } = fakeProcess();
    proc.stdout.emit('error', epipe());
    proc.stdout.emit('error', epipe());
    proc.stderr.emit('error', epipe());
    expect(proc.exits).toEqual([]);
    expect(proc.exitCode).toBeUndefined();
    // Marked for the command to see, and what it writes there later is dropped, its callback called.
    expect((proc.stdout as unknown as Record<symbol, unknown>)[Symbol.for('neatroots.closedPipe')]).toBe(true);
    const write = (proc.stdout as unknown as { write(chunk: string, cb: () => void): boolean }).write;
    return new Promise<void>((resolve) => expect(write('more\n', resolve)).toBe(true));
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
