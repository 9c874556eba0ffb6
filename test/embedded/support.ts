import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { openPglite } from '@neatroots/platform';
import { v1 } from '@neatroots/proto';
import { itemToEvent, type StreamItem } from '@neatroots/spans';
import { serverNodeFlags } from '../../packages/neatroots/src/relaunch';
import { CLI, freePort } from '../distributed/cluster';

/**
 * The embedded default as a user runs it: `neatroots start --no-demo` (the built CLI) in a
 * child process with its own home and data folder, on free loopback ports; killed and started
 * again on the same folder by the fault tests.
 */
export class EmbeddedProc {
  readonly home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-embedded-'));
  proc: ChildProcess | undefined;
  output: string[] = [];
  ports = { otlp: 0, grpc: 0, http: 0, admin: 0 };

  constructor(
    readonly project: string,
    readonly key: string,
    private readonly env: Record<string, string> = {},
  ) {}

  async start(env: Record<string, string> = {}): Promise<void> {
    if (!this.ports.grpc) this.ports = { otlp: await freePort(), grpc: await freePort(), http: await freePort(), admin: await freePort() };
    this.output = [];
    // With the servers' node flags given here, the CLI serves in this very process (no relaunch
    // into a child): a SIGKILL of `proc` is the crash of the server, not a signal to a parent
    // whose child then stops gracefully.
    const proc = spawn(process.execPath, [...serverNodeFlags(), CLI, 'start', '--no-demo'], {
      env: {
        PATH: process.env.PATH,
        NEATROOTS_HOME: this.home,
        NEATROOTS_OTLP_PORT: String(this.ports.otlp),
        NEATROOTS_OTLP_HTTP_PORT: '0',
        NEATROOTS_GRPC_PORT: String(this.ports.grpc),
        NEATROOTS_HTTP_PORT: String(this.ports.http),
        NEATROOTS_ADMIN_PORT: String(this.ports.admin),
        NEATROOTS_API_KEYS: `${this.project}=${this.key}`,
        ...this.env,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.proc = proc;
    proc.stdout!.on('data', (d: Buffer) => this.output.push(d.toString()));
    proc.stderr!.on('data', (d: Buffer) => this.output.push(d.toString()));
    // Ready once an export is answered by ingest (an empty one: accepted, nothing published).
    const client = new v1.IngestClient(`127.0.0.1:${this.ports.grpc}`, credentials.createInsecure());
    const end = Date.now() + 120_000;
    try {
      for (;;) {
        if (proc.exitCode !== null) throw new Error(`neatroots start exited ${proc.exitCode}:\n${this.output.join('')}`);
        if (Date.now() > end) throw new Error(`neatroots start did not answer in 120 s:\n${this.output.join('')}`);
        const err = await new Promise<ServiceError | null>((resolve) =>
          client.export({ events: [], note_runs: [] }, this.md(), { deadline: Date.now() + 1000 }, (e) => resolve(e)),
        );
        if (!err) return;
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      client.close();
    }
  }

  md(): Metadata {
    const m = new Metadata();
    m.set('x-api-key', this.key);
    return m;
  }

  /** Sends a signal and waits for the exit (SIGKILL after `timeoutMs`). */
  async stop(signal: NodeJS.Signals, timeoutMs = 120_000): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }> {
    const proc = this.proc!;
    const t0 = Date.now();
    if (proc.exitCode !== null || proc.signalCode !== null) return { code: proc.exitCode, signal: proc.signalCode, ms: 0 };
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => proc.once('exit', (code, sig) => r({ code, signal: sig })));
    proc.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    const r = await Promise.race([exited, new Promise<null>((res) => (timer = setTimeout(() => res(null), timeoutMs)))]);
    clearTimeout(timer);
    if (!r) {
      proc.kill('SIGKILL');
      return { ...(await exited), ms: Date.now() - t0 };
    }
    return { ...r, ms: Date.now() - t0 };
  }

  /** The spans stored for the project, as run_id/span_id (the process must be stopped: PGlite has one writer). */
  async storedSpans(): Promise<Set<string>> {
    const db = await openPglite({ dataDir: path.join(this.home, 'data', 'pg') });
    try {
      const r = await db.query<{ run_id: string; span_id: string }>('SELECT run_id, span_id FROM spans WHERE project = $1', [this.project]);
      return new Set(r.rows.map((x) => `${x.run_id}/${x.span_id}`));
    } finally {
      await db.close();
    }
  }

  /**
   * The rule findings stored for the project, id -> status (the process must be stopped). The
   * question service's findings are left out: they depend on a model's answers, not on replay.
   */
  async storedFindings(): Promise<Map<string, string>> {
    const db = await openPglite({ dataDir: path.join(this.home, 'data', 'pg') });
    try {
      const r = await db.query<{ id: string; status: string }>("SELECT id, status FROM findings WHERE project = $1 AND kind = 'rule'", [this.project]);
      return new Map(r.rows.map((x) => [x.id, x.status]));
    } finally {
      await db.close();
    }
  }

  /** check_id/run_id (kind) of these findings, for a failure message. */
  async describeFindings(ids: string[]): Promise<string[]> {
    const db = await openPglite({ dataDir: path.join(this.home, 'data', 'pg') });
    try {
      const r = await db.query<{ check_id: string; run_id: string; kind: string }>('SELECT check_id, run_id, kind FROM findings WHERE id = ANY($1)', [ids]);
      return r.rows.map((x) => `${x.check_id}/${x.run_id} (${x.kind})`);
    } finally {
      await db.close();
    }
  }

  remove(): void {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
    fs.rmSync(this.home, { recursive: true, force: true });
  }
}

/**
 * A steady load of `inflight` exports at a time, each of `perExport` new spans (runs of 20
 * spans, interleaved), until `stop()` says so or `maxSpans` were sent. Records which spans
 * were acknowledged: a span counts only when its export answered OK.
 */
export class Load {
  readonly acked = new Set<string>();
  sent = 0;
  refused = 0;
  failed = 0;
  private stopped = false;
  private next = 0;
  private readonly client: v1.IngestClient;
  done: Promise<void> | undefined;

  constructor(
    private readonly app: EmbeddedProc,
    private readonly opts: { inflight: number; perExport: number; maxSpans: number },
  ) {
    this.client = new v1.IngestClient(`127.0.0.1:${app.ports.grpc}`, credentials.createInsecure());
  }

  start(): this {
    this.done = Promise.all(Array.from({ length: this.opts.inflight }, () => this.worker())).then(() => this.client.close());
    return this;
  }

  stop(): Promise<void> {
    this.stopped = true;
    return this.done!;
  }

  private batch(): { items: StreamItem[]; keys: string[] } {
    const items: StreamItem[] = [];
    const keys: string[] = [];
    for (let i = 0; i < this.opts.perExport; i++) {
      const n = this.next++;
      // 50 runs open at a time; each gets 20 spans.
      const run = `run-${Math.floor(n / 1000) * 50 + (n % 50)}`;
      const span = `s${Math.floor((n % 1000) / 50)}`;
      items.push({ kind: 'span', span: { run_id: run, span_id: span, type: 'tool', name: 'search', tool: 'search', status: 'ok', input: { q: n }, output: { ok: true }, start_ms: Date.now() - 5, end_ms: Date.now() } });
      keys.push(`${run}/${span}`);
    }
    return { items, keys };
  }

  private async worker(): Promise<void> {
    const md = this.app.md();
    while (!this.stopped && this.sent < this.opts.maxSpans) {
      const { items, keys } = this.batch();
      this.sent += items.length;
      const err = await new Promise<ServiceError | null>((resolve) =>
        this.client.export({ events: items.map(itemToEvent), note_runs: [] }, md, { deadline: Date.now() + 30_000 }, (e) => resolve(e)),
      );
      if (!err) for (const k of keys) this.acked.add(k);
      else if (err.code === status.RESOURCE_EXHAUSTED) {
        this.refused += items.length;
        await new Promise((r) => setTimeout(r, 50));
      } else {
        this.failed += items.length;
        if (err.code === status.UNAVAILABLE) return; // the server is gone (killed)
      }
    }
  }
}

export async function waitUntil(cond: () => boolean, timeoutMs: number, what: () => string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms: ${what()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
