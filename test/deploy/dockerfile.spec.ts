/**
 * deploy/docker/Dockerfile and /.dockerignore. No engine here to build the image, so the file is
 * read instruction by instruction and checked for what the compose file and the chart rely on:
 * the stages, the native build tools for re2, the generated code and the build, production
 * dependencies only, a numeric non-root user, the entry point and default command, and that
 * everything the runtime and the health check need gets into the build context.
 */
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { loadConfig } from '@neatroots/platform';
import { repoRoot } from './support';

interface Instruction {
  op: string;
  args: string;
  line: number;
}

interface Stage {
  from: string;
  name?: string;
  body: Instruction[];
}

/** Instructions with their continuation lines joined and comments dropped. */
function parse(text: string): Instruction[] {
  const out: Instruction[] = [];
  let buf = '';
  let start = 0;
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!buf && (!line || line.startsWith('#'))) return;
    if (buf && line.startsWith('#')) return; // comment inside a continued instruction
    if (!buf) start = i + 1;
    if (line.endsWith('\\')) {
      buf += `${line.slice(0, -1).trim()} `;
      return;
    }
    buf += line;
    const m = /^(\S+)\s+([\s\S]*)$/.exec(buf);
    if (m) out.push({ op: m[1].toUpperCase(), args: m[2].trim(), line: start });
    buf = '';
  });
  return out;
}

function stages(instructions: Instruction[]): { args: Map<string, string>; stages: Stage[] } {
  const args = new Map<string, string>();
  const result: Stage[] = [];
  for (const ins of instructions) {
    if (ins.op === 'ARG' && !result.length) {
      const [k, v] = ins.args.split('=');
      args.set(k, v ?? '');
    } else if (ins.op === 'FROM') {
      const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args);
      if (!m) throw new Error(`line ${ins.line}: cannot read FROM ${ins.args}`);
      const from = m[1].replace(/\$\{(\w+)\}/g, (_, k: string) => args.get(k) ?? '');
      result.push({ from, name: m[2], body: [] });
    } else if (result.length) {
      result[result.length - 1].body.push(ins);
    }
  }
  return { args, stages: result };
}

const dockerfile = path.join(repoRoot, 'deploy/docker/Dockerfile');
const parsed = stages(parse(readFileSync(dockerfile, 'utf8')));
const byName = new Map(parsed.stages.map((s) => [s.name, s]));
const final = parsed.stages[parsed.stages.length - 1];
const run = (s: Stage) => s.body.filter((i) => i.op === 'RUN').map((i) => i.args).join('\n');
const ignore = readFileSync(path.join(repoRoot, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));

describe('deploy/docker/Dockerfile', () => {
  it('builds in stages from node:20-bookworm-slim, the last one the runtime', () => {
    expect(parsed.args.get('NODE_IMAGE')).toBe('node:20-bookworm-slim');
    expect(parsed.stages.map((s) => s.name)).toEqual(['manifests', 'toolchain', 'prod-deps', 'build', 'runtime']);
    for (const s of parsed.stages) expect(['node:20-bookworm-slim', 'toolchain']).toContain(s.from);
    // the runtime starts from the bare base image: no compiler, no dev dependencies
    expect(final.from).toBe('node:20-bookworm-slim');
  });

  it('copies only from stages it defines', () => {
    for (const s of parsed.stages) {
      for (const c of s.body.filter((i) => i.op === 'COPY')) {
        const from = /--from=(\S+)/.exec(c.args)?.[1];
        if (from) expect(byName.has(from)).toBe(true);
      }
    }
  });

  it('compiles re2 with python3, make and g++ in the install stages only', () => {
    const toolchain = byName.get('toolchain')!;
    expect(run(toolchain)).toMatch(/apt-get install -y --no-install-recommends python3 make g\+\+/);
    expect(run(toolchain)).toMatch(/rm -rf \/var\/lib\/apt\/lists/);
    expect(byName.get('prod-deps')!.from).toBe('toolchain');
    expect(byName.get('build')!.from).toBe('toolchain');
    expect(run(final)).not.toMatch(/apt-get|g\+\+|build-essential/);
  });

  it('installs from the lockfile, generates the gRPC code and builds; the runtime gets production dependencies only', () => {
    const steps = run(byName.get('build')!);
    const order = ['npm ci', 'npm run codegen', 'npm run build', 'find . -name node_modules -type d -prune -exec rm -rf {} +'].map((s) => steps.indexOf(s));
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    // install scripts off (the root postinstall builds, which needs the sources), re2 compiled by name
    expect(run(byName.get('prod-deps')!)).toMatch(/npm ci --omit=dev --ignore-scripts && npm rebuild re2$/);
    expect(steps).toMatch(/npm ci --ignore-scripts/);
    const copies = final.body.filter((i) => i.op === 'COPY').map((i) => i.args);
    expect(copies).toEqual(['--from=build /app/ ./', '--from=prod-deps /app/ ./']);
    // the manifests stage keeps package.json files and the lockfile, so `npm ci` stays cached
    expect(run(byName.get('manifests')!)).toMatch(/! -name package\.json ! -name package-lock\.json -delete/);
    // the scripts it runs exist
    const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.codegen).toBeDefined();
    expect(pkg.scripts.build).toBeDefined();
  });

  it('runs as a numeric non-root user with a writable NEATROOTS_HOME', () => {
    const user = final.body.filter((i) => i.op === 'USER').map((i) => i.args);
    expect(user).toEqual(['1000:1000']);
    const env = final.body.filter((i) => i.op === 'ENV').map((i) => i.args).join(' ');
    expect(env).toMatch(/NODE_ENV=production/);
    expect(env).toMatch(/NEATROOTS_HOST=0\.0\.0\.0/);
    expect(env).toMatch(/NEATROOTS_HOME=\/data/);
    expect(run(final)).toMatch(/chown 1000:1000 \/data/);
  });

  it('starts the CLI, running the embedded default (nothing else needed) unless told a --target', () => {
    const entry = final.body.filter((i) => i.op === 'ENTRYPOINT');
    const cmd = final.body.filter((i) => i.op === 'CMD');
    expect(entry).toHaveLength(1);
    expect(cmd).toHaveLength(1);
    expect(JSON.parse(entry[0].args)).toEqual(['node', 'packages/neatroots/bin/neatroots.js']);
    expect(JSON.parse(cmd[0].args)).toEqual(['start', '--no-demo']);
    expect(final.body.find((i) => i.op === 'WORKDIR')?.args).toBe('/app');
    expect(existsSync(path.join(repoRoot, 'packages/neatroots/bin/neatroots.js'))).toBe(true);
  });

  it('exits after a disk error under /data (NEATROOTS_ON_FAILING=exit, a value the configuration takes), for the restart policy', () => {
    const env = final.body.filter((i) => i.op === 'ENV').map((i) => i.args).join(' ');
    const value = /NEATROOTS_ON_FAILING=(\S+)/.exec(env)?.[1];
    expect(value).toBe('exit');
    expect(loadConfig({ NEATROOTS_ON_FAILING: value }).NEATROOTS_ON_FAILING).toBe('exit');
  });

  it('health-checks /readyz with the script it carries, and exposes the service ports', () => {
    const hc = final.body.find((i) => i.op === 'HEALTHCHECK')!;
    expect(hc.args).toMatch(/CMD \["node", "\/app\/deploy\/docker\/healthcheck\.js", "\/readyz"\]$/);
    const exposed = final.body.filter((i) => i.op === 'EXPOSE').flatMap((i) => i.args.split(/\s+/)).map(Number).sort((a, b) => a - b);
    expect(exposed).toEqual([4317, 4318, 8080, 9464, 50051, 50052, 50053]);
  });
});

describe('.dockerignore', () => {
  it('keeps installs, build output, git and local state out of the context', () => {
    for (const p of ['**/node_modules', '**/dist', '.git', '.nx', 'libs/proto/src/gen', '.neatroots-data']) expect(ignore).toContain(p);
  });

  it('lets in what the build and the runtime need', () => {
    // the health check script is under deploy/, which is otherwise left out
    expect(ignore.indexOf('!deploy/docker/healthcheck.js')).toBeGreaterThan(ignore.indexOf('deploy'));
    for (const needed of ['proto', 'libs', 'services', 'packages', 'scripts', 'package.json', 'package-lock.json', 'tsconfig.base.json', 'tsconfig.build.json', 'buf.yaml', 'buf.gen.yaml']) {
      expect(ignore).not.toContain(needed);
      expect(existsSync(path.join(repoRoot, needed))).toBe(true);
    }
  });
});
