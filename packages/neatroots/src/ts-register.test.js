'use strict';
// A require hook that runs the TypeScript sources directly (`node -r <this> script.js`): .ts
// compiled by swc as jest compiles tests, @neatroots/* and neatroots read from the sources
// (jest.config.js's moduleNameMapper), so no build is needed. For tests that start a process
// of their own and for benchmarks run from a checkout. Named *.test.js: neither run nor built.
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
  [/^neatroots$/, 'packages/neatroots/src'],
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
