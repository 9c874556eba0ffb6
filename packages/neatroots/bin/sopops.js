#!/usr/bin/env node
'use strict';
require('../dist/sopops.js').main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err) => { console.error(`sopops: ${err && err.stack ? err.stack : err}`); process.exitCode = 1; },
);
