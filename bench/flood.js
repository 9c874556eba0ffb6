'use strict';
// A flood against the embedded deployment (`neatroots start` as a child process, its own data
// folder, loopback only): first an unloaded baseline (one export in flight), then
// FLOOD_SECONDS (default 60) with FLOOD_INFLIGHT (default 64) exports in flight. Prints spans/s
// accepted and refused (RESOURCE_EXHAUSTED: back-pressure), p99 export latency, and the server
// process's peak resident memory beside its configured ceiling; then how long the backlog
// took to drain and what a SIGTERM did. Bounded in time and count; it stops by itself.
//   FLOOD_SECONDS=20 node bench/flood.js
// Environment: FLOOD_SECONDS, FLOOD_INFLIGHT, FLOOD_BACKOFF_MS (a refused worker waits this
// long before its next export, as a client backing off would; default 50), and the server's
// NEATROOTS_MAX_BACKLOG, NEATROOTS_MEMORY_CEILING_MB, NEATROOTS_BUS passed through.
// Exits 1, after printing its result, when the server's resident memory went past the ceiling.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const grpc = require('@grpc/grpc-js');
const { buildBatches } = require('./e2e');
const { percentile } = require('./checks');
const { serverNodeFlags } = require('neatroots/dist/relaunch');

const CLI = path.resolve(__dirname, '../packages/neatroots/bin/neatroots.js');
const KEY = 'flood-key';
const PREFIX = 'q000';

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Resident memory of a process, from /proc (bytes). */
function rssOf(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/**
 * The server's environment: the settings given (`env`: a comparison's NEATROOTS_*), then the
 * bench's own data folder, ports and key, which a setting in the user's shell (NEATROOTS_HOME,
 * a port) must not move: the bench measures, and removes, the folder it made.
 */
function serverEnv(env, home, ports) {
  return {
    PATH: process.env.PATH,
    ...env,
    NEATROOTS_HOME: home,
    NEATROOTS_OTLP_PORT: String(ports.otlp),
    NEATROOTS_OTLP_HTTP_PORT: '0',
    NEATROOTS_GRPC_PORT: String(ports.grpc),
    NEATROOTS_HTTP_PORT: String(ports.http),
    NEATROOTS_API_KEYS: `flood=${KEY}`,
  };
}

/** `neatroots start` in a new data folder, or in `home` (a start after a stop or a kill). */
async function startServer(env, home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-flood-'))) {
  const ports = { otlp: await freePort(), grpc: await freePort(), http: await freePort() };
  // The servers' node flags given here: the CLI serves in this process (no relaunch), whose memory is read.
  const proc = spawn(process.execPath, [...serverNodeFlags(), CLI, 'start', '--no-demo'], {
    env: serverEnv(env, home, ports),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = [];
  proc.stdout.on('data', (d) => output.push(d.toString()));
  proc.stderr.on('data', (d) => output.push(d.toString()));
  const end = Date.now() + 120_000;
  while (!output.join('').includes('Serving')) {
    if (proc.exitCode !== null) throw new Error(`neatroots start exited ${proc.exitCode}:\n${output.join('')}`);
    if (Date.now() > end) {
      proc.kill('SIGKILL'); // not left holding its data folder
      throw new Error(`neatroots start not serving after 120 s:\n${output.join('')}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { proc, home, ports, output };
}

/**
 * The next batch to send, round and round `batches` (built with run ids prefixed PREFIX): each
 * pass after the first sends them as other runs, the run ids' prefix rewritten in place.
 */
function rotating(batches) {
  let next = 0;
  let cycle = 0;
  return () => {
    if (next === batches.length) {
      next = 0;
      cycle++;
      const from = Buffer.from(`${PREFIX}-`);
      const to = Buffer.from(`q${String(cycle % 1000).padStart(3, '0')}-`);
      const prev = Buffer.from(`q${String((cycle - 1) % 1000).padStart(3, '0')}-`);
      for (const b of batches) for (let i = b.indexOf(cycle === 1 ? from : prev); i >= 0; i = b.indexOf(prev, i + 1)) to.copy(b, i);
    }
    return batches[next++];
  };
}

/** Workers sending exports until `until`; each export's latency and outcome are recorded. */
async function load({ port, batches, spansPerBatch, inflight, until, backoffMs }) {
  const conns = Math.max(1, Math.min(4, inflight));
  const clients = Array.from({ length: conns }, () =>
    new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.max_send_message_length': 64 << 20 }));
  const md = new grpc.Metadata();
  md.set('x-api-key', KEY);
  const r = { accepted: 0, refused: 0, failed: 0, latOk: [], latAll: [], errors: {} };
  const take = rotating(batches);
  const worker = async (client) => {
    while (performance.now() < until) {
      const buf = take();
      const t0 = performance.now();
      const err = await new Promise((resolve) =>
        client.makeUnaryRequest('/neatroots.v1.Ingest/Export', (b) => b, (b) => b, buf, md, { deadline: Date.now() + 30_000 }, (e) => resolve(e)));
      const ms = performance.now() - t0;
      r.latAll.push(ms);
      if (!err) {
        r.accepted += spansPerBatch;
        r.latOk.push(ms);
      } else if (err.code === grpc.status.RESOURCE_EXHAUSTED) {
        r.refused += spansPerBatch;
        if (backoffMs) await new Promise((res) => setTimeout(res, backoffMs));
      } else {
        r.failed += spansPerBatch;
        r.errors[grpc.status[err.code]] = (r.errors[grpc.status[err.code]] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: inflight }, (_, i) => worker(clients[i % conns])));
  clients.forEach((c) => c.close());
  r.latOk.sort((a, b) => a - b);
  r.latAll.sort((a, b) => a - b);
  return r;
}

async function benchFlood({
  seconds = Number(process.env.FLOOD_SECONDS ?? 60),
  inflight = Number(process.env.FLOOD_INFLIGHT ?? 64),
  backoffMs = Number(process.env.FLOOD_BACKOFF_MS ?? 50),
  baselineSeconds = 5,
} = {}) {
  const env = {};
  for (const k of ['NEATROOTS_MAX_BACKLOG', 'NEATROOTS_MEMORY_CEILING_MB', 'NEATROOTS_BUS', 'NEATROOTS_DRAIN_MS']) if (process.env[k]) env[k] = process.env[k];
  const ceilingMb = Number(env.NEATROOTS_MEMORY_CEILING_MB ?? 1024);
  const spansPerBatch = 500;
  // 400 batches of 500 spans (200,000 spans, 2,000 runs), sent again under other run ids.
  const { batches, spans } = buildBatches({ spans: 200_000, perRun: 100, batch: spansPerBatch, prefix: PREFIX });
  const perBatch = Math.round(spans / batches.length);
  const server = await startServer(env);
  const pid = server.proc.pid;
  let peak = 0;
  const sampler = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 200);
  try {
    const rssIdle = rssOf(pid);
    // Unloaded: one export in flight.
    let t0 = performance.now();
    const base = await load({ port: server.ports.grpc, batches, spansPerBatch: perBatch, inflight: 1, until: t0 + baselineSeconds * 1000, backoffMs });
    const baseS = (performance.now() - t0) / 1000;
    // Let the pipeline catch up before the flood.
    await new Promise((r) => setTimeout(r, 5000));
    peak = rssOf(pid);
    t0 = performance.now();
    const flood = await load({ port: server.ports.grpc, batches, spansPerBatch: perBatch, inflight, until: t0 + seconds * 1000, backoffMs });
    const floodS = (performance.now() - t0) / 1000;
    const peakFlood = peak;
    const rssAfter = rssOf(pid);
    // Stop: SIGTERM, and what the process said about what it left.
    const tStop = performance.now();
    const exited = new Promise((r) => server.proc.once('exit', (code, signal) => r({ code, signal })));
    server.proc.kill('SIGTERM');
    const exit = await Promise.race([exited, new Promise((r) => setTimeout(() => r({ code: 'still running after 60 s' }), 60_000))]);
    const stopS = (performance.now() - tStop) / 1000;
    const said = server.output.join('').split('\n').filter((l) => /stop:|drain/i.test(l)).slice(-3);
    return {
      baseline_unloaded: {
        seconds: +baseS.toFixed(1),
        accepted_spans_per_s: Math.round(base.accepted / baseS),
        export_p50_ms: +percentile(base.latOk, 50).toFixed(1),
        export_p99_ms: +percentile(base.latOk, 99).toFixed(1),
      },
      flood: {
        seconds: +floodS.toFixed(1),
        exports_in_flight: inflight,
        accepted_spans_per_s: Math.round(flood.accepted / floodS),
        refused_spans_per_s: Math.round(flood.refused / floodS),
        failed_spans: flood.failed,
        errors: flood.errors,
        accepted_export_p99_ms: +percentile(flood.latOk, 99).toFixed(1),
        any_export_p99_ms: +percentile(flood.latAll, 99).toFixed(1),
      },
      memory: {
        rss_idle_mb: Math.round(rssIdle / 1048576),
        rss_peak_during_flood_mb: Math.round(peakFlood / 1048576),
        rss_after_flood_mb: Math.round(rssAfter / 1048576),
        ceiling_mb: ceilingMb,
        under_ceiling: peakFlood < ceilingMb * 1048576,
      },
      stop: { signal: 'SIGTERM', seconds: +stopS.toFixed(1), exit, said },
    };
  } finally {
    clearInterval(sampler);
    if (server.proc.exitCode === null && server.proc.signalCode === null) server.proc.kill('SIGKILL');
    fs.rmSync(server.home, { recursive: true, force: true });
  }
}

/**
 * What the command line makes of a result: prints it (`log`), and answers the exit code: 1 when
 * the server's resident memory went past its ceiling during the flood (saying so on `warn`),
 * which back-pressure is there to prevent, else 0.
 */
function report(r, log = console.log, warn = console.error) {
  log(JSON.stringify(r, null, 2));
  const over = overCeiling(r);
  if (!over) return 0;
  warn(over);
  return 1;
}

/** What failed when the server's resident memory went past its ceiling during the flood, else undefined. */
function overCeiling(r) {
  if (r.memory.under_ceiling) return undefined;
  return `flood: the server's resident memory peaked at ${r.memory.rss_peak_during_flood_mb} MB, over its ${r.memory.ceiling_mb} MB ceiling`;
}

module.exports = { benchFlood, report, overCeiling, startServer, serverEnv, rotating, rssOf, freePort, KEY, PREFIX };

if (require.main === module) {
  benchFlood().then((r) => (process.exitCode = report(r)), (e) => {
    console.error(e);
    process.exit(1);
  });
}
