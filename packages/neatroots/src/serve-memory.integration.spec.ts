import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { requireService } from '@neatroots/platform';

/**
 * `neatroots serve --target ingest` in a real memory cgroup (a container's limit, as Kubernetes
 * sets it): the ceiling is the limit, and what is compared with it is the cgroup's memory in use,
 * every process of it counted (the launcher `neatroots serve` starts the server from, anything
 * else in the container), since the kernel kills on the sum. Needs root and a cgroup file system
 * it may create a group in; skipped otherwise.
 */
const SUITE = 'serve: ingest in a memory cgroup';
const kafka = requireService('kafka', SUITE);
const bin = path.resolve(__dirname, '..', 'bin', 'neatroots.js');
const MiB = 1048576;

/** rmdir, tried again while the group's last process is still leaving. */
function removeGroup(dir: string): void {
  for (let i = 0; ; i++) {
    try {
      return fs.rmdirSync(dir);
    } catch (err) {
      if (i >= 50) throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
    }
  }
}

/** A memory cgroup with `limitBytes`, v1 or v2, or why none can be made here. */
function makeCgroup(limitBytes: number): { dir: string; remove(): void } | string {
  if (process.getuid?.() !== 0) return 'not root';
  const name = `neatroots-test-${process.pid}`;
  const v1 = '/sys/fs/cgroup/memory';
  const v2 = '/sys/fs/cgroup';
  try {
    if (fs.existsSync(path.join(v1, 'cgroup.procs'))) {
      const dir = path.join(v1, name);
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, 'memory.limit_in_bytes'), String(limitBytes));
      return { dir, remove: () => removeGroup(dir) };
    }
    if (/\bmemory\b/.test(fs.readFileSync(path.join(v2, 'cgroup.subtree_control'), 'utf8'))) {
      const dir = path.join(v2, name);
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, 'memory.max'), String(limitBytes));
      return { dir, remove: () => removeGroup(dir) };
    }
    return 'no memory controller to make a group of';
  } catch (err) {
    return String(err);
  }
}

/** `node args` as the first process of the cgroup `dir` (it joins before node starts). */
function spawnIn(dir: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
  const quoted = [process.execPath, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  return spawn('/bin/sh', ['-c', `echo $$ > '${dir}/cgroup.procs' && exec ${quoted}`], { env, stdio: ['ignore', 'pipe', 'pipe'] });
}

const exited = (c: ChildProcess) => new Promise<void>((r) => (c.exitCode !== null || c.signalCode !== null ? r() : c.once('exit', () => r())));

const cgroup = kafka ? makeCgroup(1000 * MiB) : 'no kafka';
if (typeof cgroup === 'string' && kafka) process.stderr.write(`skipping ${SUITE}: ${cgroup}\n`);
const maybe = typeof cgroup === 'string' ? describe.skip : describe;

maybe(SUITE, () => {
  const { dir, remove } = cgroup as { dir: string; remove(): void };
  afterAll(() => remove());

  it("in a 1000 MiB container where another process holds 780 MiB, says at start it is past 80% of the ceiling, counting the container's memory in use", async () => {
    // What else the container holds: 780 MiB written (resident), as a launcher's share would be.
    const other = spawnIn(dir, ['-e', "const b = Buffer.alloc(780 * 1048576, 1); process.stdout.write('held ' + b.length); setInterval(() => {}, 1000);"], process.env);
    let out = '';
    let server: ChildProcess | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        other.stdout!.on('data', () => resolve());
        other.once('exit', (code) => reject(new Error(`the other process exited ${code}`)));
      });
      const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('NEATROOTS_')));
      server = spawnIn(dir, [bin, 'serve', '--target', 'ingest'], {
        ...env,
        NEATROOTS_KAFKA_BROKERS: kafka!.join(','),
        NEATROOTS_TOPIC_PREFIX: `cg${Date.now().toString(36)}`,
        NEATROOTS_ADMIN_PORT: '0',
        NEATROOTS_SERVICE_PORT: '0',
        NEATROOTS_OTLP_PORT: '0',
        NEATROOTS_OTLP_HTTP_PORT: '0',
        NEATROOTS_GRPC_PORT: '0',
        NEATROOTS_LOG_FORMAT: 'pretty',
      });
      const s = server;
      await new Promise<void>((resolve, reject) => {
        const take = (d: Buffer) => {
          out += d.toString();
          if (/serving \(health/.test(out)) resolve();
        };
        s.stdout!.on('data', take);
        s.stderr!.on('data', take);
        s.once('exit', (code) => reject(new Error(`serve exited ${code}: ${out}`)));
      });
      const warned = /the container's memory in use is already (\d+) MB of the 1000 MB memory ceiling as ingest starts: exports will be refused once it passes 900 MB/.exec(out);
      expect(warned?.[0]).toBeDefined();
      expect(Number(warned![1])).toBeGreaterThan(800);
      expect(out).toContain("memory ceiling 1000 MB, the container's memory limit (NEATROOTS_MEMORY_CEILING_MB sets another): exports are refused past 90% of it, of the container's memory in use");
    } finally {
      if (server && server.exitCode === null) {
        server.kill('SIGTERM');
        await exited(server);
      }
      other.kill('SIGKILL');
      await exited(other);
    }
  }, 90_000);
});
