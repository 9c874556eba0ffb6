import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * Ingest's memory ceiling under a real memory limit: a child cgroup of this process's own, with
 * memory.limit_in_bytes (cgroup v1) or memory.max (v2) set, as a container runtime sets it. The
 * process runs inside it from its first instruction (a shell puts itself in, then execs node).
 * Creating a cgroup takes root and a writable cgroup file system: without them it skips, saying so.
 */
interface Cgroup {
  /** The shell command prefix that runs what follows inside the cgroup. */
  enter: string;
  remove(): void;
}

function memoryCgroup(limitBytes: number): Cgroup | string {
  let lines: string[];
  try {
    lines = fs.readFileSync('/proc/self/cgroup', 'utf8').trim().split('\n');
  } catch (e) {
    return `no /proc/self/cgroup (${(e as Error).message})`;
  }
  const v1 = lines.map((l) => l.split(':')).find(([, ctl]) => ctl.split(',').includes('memory'));
  const v2 = lines.map((l) => l.split(':')).find(([id, ctl]) => id === '0' && ctl === '');
  const base = v1 && fs.existsSync('/sys/fs/cgroup/memory') ? path.join('/sys/fs/cgroup/memory', v1[2]) : v2 && fs.existsSync('/sys/fs/cgroup/cgroup.controllers') ? path.join('/sys/fs/cgroup', v2[2]) : undefined;
  if (!base) return 'no memory cgroup controller mounted';
  const dir = path.join(base, `neatroots-ceiling-${process.pid}`);
  try {
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, v1 ? 'memory.limit_in_bytes' : 'memory.max'), String(limitBytes));
  } catch (e) {
    try {
      fs.rmdirSync(dir);
    } catch {
      // never made
    }
    return `cannot make a memory cgroup here (${(e as Error).message}): it takes root and a writable cgroup file system`;
  }
  return {
    enter: `echo $$ > ${path.join(dir, 'cgroup.procs')} && exec`,
    remove: () => {
      for (let i = 0; i < 50; i++) {
        try {
          return fs.rmdirSync(dir);
        } catch {
          // its last process may still be leaving
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
        }
      }
    },
  };
}

const MiB = 1048576;
const probe = memoryCgroup(600 * MiB);
if (typeof probe === 'string') console.log(`skipping ingest's memory ceiling under a cgroup limit: ${probe}`);
else probe.remove();
const maybe = typeof probe === 'string' ? describe.skip : describe;

/**
 * Runs `args` with node, inside a cgroup limited to `limitMb` when given; its output so far, the
 * process, and when it exited (the cgroup removed then).
 */
function run(args: string[], env: Record<string, string>, limitMb?: number) {
  const cg = limitMb === undefined ? undefined : memoryCgroup(limitMb * MiB);
  if (typeof cg === 'string') throw new Error(cg);
  const quoted = [process.execPath, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
  const proc = cg
    ? spawn('sh', ['-c', `${cg.enter} ${quoted}`], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(process.execPath, args, { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { text: '' };
  proc.stdout!.on('data', (d: Buffer) => (out.text += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out.text += d.toString()));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return { proc, out, exited: exited.finally(() => cg?.remove()) };
}

const root = path.resolve(__dirname, '../../..');

/** `neatroots start --no-demo` with a data folder of its own and ports the OS picks, until it serves; what it printed by then. Stopped after `fn`. */
async function whileServing(env: Record<string, string>, limitMb: number | undefined, fn: (out: string) => void): Promise<void> {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-ceiling-'));
  const ports = { NEATROOTS_OTLP_PORT: '0', NEATROOTS_OTLP_HTTP_PORT: '0', NEATROOTS_GRPC_PORT: '0', NEATROOTS_HTTP_PORT: '0', NEATROOTS_ADMIN_PORT: '0' };
  const started = run([path.join(root, 'packages/neatroots/bin/neatroots.js'), 'start', '--no-demo'], { NEATROOTS_HOME: home, ...ports, ...env }, limitMb);
  try {
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`not serving in 90 s:\n${started.out.text}`)), 90_000);
      const look = () => started.out.text.includes('Serving; Ctrl-C to stop.') && (clearTimeout(t), resolve());
      started.proc.stdout!.on('data', look);
      started.proc.stderr!.on('data', look);
      void started.exited.then((code) => reject(new Error(`start exited ${code}:\n${started.out.text}`)));
    });
    fn(started.out.text);
  } finally {
    started.proc.kill('SIGINT');
    await started.exited;
    fs.rmSync(home, { recursive: true, force: true });
  }
}

maybe("ingest's memory ceiling under a container's memory limit", () => {
  it('is the limit when NEATROOTS_MEMORY_CEILING_MB is unset and the limit is lower than 1024 MB, else the setting', async () => {
    const script = `const p = require(${JSON.stringify(path.join(root, 'services/ingest/dist/pressure.js'))}); console.log(JSON.stringify([p.memoryCeilingMb(undefined, p.constrainedMemory()), p.memoryCeilingMb(2048, p.constrainedMemory())]))`;
    const probe = run(['-e', script], {}, 600);
    expect(await probe.exited).toBe(0);
    expect(JSON.parse(probe.out.text)).toEqual([{ mb: 600, from: 'container' }, { mb: 2048, from: 'setting' }]);
  });

  it('neatroots start in a 900 MB container says it refuses exports past 90% of that limit', async () => {
    await whileServing({}, 900, (out) => {
      expect(out).toContain("memory ceiling 900 MB, the container's memory limit");
      expect(out).not.toContain('as ingest starts');
    });
  }, 120_000);
});

describe('ingest\'s memory ceiling below what the process takes at rest', () => {
  it('neatroots start says so as ingest starts (it would refuse every export), and how to raise it', async () => {
    // PGlite alone takes about 350 MB: with a ceiling of 200 MB, 80% of it is passed before ingest starts
    await whileServing({ NEATROOTS_MEMORY_CEILING_MB: '200' }, undefined, (out) => {
      expect(out).toMatch(/resident memory is already \d+ MB of the 200 MB memory ceiling as ingest starts: exports will be refused once it passes 180 MB; raise NEATROOTS_MEMORY_CEILING_MB/);
    });
  }, 120_000);
});
