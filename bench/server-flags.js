'use strict';
// A bench that runs the embedded app in its own process runs it as `neatroots start` does: with
// the servers' node flags (packages/neatroots/src/relaunch.ts: the young generation's size, which
// V8 only takes on the command line) and thread pool (UV_THREADPOOL_SIZE, read once). Called
// first thing when run as a script: without the flags, the script runs again in a child process
// with them and this one exits with its code.
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { SemiSpaceError, invalidConfiguration, serverNodeFlags, sizeThreadpool, sizedAlready } = require('neatroots/dist/relaunch');

/** True when this process is the one to run the bench; otherwise it ran in a child and this process exits. */
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
  const r = spawnSync(process.execPath, [...process.execArgv, ...flags, process.argv[1], ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

module.exports = { asServer };
