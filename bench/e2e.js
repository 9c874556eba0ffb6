'use strict';
// Through the whole embedded deployment: gRPC export (neatroots.v1) -> ingest -> bus ->
// rule engine -> findings, with review storing runs, spans and findings in PGlite.
// Prints spans/s end to end and p50/p99 latency from a span's receipt at ingest to the
// finding it caused, beside a baseline measured in the same run: the same exports into an
// ingest whose bus nobody reads (transport and validation only). The embedded default's bus
// is the durable log (an export acknowledged once on disk); the same run also measures the
// in-memory bus (NEATROOTS_BUS=memory, nothing survives a crash), so the cost of durability shows,
// and the run windows kept in memory only (NEATROOTS_WINDOWS=memory) beside the journaled default.
// The database is PGlite in the data folder, as `neatroots start` keeps it; `--memory-db` puts it
// in memory instead (the whole run, for comparison), and the full run measures that too.
// Each row is a share of a ceiling of its own protocol, exports and concurrency: the neatroots.v1
// rows of a null neatroots.v1 receiver taking the same ExportRequests at 2 connections x 4 in
// flight; the full run also drives the embedded default with the OTLP ceiling's own workload
// (bench/ceiling.js workload(): OTel SDK spans over OTLP/gRPC, 8 in flight) until everything is
// stored, beside that OTLP ceiling.
const os = require('node:os');
const path = require('node:path');
const fs = require('node:fs');
const { performance } = require('node:perf_hooks');
const grpc = require('@grpc/grpc-js');
const { v1 } = require('@neatroots/proto');
const { itemToEvent } = require('@neatroots/spans');
const { startIngest } = require('@neatroots/ingest');
const { MemoryBus, createLogger, loadConfig } = require('@neatroots/platform');
const { startEmbedded } = require('neatroots');
const { extraChecksYaml, fleet, percentile } = require('./checks');
const { benchCeiling, nullReceiver, workload } = require('./ceiling');
const { grpcCaller, pump } = require('./otlp');
const { deadlineMs, waitFor, waitUntil, within } = require('./wait');

const KEY = 'bench-key';
/** Each export's gRPC deadline: generous (an export waits behind the pipeline), never forever. */
const CALL_MS = 120_000;
/** Where PGlite keeps the database: 'disk' (the embedded default) unless --memory-db. */
const DB = process.argv.includes('--memory-db') ? 'memory' : 'disk';

/**
 * The defaults unless set, for comparisons: NEATROOTS_WINDOW_CHECKPOINT_MS=0 (every window save
 * journaled on its own), NEATROOTS_DB_CHECKPOINT_MB=0 (PGlite's own checkpoints only).
 */
function windowCheckpoint() {
  const out = {};
  for (const k of ['NEATROOTS_WINDOW_CHECKPOINT_MS', 'NEATROOTS_DB_CHECKPOINT_MB']) if (process.env[k] !== undefined) out[k] = process.env[k];
  return out;
}

/**
 * The rule engine's window journals (its checks' and its question scheduler's): windows written
 * and syncs over the app's life (a checkpoint writes each window saved since once; with
 * NEATROOTS_WINDOW_CHECKPOINT_MS=0, each save). Nothing with the windows in memory.
 */
async function journalRecords(app) {
  let windows = 0;
  let syncs = 0;
  for (const name of ['', ':qs']) {
    const st = (await app.windows(name)).stats;
    if (!st || st.edited === undefined) return {};
    windows += st.edited + st.whole;
    syncs += st.syncs;
  }
  return { journal_windows_written: windows, journal_syncs: syncs };
}

function buildBatches({ spans, perRun, batch, prefix = 'run' }) {
  const runs = Math.ceil(spans / perRun);
  const batches = [];
  let cur = [];
  let count = 0;
  for (const item of fleet({ runs, perRun, project: undefined, prefix })) {
    if (item.kind === 'span') count++;
    cur.push(itemToEvent(item));
    if (cur.length >= batch) {
      batches.push(Buffer.from(v1.ExportRequest.encode({ events: cur, note_runs: [] }).finish()));
      cur = [];
    }
  }
  if (cur.length) batches.push(Buffer.from(v1.ExportRequest.encode({ events: cur, note_runs: [] }).finish()));
  return { batches, spans: count };
}

/** Sends pre-encoded ExportRequests over `conns` channels, `inflight` calls each. */
async function send(port, batches, { conns = 2, inflight = 4, key = KEY } = {}) {
  const clients = Array.from({ length: conns }, () =>
    new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.max_send_message_length': 64 << 20 }));
  const md = new grpc.Metadata();
  md.set('x-api-key', key);
  let next = 0;
  const call = (client, buf) =>
    new Promise((resolve, reject) =>
      client.makeUnaryRequest('/neatroots.v1.Ingest/Export', (b) => b, (b) => b, buf, md, { deadline: Date.now() + CALL_MS }, (err) => (err ? reject(err) : resolve())));
  const worker = async (client) => {
    while (next < batches.length) {
      const i = next++;
      await call(client, batches[i]);
    }
  };
  try {
    await Promise.all(clients.flatMap((c) => Array.from({ length: inflight }, () => worker(c))));
  } finally {
    clients.forEach((c) => c.close());
  }
}

/**
 * The ceiling of the neatroots.v1 rows, like for like: the null receiver (bench/ceiling.js: decodes
 * and counts, nothing else) taking the same ExportRequests at the same connections and exports in
 * flight as the row it is the ceiling of, best of `rounds`.
 */
async function v1Ceiling(batches, spans, { conns = 2, inflight = 4, rounds = 3 } = {}) {
  const rx = await nullReceiver();
  let best = Infinity;
  try {
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      await send(rx.port, batches, { conns, inflight });
      best = Math.min(best, performance.now() - t0);
    }
  } finally {
    await rx.close();
  }
  if (rx.state.v1Spans !== spans * rounds) throw new Error(`null receiver counted ${rx.state.v1Spans} spans of ${spans * rounds}`);
  return { protocol: 'neatroots.v1', connections: conns, exports_in_flight: conns * inflight, spans_per_s: Math.round(spans / (best / 1000)) };
}

async function baseline(batches, spans) {
  const bus = new MemoryBus({ maxLag: Number.MAX_SAFE_INTEGER });
  try {
    const ingest = await startIngest({ bus, resolveKey: async () => 'bench', otlpPort: 0, grpcPort: 0 });
    try {
      const t0 = performance.now();
      await send(ingest.grpcPort, batches);
      const ms = performance.now() - t0;
      return { spans_per_s: Math.round(spans / (ms / 1000)) };
    } finally {
      await ingest.close();
    }
  } finally {
    await bus.close();
  }
}

/**
 * Sends `batches` at a steady rate (`perSecond` spans), as a fleet's agents would, rather
 * than all at once: latency is measured at a load the pipeline sustains, not behind a burst.
 */
async function paced(port, batches, spansPerBatch, perSecond, key = KEY) {
  const clientOpts = { 'grpc.max_send_message_length': 64 << 20 };
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), clientOpts);
  const md = new grpc.Metadata();
  md.set('x-api-key', key);
  const interval = (spansPerBatch / perSecond) * 1000;
  const t0 = performance.now();
  const calls = [];
  for (let i = 0; i < batches.length; i++) {
    const due = t0 + i * interval;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    calls.push(new Promise((resolve, reject) =>
      client.makeUnaryRequest('/neatroots.v1.Ingest/Export', (b) => b, (b) => b, batches[i], md, { deadline: Date.now() + CALL_MS }, (err) => (err ? reject(err) : resolve()))));
  }
  await Promise.all(calls);
  client.close();
}

/**
 * The main thread's CPU time so far, in ms: its utime + stime in /proc/self/task/<pid>/stat (the
 * main thread's task id is the process id; clock ticks of 10 ms). Undefined where there is no
 * /proc (not Linux): the busy time below is printed alone then.
 */
function mainThreadCpuMs() {
  try {
    const stat = fs.readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return undefined;
  }
}

/**
 * Counts what was stored and fails unless it is what was sent: the spans rows against `spans`, and
 * the findings rows against the distinct findings published (`ids`, gathered from the findings
 * topic), compared until they agree (a timer may publish one meanwhile) for at most `ms`. `db`:
 * the embedded PGlite or a Postgres pool, a scratch database of the run alone.
 */
async function verifyStored(db, { what, spans, ids, ms = 60_000 }) {
  const count = async (table) => Number((await db.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);
  const stored = await count('spans');
  if (stored !== spans) throw new Error(`${what}: ${stored} spans stored of ${spans} sent`);
  if (!ids) return { spans: stored };
  const r = await waitUntil(`${what}: findings stored`, async () => {
    const rows = await count('findings');
    return { done: rows === ids.size, rows, state: `${rows} of the ${ids.size} published` };
  }, { ms, everyMs: 50 });
  return { spans: stored, findings: r.rows };
}

/** What the embedded bus still holds, topic by topic (for a deadline's message). */
function backlogOf(app) {
  return Object.values(app.topics).map((t) => `${t.name} ${app.bus.backlog(t.name)}`).join(', ');
}

/** The app's bus idle (every group consumed everything), within the deadline for `spans` spans. */
function idleWithin(app, spans) {
  return within(app.bus.idle(), deadlineMs(spans), () => `the embedded bus not idle, records left by topic: ${backlogOf(app)}`);
}

/** An AbortSignal that aborts once a part of the app stopped for good (a disk error): the waits end then. */
function failedSignal(app) {
  const stop = new AbortController();
  app.failed.then((why) => stop.abort(new Error(`the embedded app stopped: ${why}`)));
  return stop.signal;
}

/**
 * A scratch data folder holding the shipped library plus the benchmark's 20 rule checks (as a
 * user's own checks), and the embedded app's settings on it: every port chosen by the system,
 * the bench's key, nothing refused (throughput is measured here, not back-pressure:
 * bench/flood.js), the window checkpoints as configured; `settings` adds to or overrides them.
 */
function benchHome(settings) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-bench-'));
  fs.mkdirSync(path.join(home, 'checks'));
  fs.writeFileSync(path.join(home, 'checks', 'bench.yaml'), extraChecksYaml());
  const config = loadConfig({
    NEATROOTS_HOME: home, NEATROOTS_OTLP_PORT: '0', NEATROOTS_OTLP_HTTP_PORT: '0', NEATROOTS_GRPC_PORT: '0', NEATROOTS_HTTP_PORT: '0', NEATROOTS_ADMIN_PORT: '0',
    NEATROOTS_API_KEYS: `bench=${KEY}`, NEATROOTS_MAX_BACKLOG: String(10_000_000), NEATROOTS_MEMORY_CEILING_MB: '0',
    ...windowCheckpoint(),
    ...settings,
  });
  return { home, config };
}

/** `db`: 'disk' (the embedded default: PGlite in the data folder) or 'memory' (PGlite in memory, for comparison). */
async function full(batches, spans, latencyBatches, latencyRate, bus = 'log', windows = 'journal', db = DB) {
  const { home, config } = benchHome({ NEATROOTS_BUS: bus, NEATROOTS_WINDOWS: windows });
  const quiet = createLogger({ level: 'error' });
  // A failure anywhere (a deadline, a count that is short, a refused export) still closes the app
  // and removes its data folder.
  let app;
  try {
    app = await startEmbedded({ config, inMemoryDb: db === 'memory', watch: false, log: quiet });
    let latencies = null;
    // Every finding published (its id: a finding's events upsert one row), to count the stored ones against.
    const ids = new Set();
    await app.bus.subscribe(app.topics.findings, { group: 'bench-latency', fromBeginning: false }, async (b) => {
      const now = Date.now();
      for (const r of b.records) ids.add(r.value.id);
      // Rule findings (question findings wait for a model); requires_before waits 250 ms by design, so it is left out.
      if (latencies) for (const r of b.records) if (r.value.status === 'raised' && r.value.kind === 'rule' && r.value.received_ms && r.value.check_id !== 'bench-refund-lookup') latencies.push(now - r.value.received_ms);
    });
    // Throughput: everything at once, done when the rule engine consumed every accepted item.
    const t0 = performance.now();
    // CPU spent until everything is stored: the process's (every thread: PGlite's, the thread
    // pool's, the collector's) and the main thread's own CPU (from /proc). On a shared machine these
    // move far less than the wall time does. Beside them the main thread's busy time (its event
    // loop's active time: wall-clock time not waiting for events, which counts the time it was
    // runnable but off the core, and blocked in a system call, as busy).
    const cpu0 = process.cpuUsage();
    const main0 = mainThreadCpuMs();
    const elu0 = performance.eventLoopUtilization();
    await send(app.ingest.grpcPort, batches);
    await waitFor('the rule engine consumed items', () => app.ruleEngine.metrics.consumed, totalItems, { ms: deadlineMs(spans), everyMs: 5, signal: failedSignal(app) });
    const ms = performance.now() - t0;
    const tStore = performance.now();
    // Everything stored too (runs, spans, findings in PGlite): every group has consumed it all.
    await idleWithin(app, spans);
    const storeMs = performance.now() - tStore;
    const storedMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const mainCpuMs = main0 === undefined ? undefined : mainThreadCpuMs() - main0;
    const mainBusyMs = performance.eventLoopUtilization(elu0).active;
    // Stored is counted, not taken on trust: every span sent, every finding published.
    const what = `embedded (bus ${bus}, windows ${windows}, database ${db})`;
    const storedCount = await verifyStored(app.db, { what, spans, ids });
    // Latency: a steady stream at a rate the whole pipeline (storage included) sustains.
    latencies = [];
    await paced(app.ingest.grpcPort, latencyBatches.batches, latencyBatches.perBatch, latencyRate);
    await idleWithin(app, spans);
    await verifyStored(app.db, { what: `${what}, after the latency phase`, spans: spans + latencyBatches.spans, ids });
    const findings = app.ruleEngine.metrics.findings;
    const journal = await journalRecords(app);
    latencies.sort((a, b) => a - b);
    return {
      spans_per_s: Math.round(spans / (ms / 1000)),
      stored_spans_per_s: Math.round(spans / (storedMs / 1000)),
      findings,
      // counted in the database when stored: as many as sent and published
      stored_counted: storedCount,
      p50_ms: percentile(latencies, 50),
      p99_ms: percentile(latencies, 99),
      ...journal,
      latency_samples: latencies.length,
      store_drain_ms: Math.round(storeMs),
      cpu_us_per_span: +((cpu.user + cpu.system) / spans).toFixed(1),
      main_thread_cpu_us_per_span: mainCpuMs === undefined ? null : +((mainCpuMs * 1000) / spans).toFixed(1),
      main_thread_busy_us_per_span: +((mainBusyMs * 1000) / spans).toFixed(1),
    };
  } finally {
    await app?.close();
    fs.rmSync(home, { recursive: true, force: true });
  }
}

/**
 * The embedded default (durable log, journaled windows, PGlite in the data folder) driven by the
 * OTLP ceiling's own workload (bench/ceiling.js workload(): the OTel JS SDK's spans, the same
 * bodies, the same exports in flight over the same 2 connections), until everything is stored:
 * the end-to-end row that is a share of the OTLP ceiling like for like.
 */
async function otlpStored(work) {
  const { home, config } = benchHome({});
  let app;
  try {
    app = await startEmbedded({ config, inMemoryDb: DB === 'memory', watch: false, log: createLogger({ level: 'error' }) });
    const ids = new Set();
    await app.bus.subscribe(app.topics.findings, { group: 'bench-findings', fromBeginning: false }, async (b) => {
      for (const r of b.records) ids.add(r.value.id);
    });
    const caller = grpcCaller(app.ingest.otlpPort);
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    try {
      await pump(work.bodies, caller.call, work.inflight);
    } finally {
      caller.close();
    }
    // Everything stored: every group (rule engine, review's store, question service) consumed it all.
    await idleWithin(app, work.spans);
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const storedCount = await verifyStored(app.db, { what: 'embedded, OTLP', spans: work.spans, ids });
    return {
      protocol: work.protocol, spans: work.spans, batch: work.batch, connections: work.connections, exports_in_flight: work.inflight,
      stored_spans_per_s: Math.round(work.spans / (ms / 1000)),
      findings: app.ruleEngine.metrics.findings,
      stored_counted: storedCount,
      cpu_us_per_span: +((cpu.user + cpu.system) / work.spans).toFixed(1),
    };
  } finally {
    await app?.close();
    fs.rmSync(home, { recursive: true, force: true });
  }
}

let totalItems = 0;

/**
 * `work` and `ceiling`: the OTLP ceiling's workload and its figure measured in the same run
 * (bench/run.js measures them once for every row); measured here when not given.
 */
async function benchE2e({ spans = 200_000, perRun = 100, batch = 500, latencyRate = 5000, variant, work, ceiling } = {}) {
  const built = buildBatches({ spans, perRun, batch });
  totalItems = built.spans + 2 * Math.ceil(spans / perRun);
  // A different fleet (other run ids) for the latency phase, sent 50 spans at a time.
  const lat = buildBatches({ spans: latencyRate * 4, perRun, batch: 50, prefix: 'lat' });
  // The ceiling of these rows: the same ExportRequests at the same 2 connections x 4 in flight.
  const v1Ceil = await v1Ceiling(built.batches, built.spans, { conns: 2, inflight: 4 });
  const base = await baseline(built.batches, built.spans);
  // The windows in memory only, then the default (journaled windows, durable log), then the in-memory bus.
  const latency = { batches: lat.batches, perBatch: 50, spans: lat.spans };
  // `variant` runs one alone (for a profile): 'default', 'memory-windows', 'memory-bus' or 'memory-db'.
  if (variant) {
    const [bus, windows, db] = { default: ['log', 'journal', DB], 'memory-windows': ['log', 'memory', DB], 'memory-bus': ['memory', 'journal', DB], 'memory-db': ['log', 'journal', 'memory'] }[variant] ?? [];
    if (!bus) throw new Error(`--variant: one of default, memory-windows, memory-bus, memory-db, not '${variant}'`);
    const r = await full(built.batches, built.spans, latency, latencyRate, bus, windows, db);
    return {
      variant, database: db, spans: built.spans, neatroots_v1_ceiling: v1Ceil, baseline_ingest_only_spans_per_s: base.spans_per_s, ...r,
      stored_share_of_v1_ceiling: +(r.stored_spans_per_s / v1Ceil.spans_per_s).toFixed(3),
    };
  }
  const w = await full(built.batches, built.spans, latency, latencyRate, 'log', 'memory');
  const f = await full(built.batches, built.spans, latency, latencyRate, 'log');
  const m = await full(built.batches, built.spans, latency, latencyRate, 'memory');
  const d = DB === 'disk' ? await full(built.batches, built.spans, latency, latencyRate, 'log', 'journal', 'memory') : undefined;
  // The OTLP row: the OTLP ceiling's own exports until everything is stored, beside that ceiling.
  work ??= workload({ spans: Math.min(spans, 100_000) });
  ceiling ??= await benchCeiling({ work });
  const o = await otlpStored(work);
  return {
    database: DB,
    spans: built.spans,
    batch,
    // the ceiling of the neatroots.v1 rows below: a null receiver taking the same exports, 2 connections x 4 in flight
    neatroots_v1_ceiling: v1Ceil,
    baseline_ingest_only_spans_per_s: base.spans_per_s,
    spans_per_s: f.spans_per_s,
    stored_spans_per_s: f.stored_spans_per_s,
    ratio_to_baseline: +(base.spans_per_s / f.spans_per_s).toFixed(2),
    findings: f.findings,
    latency_at_spans_per_s: latencyRate,
    receipt_to_finding_p50_ms: f.p50_ms,
    receipt_to_finding_p99_ms: f.p99_ms,
    latency_samples: f.latency_samples,
    store_drain_after_ms: f.store_drain_ms,
    memory_bus_spans_per_s: m.spans_per_s,
    memory_bus_stored_spans_per_s: m.stored_spans_per_s,
    memory_bus_receipt_to_finding_p50_ms: m.p50_ms,
    memory_bus_receipt_to_finding_p99_ms: m.p99_ms,
    memory_bus_over_log_throughput: +(m.spans_per_s / f.spans_per_s).toFixed(2),
    memory_windows_spans_per_s: w.spans_per_s,
    memory_windows_stored_spans_per_s: w.stored_spans_per_s,
    memory_windows_receipt_to_finding_p50_ms: w.p50_ms,
    memory_windows_receipt_to_finding_p99_ms: w.p99_ms,
    memory_windows_over_journal_throughput: +(w.spans_per_s / f.spans_per_s).toFixed(2),
    ...(d ? { memory_db_stored_spans_per_s: d.stored_spans_per_s, memory_db_over_disk_stored: +(d.stored_spans_per_s / f.stored_spans_per_s).toFixed(2) } : {}),
    stored_share_of_v1_ceiling: +(f.stored_spans_per_s / v1Ceil.spans_per_s).toFixed(3),
    // OTel SDK spans over OTLP/gRPC (the OTLP ceiling's workload) until everything is stored, and that ceiling
    otlp_ceiling: ceiling,
    otlp: { ...o, stored_share_of_otlp_ceiling: +(o.stored_spans_per_s / ceiling.spans_per_s).toFixed(3) },
  };
}

/**
 * The garbage collector's pauses from now until stop(): how many, the longest, their total, and
 * the major ones (mark-compact) apart, whose pauses grow with what the old generation holds.
 */
function gcPauses() {
  const { PerformanceObserver, constants } = require('node:perf_hooks');
  const all = [];
  const major = [];
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      all.push(e.duration);
      if (e.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) major.push(e.duration);
    }
  });
  obs.observe({ entryTypes: ['gc'] });
  const ms = (x) => +x.toFixed(1);
  return {
    stop: () => {
      obs.disconnect();
      return {
        gc_pauses: all.length, gc_max_ms: ms(Math.max(0, ...all)), gc_total_ms: ms(all.reduce((a, b) => a + b, 0)),
        gc_major_pauses: major.length, gc_major_max_ms: ms(Math.max(0, ...major)),
      };
    },
  };
}

/**
 * Receipt to finding alone, on the embedded default as `neatroots start` runs it (the durable
 * log, journaled windows): a second of warm-up, then `seconds` at `rate` spans/s, 50 spans an
 * export. Prints the load average beside it and the bus's group commits (fsync) in the same run.
 *   node bench/e2e.js --latency [--rate 5000] [--seconds 6]
 */
async function latencyOnly({ rate = 5000, seconds = 6 } = {}) {
  const { home, config } = benchHome({
    // The default unless set (NEATROOTS_WINDOWS=memory: the run windows not journaled, for comparison).
    NEATROOTS_WINDOWS: process.env.NEATROOTS_WINDOWS ?? 'journal',
    // The default unless set (NEATROOTS_LOG_COMPRESSION=deflate: the log's frames deflated, for comparison).
    NEATROOTS_LOG_COMPRESSION: process.env.NEATROOTS_LOG_COMPRESSION ?? 'none',
  });
  let app;
  try {
    app = await startEmbedded({ config, inMemoryDb: DB === 'memory', watch: false, log: createLogger({ level: 'error' }) });
    const latencies = [];
    const ids = new Set();
    await app.bus.subscribe(app.topics.findings, { group: 'bench-latency', fromBeginning: false }, async (b) => {
      const now = Date.now();
      for (const r of b.records) ids.add(r.value.id);
      for (const r of b.records) if (r.value.status === 'raised' && r.value.kind === 'rule' && r.value.received_ms && r.value.check_id !== 'bench-refund-lookup') latencies.push(now - r.value.received_ms);
    });
    const warm = buildBatches({ spans: rate, perRun: 100, batch: 50, prefix: 'warm' });
    await paced(app.ingest.grpcPort, warm.batches, 50, rate);
    await idleWithin(app, rate);
    latencies.length = 0;
    const load0 = os.loadavg()[0];
    const lat = buildBatches({ spans: rate * seconds, perRun: 100, batch: 50, prefix: 'lat' });
    const cpu0 = process.cpuUsage();
    const gc = gcPauses();
    // How late the main thread's event loop ran (every stage but PGlite's is on it).
    const loop = require('node:perf_hooks').monitorEventLoopDelay({ resolution: 5 });
    loop.enable();
    await paced(app.ingest.grpcPort, lat.batches, 50, rate);
    await idleWithin(app, rate * seconds);
    const cpu = process.cpuUsage(cpu0);
    const pauses = gc.stop();
    loop.disable();
    await verifyStored(app.db, { what: 'embedded, latency', spans: warm.spans + lat.spans, ids });
    latencies.sort((a, b) => a - b);
    const st = app.bus.stats ?? { syncs: 0, syncMs: 0, syncMaxMs: 0 };
    return {
      windows: config.NEATROOTS_WINDOWS, database: DB, rate, seconds, p50_ms: percentile(latencies, 50), p90_ms: percentile(latencies, 90), p99_ms: percentile(latencies, 99), max_ms: latencies[latencies.length - 1], samples: latencies.length,
      bus_fsync_avg_ms: st.syncs ? +(st.syncMs / st.syncs).toFixed(1) : 0, bus_fsync_max_ms: Math.round(st.syncMaxMs),
      bus_write_max_ms: +(st.writeMaxMs ?? 0).toFixed(1), load_average: +((load0 + os.loadavg()[0]) / 2).toFixed(2),
      // The process's CPU over the measured seconds (others' jobs move wall time, far less this).
      cpu_s: +((cpu.user + cpu.system) / 1e6).toFixed(2),
      bus_mb_written: app.bus.stats ? +(app.bus.stats.bytesWritten / 1e6).toFixed(1) : 0,
      ...(await journalRecords(app)),
      // The collector's pauses of the process over the measured seconds: what a finding may wait behind.
      ...pauses,
      loop_delay_p99_ms: +(loop.percentile(99) / 1e6).toFixed(1), loop_delay_max_ms: +(loop.max / 1e6).toFixed(1),
    };
  } finally {
    await app?.close();
    fs.rmSync(home, { recursive: true, force: true });
  }
}

module.exports = { benchE2e, buildBatches, send, paced, latencyOnly, v1Ceiling, otlpStored, mainThreadCpuMs, verifyStored, full };

const USAGE = {
  usage: `
usage: node bench/e2e.js [SPANS] [--variant NAME] [--memory-db]
       node bench/e2e.js --latency [--rate N] [--seconds N] [--memory-db]
  SPANS          spans of the throughput runs (default 200000)
  --variant NAME one configuration alone, for a profile: default, memory-windows, memory-bus, memory-db
  --memory-db    PGlite in memory for the whole run (the default: in the data folder)
  --latency      receipt to finding alone, at --rate spans/s (default 5000) for --seconds (default 6)
  --help         this text
  BENCH_DEADLINE_S: how long a wait for the pipeline may take (default: a minute plus 5 ms a span)`,
  options: {
    variant: { oneOf: ['default', 'memory-windows', 'memory-bus', 'memory-db'] },
    'memory-db': { type: 'boolean' },
    latency: { type: 'boolean' },
    rate: { count: true },
    seconds: { count: true },
  },
  positionals: [{ name: 'spans', count: true }],
  check: (v) => (v.latency
    ? (v.spans || v.variant ? 'SPANS and --variant are for the throughput runs, not --latency' : undefined)
    : (v.rate || v.seconds ? '--rate and --seconds go with --latency' : undefined)),
};

// The embedded app runs in this process: with the node flags `neatroots start` runs it with.
// The command line is checked first: a bad one (or --help) ends here, before any relaunch.
const args = require.main === module ? require('./args').cli(USAGE) : undefined;
if (args && require('./server-flags').asServer()) {
  const run = args.latency ? latencyOnly({ rate: args.rate ?? 5000, seconds: args.seconds ?? 6 }) : benchE2e({ spans: args.spans ?? 200_000, variant: args.variant });
  run.then((r) => console.log(JSON.stringify(r, null, 2)), (e) => {
    console.error(e);
    process.exit(1);
  });
}
