#!/usr/bin/env node
// Generates the TypeScript for proto/ into libs/proto/src/gen with ts-proto, through the
// buf binary that ships inside the @bufbuild/buf npm package (no protoc download needed).
// Runs on install and before every build; generated code is never edited by hand.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const out = path.join(root, 'libs/proto/src/gen');
const buf = require.resolve('@bufbuild/buf/bin/buf', { paths: [root] });
const plugin = path.join(root, 'node_modules/.bin/protoc-gen-ts_proto');
if (!fs.existsSync(plugin)) {
  console.error(`codegen: ${plugin} is missing; run npm install first`);
  process.exit(1);
}
fs.rmSync(out, { recursive: true, force: true });
try {
  execFileSync(process.execPath, [buf, 'generate'], { cwd: root, stdio: 'inherit' });
} catch (err) {
  console.error('codegen: buf generate failed (see above)');
  process.exit(1);
}
console.log(`codegen: generated ${path.relative(root, out)}`);
