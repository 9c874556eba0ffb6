'use strict';
// Runs the neatroots CLI from its TypeScript sources in a process of its own (tests that start
// it as a command, as a coding agent starts `neatroots mcp`): no build needed. Named
// *.test.js: a helper, neither run by jest nor built.
require('./ts-register.test.js');
require('./cli.ts')
  .main(process.argv.slice(2))
  .then(
    (code) => (process.exitCode = code),
    (err) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
