'use strict';
// A memory cap for a process the benches start, as a container's memory limit is one: a cgroup
// of its own under the machine's memory controller (cgroup v2's memory.max, or v1's
// memory.limit_in_bytes), the process started inside it (so node sizes its heap from the limit
// as it would in a container), and the kernel's own peak and OOM kills read back. Needs root, or
// a delegated cgroup; `memoryCgroupRoot()` says why not when there is none to use.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const YAML = require('yaml');

const V2 = '/sys/fs/cgroup';
const V1 = '/sys/fs/cgroup/memory';

/** Where memory cgroups can be made ({ dir, version }), or { why } when nowhere. */
function memoryCgroupRoot() {
  try {
    if (fs.readFileSync(path.join(V2, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('memory')) {
      // a child's memory.max needs the controller enabled for the root's children
      const sub = path.join(V2, 'cgroup.subtree_control');
      if (!fs.readFileSync(sub, 'utf8').split(/\s+/).includes('memory')) fs.writeFileSync(sub, '+memory');
      fs.accessSync(V2, fs.constants.W_OK);
      return { dir: V2, version: 2 };
    }
  } catch {}
  try {
    fs.accessSync(path.join(V1, 'memory.limit_in_bytes'));
    fs.accessSync(V1, fs.constants.W_OK);
    return { dir: V1, version: 1 };
  } catch {}
  return { why: `no writable memory cgroup controller (${V2}/cgroup.controllers without memory, no ${V1}): run as root on Linux` };
}

/**
 * A cgroup `name` capped at `bytes` (no swap). `command(file, args)` is the command line that
 * starts `file` inside it (the same process id: `sh` moves itself in, then execs). `peak()`:
 * the most memory its processes held at once (the kernel's count, page cache included);
 * `oomKills()`: processes the kernel killed in it for want of memory. `remove()` once they exited.
 */
function memoryCap(name, bytes) {
  const root = memoryCgroupRoot();
  if (!root.dir) throw new Error(root.why);
  const dir = path.join(root.dir, name);
  fs.mkdirSync(dir, { recursive: true });
  const write = (file, value) => fs.writeFileSync(path.join(dir, file), String(value));
  const read = (file) => {
    try {
      return fs.readFileSync(path.join(dir, file), 'utf8');
    } catch {
      return '';
    }
  };
  if (root.version === 2) {
    write('memory.max', bytes);
    try {
      write('memory.swap.max', 0);
    } catch {}
  } else {
    write('memory.limit_in_bytes', bytes);
    try {
      write('memory.memsw.limit_in_bytes', bytes);
    } catch {}
  }
  return {
    dir,
    version: root.version,
    bytes,
    command: (file, args) => ['/bin/sh', ['-c', `echo $$ > '${path.join(dir, 'cgroup.procs')}' && exec "$@"`, 'sh', file, ...args]],
    peak: () => Number(root.version === 2 ? read('memory.peak') : read('memory.max_usage_in_bytes')) || undefined,
    oomKills: () => Number(/oom_kill (\d+)/.exec(root.version === 2 ? read('memory.events') : read('memory.oom_control'))?.[1] ?? 0),
    /** Hits of the limit (v1's failcnt; v2: memory.events' max). */
    hits: () => Number(root.version === 2 ? /^max (\d+)/m.exec(read('memory.events'))?.[1] ?? 0 : read('memory.failcnt')) || 0,
    remove: () => {
      try {
        fs.rmdirSync(dir);
      } catch {}
    },
  };
}

/** A Kubernetes memory quantity ("512Mi", "1Gi", "1.5G", "800M", bytes) in bytes. */
function quantityBytes(q) {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|K|M|G|T)?$/.exec(String(q).trim());
  if (!m) throw new Error(`not a memory quantity: ${q}`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, K: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Math.round(Number(m[1]) * (m[2] ? unit[m[2]] : 1));
}

/** The helm binary: $NEATROOTS_HELM, the one scripts/helm.sh built, or helm on PATH. */
function findHelm(env = process.env) {
  if (env.NEATROOTS_HELM) return env.NEATROOTS_HELM;
  const built = path.join(env.NEATROOTS_TOOLS_DIR || path.join(os.homedir(), '.cache/neatroots-tools'), 'bin', 'helm');
  if (fs.existsSync(built)) return built;
  return (env.PATH ?? '').split(path.delimiter).filter(Boolean).map((d) => path.join(d, 'helm')).find((f) => fs.existsSync(f));
}

/**
 * What the chart (helm/neatroots, rendered with `helm template` and `values`, a values file)
 * gives each service's container: its memory limit in bytes and its own variables (`env`:
 * NODE_OPTIONS and the like; not the ConfigMap's, whose addresses are the cluster's). By
 * --target name.
 */
function chartCaps(values) {
  const helm = findHelm();
  if (!helm) throw new Error('no helm: scripts/helm.sh builds one, or set NEATROOTS_HELM');
  const chart = path.resolve(__dirname, '../helm/neatroots');
  const r = spawnSync(helm, ['template', 'nr', chart, ...(values ? ['-f', values] : [])], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.error) throw new Error(`helm (${helm}): ${r.error.message}; scripts/helm.sh builds one, or set NEATROOTS_HELM`);
  if (r.status !== 0) throw new Error(`helm template failed: ${r.stderr}`);
  const caps = {};
  for (const doc of YAML.parseAllDocuments(r.stdout)) {
    const o = doc.toJSON();
    if (o?.kind !== 'Deployment') continue;
    const c = o.spec.template.spec.containers[0];
    const target = c.args[c.args.indexOf('--target') + 1];
    const limit = c.resources?.limits?.memory;
    if (!limit) continue;
    caps[target] = { bytes: quantityBytes(limit), limit, env: Object.fromEntries((c.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value])) };
  }
  return caps;
}

module.exports = { memoryCgroupRoot, memoryCap, chartCaps, quantityBytes };
