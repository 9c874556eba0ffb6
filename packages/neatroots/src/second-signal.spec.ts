import { spawn } from 'node:child_process';
import * as path from 'node:path';

const RUNTIME = path.resolve(__dirname, '../dist/runtime.js');

/**
 * A server process as `neatroots start` and `serve` run it: untilSignal(), then a stop that
 * takes long (a drain, a client keeping a connection busy). Its output says when it listens and
 * when its stop began.
 */
const SERVER = `
  const { cliLogger, untilSignal } = require(${JSON.stringify(RUNTIME)});
  const { loadConfig } = require('@neatroots/platform');
  const log = cliLogger(loadConfig({ NEATROOTS_LOG_FORMAT: 'json' }), { err: (l) => process.stderr.write(l + '\\n') });
  const serving = setInterval(() => undefined, 1000); // its ports
  untilSignal(log).then(() => {
    clearInterval(serving);
    process.stdout.write('stopping\\n');
    setInterval(() => undefined, 1000); // a stop that does not end by itself
  });
  process.stdout.write('listening\\n');
`;

/** Sends `first`, then once the stop began `second`: how the process ended, and what it logged. */
async function stopTwice(first: NodeJS.Signals, second: NodeJS.Signals): Promise<{ ended: string; log: unknown[] }> {
  const child = spawn(process.execPath, ['-e', SERVER], { cwd: path.resolve(__dirname, '../../..'), stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<string>((resolve) => child.once('exit', (code, signal) => resolve(signal ? `by ${signal}` : `exit ${code}`)));
  const said = (line: string) =>
    new Promise<void>((resolve) => {
      let out = '';
      const on = (d: Buffer) => {
        out += d.toString();
        if (out.split('\n').includes(line)) {
          child.stdout.off('data', on);
          resolve();
        }
      };
      child.stdout.on('data', on);
    });
  const listening = said('listening');
  const stopping = said('stopping');
  await listening;
  child.kill(first);
  await stopping;
  child.kill(second);
  // Ignored, the process would go on stopping for ever: after 10 s it is killed, and the test says so.
  let bound!: NodeJS.Timeout;
  const ended = await Promise.race([exited, new Promise<string>((r) => (bound = setTimeout(() => r('still running after 10 s'), 10_000)))]);
  clearTimeout(bound);
  if (ended.startsWith('still')) {
    child.kill('SIGKILL');
    await exited;
  }
  const log = stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => {
      const { level, msg } = JSON.parse(l) as { level: string; msg: string };
      return { level, msg };
    });
  return { ended, log };
}

describe('a second signal during the stop', () => {
  it.each([
    ['SIGTERM', 'SIGINT'],
    ['SIGINT', 'SIGTERM'],
    ['SIGTERM', 'SIGHUP'],
    ['SIGTERM', 'SIGTERM'],
  ] as const)('%s, then %s: stops the process at once, by that signal, and says so', async (first, second) => {
    expect(await stopTwice(first, second)).toEqual({
      ended: `by ${second}`,
      log: [{ level: 'warn', msg: `${second} after ${first}: stopping now, without finishing the stop (a second signal ends the process at once)` }],
    });
  }, 30_000);
});
