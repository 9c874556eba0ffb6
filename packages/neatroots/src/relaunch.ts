import { spawn } from 'node:child_process';
import { constants } from 'node:os';

/**
 * The servers (`neatroots start`, `neatroots serve`) run with a young generation of their own
 * size, 32 MB semi-spaces. Measured on the embedded default (bench/precheck.js and bench/run.js
 * --only e2e, alternated, 2026-12-01): node's own (16 MB at most, grown on demand) gave the
 * pre-call check a p99 of 6.2-10.8 ms, its collections pausing up to 7-24 ms; 64 MB halved the
 * collections' count but each paused longer (up to 20 ms), p99 6.7-16.7 ms; 8 MB paused 3-4 ms
 * at most, p99 7.3-8.8 ms, but the pipeline found 15% fewer spans/s than at 64. At 32 MB: p99
 * 7.5-9.8 ms in six runs, pauses up to 7-9 ms, and 14,000 spans/s found against 14,400 at 64
 * and 12,200 at 8. V8 reads the size when the process starts, not later (v8.setFlagsFromString
 * has no effect on it, and --min-semi-space-size is refused in NODE_OPTIONS), so the command
 * runs again in a child process started with the flags.
 */

/** Commands that run servers. */
export const SERVER_COMMANDS: ReadonlySet<string> = new Set(['start', 'serve']);

/** Set in the relaunched process: it never relaunches again. */
export const RELAUNCHED_ENV = 'NEATROOTS_RELAUNCHED';

const SEMI_SPACE_ENV = 'NEATROOTS_SEMI_SPACE_MB';
const DEFAULT_SEMI_SPACE_MB = 32;

/**
 * An invalid NEATROOTS_SEMI_SPACE_MB; its message names the setting and what is wrong. Its own
 * class (not the platform's ConfigError) so that this file, loaded before anything else by the
 * bin and by bench/server-flags.js, stays free of the platform's dependencies.
 */
export class SemiSpaceError extends Error {
  override name = 'SemiSpaceError';
}

/** How a command says its configuration is invalid, as start.ts and serve.ts print a ConfigError. */
export function invalidConfiguration(command: string, e: Error): string {
  return `${command}: invalid configuration:\n  ${e.message}`;
}

/** The semi-space size in MB (NEATROOTS_SEMI_SPACE_MB, default 32; 0 keeps node's own and does not relaunch). */
export function semiSpaceMb(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[SEMI_SPACE_ENV];
  if (raw === undefined || raw.trim() === '') return DEFAULT_SEMI_SPACE_MB;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 1024) {
    throw new SemiSpaceError(`${SEMI_SPACE_ENV}: expected a whole number of MB from 0 (node's default young generation) to 1024, got "${raw}"`);
  }
  return n;
}

/** The node flags a server runs with (none when NEATROOTS_SEMI_SPACE_MB is 0). */
export function serverNodeFlags(env: NodeJS.ProcessEnv = process.env): string[] {
  const mb = semiSpaceMb(env);
  return mb ? [`--min-semi-space-size=${mb}`, `--max-semi-space-size=${mb}`] : [];
}

/** node's (libuv's) thread pool size; a server's default is SERVER_THREADPOOL unless it is set. */
export const THREADPOOL_ENV = 'UV_THREADPOOL_SIZE';

/**
 * libuv's thread pool for a server, in place of node's 4. Every fsync of the embedded default
 * (the bus's group commits, the three window journals') holds a pool thread while the disk
 * flushes, 5-160 ms on the machine measured, and the journals' writes wait for a free one.
 * bench/e2e.js --latency, ten pairs alternated (2026-12-01): a span's receipt-to-finding p99 at
 * 5,000 spans/s went over 150 ms in 1 run of 10 at 16 threads, 4 of 10 at 4 (median 81 against
 * 127 ms). The threads mostly sleep in the kernel.
 */
const SERVER_THREADPOOL = 16;

/**
 * Sets the thread pool's size for a server command, unless it is set already. Called before the
 * process uses the pool (libuv reads the variable once, when the pool starts) and before the
 * server process is started, which inherits it.
 */
export function sizeThreadpool(args: readonly string[], env: NodeJS.ProcessEnv = process.env): void {
  if (SERVER_COMMANDS.has(args[0] ?? '') && !env[THREADPOOL_ENV]) env[THREADPOOL_ENV] = String(SERVER_THREADPOOL);
}

/** Whether this process already runs with a semi-space size given on node's command line. */
export function sizedAlready(execArgv: readonly string[] = process.execArgv): boolean {
  return execArgv.some((a) => /^--(min|max)[-_]semi[-_]space[-_]size/.test(a));
}

/**
 * Runs a server command again in a child process with serverNodeFlags(), and resolves with
 * its exit code; null when this process should run the command itself (not a server command,
 * already relaunched, flags given by hand, --help, or NEATROOTS_SEMI_SPACE_MB=0). An invalid
 * NEATROOTS_SEMI_SPACE_MB is reported on `err` the way the commands report their other invalid
 * settings, and resolves with 2.
 *
 * The child is the server; this process only waits for it:
 * - it is in a process group of its own, so a terminal's Ctrl-C reaches it once, forwarded
 *   from here (a second SIGINT during its graceful stop would end it at once);
 * - SIGINT, SIGTERM and SIGHUP sent here are passed on (a container's stop reaches this process);
 * - if this process dies without passing anything on (SIGKILL), the child sees its channel to
 *   this process close and stops as on SIGTERM (see watchParent): no server is left running;
 * - a child killed by a signal makes this process exit with 128 + the signal's number.
 */
export function relaunch(
  args: readonly string[],
  script: string,
  err: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
): Promise<number> | null {
  if (!SERVER_COMMANDS.has(args[0] ?? '') || process.env[RELAUNCHED_ENV]) return null;
  if (args.includes('--help') || args.includes('-h')) return null;
  let flags: string[];
  try {
    flags = serverNodeFlags();
  } catch (e) {
    if (!(e instanceof SemiSpaceError)) throw e;
    err(invalidConfiguration(`neatroots ${args[0]}`, e));
    return Promise.resolve(2);
  }
  if (!flags.length || sizedAlready(process.execArgv)) return null;
  const child = spawn(process.execPath, [...process.execArgv, ...flags, script, ...args], {
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, [RELAUNCHED_ENV]: '1' },
    detached: true,
  });
  const forward = (signal: NodeJS.Signals) => () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  const handlers = signals.map((s) => [s, forward(s)] as const);
  for (const [s, h] of handlers) process.on(s, h);
  return new Promise<number>((resolve, reject) => {
    child.once('error', (err) => reject(new Error(`could not start the server process (${process.execPath}): ${err.message}`)));
    child.once('exit', (code, signal) => {
      for (const [s, h] of handlers) process.off(s, h);
      resolve(code ?? 128 + (signal ? constants.signals[signal] ?? 0 : 0));
    });
  });
}

/**
 * In a relaunched server: stop (as on SIGTERM) when the process that started it is gone. The
 * channel to it does not keep this process running.
 */
export function watchParent(): void {
  if (!process.env[RELAUNCHED_ENV] || !process.send || !process.channel) return;
  process.channel.unref();
  // Before the server listens for SIGTERM, its default (ending the process) is what is wanted.
  process.once('disconnect', () => (process.listenerCount('SIGTERM') ? process.emit('SIGTERM', 'SIGTERM') : process.kill(process.pid, 'SIGTERM')));
}
