'use strict';
// A bench that runs the embedded app in its own process runs it as `neatroots start` does: with
// the servers' node flags (packages/neatroots/src/relaunch.ts: the young generation's size, which
// V8 only takes on the command line) and thread pool (UV_THREADPOOL_SIZE, read once). Called
// first thing when run as a script: without the flags, the script runs again in a child process
// with them and this one exits with its code once the child has ended.
const { spawn } = require('node:child_process');
const os = require('node:os');
const path = require('node:path');
const { SemiSpaceError, invalidConfiguration, serverNodeFlags, sizeThreadpool, sizedAlready } = require('neatroots/dist/relaunch');

/**
 * True when this process is the one to run the bench; otherwise the bench runs in a child, this
 * process exits with the child's code once it has ended, and the caller does nothing more.
 */
function asServer() {
  // Before the pool is first used; a child started below inherits it.
  sizeThreadpool(['start']);
  let flags;
  try {
    flags = serverNodeFlags();
  } catch (e) {
    if (!(e instanceof SemiSpaceError)) throw e;
    // As `neatroots start` reports it: the setting and what is wrong, no stack trace.
    process.stderr.write(`${invalidConfiguration(path.basename(process.argv[1]), e)}\n`);
    process.exit(2);
  }
  if (!flags.length || sizedAlready()) return true;
  // The child is a process group of its own, so a signal reaches it once, through this process:
  // Ctrl-C, a `kill` of this process or a job's timeout go on to the bench, which stops what it
  // started (bench/distributed.js: its services, topics, scratch database); a second one ends it.
  // Before, a kill of this process left the bench running, and Ctrl-C ended this one at once.
  const child = spawn(process.execPath, [...process.execArgv, ...flags, process.argv[1], ...process.argv.slice(2)], { stdio: 'inherit', detached: true });
  const forward = (sig) => child.kill(sig);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, forward);
  child.on('exit', (code, signal) => process.exit(code ?? 128 + (os.constants.signals[signal] ?? 0)));
  return false;
}

module.exports = { asServer };
