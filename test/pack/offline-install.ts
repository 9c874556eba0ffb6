import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * Installs a packed tarball into an empty folder without the registry: npm fetches each
 * third-party package from its cache (which `npm ci` filled for this repository) by the
 * resolved address and integrity in a lockfile. This writes that lockfile: the tarball's
 * dependencies, at the versions the repository's package-lock.json resolves for the workspace
 * packages that declare them, and their dependencies in turn, laid out as npm lays out a
 * tree (hoisted unless two versions collide). Nothing in the folder points back at the repo.
 */

interface LockEntry {
  name?: string;
  version?: string;
  resolved?: string;
  integrity?: string;
  link?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  [key: string]: unknown;
}

/** The fields of a lock entry that describe the package itself (not how the repo used it). */
const KEPT = ['version', 'resolved', 'integrity', 'license', 'dependencies', 'optionalDependencies', 'peerDependencies', 'peerDependenciesMeta', 'bin', 'engines', 'os', 'cpu', 'hasInstallScript'];

export interface Manifest {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  bundleDependencies?: string[];
  bin?: Record<string, string>;
}

export function tarballManifest(tarball: string): Manifest {
  return JSON.parse(execFileSync('tar', ['xzf', tarball, '-O', 'package/package.json'], { encoding: 'utf8' })) as Manifest;
}

/** The lock path a package at `from` gets `name` from: the nearest node_modules up the tree. */
function locate(packages: Record<string, LockEntry>, from: string, name: string): string | undefined {
  let at = from;
  for (;;) {
    const candidate = `${at ? `${at}/` : ''}node_modules/${name}`;
    const e = packages[candidate];
    if (e && !e.link) return candidate;
    if (!at) return undefined;
    const i = at.lastIndexOf('/node_modules/');
    at = i < 0 ? '' : at.slice(0, i);
  }
}

/**
 * Where npm would download a package from: the repo lock leaves `resolved` out for registry
 * packages, and without it npm asks the registry for the package's metadata first.
 */
function tarballUrl(registry: string, name: string, version: string): string {
  return `${registry.replace(/\/*$/, '/')}${name}/-/${name.split('/').pop()}-${version}.tgz`;
}

export function writeOfflineLock(opts: { repoLock: string; tarball: string; dir: string; registry: string; allowScripts?: string[] }): void {
  const repo = (JSON.parse(fs.readFileSync(opts.repoLock, 'utf8')) as { packages: Record<string, LockEntry> }).packages;
  const manifest = tarballManifest(opts.tarball);
  const bundled = new Set(manifest.bundleDependencies ?? []);
  // Workspace folders in the repo lock, by package name: where each declared its dependencies.
  const workspaces = new Map<string, string>();
  for (const [at, e] of Object.entries(repo)) if (e.name && !at.includes('node_modules/')) workspaces.set(e.name, at);

  const spec = `file:${path.basename(opts.tarball)}`;
  const top = `node_modules/${manifest.name}`;
  const out: Record<string, LockEntry> = {
    '': { name: 'consumer', dependencies: { [manifest.name]: spec } },
    // npm ci links bins from the lock, not from the package.
    [top]: { version: manifest.version, resolved: spec, dependencies: manifest.dependencies, bundleDependencies: manifest.bundleDependencies, bin: manifest.bin },
  };
  /** The version placed at each consumer path. */
  const placed = new Map<string, string>();
  const queue: { parent: string; name: string; source: string }[] = [];

  // The tarball's own third-party dependencies: resolved where a workspace package declared them.
  for (const name of Object.keys(manifest.dependencies ?? {})) {
    if (bundled.has(name)) continue;
    const declaring = [manifest.name, ...bundled].map((n) => workspaces.get(n)).find((w) => w !== undefined && repo[w].dependencies?.[name] !== undefined);
    const source = locate(repo, declaring ?? '', name);
    if (!source) throw new Error(`${name}: not in ${opts.repoLock}`);
    queue.push({ parent: top, name, source });
  }

  while (queue.length) {
    const { parent, name, source } = queue.shift()!;
    const entry = repo[source];
    // Node's resolution from `parent`: the nearest copy up the tree wins.
    let at: string | undefined;
    let conflict = false;
    for (let level = parent; ; ) {
      const candidate = `${level ? `${level}/` : ''}node_modules/${name}`;
      const v = placed.get(candidate) ?? (candidate === top ? manifest.version : undefined);
      if (v !== undefined) {
        if (v === entry.version) at = candidate;
        else conflict = true;
        break;
      }
      if (!level) break;
      const i = level.lastIndexOf('/node_modules/');
      level = i < 0 ? '' : level.slice(0, i);
    }
    if (at) continue; // already there
    at = conflict ? `${parent}/node_modules/${name}` : `node_modules/${name}`;
    placed.set(at, entry.version ?? '');
    out[at] = Object.fromEntries(KEPT.filter((k) => entry[k] !== undefined).map((k) => [k, entry[k]]));
    out[at].resolved ??= tarballUrl(opts.registry, name, entry.version ?? '');
    const needs = { ...entry.dependencies, ...entry.optionalDependencies, ...entry.peerDependencies };
    for (const dep of Object.keys(needs)) {
      const from = locate(repo, source, dep);
      if (!from) {
        // An optional or optional-peer dependency the repository never installed (another platform).
        if (entry.optionalDependencies?.[dep] !== undefined || entry.peerDependencies?.[dep] !== undefined) continue;
        throw new Error(`${source} needs ${dep}, which ${opts.repoLock} does not hold`);
      }
      queue.push({ parent: at, name: dep, source: from });
    }
  }

  const pkg: Record<string, unknown> = { name: 'consumer', private: true, dependencies: { [manifest.name]: spec } };
  if (opts.allowScripts?.length) pkg.allowScripts = Object.fromEntries(opts.allowScripts.map((n) => [n, true]));
  fs.writeFileSync(path.join(opts.dir, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  fs.writeFileSync(path.join(opts.dir, 'package-lock.json'), `${JSON.stringify({ name: 'consumer', lockfileVersion: 3, requires: true, packages: out }, null, 2)}\n`);
}
