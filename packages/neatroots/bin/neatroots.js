#!/usr/bin/env node
'use strict';
const args = process.argv.slice(2);
require('./failure.js').runCli('neatroots', () => {
  // The servers run again in a child process with their node flags (see src/relaunch.ts).
  const { relaunch, sizeThreadpool, watchParent } = require('../dist/relaunch.js');
  sizeThreadpool(args);
  const relaunched = relaunch(args, __filename);
  if (relaunched) return relaunched;
  watchParent();
  return require('../dist/cli.js').main(args);
});
