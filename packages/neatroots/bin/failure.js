'use strict';

/**
 * How the CLIs (neatroots, sopc, sopops) report a failure that reaches them: the error's stack,
 * except where the fix is known and the stack would not say it, such as re2's native addon that
 * was never built because npm skipped its install script.
 */
function describeFailure(err) {
  if (err && err.code === 'MODULE_NOT_FOUND' && /re2\.node/.test(String(err.message))) {
    return [
      "re2's native addon is not built: its install script did not run (npm 11 and later skip a dependency's install script until it is approved).",
      'In the folder neatroots is installed in, run:',
      '  npm install-scripts approve re2 && npm rebuild re2',
    ].join('\n');
  }
  return err && err.stack ? err.stack : String(err);
}

/** Set to true on a standard stream whose reader has gone: `stream[CLOSED_PIPE]`. */
const CLOSED_PIPE = Symbol.for('neatroots.closedPipe');

/**
 * Standard output or error whose reader has gone (`neatroots replay FILE | head -3`, an MCP
 * client that closed its end): a write there fails with EPIPE, which node reports as an 'error'
 * event of the stream, and with nothing listening that was a stack trace and exit 1. The CLI
 * goes on quietly instead: the stream is marked (CLOSED_PIPE, which tells a command that reads
 * a long input, such as replay, that it may stop reading) and its later writes are dropped, and
 * a command finishes and exits with its own status: `sopc compile DIR | head -3` still exits 1
 * when DIR does not compile, for `set -o pipefail` and CI to see; a command that succeeded exits
 * 0 (the reader took what it wanted). A server (a process that listens for SIGTERM: `neatroots
 * start`, `serve`) stops in order, as on SIGTERM. Any other error of the streams is thrown as
 * before.
 */
function exitOnClosedPipe(proc = process) {
  let gone = false;
  const watch = (stream) => {
    stream.on('error', (err) => {
      if (!err || err.code !== 'EPIPE') throw err;
      if (!stream[CLOSED_PIPE]) {
        stream[CLOSED_PIPE] = true;
        // Node keeps a standard stream open (it cannot be destroyed), and each write would fail again.
        stream.write = (_chunk, encoding, cb) => {
          const done = typeof encoding === 'function' ? encoding : cb;
          if (typeof done === 'function') process.nextTick(done);
          return true;
        };
      }
      if (gone) return;
      gone = true;
      if (proc.listenerCount('SIGTERM') > 0) proc.emit('SIGTERM', 'SIGTERM');
    });
  };
  watch(proc.stdout);
  watch(proc.stderr);
}

/**
 * Runs `start()` (a CLI's main, a promise of its exit code); a failure, thrown or rejected, exits
 * 1 with it described; a closed standard output or error is no failure (exitOnClosedPipe).
 */
function runCli(name, start) {
  exitOnClosedPipe();
  const fail = (err) => {
    console.error(`${name}: ${describeFailure(err)}`);
    process.exitCode = 1;
  };
  let run;
  try {
    run = Promise.resolve(start());
  } catch (err) {
    run = Promise.reject(err);
  }
  run.then((code) => {
    process.exitCode = code;
  }, fail);
}

module.exports = { CLOSED_PIPE, describeFailure, exitOnClosedPipe, runCli };
