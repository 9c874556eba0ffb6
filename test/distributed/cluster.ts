import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { deleteKafkaTopics, scratchDatabase, type ScratchDatabase } from '@neatroots/platform';
import { serverNodeFlags } from '../../packages/neatroots/src/relaunch';

/**
 * A distributed deployment on this machine for tests: each service its own process
 * (`neatroots serve --target ...`, the built CLI), on the real Kafka, Redis and Postgres
 * named by the environment, isolated from other runs by a topic prefix of its own and a
 * Postgres database of its own on that server (dropped at close).
 */
export const CLI = path.resolve(__dirname, '../../packages/neatroots/bin/neatroots.js');

/** Ports each jest worker hands out: workers take disjoint slices of 20000-32000. */
const SLICE = 1_500;
/** Where this process's walk through its slice is (a random start, so a worker started again does not retrace its predecessor). */
let cursor = Math.floor(Math.random() * SLICE);

/**
 * A port free now, for a process started later. Taken below the kernel's ephemeral range
 * (32768 and up here): a port the OS handed out as free is also what it hands out as the
 * source port of the next outgoing connection (to Kafka, Redis, Postgres), so between the pick
 * and the child's bind another process could take it (seen in CI: EADDRINUSE).
 *
 * Handed out in turn from a slice of the range that is this jest worker's alone, never twice
 * before the walk comes round again: a port picked at random could be one handed out a moment
 * before and not bound yet, by this cluster (a service's admin port landing on the question
 * service's port, seen in a CI run) or by a cluster in another worker.
 */
export async function freePort(): Promise<number> {
  const worker = Math.max(1, Number(process.env.JEST_WORKER_ID ?? '1') || 1);
  const base = 20_000 + ((worker - 1) % 8) * SLICE;
  for (let i = 0; i < SLICE; i++) {
    const port = base + (cursor++ % SLICE);
    if (await canBind(port)) return port;
  }
  throw new Error(`no free port between ${base} and ${base + SLICE - 1}`);
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

export interface ServiceProc {
  target: string;
  proc: ChildProcess;
  adminPort: number;
  servicePort: number;
  output: string[];
}

export class Cluster {
  readonly prefix = `nrt${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  readonly home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-cluster-'));
  readonly procs: ServiceProc[] = [];
  env: NodeJS.ProcessEnv = {};
  ports = { otlp: 0, grpc: 0, http: 0, review: 0, question: 0, ruleEngine: 0 };
  /**
   * The database the services use: one of the cluster's own (named by its prefix), unless the
   * extra environment names one. Review re-queues every suggestion left generating in its
   * database when it starts: in a database shared with other runs, theirs too.
   */
  pgUrl = '';
  private db: ScratchDatabase | undefined;

  constructor(
    private readonly services: { kafka: string[]; redis: string; pg: string },
    private readonly extraEnv: Record<string, string> = {},
  ) {}

  async init(): Promise<void> {
    if (this.extraEnv.NEATROOTS_PG_URL === undefined) this.db = await scratchDatabase(this.services.pg, this.prefix);
    this.pgUrl = this.extraEnv.NEATROOTS_PG_URL ?? this.db!.url;
    this.ports = { otlp: await freePort(), grpc: await freePort(), http: await freePort(), review: await freePort(), question: await freePort(), ruleEngine: await freePort() };
    this.env = {
      PATH: process.env.PATH,
      NEATROOTS_HOME: this.home,
      NEATROOTS_KAFKA_BROKERS: this.services.kafka.join(','),
      NEATROOTS_REDIS_URL: this.services.redis,
      NEATROOTS_PG_URL: this.pgUrl,
      NEATROOTS_TOPIC_PREFIX: this.prefix,
      NEATROOTS_PARTITIONS: '4',
      NEATROOTS_OTLP_PORT: String(this.ports.otlp),
      NEATROOTS_OTLP_HTTP_PORT: '0',
      NEATROOTS_GRPC_PORT: String(this.ports.grpc),
      NEATROOTS_HTTP_PORT: String(this.ports.http),
      NEATROOTS_REVIEW_ADDR: `127.0.0.1:${this.ports.review}`,
      NEATROOTS_QUESTION_ADDR: `127.0.0.1:${this.ports.question}`,
      NEATROOTS_RULE_ENGINE_ADDR: `127.0.0.1:${this.ports.ruleEngine}`,
      // As a deployment should run: the services' own ports answer each other only.
      NEATROOTS_INTERNAL_TOKEN: `internal-token-of-${this.prefix}`,
      KAFKAJS_NO_PARTITIONER_WARNING: '1',
      ...this.extraEnv,
    };
  }

  /** Starts `serve --target target`; an `env` value of undefined leaves that variable out. */
  async start(target: string, env: Record<string, string | undefined> = {}): Promise<ServiceProc> {
    const adminPort = await freePort();
    // review and question bind the ports the others reach them on; `all` serves both on review's.
    // A second replica of review or question is given its own port in env. The first rule
    // engine running binds the port ingest forwards pre-call checks to; others take their own.
    const own = target === 'review' ? env.NEATROOTS_REVIEW_PORT : target === 'question' ? env.NEATROOTS_QUESTION_PORT : undefined;
    const ruleEnginePort = target === 'rule-engine' && !this.procs.some((p) => p.servicePort === this.ports.ruleEngine) ? this.ports.ruleEngine : undefined;
    const servicePort = own
      ? Number(own)
      : target === 'review' || target === 'all'
        ? this.ports.review
        : target === 'question'
          ? this.ports.question
          : (ruleEnginePort ?? (await freePort()));
    const all: NodeJS.ProcessEnv = {
      ...this.env,
      NEATROOTS_ADMIN_PORT: String(adminPort),
      NEATROOTS_SERVICE_PORT: String(servicePort),
      NEATROOTS_QUESTION_PORT: String(this.ports.question),
      NEATROOTS_REVIEW_PORT: String(this.ports.review),
      ...env,
    };
    for (const [k, v] of Object.entries(all)) if (v === undefined) delete all[k];
    // With the servers' node flags given here, the CLI serves in this very process (no relaunch):
    // a SIGKILL of `proc` is the crash of the service, as the fault tests mean it.
    const proc = spawn(process.execPath, [...serverNodeFlags(), CLI, 'serve', '--target', target], {
      env: all,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const sp: ServiceProc = { target, proc, adminPort, servicePort, output: [] };
    proc.stdout!.on('data', (d: Buffer) => sp.output.push(d.toString()));
    proc.stderr!.on('data', (d: Buffer) => sp.output.push(d.toString()));
    this.procs.push(sp);
    await this.ready(sp);
    return sp;
  }

  /** Waits for /readyz, failing with the process's output if it dies or takes too long. */
  async ready(sp: ServiceProc, timeoutMs = 60_000): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (Date.now() < end) {
      if (sp.proc.exitCode !== null) throw new Error(`${sp.target} exited ${sp.proc.exitCode}:\n${sp.output.join('')}`);
      try {
        const res = await fetch(`http://127.0.0.1:${sp.adminPort}/readyz`);
        if (res.ok) return;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`${sp.target} not ready after ${timeoutMs} ms:\n${sp.output.join('')}`);
  }

  async stop(sp: ServiceProc, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    if (sp.proc.exitCode !== null || sp.proc.signalCode !== null) return;
    const exited = new Promise<void>((r) => sp.proc.once('exit', () => r()));
    sp.proc.kill(signal);
    await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000))]);
    if (sp.proc.exitCode === null && sp.proc.signalCode === null) sp.proc.kill('SIGKILL');
    this.procs.splice(this.procs.indexOf(sp), 1);
  }

  /** Stops the services, then deletes this cluster's topics: each run's partitions left on the
   * broker make every later start of it slower (they are all loaded before it opens its port). */
  async close(): Promise<void> {
    for (const sp of [...this.procs].reverse()) await this.stop(sp);
    fs.rmSync(this.home, { recursive: true, force: true });
    await deleteKafkaTopics(this.services.kafka, this.prefix);
    await this.db?.drop();
  }
}

