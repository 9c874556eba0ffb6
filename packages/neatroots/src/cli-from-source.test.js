'use strict';
// Runs the neatroots CLI from its TypeScript sources in a process of its own (tests that start
// it as a command, as a coding agent starts `neatroots mcp`), compiled by swc as jest compiles
// tests, with @neatroots/* read from the sources (jest.config.js's moduleNameMapper): no build
// needed. Named *.test.js: a helper, neither run by jest nor built.
const fs = require('node:fs');
const Module = require('node:module');
const path = require('node:path');
const swc = require('@swc/core');

const root = path.resolve(__dirname, '..', '..', '..');
const map = [
  [/^@neatroots\/(proto|spans|ports|checks|store|platform|questions|messages|sop)$/, 'libs/$1/src'],
  [/^@neatroots\/review-domain$/, 'libs/review/src'],
  [/^@neatroots\/(ingest|rule-engine|question|review|api)$/, 'services/$1/src'],
  [/^@neatroots\/sdk$/, 'packages/sdk/src'],
];
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  for (const [re, to] of map) if (re.test(request)) return resolve.call(this, path.join(root, request.replace(re, to)), ...rest);
  return resolve.call(this, request, ...rest);
};
const options = {
  jsc: { parser: { syntax: 'typescript', decorators: true }, transform: { legacyDecorator: true, decoratorMetadata: true }, target: 'es2022' },
  module: { type: 'commonjs' },
};
require.extensions['.ts'] = (module, filename) => {
  module._compile(swc.transformSync(fs.readFileSync(filename, 'utf8'), { ...options, filename }).code, filename);
};
require(path.join(__dirname, 'cli.ts'))
  .main(process.argv.slice(2))
  .then(
    (code) => (process.exitCode = code),
    (err) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
