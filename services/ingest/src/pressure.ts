import { Metadata, status as Status } from '@grpc/grpc-js';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';

/**
 * Back-pressure at the edge. Acknowledging more than the pipeline can work through only moves
 * the queue into memory (and, on a crash, into the list of what was lost), so ingest refuses
 * an export with RESOURCE_EXHAUSTED while
 *
 * - the bus's backlog (records of the events topic its slowest consumer group has not
 *   processed) is past `maxBacklog`, or
 * - the process's resident memory is past 90% of `memoryCeilingBytes` (sampled every
 *   `sampleMs`; the margin is for what the exports already in flight still bring); when the
 *   ceiling is the container's memory limit, the container's memory in use (`container`: every
 *   process in it, `neatroots serve`'s launcher included, as its limit counts them) instead.
 *
 * Resident memory counts garbage the collector has not reclaimed yet, and V8 reclaims lazily:
 * its heap may grow to several times what is live before a full collection, because V8 does not
 * know the ceiling. At a steady 2,000 spans/s the embedded default's heap grew from 130 to 400 MB
 * between collections (about 100 MB of it live), its resident memory crossed the ceiling, and
 * every export was refused for 40-60 s at a time until V8's idle-time collection ran. So past
 * 80% of the ceiling a full collection is asked for first (`collect`, at most every
 * `collectEveryMs`), and the memory is sampled again once it is done: only memory still in use
 * is refused for.
 *
 * The refusal carries google.rpc.RetryInfo, which is what makes OTLP exporters retry a
 * RESOURCE_EXHAUSTED (with their backoff) instead of dropping the data; the agent SDK retries it too.
 */
/** The memory ceiling when none is set: enough for the embedded default's steady load. */
export const DEFAULT_MEMORY_CEILING_MB = 1024;

/**
 * The memory ceiling in effect, and where it comes from. Set (NEATROOTS_MEMORY_CEILING_MB), it is
 * that. Unset, it is DEFAULT_MEMORY_CEILING_MB, or the memory the process may use when that is
 * lower (`constrainedBytes`: a container's limit, its cgroup's memory limit, as node reads it with
 * process.constrainedMemory): a pod limited to 512 MiB that waited for 1024 MB would be killed
 * for its memory before it ever refused an export. A constraint of 2^50 bytes or more is none
 * (cgroups write "no limit" as the largest number they hold).
 */
export function memoryCeilingMb(configured: number | undefined, constrainedBytes: number | undefined): { mb: number; from: 'setting' | 'default' | 'container' } {
  if (configured !== undefined) return { mb: configured, from: 'setting' };
  const limitMb = constrainedBytes !== undefined && Number.isFinite(constrainedBytes) && constrainedBytes > 0 && constrainedBytes < 2 ** 50 ? Math.floor(constrainedBytes / 1048576) : undefined;
  if (limitMb !== undefined && limitMb < DEFAULT_MEMORY_CEILING_MB) return { mb: limitMb, from: 'container' };
  return { mb: DEFAULT_MEMORY_CEILING_MB, from: 'default' };
}

/** The memory the OS lets this process use, where node knows it (process.constrainedMemory, node >= 19.6). */
export function constrainedMemory(): number | undefined {
  const f = (process as { constrainedMemory?: () => number | undefined }).constrainedMemory;
  return typeof f === 'function' ? f.call(process) : undefined;
}

/** Where a process reads its cgroups (tests give a folder of their own). */
export interface CgroupPaths {
  /** Where the cgroup file systems are mounted. Default /sys/fs/cgroup. */
  root?: string;
  /** The process's cgroups, one `id:controllers:path` a line. Default /proc/self/cgroup. */
  self?: string;
}

/**
 * The memory in use of the cgroup this process is in, read anew at each call: its container's,
 * every process of it counted (a limit on the container holds them all, so `neatroots serve`'s
 * launcher, the parent of the server, counts as well as the server). As the kubelet counts a
 * container's working set: the usage (cgroup v2 memory.current, v1 memory.usage_in_bytes) less
 * the file cache the kernel can drop first (memory.stat inactive_file, v1 total_inactive_file).
 * The process's own cgroup (from /proc/self/cgroup) where mounted, else the mount's root (a
 * container seeing only its own); of those, the one whose limit is `limitBytes` when given (the
 * limit the ceiling came from). Undefined when no usage can be read (not Linux, no cgroup
 * mounted); the reader answers undefined while its files cannot be read.
 */
export function cgroupMemory(limitBytes?: number, paths: CgroupPaths = {}): (() => number | undefined) | undefined {
  const root = paths.root ?? '/sys/fs/cgroup';
  let lines: string[];
  try {
    lines = fs.readFileSync(paths.self ?? '/proc/self/cgroup', 'utf8').split('\n');
  } catch {
    return undefined;
  }
  const of = (test: (controllers: string[], id: string) => boolean) => {
    for (const line of lines) {
      const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
      if (m && test(m[2].split(','), m[1])) return m[3];
    }
    return undefined;
  };
  const v2 = of((c, id) => id === '0' && c.length === 1 && c[0] === '');
  const v1 = of((c) => c.includes('memory'));
  type Kind = { dir: string; usage: string; inactive: string; limit: string };
  const candidates: Kind[] = [];
  const add = (base: string, rel: string | undefined, usage: string, inactive: string, limit: string) => {
    for (const dir of rel !== undefined && rel !== '/' ? [path.join(base, rel), base] : [base]) candidates.push({ dir, usage, inactive, limit });
  };
  if (v2 !== undefined) add(root, v2, 'memory.current', 'inactive_file', 'memory.max');
  if (v1 !== undefined) add(path.join(root, 'memory'), v1, 'memory.usage_in_bytes', 'total_inactive_file', 'memory.limit_in_bytes');
  const readNumber = (file: string) => {
    const n = Number(fs.readFileSync(file, 'utf8').trim());
    if (!Number.isFinite(n)) throw new Error(`${file}: not a number`);
    return n;
  };
  const readable = candidates.filter((c) => {
    try {
      readNumber(path.join(c.dir, c.usage));
      return true;
    } catch {
      return false;
    }
  });
  const limited = (c: Kind) => {
    try {
      return readNumber(path.join(c.dir, c.limit)) === limitBytes;
    } catch {
      return false;
    }
  };
  const chosen = (limitBytes !== undefined ? readable.find(limited) : undefined) ?? readable[0];
  if (!chosen) return undefined;
  const statKey = new RegExp(`^${chosen.inactive} (\\d+)$`, 'm');
  return () => {
    try {
      const usage = readNumber(path.join(chosen.dir, chosen.usage));
      let inactive = 0;
      try {
        inactive = Number(statKey.exec(fs.readFileSync(path.join(chosen.dir, 'memory.stat'), 'utf8'))?.[1] ?? 0);
      } catch {
        // no memory.stat: the usage as it is
      }
      return Math.max(0, usage - inactive);
    } catch {
      return undefined;
    }
  };
}

export interface PressureOptions {
  backlog?: () => number;
  maxBacklog?: number;
  memoryCeilingBytes?: number;
  /** Resident set size now (tests give their own). Default process.memoryUsage.rss. */
  rss?: () => number;
  /**
   * The container's memory in use (cgroupMemory), counted instead of the process's resident
   * memory when the ceiling is the container's limit; the resident memory while it answers undefined.
   */
  container?: () => number | undefined;
  sampleMs?: number;
  /** What the refusal asks clients to wait. Default 1 s. */
  retryAfterMs?: number;
  /** A full garbage collection (tests give their own; null: none). Default: V8's, asked for asynchronously. */
  collect?: (() => Promise<void>) | null;
  /** At most one collection this often. Default 10 s. */
  collectEveryMs?: number;
  now?: () => number;
}

/**
 * V8's full collection, run incrementally (`execution: 'async'`, the marking concurrent: no
 * long pause). The `gc` function is exposed for a fresh context only; the process's own global
 * is left as it was. Undefined where V8 refuses.
 */
export function v8Collect(): (() => Promise<void>) | undefined {
  try {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as ((o: { type: string; execution: string }) => Promise<void> | void) | undefined;
    if (typeof gc !== 'function') return undefined;
    return async () => {
      await gc({ type: 'major', execution: 'async' });
    };
  } catch {
    return undefined;
  }
}

export type PressureReason = 'backlog' | 'memory';

export interface Refusal {
  reason: PressureReason;
  message: string;
}

export class Pressure {
  private rssNow = 0;
  /** Whether rssNow is the container's memory in use (else the process's resident memory). */
  private ofContainer = false;
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly rss: () => number;
  private readonly collect: (() => Promise<void>) | undefined;
  private readonly now: () => number;
  private lastCollect = -Infinity;
  private collecting = false;
  /** Full collections asked for near the ceiling. */
  collections = 0;

  constructor(private readonly opts: PressureOptions) {
    const rss = opts.rss ?? (() => process.memoryUsage.rss());
    const container = opts.container;
    this.rss = container
      ? () => {
          const used = container();
          this.ofContainer = used !== undefined;
          return used ?? rss();
        }
      : rss;
    this.now = opts.now ?? Date.now;
    this.collect = opts.collect === null ? undefined : (opts.collect ?? (opts.memoryCeilingBytes ? v8Collect() : undefined));
    if (opts.memoryCeilingBytes) {
      this.rssNow = this.rss();
      this.timer = setInterval(() => this.sample(), opts.sampleMs ?? 100);
      this.timer.unref();
    }
  }

  /** Reads the resident memory; past 80% of the ceiling, has garbage collected first (see the class comment). */
  private sample(): void {
    if (this.collecting) return;
    this.rssNow = this.rss();
    const ceiling = this.opts.memoryCeilingBytes ?? 0;
    if (!this.collect || this.rssNow <= ceiling * 0.8) return;
    const now = this.now();
    if (now - this.lastCollect < (this.opts.collectEveryMs ?? 10_000)) return;
    this.lastCollect = now;
    this.collecting = true;
    this.collections++;
    this.collect()
      .catch(() => undefined)
      .finally(() => {
        this.collecting = false;
        this.rssNow = this.rss();
      });
  }

  /** Why an export must be refused now, or undefined. */
  check(): Refusal | undefined {
    const { maxBacklog, backlog, memoryCeilingBytes } = this.opts;
    if (maxBacklog !== undefined && backlog) {
      const n = backlog();
      if (n > maxBacklog) {
        return { reason: 'backlog', message: `ingest is behind: ${n} records wait to be processed (bound ${maxBacklog}, NEATROOTS_MAX_BACKLOG); retry later` };
      }
    }
    if (memoryCeilingBytes && this.rssNow > memoryCeilingBytes * 0.9) {
      const mb = (b: number) => Math.round(b / 1048576);
      return {
        reason: 'memory',
        message: `ingest is near its memory ceiling (${this.ofContainer ? 'its container uses ' : ''}${mb(this.rssNow)} MB of ${mb(memoryCeilingBytes)} MB, NEATROOTS_MEMORY_CEILING_MB); retry later`,
      };
    }
    return undefined;
  }

  /** Trailers of a refusal: grpc-status-details-bin with google.rpc.RetryInfo. */
  trailers(message: string): Metadata {
    const md = new Metadata();
    md.set('grpc-status-details-bin', retryStatus(Status.RESOURCE_EXHAUSTED, message, this.opts.retryAfterMs ?? 1000));
    return md;
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
  }
}

// ---- google.rpc.Status { code, message, details: [Any(RetryInfo)] }, encoded by hand (three small messages) ----

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 127) {
    out.push((n & 127) | 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

function field(no: number, bytes: Uint8Array | number[]): number[] {
  return [...varint((no << 3) | 2), ...varint(bytes.length), ...bytes];
}

function varintField(no: number, n: number): number[] {
  return [...varint(no << 3), ...varint(n)];
}

export function retryStatus(code: number, message: string, retryAfterMs: number): Buffer {
  const seconds = Math.floor(retryAfterMs / 1000);
  const nanos = (retryAfterMs % 1000) * 1_000_000;
  const duration = [...(seconds ? varintField(1, seconds) : []), ...(nanos ? varintField(2, nanos) : [])];
  const retryInfo = field(1, duration);
  const any = [...field(1, Buffer.from('type.googleapis.com/google.rpc.RetryInfo')), ...field(2, retryInfo)];
  return Buffer.from([...varintField(1, code), ...field(2, Buffer.from(message)), ...field(3, any)]);
}
