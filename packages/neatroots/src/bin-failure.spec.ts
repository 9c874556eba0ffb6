import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * The CLIs as a user runs them, when re2's native addon was never built: npm 11 and later skip
 * a dependency's install script until it is approved, so an install outside this repository can
 * end up without `re2.node`. Each CLI then says what to run, and exits 1, instead of a stack
 * trace from Node's module loader. The missing file is made so by a preload that resolves it as
 * Node does when it is absent (MODULE_NOT_FOUND): the addon itself stays where other tests use it.
 */
const bin = (name: string) => path.resolve(__dirname, '..', 'bin', `${name}.js`);

let preload: string;
beforeAll(() => {
  preload = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-no-re2-')), 'no-re2.js');
  fs.writeFileSync(
    preload,
    `const Module = require('node:module');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, parent, ...rest) {
  if (/re2\\.node$/.test(request)) {
    const err = new Error("Cannot find module '" + request + "'");
    err.code = 'MODULE_NOT_FOUND';
    throw err;
  }
  return resolve.call(this, request, parent, ...rest);
};
`,
  );
});
afterAll(() => fs.rmSync(path.dirname(preload), { recursive: true, force: true }));

function run(name: string, args: string[]) {
  const env = { ...process.env, NODE_OPTIONS: `--require ${preload}` };
  return spawnSync(process.execPath, [bin(name), ...args], { env, encoding: 'utf8', timeout: 60_000 });
}

it.each([[['checks', 'list']], [['start', '--help']]])('neatroots %j says how to build re2 when its addon is missing, and exits 1', (args) => {
  const r = run('neatroots', args);
  expect(r.status).toBe(1);
  expect(r.stderr).toContain("neatroots: re2's native addon is not built");
  expect(r.stderr).toContain('npm install-scripts approve re2 && npm rebuild re2');
  expect(r.stderr).not.toMatch(/at Module\._resolveFilename/);
});

it('leaves sopc and sopops working without it (they run no match check)', () => {
  for (const name of ['sopc', 'sopops']) {
    const r = run(name, ['--help']);
    expect([name, r.status, r.stderr]).toEqual([name, 0, '']);
  }
});

it('still prints the stack of any other failure', () => {
  const r = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(path.resolve(__dirname, '..', 'bin', 'failure.js'))}).runCli('neatroots', () => { throw new Error('boom'); })`], { encoding: 'utf8' });
  expect(r.status).toBe(1);
  expect(r.stderr).toMatch(/^neatroots: Error: boom\n\s+at /);
});
