import * as fs from 'node:fs';
import * as path from 'node:path';
import { ConfigError, loadConfig, loadModelConfig, type Config } from '@neatroots/platform';
import { causes } from '@neatroots/ports';
import type { Io } from './cli';
import { runDemoFleet } from './demo';
import { demoSopSummary, loadDemoWorkspace, type DemoWorkspace } from './demo-sop';
import { DEMO_PROJECT, startEmbedded, type EmbeddedApp } from './embedded';
import { cliLogger, logCrashes, untilSignal } from './runtime';

/**
 * `neatroots start`: every service on the embedded platform (what `serve --target all` runs on
 * Kafka, Redis and Postgres), plus the demo, serving until SIGINT, SIGTERM or SIGHUP (one during
 * start-up stops it once started).
 */
export async function runEmbedded(opts: { demo: boolean; io: Io }): Promise<number> {
  const { io } = opts;
  let config;
  let models;
  try {
    config = loadConfig(io.env);
    models = loadModelConfig(io.env);
  } catch (e) {
    if (e instanceof ConfigError) {
      io.err(`neatroots start: ${e.message}`);
      return 2;
    }
    throw e;
  }
  const log = cliLogger(config, io);
  logCrashes(log);
  // Listened for before anything is opened: a signal during start-up (opening the data folder,
  // the demo's replay) or a SIGHUP stops it in order once started, instead of ending the process
  // (node's default) with its data folder's lock left behind and nothing drained or closed.
  const stop = untilSignal(log);
  try {
    return await startAndServe({ ...opts, config, models, log, stop });
  } finally {
    stop.dispose();
  }
}

async function startAndServe(opts: {
  demo: boolean;
  io: Io;
  config: Config;
  models: ReturnType<typeof loadModelConfig>;
  log: ReturnType<typeof cliLogger>;
  stop: Promise<void>;
}): Promise<number> {
  const { io, config, models, log, stop } = opts;
  let app: EmbeddedApp;
  let stopping = false;
  void stop.then(() => (stopping = true));
  const stopNow = async (): Promise<number> => {
    io.out('stopping...');
    await app.close();
    return 0;
  };
  try {
    app = await startEmbedded({
      config,
      models,
      demo: opts.demo,
      log,
    });
  } catch (e) {
    const why = cannotServe(e, config);
    if (why) {
      io.err(`neatroots start: ${why}`);
      return 2;
    }
    const disk = cannotWrite(e, config.dataDir);
    if (disk) {
      io.err(`neatroots start: ${disk}`);
      return 1;
    }
    throw e;
  }
  const host = config.NEATROOTS_HOST;
  const bus = config.NEATROOTS_BUS === 'log' ? 'the bus log' : 'the in-memory bus';
  const windows = config.NEATROOTS_WINDOWS === 'journal' ? 'journaled windows' : 'in-memory windows';
  io.out(`neatroots is running (embedded: ${bus}, ${windows}, PGlite in ${config.dataDir})`);
  io.out(`  OTLP/gRPC      ${host}:${app.ingest.otlpPort}`);
  io.out(`  OTLP/HTTP      http://${host}:${app.ingest.otlpHttpPort}/v1/traces`);
  io.out(`  neatroots gRPC ${host}:${app.ingest.grpcPort}`);
  io.out(`  HTTP API       http://${host}:${app.httpPort}/v1/projects/{project}/runs`);
  io.out(`  admin          http://${host}:${app.adminPort}/metrics (/healthz, /readyz)`);
  io.out(`  checks         ${app.checks().checks.length} in effect (neatroots checks list)`);
  if (stopping) return stopNow();

  if (opts.demo && app.demoKey) {
    // The demo project is also a SOP workspace: its procedures published before the fleet runs, so its runs become sessions.
    let workspace: DemoWorkspace | undefined;
    try {
      workspace = await loadDemoWorkspace(app.review.sop);
    } catch (err) {
      io.err(`neatroots start: the demo's SOP workspace could not be loaded: ${(err as Error).message}`);
    }
    io.out(`\nReplaying the sample fleet as project "${DEMO_PROJECT}" (API key: ${app.demoKey}; the agents send with an ingest key: ${app.demoAgentKey})`);
    const result = await runDemoFleet({
      address: `${host}:${app.ingest.grpcPort}`,
      apiKey: app.demoAgentKey ?? app.demoKey,
      onEvent: (e) => {
        if (e.kind === 'note') io.out(`  note  ${e.run_id}: ${e.text}`);
        else if (e.kind === 'halt') io.out(`  HALT  ${e.run_id}: ${e.text}`);
      },
    });
    io.out(`  ${result.runs} runs, ${result.spans} spans sent; ${result.notes} notes received; halted: ${result.halted.join(', ') || 'none'}`);
    // A stop during the replay lets it end (a second or two: its runs are sent whole), then stops.
    if (stopping) return stopNow();
    await summarise(app, io);
    if (workspace) {
      const modelConfigured = !!(models.decision || models.local);
      io.out('');
      for (const line of await demoSopSummary(app.review.sop, { demo: workspace, runIds: result.runIds, modelConfigured })) io.out(line);
    }
    io.out(`\nTry: curl -H 'x-api-key: ${app.demoKey}' http://${host}:${app.httpPort}/v1/projects/${DEMO_PROJECT}/findings`);
    if (workspace) io.out(`     curl -H 'x-api-key: ${app.demoKey}' http://${host}:${app.httpPort}/v1/workspaces/${DEMO_PROJECT}/sessions`);
  }
  if (stopping) return stopNow();
  io.out('\nServing; Ctrl-C to stop.');
  const code = await servedUntil(stop, app.failed, config.NEATROOTS_ON_FAILING, io);
  await stopNow();
  return code;
}

const PORT_VARIABLES = ['NEATROOTS_OTLP_PORT', 'NEATROOTS_OTLP_HTTP_PORT', 'NEATROOTS_GRPC_PORT', 'NEATROOTS_HTTP_PORT', 'NEATROOTS_ADMIN_PORT'] as const;

/**
 * Why start could not serve, when it is the machine's state and not a bug: a port another
 * program (or another neatroots) listens on, or a data folder another neatroots process holds.
 * Else undefined (the error is thrown on, with its stack).
 */
export function cannotServe(e: unknown, config: Pick<Config, (typeof PORT_VARIABLES)[number] | 'dataDir'>): string | undefined {
  const err = e as (NodeJS.ErrnoException & { port?: unknown }) | undefined;
  const message = typeof err?.message === 'string' ? err.message : '';
  // node's listen error has its code and port; grpc-js's bind error has neither, only the
  // message: "No address added out of total 1 resolved errors: [listen EADDRINUSE: address
  // already in use 127.0.0.1:4317]".
  if (err?.code === 'EADDRINUSE' || /\bEADDRINUSE\b/.test(message)) {
    const port = typeof err?.port === 'number' ? err.port : Number(/EADDRINUSE\b[^\]]*:(\d+)/.exec(message)?.[1] ?? NaN);
    const vars = PORT_VARIABLES.filter((v) => config[v] === port);
    if (vars.length) {
      return `port ${port} (${vars.join(', ')}) is already in use, by another program or another neatroots; stop it, or set ${vars.join(' or ')} to a free port`;
    }
    return `a port is already in use (${message}); set ${PORT_VARIABLES.slice(0, -1).join(', ')} or ${PORT_VARIABLES[PORT_VARIABLES.length - 1]}`;
  }
  // The data folder's lock (or its bus log's): "<what> is in use by process N; ...".
  const holder = /\bis in use by process (\d+)\b/.exec(message)?.[1];
  if (holder) {
    return `the data folder ${config.dataDir} is in use by process ${holder} (another neatroots start?); stop it first, or set NEATROOTS_DATA_DIR to another folder`;
  }
  return undefined;
}

const DISK_CODES = ['ENOSPC', 'EDQUOT', 'EROFS', 'EACCES', 'EPERM'] as const;

/**
 * Why start could not open its data folder, when the disk is at fault (full, over quota,
 * read-only, or not this user's to write): one line naming the folder, what failed and the room
 * left, for an exit 1. The lock, the bus log, the window journals and the database each fail
 * their own way on such a disk (node's errno error, one wrapped in a message, PGlite aborting),
 * so the error and its causes are looked at for the code, or for a database that could not be
 * opened with little room left. Else undefined.
 */
export function cannotWrite(e: unknown, dataDir: string): string | undefined {
  let code: string | undefined;
  let what = '';
  for (const err of causes<NodeJS.ErrnoException>(e)) {
    const message = typeof err.message === 'string' ? err.message.split('\n')[0] : String(err);
    what ||= message;
    const found = DISK_CODES.find((c) => err.code === c) ?? DISK_CODES.find((c) => new RegExp(`\\b${c}\\b`).test(message));
    // EACCES/EPERM only for a path in the data folder (or none said): not a port or another file.
    if (found && (found === 'EACCES' || found === 'EPERM') && typeof err.path === 'string' && !inside(err.path, dataDir)) continue;
    if (found) {
      code = found;
      what = message;
      const part = partOf(String(err.stack ?? ''));
      if (part && typeof err.path !== 'string') what = `${part}: ${message}`;
      break;
    }
  }
  if (!code) {
    // PGlite aborting on a full disk says nothing of why: its message carries the room left.
    const first = String((e as Error | undefined)?.message ?? '').replace(/\s*\n\s*/g, ' ');
    return /\bcannot be opened: .*\(the disk holding it has [\d.]+ MB free\b/.test(first) ? first : undefined;
  }
  const free = freeMb(dataDir);
  const room = free === undefined || (code !== 'ENOSPC' && code !== 'EDQUOT') ? '' : `; the disk holding it has ${free.toFixed(1)} MB free`;
  const fix =
    code === 'EROFS'
      ? 'the disk is read-only: set NEATROOTS_DATA_DIR to a folder on a writable disk, then start again'
      : code === 'EACCES' || code === 'EPERM'
        ? 'this user may not write there: give it the folder, or set NEATROOTS_DATA_DIR to another, then start again'
        : 'make room (or set NEATROOTS_DATA_DIR to a folder on another disk), then start again';
  return `the data folder ${dataDir} cannot be written (${what})${room}: ${fix}`;
}

/** Which part of the data folder a disk error's stack was writing, when it says. */
function partOf(stack: string): string | undefined {
  // by function or by file (a stack read through a source map names the frames differently)
  const parts: [RegExp, string][] = [
    [/\blockFolder\b|\bfolder-lock\.[jt]s\b/, 'its LOCK'],
    [/\bSpillFile\b|\bwindows[\\/]spill\.[jt]s\b/, 'a window spill file'],
    [/\bJournal\w*\b|\bwindows[\\/]journal[\w-]*\.[jt]s\b/, 'a window journal'],
    [/\bLogBus\b|\bbus[\\/](log|segment[\w-]*)\.[jt]s\b/, 'the bus log'],
    [/\bsecret-key\.[jt]s\b/, 'its secret key'],
  ];
  const frames = stack.split('\n').filter((l) => /^\s+at /.test(l));
  for (const frame of frames) for (const [re, name] of parts) if (re.test(frame)) return name;
  return undefined;
}

function inside(file: string, dir: string): boolean {
  const rel = path.relative(path.resolve(dir), path.resolve(file));
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/** The room left on the disk holding `dir` (or its nearest folder that exists), in MB. */
function freeMb(dir: string): number | undefined {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    try {
      const st = fs.statfsSync(d);
      return (st.bavail * st.bsize) / 2 ** 20;
    } catch {
      if (d === path.dirname(d)) return undefined;
    }
  }
}

/**
 * Until a signal (exit code 0), or, with NEATROOTS_ON_FAILING=exit, until a part of the app
 * stopped for good (a disk error): then it stops as on a signal and exits 1, for a restart policy.
 */
export async function servedUntil(signal: Promise<void>, failed: Promise<string>, onFailing: 'stay' | 'exit', io: Pick<Io, 'err'>): Promise<number> {
  const why = await Promise.race([signal.then(() => undefined), onFailing === 'exit' ? failed : new Promise<never>(() => undefined)]);
  if (why === undefined) return 0;
  io.err(`neatroots start: ${why}: stopping, to exit 1 (NEATROOTS_ON_FAILING=exit)`);
  return 1;
}

/** The demo's findings as the API serves them, once the store has caught up. */
async function summarise(app: EmbeddedApp, io: Io): Promise<void> {
  const url = `http://${app.config.NEATROOTS_HOST}:${app.httpPort}/v1/projects/${DEMO_PROJECT}/findings?state=all&limit=100`;
  let items: { check_id: string; run_id: string; state?: string; status?: string; count: number; action: string }[] = [];
  for (let i = 0; i < 20; i++) {
    const res = await fetch(url, { headers: { 'x-api-key': app.demoKey ?? '' } });
    if (res.ok) {
      const body = (await res.json()) as { items?: typeof items; findings?: typeof items };
      items = body.items ?? body.findings ?? [];
    }
    if (items.length) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  io.out(`\nFindings stored (GET /v1/projects/${DEMO_PROJECT}/findings):`);
  for (const f of items) io.out(`  ${f.check_id.padEnd(24)} ${f.run_id.padEnd(28)} ${(f.state ?? f.status ?? '').padEnd(9)} count=${f.count} ${f.action}`);
}
