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

/** Runs `start()` (a CLI's main, a promise of its exit code); a failure, thrown or rejected, exits 1 with it described. */
function runCli(name, start) {
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

module.exports = { describeFailure, runCli };
