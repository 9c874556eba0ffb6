#!/usr/bin/env node
'use strict';
const args = process.argv.slice(2);
const fail = (err) => { console.error(`neatroots: ${err && err.stack ? err.stack : err}`); process.exitCode = 1; };
let run;
try {
  // The servers run again in a child process with their node flags (see src/relaunch.ts).
  const { relaunch, sizeThreadpool, watchParent } = require('../dist/relaunch.js');
  sizeThreadpool(args);
  run = relaunch(args, __filename);
  if (!run) {
    watchParent();
    run = require('../dist/cli.js').main(args);
  }
} catch (err) {
  run = Promise.reject(err);
}
run.then((code) => { process.exitCode = code; }, fail);
