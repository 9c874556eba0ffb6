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

/**
 * Standard output or error whose reader has gone (`neatroots replay FILE | head -3`, an MCP
 * client that closed its end): a write there fails with EPIPE, which node reports as an 'error'
 * event of the stream, and with nothing listening that was a stack trace and exit 1. The CLI
 * stops quietly instead, as a Unix tool ended by SIGPIPE does but with no 141: a command at
 * once, with the status it already set, else 0 (the reader took what it wanted); a server (a
 * process that listens for SIGTERM: `neatroots start`, `serve`) stops in order, as on SIGTERM,
 * its later writes to the closed pipe dropped. Any other error of the streams is thrown as before.
 */
function exitOnClosedPipe(proc = process) {
  let gone = false;
  const onError = (err) => {
    if (!err || err.code !== 'EPIPE') throw err;
    if (gone) return;
    gone = true;
    if (proc.listenerCount('SIGTERM') > 0) proc.emit('SIGTERM', 'SIGTERM');
    else proc.exit(proc.exitCode ?? 0);
  };
  proc.stdout.on('error', onError);
  proc.stderr.on('error', onError);
}

/**
 * Runs `start()` (a CLI's main, a promise of its exit code); a failure, thrown or rejected, exits
 * 1 with it described; a closed standard output ends it quietly (exitOnClosedPipe).
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

module.exports = { describeFailure, exitOnClosedPipe, runCli };
