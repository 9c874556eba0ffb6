#!/usr/bin/env node
// Packs a workspace package (the CLI, packages/neatroots, or the agent SDK, packages/sdk) into
// a tarball that installs outside this repository:
//
//   node scripts/pack.js packages/sdk [OUT_DIR]       -> OUT_DIR/neatroots-sdk-0.1.0.tgz
//   node scripts/pack.js packages/neatroots [OUT_DIR] -> OUT_DIR/neatroots-0.1.0.tgz
//
// The workspace packages it depends on (@neatroots/*) are not published, so the tarball
// carries them: they are bundled dependencies, copied (built) into the package's own
// node_modules in a staging folder. `npm pack` cannot do this from the workspace itself: a
// workspace dependency is a symlink in the root node_modules, which it leaves out. Their
// third-party dependencies become the tarball's own, so `npm install` puts them where the
// bundled packages find them. Run `npm run build` first.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..');

/** Every workspace package by name: its folder and package.json. */
function workspacePackages() {
  const byName = new Map();
  for (const group of ['libs', 'services', 'packages']) {
    for (const name of fs.readdirSync(path.join(root, group))) {
      const dir = path.join(root, group, name);
      const file = path.join(dir, 'package.json');
      if (!fs.existsSync(file)) continue;
      const pkg = JSON.parse(fs.readFileSync(file, 'utf8'));
      byName.set(pkg.name, { dir, pkg });
    }
  }
  return byName;
}

/** The workspace packages `pkg` needs at run time, directly or through another one. */
function workspaceClosure(pkg, workspace) {
  const seen = new Set();
  const visit = (p) => {
    for (const dep of Object.keys(p.dependencies ?? {})) {
      if (!workspace.has(dep) || seen.has(dep)) continue;
      seen.add(dep);
      visit(workspace.get(dep).pkg);
    }
  };
  visit(pkg);
  return [...seen].sort();
}

/** What a package ships: its `files` (default: the build), less build-only files. */
function copyShipped(from, to, pkg) {
  for (const entry of pkg.files ?? ['dist']) {
    const src = path.join(from, entry);
    if (!fs.existsSync(src)) throw new Error(`${pkg.name}: ${entry} is missing in ${from}; run npm run build first`);
    fs.cpSync(src, path.join(to, entry), {
      recursive: true,
      dereference: true,
      // Source maps point at src/, which is not shipped; the build cache is of no use outside.
      filter: (p) => !/\.(map|tsbuildinfo)$/.test(p) && !/\.(spec|test)\.(js|d\.ts)$/.test(p),
    });
  }
  for (const extra of ['README.md', 'LICENSE']) {
    if (fs.existsSync(path.join(from, extra))) fs.copyFileSync(path.join(from, extra), path.join(to, extra));
  }
}

/** A package.json fit to ship: no workspace-only fields. */
function shippedManifest(pkg) {
  const out = { ...pkg };
  delete out.nx;
  delete out.devDependencies;
  delete out.scripts;
  return out;
}

function pack(target, outDir) {
  const workspace = workspacePackages();
  const dir = path.resolve(root, target);
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const bundled = workspaceClosure(pkg, workspace);
  const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-pack-'));
  try {
    copyShipped(dir, stage, pkg);
    // Third-party dependencies of everything bundled, so npm installs them beside it.
    const deps = {};
    for (const name of [pkg.name, ...bundled]) {
      const p = name === pkg.name ? pkg : workspace.get(name).pkg;
      for (const [dep, range] of Object.entries(p.dependencies ?? {})) {
        if (workspace.has(dep)) continue;
        if (deps[dep] && deps[dep] !== range) throw new Error(`${dep}: ${name} wants ${range}, another package ${deps[dep]}; align them`);
        deps[dep] = range;
      }
    }
    for (const name of bundled) {
      const { dir: from, pkg: p } = workspace.get(name);
      const to = path.join(stage, 'node_modules', ...name.split('/'));
      fs.mkdirSync(to, { recursive: true });
      copyShipped(from, to, p);
      fs.writeFileSync(path.join(to, 'package.json'), `${JSON.stringify(shippedManifest(p), null, 2)}\n`);
    }
    const manifest = shippedManifest(pkg);
    manifest.dependencies = { ...Object.fromEntries(bundled.map((n) => [n, workspace.get(n).pkg.version])), ...sorted(deps) };
    manifest.bundleDependencies = bundled;
    fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    fs.mkdirSync(outDir, { recursive: true });
    const out = execFileSync('npm', ['pack', '--json', '--pack-destination', path.resolve(outDir)], {
      cwd: stage,
      encoding: 'utf8',
      env: { ...process.env, npm_config_ignore_scripts: 'true' },
    });
    return path.join(path.resolve(outDir), JSON.parse(out)[0].filename);
  } finally {
    fs.rmSync(stage, { recursive: true, force: true });
  }
}

function sorted(o) {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

module.exports = { pack };

if (require.main === module) {
  const [target, outDir = '.'] = process.argv.slice(2);
  if (!target) {
    console.error('usage: node scripts/pack.js <packages/neatroots|packages/sdk> [OUT_DIR]');
    process.exit(2);
  }
  try {
    console.log(pack(target, outDir));
  } catch (e) {
    console.error(`pack: ${e.message}`);
    process.exit(1);
  }
}
