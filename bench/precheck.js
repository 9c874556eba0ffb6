'use strict';
// Halt before the harm: the pre-call check's latency on the embedded default (`neatroots
// start`'s wiring, in this process), at a steady 1,000 checks/s, beside the export round trip
// measured in the same run at the same rate (one span per Export: what an agent already pays
// for every call it records). The bar is 10 ms p99 for the check.
//   node bench/precheck.js [--seconds 5] [--rate 1000]
// --rate 0: one call at a time, each as soon as the last is answered (nothing queues, so what
// survives the server thread's young collections is the code's, whatever else runs on the machine).
// From a checkout without a build: node -r ./packages/neatroots/src/ts-register.test.js bench/precheck.js
const fs = require('node:fs');
const os = require('node:os');
const v8 = require('node:v8');
const path = require('node:path');
const { monitorEventLoopDelay, performance, PerformanceObserver } = require('node:perf_hooks');
const { fork } = require('node:child_process');
// The calls come from a process of their own, as an agent's would (NEATROOTS_BENCH_LOAD set),
// with node's default flags whatever this process was started with.
const child = process.env.NEATROOTS_BENCH_LOAD ? JSON.parse(process.env.NEATROOTS_BENCH_LOAD) : null;
// The parent process: it runs the embedded app and measures; the forked child only makes the calls.
const inParent = !child;
const grpc = require('@grpc/grpc-js');
const { v1 } = require('@neatroots/proto');
const { spanToProto, runStartToProto } = require('@neatroots/spans');
// The calling process loads the client only, as an agent's SDK would: with the whole app in its
// heap (about 40 MB) its own collector paused 6-15 ms at a time, inside the measured calls.
const main = (load) => (inParent ? load() : {});
const { compileRuleSet, parseCheckFile, registerProject, RuleEngine } = main(() => require('@neatroots/checks'));
const { createLogger, loadConfig, MemoryWindowStore } = main(() => require('@neatroots/platform'));
const { Prechecker } = main(() => require('@neatroots/rule-engine'));
const { startEmbedded } = main(() => require('neatroots'));
const { percentile } = main(() => require('./checks'));

const KEY = 'bench-precheck';
const RULE = `id: refund-without-lookup
kind: rule
title: Refund without lookup
rule: { type: requires_before, call: { tool: [issue_refund] }, requires: { tool: [lookup_order] } }
action: halt
`;

function unary(client, method, req) {
  return new Promise((resolve, reject) => client[method](req, md(), { deadline: Date.now() + 60_000 }, (err, res) => (err ? reject(err) : resolve(res))));
}

function md() {
  const m = new grpc.Metadata();
  m.set('x-api-key', KEY);
  return m;
}

/** Fires `call(i)` at a steady `rate` per second for `seconds` (open loop) and returns the latencies, sorted. */
async function paced(rate, seconds, call) {
  if (!rate) {
    const lat = [];
    const start = performance.now();
    for (let i = 0; performance.now() - start < seconds * 1000; i++) {
      const t0 = performance.now();
      await call(i);
      lat.push(performance.now() - t0);
    }
    return { sorted: lat.sort((a, b) => a - b), achieved: Math.round(lat.length / seconds) };
  }
  const n = Math.round(rate * seconds);
  const lat = [];
  const start = performance.now();
  const pending = [];
  for (let i = 0; i < n; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const t0 = performance.now();
    pending.push(call(i).then(() => lat.push(performance.now() - t0)));
  }
  await Promise.all(pending);
  const took = (performance.now() - start) / 1000;
  return { sorted: lat.sort((a, b) => a - b), achieved: Math.round(n / took) };
}

const stats = (r) => ({ p50_ms: +percentile(r.sorted, 50).toFixed(2), p99_ms: +percentile(r.sorted, 99).toFixed(2), calls: r.sorted.length, per_s: r.achieved, first_call_ms: r.first_call_ms });

/** The engine's part alone: the same question asked of a Prechecker in this thread, one after another. */
async function engineAlone(n = 5000) {
  const rules = compileRuleSet(parseCheckFile(RULE, 'refund.yaml', 'user').checks, () => ({ test: () => false }));
  const windows = new MemoryWindowStore();
  const live = new RuleEngine({ windows, rules: () => rules, steering: () => true });
  for (let r = 0; r < 100; r++) {
    const span = { run_id: `run-${r}`, span_id: `s${r}`, type: 'tool', name: 'search', tool: 'search', status: 'ok', start_ms: 1, end_ms: 1 };
    await (await live.process([{ project: 'shop', received_ms: 1, item: { kind: 'span', span } }])).commit();
  }
  const p = new Prechecker({ windows, rules: () => rules, steering: () => true });
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    await p.precheck({ project: 'shop', span: { run_id: `run-${i % 100}`, span_id: `x${i}`, type: 'tool', name: 'issue_refund', tool: 'issue_refund', status: 'ok' }, knownSpans: 1 });
  }
  const ms = (performance.now() - t0) / n;
  return { per_check_ms: +ms.toFixed(3), per_s: Math.round(1000 / ms) };
}

async function benchPrecheck({ seconds = 5, rate = 1000 } = {}) {
  const engine = await engineAlone();
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'nr-bench-precheck-'));
  const project = path.join(home, 'shop');
  fs.mkdirSync(path.join(project, '.neatroots', 'checks'), { recursive: true });
  fs.writeFileSync(path.join(project, '.neatroots', 'checks', 'refund.yaml'), RULE);
  registerProject(home, { name: 'shop', path: project, steering: true });
  const config = loadConfig({
    NEATROOTS_HOME: home, NEATROOTS_OTLP_PORT: '0', NEATROOTS_OTLP_HTTP_PORT: '0', NEATROOTS_GRPC_PORT: '0', NEATROOTS_HTTP_PORT: '0',
    NEATROOTS_ADMIN_PORT: '0', NEATROOTS_MEMORY_CEILING_MB: '0', NEATROOTS_API_KEYS: `shop=${KEY}`,
  });
  const app = await startEmbedded({ config, inMemoryDb: true, watch: false, log: createLogger({ level: 'error' }) });
  const client = new v1.IngestClient(`127.0.0.1:${app.ingest.grpcPort}`, grpc.credentials.createInsecure());
  try {
    // 100 runs, each with a search and (every other one) a lookup, in the engine's windows.
    const runs = 100;
    const now = Date.now();
    const events = [];
    for (let r = 0; r < runs; r++) {
      events.push({ kind: { $case: 'run_start', value: runStartToProto({ run_id: `run-${r}`, workflow: 'refunds', ts_ms: now }) } });
      events.push({ kind: { $case: 'span', value: spanToProto({ run_id: `run-${r}`, span_id: `s${r}a`, type: 'tool', name: 'search', tool: 'search', status: 'ok', start_ms: now, end_ms: now }) } });
      if (r % 2) events.push({ kind: { $case: 'span', value: spanToProto({ run_id: `run-${r}`, span_id: `s${r}b`, type: 'tool', name: 'lookup_order', tool: 'lookup_order', status: 'ok', start_ms: now, end_ms: now }) } });
    }
    await unary(client, 'export', { events, note_runs: [] });
    // The calls are made from a thread of their own, so the client does not share the
    // server's event loop (an agent is another process).
    const load = (kind, secs) =>
      new Promise((resolve, reject) => {
        const w = fork(__filename, [], { execArgv: [], env: { ...process.env, NEATROOTS_BENCH_LOAD: JSON.stringify({ port: app.ingest.grpcPort, kind, rate, seconds: secs, runs }) } });
        w.once('message', resolve);
        w.once('error', reject);
        w.once('exit', (code) => code && reject(new Error(`the load process exited with ${code}`)));
      });
    const server = serverThread();
    const precheck = stats(await load('precheck', seconds));
    const server_thread = server.stop();
    const exportRt = stats(await load('export', seconds));
    return { rate, seconds, precheck, server_thread, export_round_trip: exportRt, p99_vs_export: +(precheck.p99_ms / exportRt.p99_ms).toFixed(2), engine_alone: engine, load_average: os.loadavg()[0], bar_p99_ms: 10 };
  } finally {
    client.close();
    await app.close();
    fs.rmSync(home, { recursive: true, force: true });
  }
}

/**
 * Where a tail comes from: the server thread's event-loop delay and its collector's pauses
 * while the checks are measured (a check that arrives during either waits for it). A young
 * collection's pause grows with what survives it; what it moved to the old space (KB a young
 * collection, mean) depends on the code, not on other jobs on the machine, unlike the pauses.
 */
function serverThread() {
  const delay = monitorEventLoopDelay({ resolution: 1 });
  const pauses = [];
  const gc = new PerformanceObserver((list) => list.getEntries().forEach((e) => pauses.push(e.duration)));
  const profiler = new v8.GCProfiler();
  delay.enable();
  gc.observe({ entryTypes: ['gc'] });
  profiler.start();
  return {
    stop() {
      delay.disable();
      gc.disconnect();
      const old = (h) => h.heapSpaceStatistics.find((sp) => sp.spaceName === 'old_space').spaceUsedSize;
      const young = profiler.stop().statistics.filter((e) => e.gcType === 'Scavenge');
      const promoted = young.reduce((a, e) => a + Math.max(0, old(e.afterGC) - old(e.beforeGC)), 0);
      const ms = (ns) => +(ns / 1e6).toFixed(2);
      return {
        loop_delay_p99_ms: ms(delay.percentile(99)),
        loop_delay_max_ms: ms(delay.max),
        gc_pauses: pauses.length,
        gc_ms: +pauses.reduce((a, b) => a + b, 0).toFixed(1),
        gc_max_ms: +Math.max(0, ...pauses).toFixed(2),
        young_gcs: young.length,
        promoted_kb_per_young_gc: young.length ? Math.round(promoted / young.length / 1024) : 0,
      };
    },
  };
}

/** In the worker: the paced calls of one kind, their latencies back to the main thread. */
async function workerLoad({ port, kind, rate, seconds, runs }) {
  const client = new v1.IngestClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  try {
    const check = (i) => {
      const r = i % runs;
      const t = Date.now();
      return unary(client, 'preCheck', {
        span: spanToProto({ run_id: `run-${r}`, span_id: `pc${i}`, type: 'tool', name: 'issue_refund', tool: 'issue_refund', status: 'ok', start_ms: t, end_ms: t }),
        known_spans: r % 2 ? 2 : 1,
        timeout_ms: 1_000,
      }).then((a) => {
        if (a.decision !== (r % 2 ? 'allow' : 'halt')) throw new Error(`run-${r}: ${a.decision}`);
      });
    };
    const exportOne = (i) => {
      const t = Date.now();
      return unary(client, 'export', { events: [{ kind: { $case: 'span', value: spanToProto({ run_id: `exp-${i % runs}`, span_id: `e${i}`, type: 'tool', name: 'search', tool: 'search', status: 'ok', start_ms: t, end_ms: t }) } }], note_runs: [] });
    };
    const call = kind === 'precheck' ? check : exportOne;
    // The first call opens the connection (an agent's SDK does that once, not per call): timed
    // on its own. Then one second at the rate, not measured, so the numbers are the steady
    // state's and not this process's first compilations of the call path.
    const t0 = performance.now();
    await call(-1 + runs * 1000);
    const first_call_ms = +(performance.now() - t0).toFixed(2);
    await paced(rate, 1, (i) => call(i + runs * 2000));
    const r = { ...(await paced(rate, seconds, call)), first_call_ms };
    await new Promise((res) => process.send(r, res));
  } finally {
    client.close();
  }
}

module.exports = { benchPrecheck };

if (child) {
  workerLoad(child).then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
} else if (require.main === module) {
  // The command line is checked first: a bad one (or --help) ends here, before any relaunch.
  const args = require('./args').cli({
    usage: `
usage: node bench/precheck.js [--seconds N] [--rate N]
  --seconds N  how long each of the two loads runs, after a second not measured (default 5)
  --rate N     checks (and exports) a second (default 1000); 0: one at a time, each as soon as
               the last is answered
  --help       this text`,
    options: { seconds: { count: true }, rate: { count: true, min: 0 } },
  });
  if (require('./server-flags').asServer()) run(args);
}

function run(args) {
  benchPrecheck({ seconds: args.seconds ?? 5, rate: args.rate ?? 1000 }).then(
    (r) => console.log('pre-call check beside the export round trip:', JSON.stringify(r)),
    (err) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
