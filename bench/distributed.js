'use strict';
// The distributed deployment on this machine's real Kafka, Redis and Postgres: ingest,
// rule-engine, review and question each their own process (neatroots serve --target ...;
// the question service answers with the fast classifier, no model configured). Prints
// spans/s from the first export until the rule engine consumed everything, and p50/p99
// latency from a span's receipt at ingest to its finding on the findings topic, at a steady
// 2,000 spans/s (`--latency-rate N`), with what each process spent meanwhile in cores.
// Each throughput figure is beside a ceiling of its own protocol, exports and concurrency,
// measured in the same run with the services up: the neatroots.v1 rows (4 connections x 8
// exports in flight each) beside a null neatroots.v1 receiver taking the same ExportRequests
// the same way; then the OTLP ceiling's own workload (bench/ceiling.js workload(): OTel SDK
// spans over OTLP/gRPC, 8 in flight over 2 connections) sent into the same deployment until
// everything is stored, beside that OTLP ceiling (`--no-otlp` leaves that phase out).
// Each service's peak resident memory (the kernel's high-water mark) is reported too, with its
// V8 heap and external memory (Buffers) when its resident size was highest; `--backlog` starts
// the rule engine on a full events topic and the question service on a full questions topic.
// `--cap` runs each service under the chart's memory limit for it (a cgroup), as in its pod.
//   node bench/distributed.js 100000 [--no-question] [--no-otlp] [--backlog] [--cap [--values FILE]] [--per-run N] [--latency-rate N]
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');
const { performance } = require('node:perf_hooks');
const { KafkaBus, deleteKafkaTopics, openPostgres, scratchDatabase } = require('@neatroots/platform');
const { serverNodeFlags } = require('neatroots/dist/relaunch');
const { makeTopics } = require('@neatroots/messages');
const { extraChecksYaml, percentile } = require('./checks');
const { buildBatches, send, paced, v1Ceiling, verifyStored } = require('./e2e');
const { benchCeiling, busItems, workload } = require('./ceiling');
const { grpcCaller, pump } = require('./otlp');
const { deadlineMs, waitFor, waitUntil } = require('./wait');
const { chartCaps, memoryCap } = require('./cgroup');

const CLI = path.resolve(__dirname, '../packages/neatroots/bin/neatroots.js');
const KEY = 'bench-key';

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

/** CPU seconds (user + system) a process has used so far (Linux /proc; undefined elsewhere). */
function cpuSeconds(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return undefined;
  }
}

/**
 * The local backing services (deploy/local/services: their pid files) and, for Postgres, its
 * connection processes: their CPU is on the same two cores. Empty when they run elsewhere.
 */
function servicePids() {
  const dir = process.env.NEATROOTS_SERVICES_DIR ?? path.join(os.homedir(), '.cache/neatroots-services');
  const read = (f) => {
    try {
      return Number(fs.readFileSync(f, 'utf8').split('\n')[0].trim()) || undefined;
    } catch {
      return undefined;
    }
  };
  let pg;
  try {
    for (const v of fs.readdirSync(path.join(dir, 'postgres'))) pg ??= read(path.join(dir, 'postgres', v, 'data', 'postmaster.pid'));
  } catch {}
  const out = { kafka: read(path.join(dir, 'kafka', 'kafka.pid')), redis: read(path.join(dir, 'redis', 'redis.pid')), postgres: pg };
  return Object.fromEntries(Object.entries(out).filter(([, v]) => v));
}

/** CPU seconds of a process and its children (Postgres: one process per connection). */
function treeCpuSeconds(pid) {
  let sum = cpuSeconds(pid) ?? 0;
  try {
    for (const d of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try {
        const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
        if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) sum += cpuSeconds(Number(d)) ?? 0;
      } catch {}
    }
  } catch {}
  return sum;
}

/** A process's resident memory now and its peak so far (VmRSS, VmHWM), in bytes; undefined once it has exited. */
function rssOf(pid) {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k) => Number(new RegExp(`${k}:\\s+(\\d+) kB`).exec(status)?.[1] ?? NaN) * 1024;
    return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
  } catch {
    return undefined;
  }
}

/**
 * What each service holds in memory: every `everyMs` its resident size, and when that is the
 * highest yet, its /metrics' V8 heap (used, and the total V8 holds) and external memory
 * (Buffers: Kafka fetches, decompressed batches): what the peak is made of. The peak itself is
 * the kernel's high-water mark (VmHWM), which no sample misses.
 */
function memorySampler(byTarget, admins, cgroups = {}, everyMs = 500) {
  const peaks = {};
  // A capped service is its cgroup's processes (the command and the server it relaunched as): summed.
  const usage = (t, p) => {
    if (!cgroups[t]) return rssOf(p.pid);
    let pids = [];
    try {
      pids = fs.readFileSync(path.join(cgroups[t].dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
    } catch {}
    const each = pids.map(rssOf).filter(Boolean);
    return each.length ? { rss: each.reduce((a, m) => a + m.rss, 0), hwm: each.reduce((a, m) => a + m.hwm, 0) } : undefined;
  };
  let busy = false;
  const sample = async () => {
    if (busy) return;
    busy = true;
    try {
      await Promise.all(Object.entries(byTarget).map(async ([t, p]) => {
        const now = usage(t, p);
        if (!now) return;
        const peak = (peaks[t] ??= { rss: 0, hwm: 0 });
        peak.hwm = Math.max(peak.hwm, now.hwm);
        if (now.rss <= peak.rss) return;
        peak.rss = now.rss;
        const port = admins[t];
        if (!port) return;
        try {
          const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
          const read = (name) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
          Object.assign(peak, {
            heapUsed: read('neatroots_nodejs_heap_size_used_bytes'),
            heapTotal: read('neatroots_nodejs_heap_size_total_bytes'),
            external: read('neatroots_nodejs_external_memory_bytes'),
          });
        } catch {}
      }));
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(sample, everyMs);
  const mb = (b) => (Number.isFinite(b) ? Math.round(b / 1048576) : undefined);
  return {
    stop() {
      clearInterval(timer);
      for (const [t, p] of Object.entries(byTarget)) {
        const now = usage(t, p);
        if (now && peaks[t]) peaks[t].hwm = Math.max(peaks[t].hwm, now.hwm);
        const c = cgroups[t];
        if (c && peaks[t]) Object.assign(peaks[t], { cap: c.bytes, cgroupPeak: c.peak(), oomKills: c.oomKills() });
      }
    },
    /**
     * Per service: the peak resident MB (a capped service's processes summed), the heap and
     * external MB at the highest sample, and when capped its cap, the cgroup's own peak (page
     * cache included) and the kernel's OOM kills there.
     */
    report: () => Object.fromEntries(Object.entries(peaks).map(([t, p]) => [t, {
      rss_peak_mb: mb(p.hwm), sampled_rss_mb: mb(p.rss), heap_used_mb: mb(p.heapUsed), heap_total_mb: mb(p.heapTotal), external_mb: mb(p.external),
      ...(p.cap ? { cap_mb: mb(p.cap), cgroup_peak_mb: mb(p.cgroupPeak), oom_kills: p.oomKills } : {}),
    }])),
  };
}

/** The bench's services by admin port, for what a failed read says. */
const serviceOf = new Map();

/** A process's /metrics, summed over the lines of `name` with every one of `labels`; 10 s at most. */
async function metric(port, name, labels) {
  let text;
  try {
    text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
  } catch (e) {
    const who = serviceOf.get(port) ?? `the process on admin port ${port}`;
    throw new Error(e?.name === 'TimeoutError' ? `${who}'s /metrics did not answer within 10 s` : `${who}'s /metrics: ${e.message}`);
  }
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(name) && labels.every((l) => line.includes(l))) sum += Number(line.split(' ').pop());
  return sum;
}

/**
 * Waits until the question service has stopped taking tasks (the throughput phase's answered)
 * for a second, at most 60 s; without it, a second. Returns how long it waited.
 */
async function settle(questionAdmin, signal) {
  const t0 = performance.now();
  if (questionAdmin) {
    let last = -1;
    let still = 0;
    while (still < 2 && performance.now() - t0 < 60_000) {
      signal?.throwIfAborted();
      const taken = await metric(questionAdmin, 'neatroots_question_tasks_total', []);
      still = taken === last ? still + 1 : 0;
      last = taken;
      await new Promise((r) => setTimeout(r, 500));
    }
  } else await new Promise((r) => setTimeout(r, 1000));
  return Math.round(performance.now() - t0);
}

/** The command that sets the services' variables for the local ones (deploy/local/services). */
const SERVICES_ENV = 'eval "$(deploy/local/services env)"';

/** An error in the services' setting, not in the bench: said in a line, without a stack trace. */
function setupError(message) {
  return Object.assign(new Error(message), { setup: true });
}

/** A connection URL with its password hidden, for a message. */
function redacted(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(not a URL)';
  }
}

/** Resolves to why `host`:`port` takes no TCP connection within `ms`, or undefined when it does. */
function unreachable(host, port, ms = 5_000) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    const done = (why) => {
      s.destroy();
      resolve(why);
    };
    s.setTimeout(ms, () => done(`no answer within ${ms / 1000} s`));
    s.once('connect', () => done(undefined));
    s.once('error', (e) => done(e.code ? `${e.code}` : e.message));
  });
}

/**
 * Before anything starts: Kafka (any of its brokers), Redis and Postgres each take a connection,
 * or the run stops naming every one that does not, the variable it came from, and the command
 * that sets them for the local services (a service that cannot reach them exits with a stack
 * trace, and the bench said only "review exited").
 */
async function preflight(env) {
  const hostPort = (s, port) => {
    const m = /^\[?([^\]]+?)\]?(?::(\d+))?$/.exec(s.trim());
    return m ? [m[1], Number(m[2] ?? port)] : undefined;
  };
  const fromUrl = (url, port) => {
    try {
      const u = new URL(url);
      return u.hostname ? [u.hostname.replace(/^\[|\]$/g, ''), Number(u.port || port)] : undefined;
    } catch {
      return undefined;
    }
  };
  const failed = [];
  const brokers = env.NEATROOTS_KAFKA_BROKERS.split(',').map((b) => b.trim()).filter(Boolean);
  const kafka = await Promise.all(brokers.map((b) => (hostPort(b, 9092) ? unreachable(...hostPort(b, 9092)) : Promise.resolve('not host:port'))));
  if (kafka.every(Boolean)) failed.push(`Kafka at NEATROOTS_KAFKA_BROKERS (${brokers.map((b, i) => `${b}: ${kafka[i]}`).join(', ')})`);
  for (const [name, variable, port] of [['Redis', 'NEATROOTS_REDIS_URL', 6379], ['Postgres', 'NEATROOTS_PG_URL', 5432]]) {
    // a socket path (no host in the URL) is left to the connection itself
    const at = fromUrl(env[variable], port);
    const why = at ? await unreachable(...at) : undefined;
    if (why) failed.push(`${name} at ${variable} (${redacted(env[variable])}): ${why}`);
  }
  if (failed.length) throw setupError(`cannot reach ${failed.join('; ')}. For the local services: ${SERVICES_ENV}`);
}

/**
 * Ends a service: SIGTERM (and SIGCONT, so a stopped one takes it), then SIGKILL if it has not
 * exited within `graceMs`; resolves once it has exited.
 */
function end(p, name, graceMs = 10_000) {
  return new Promise((resolve) => {
    if (p.exitCode !== null || p.signalCode !== null) return resolve();
    const kill = setTimeout(() => {
      process.stderr.write(`bench: ${name} still running ${graceMs / 1000} s after SIGTERM: SIGKILL\n`);
      p.kill('SIGKILL');
    }, graceMs);
    p.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    p.kill('SIGTERM');
    p.kill('SIGCONT');
  });
}

/**
 * `env`: settings of the services for this run (NEATROOTS_BUS_PACK=off: one Kafka record per span, the baseline).
 * `otlp`: also the OTLP phase (`work`: the OTLP ceiling's workload, built here when not given).
 */
async function benchDistributed({ spans = 200_000, perRun = 100, batch = 500, latencyRate = 2000, question = true, env: extra = {}, otlp = true, work, backlog = false, caps } = {}) {
  const env0 = process.env;
  const missing = ['NEATROOTS_KAFKA_BROKERS', 'NEATROOTS_REDIS_URL', 'NEATROOTS_PG_URL'].filter((k) => !env0[k]);
  // npm run bench skips the distributed rows then; run alone, the bench fails with this (below)
  if (missing.length) return { skipped: `${missing.join(', ')} not set: the distributed deployment needs Kafka, Redis and Postgres; for the local services: ${SERVICES_ENV}` };
  await preflight(env0);
  const prefix = `bench${Date.now().toString(36)}`;
  const procs = [];
  const byTarget = {};
  // Aborted when a service exits before the bench is over, or on SIGINT/SIGTERM: every wait ends then, with its reason.
  const stop = new AbortController();
  let stopping = false;
  let dbMade;
  let home;
  let bus;
  let subs = [];
  let redis;
  let pg;
  let cleaning;
  let memory;
  // each capped service's cgroup (`caps`)
  const cgroups = {};
  /**
   * What the bench leaves nothing of, whichever way it ends (done, failed, interrupted): its
   * services (each awaited, SIGKILL after 10 s), its Kafka client, the temp folder, the topics
   * and the scratch database. Once, however often asked.
   */
  const cleanup = () => (cleaning ??= (async () => {
    stopping = true;
    memory?.stop();
    const failed = [];
    const step = async (what, fn) => {
      try {
        await fn();
      } catch (e) {
        failed.push(`${what}: ${e.message}`);
      }
    };
    await Promise.all(procs.map((p) => end(p, Object.keys(byTarget).find((t) => byTarget[t] === p))));
    for (const sub of subs) await step('closing a subscription', () => sub.close());
    await step('closing the Kafka client', async () => bus?.close());
    redis?.disconnect();
    await step('closing the connection to the scratch database', async () => pg?.close());
    for (const c of Object.values(cgroups)) c.remove();
    if (home) fs.rmSync(home, { recursive: true, force: true });
    await step(`deleting the topics ${prefix}.*`, () => deleteKafkaTopics(env0.NEATROOTS_KAFKA_BROKERS.split(','), prefix));
    // awaited even when still being made (an interrupt during its CREATE DATABASE)
    await step(`dropping the database ${prefix}`, async () => (await dbMade?.catch(() => undefined))?.drop());
    if (failed.length) process.stderr.write(`bench: cleaning up left something behind:\n${failed.map((f) => `- ${f}`).join('\n')}\n`);
  })());
  // Interrupted (Ctrl-C, kill, a job's timeout): the same cleanup, then exit 128 + the signal's
  // number. A second signal ends the process at once (the handlers are gone by then).
  const onSignal = (sig) => {
    process.stderr.write(`bench: ${sig}: stopping the services, removing the temp folder, topics and scratch database (${sig} again to end at once)\n`);
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    stop.abort(new Error(`interrupted (${sig})`));
    cleanup().finally(() => process.exit(128 + os.constants.signals[sig]));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    return await run();
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    await cleanup();
  }

  async function run() {
    // A database of the bench's own (dropped after): the shared one holds what tests and earlier
    // runs left, which the figures should not depend on.
    dbMade = scratchDatabase(env0.NEATROOTS_PG_URL, prefix).catch((e) => {
      throw setupError(`Postgres at NEATROOTS_PG_URL (${redacted(env0.NEATROOTS_PG_URL)}): cannot make the scratch database ${prefix}: ${e.message}`);
    });
    const db = await dbMade;
    stop.signal.throwIfAborted();
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-bench-'));
    fs.mkdirSync(path.join(home, 'checks'));
    fs.writeFileSync(path.join(home, 'checks', 'bench.yaml'), extraChecksYaml());
    const grpcPort = await freePort();
    const reviewPort = await freePort();
    const questionPort = await freePort();
    const otlpPort = await freePort();
    const env = {
      ...env0, NEATROOTS_HOME: home, NEATROOTS_TOPIC_PREFIX: prefix, NEATROOTS_PARTITIONS: '6',
      NEATROOTS_API_KEYS: `bench=${KEY}`, NEATROOTS_GRPC_PORT: String(grpcPort), NEATROOTS_OTLP_PORT: String(otlpPort), NEATROOTS_OTLP_HTTP_PORT: '0',
      NEATROOTS_REVIEW_ADDR: `127.0.0.1:${reviewPort}`, NEATROOTS_QUESTION_ADDR: `127.0.0.1:${questionPort}`, NEATROOTS_PG_URL: db.url, KAFKAJS_NO_PARTITIONER_WARNING: '1', ...extra,
    };
    const deadline = deadlineMs(spans);
    // Each service's admin port, and what each holds in memory from its start to the end.
    const admins = {};
    memory = memorySampler(byTarget, admins, cgroups);
    const start = async (target, servicePort) => {
      const admin = await freePort();
      // BENCH_PROFILE=<target> writes a CPU profile of that service to /tmp/neatroots-bench-prof;
      // BENCH_HEAP=<target> gives it an old generation of BENCH_HEAP_MB (default 256) and writes a
      // heap snapshot there as it nears it (what holds its memory: a heap it cannot hold exits).
      const heapMb = Number(process.env.BENCH_HEAP_MB ?? 256);
      const prof = process.env.BENCH_PROFILE === target
        ? ['--cpu-prof', '--cpu-prof-dir=/tmp/neatroots-bench-prof']
        : process.env.BENCH_HEAP === target ? ['--heapsnapshot-near-heap-limit=1', `--max-old-space-size=${heapMb}`, '--diagnostic-dir=/tmp/neatroots-bench-prof'] : [];
      if (prof.length) fs.mkdirSync('/tmp/neatroots-bench-prof', { recursive: true });
      const port = servicePort ?? (await freePort());
      // interrupted meanwhile: the cleanup has begun, and would not end a service started now
      stop.signal.throwIfAborted();
      const own = { ...env, NEATROOTS_ADMIN_PORT: String(admin), NEATROOTS_SERVICE_PORT: String(port), NEATROOTS_REVIEW_PORT: String(reviewPort), NEATROOTS_QUESTION_PORT: String(questionPort) };
      // Capped (`caps`): started as the image starts it (the command relaunches itself with the
      // server's flags), with the chart's variables for it (NODE_OPTIONS), in a cgroup holding
      // the chart's memory limit: the process and its server, as in the pod.
      const cap = caps?.[target];
      if (cap) cgroups[target] = memoryCap(`${prefix}-${target}`, cap.bytes);
      const [file, argv] = cap
        ? cgroups[target].command(process.execPath, [CLI, 'serve', '--target', target])
        : [process.execPath, [...prof, ...serverNodeFlags(), CLI, 'serve', '--target', target]];
      const p = spawn(file, argv, { env: cap ? { ...own, ...cap.env } : own, stdio: ['ignore', 'ignore', 'inherit'] });
      procs.push(p);
      byTarget[target] = p;
      serviceOf.set(admin, target);
      p.once('exit', (code, signal) => {
        if (stopping) return;
        const c = cgroups[target];
        const killed = c?.oomKills()
          ? `: killed by the kernel at its memory cap of ${Math.round(c.bytes / 1048576)} MB`
          : c && code === 134 ? `: node's heap ran out under the cap of ${Math.round(c.bytes / 1048576)} MB (${caps[target].env.NODE_OPTIONS ?? "node's own heap size"})` : '';
        stop.abort(new Error(`${target} exited (${signal ?? `code ${code}`}${killed}) before the bench was over (its log is above)`));
      });
      admins[target] = admin;
      const t0 = Date.now();
      for (;;) {
        stop.signal.throwIfAborted();
        try {
          if ((await fetch(`http://127.0.0.1:${admin}/readyz`, { signal: AbortSignal.timeout(5_000) })).ok) return admin;
        } catch {}
        if (Date.now() - t0 > 180_000) throw new Error(`${target} not ready after 180 s (its log is above)`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const reviewAdmin = await start('review', reviewPort);
    // The question service answers the tasks the rule engine's scheduler publishes (no model
    // configured: the fast classifier, as on a fresh install); --no-question leaves it out.
    // With `backlog` the rule engine starts once every span is on the events topic, and the
    // question service once the rule engine has consumed them all: each faces the whole
    // backlog at once, as after a stop or a restart (what its memory is bounded by).
    let questionAdmin = question && !backlog ? await start('question', questionPort) : undefined;
    await start('ingest');
    let engineAdmin = backlog ? undefined : await start('rule-engine');
    const built = buildBatches({ spans, perRun, batch });
    const total = built.spans + 2 * Math.ceil(spans / perRun);
    const topics = makeTopics(prefix);
    bus = new KafkaBus({ brokers: env.NEATROOTS_KAFKA_BROKERS.split(','), clientId: 'bench', logLevel: 'error' });
    let latencies = null;
    // Every finding published, as the bench's own group reads the topic: records, and distinct ids
    // (a finding's events upsert one row), to count review's and the stored ones against.
    const seen = { records: 0, ids: new Set() };
    const sub = await bus.subscribe(topics.findings, { group: `${prefix}.bench-latency`, fromBeginning: true }, async (b) => {
      const now = Date.now();
      seen.records += b.records.length;
      for (const r of b.records) seen.ids.add(r.value.id);
      // Rule findings (question findings wait for a model); requires_before waits 250 ms by design, so it is left out.
      if (latencies) for (const r of b.records) if (r.value.status === 'raised' && r.value.kind === 'rule' && r.value.received_ms && r.value.check_id !== 'bench-refund-lookup') latencies.push(now - r.value.received_ms);
    });
    const hop1 = [];
    let measureHop1 = false;
    subs.push(sub);
    const sub1 = process.env.BENCH_HOP1 ? await bus.subscribe(topics.events, { group: `${prefix}.bench-hop1`, fromBeginning: false }, async (b) => {
      const now = Date.now();
      if (measureHop1) for (const r of b.records) hop1.push(now - r.value.received_ms);
    }) : undefined;
    if (sub1) subs.push(sub1);
    // Throughput: everything at once, done when the rule engine consumed every item.
    const infra = servicePids();
    const cpu = () => ({
      ...Object.fromEntries(Object.entries(byTarget).map(([t, p]) => [t, cpuSeconds(p.pid)])),
      ...Object.fromEntries(Object.entries(infra).map(([t, pid]) => [t, treeCpuSeconds(pid)])),
      bench: ((u) => (u.user + u.system) / 1e6)(process.cpuUsage()),
    });
    // Redis's own byte counts: what the rule engine's windows cost the network each batch.
    const { Redis } = require('ioredis');
    redis = new Redis(env.NEATROOTS_REDIS_URL);
    const redisBytes = async () => {
      const info = await redis.info('stats');
      const get = (k) => Number(new RegExp(`${k}:(\\d+)`).exec(info)?.[1] ?? NaN);
      return { in: get('total_net_input_bytes'), out: get('total_net_output_bytes') };
    };
    // The ceiling of the neatroots.v1 rows: the same ExportRequests, 4 connections x `inflight` each.
    const inflight = Number(process.env.BENCH_INFLIGHT ?? 8);
    const v1Ceil = await v1Ceiling(built.batches, built.spans, { conns: 4, inflight });
    const bytes0 = await redisBytes();
    const cpu0 = cpu();
    const t0 = performance.now();
    await send(grpcPort, built.batches, { key: KEY, conns: 4, inflight });
    // Baseline in the same run: every export acknowledged, so every span published to Kafka.
    const ingestMs = performance.now() - t0;
    engineAdmin ??= await start('rule-engine');
    const consumed = () => metric(engineAdmin, 'neatroots_bus_consumed_total', [`${prefix}.events`]);
    const within = { ms: deadline, signal: stop.signal };
    await waitFor('the rule engine consumed items', consumed, total, within);
    if (question && !questionAdmin) questionAdmin = await start('question', questionPort);
    const ms = performance.now() - t0;
    // Everything stored too: review has consumed (stored) every item of the events topic.
    const stored = () => metric(reviewAdmin, 'neatroots_bus_consumed_total', [`${prefix}.events`]);
    await waitFor('review consumed (stored) items', stored, total, within);
    // and the findings: review's findings group has consumed what the bench's own group has read
    // of the topic, on two reads in a row (none arriving in between)
    const reviewFindings = () => metric(reviewAdmin, 'neatroots_bus_consumed_total', [`topic="${prefix}.findings"`]);
    const findingsStored = (opts) => {
      let last;
      return waitUntil('review consumed (stored) the findings published', async () => {
        const now = [await reviewFindings(), seen.records];
        const done = now[0] === now[1] && last?.[0] === now[0] && last?.[1] === now[1];
        last = now;
        return { done, state: `${now[0]} of the ${now[1]} the bench read` };
      }, opts);
    };
    await findingsStored(within);
    const storedMs = performance.now() - t0;
    // The question tasks the question service had taken by then (it may still be answering: its CPU seconds are counted to here).
    const tasksTaken = questionAdmin ? await metric(questionAdmin, 'neatroots_question_tasks_total', []) : null;
    // Each service's CPU seconds from the first export until everything was stored.
    const cpu1 = cpu();
    const bytes1 = await redisBytes();
    redis.disconnect();
    redis = undefined;
    const cpuS = Object.fromEntries(Object.keys(cpu1).map((t) => [t, cpu1[t] === undefined ? undefined : Number((cpu1[t] - cpu0[t]).toFixed(2))]));
    // Latency: a steady stream at a rate the deployment sustains, once the throughput phase's
    // work is done. Stored is not idle: the question service may still be answering that phase's
    // tasks (and review storing the answers), and a latency phase begun then measured the
    // backlog as much as the rate (p50 367 ms against 211 after it, in one pair).
    const settled = await settle(questionAdmin, stop.signal);
    // Stored is counted, not taken on trust: every span sent, every finding published.
    pg = await openPostgres({ url: db.url, max: 1 });
    const check = async (what, n) => {
      await findingsStored({ ...within, ms: 60_000 });
      return verifyStored(pg, { what, spans: n, ids: seen.ids });
    };
    const storedCount = await check('distributed', built.spans);
    // The OTLP phase: the OTLP ceiling's own exports (OTel SDK spans, the same bodies and exports
    // in flight) into the same deployment until review has stored every item ingest published,
    // beside that ceiling measured now, with the services up.
    let otlpRow;
    if (otlp) {
      work ??= workload({ spans: Math.min(spans, 100_000) });
      const ceiling = await benchCeiling({ work });
      // the records on the events topic: its spans and the run events ingest derives
      const items = busItems(work);
      const s0 = await stored();
      const tO = performance.now();
      const caller = grpcCaller(otlpPort);
      await pump(work.bodies, caller.call, work.inflight);
      caller.close();
      const oWithin = { ms: deadlineMs(work.spans), signal: stop.signal };
      await waitFor('review consumed (stored) the OTLP phase\'s items', async () => (await stored()) - s0, items, oWithin);
      await findingsStored(oWithin);
      const oMs = performance.now() - tO;
      const rate = Math.round(work.spans / (oMs / 1000));
      otlpRow = {
        protocol: work.protocol, spans: work.spans, batch: work.batch, connections: work.connections, exports_in_flight: work.inflight,
        otlp_ceiling: ceiling, stored_spans_per_s: rate, stored_share_of_otlp_ceiling: +(rate / ceiling.spans_per_s).toFixed(3),
      };
      await settle(questionAdmin, stop.signal);
      otlpRow.stored_counted = await check('distributed, after the OTLP phase', built.spans + work.spans);
    }
    await pg.close();
    pg = undefined;
    // What each process spends with nothing sent (timers, heartbeats, polls): the floor under
    // the latency phase's cores.
    const idleCpu0 = cpu();
    const idleT0 = performance.now();
    await new Promise((r) => setTimeout(r, 3000));
    const idleCpu1 = cpu();
    const idleS = (performance.now() - idleT0) / 1000;
    const idleCores = Object.fromEntries(Object.keys(idleCpu1).map((t) => [t, idleCpu1[t] === undefined ? undefined : Number(((idleCpu1[t] - idleCpu0[t]) / idleS).toFixed(3))]));
    const lat = buildBatches({ spans: latencyRate * 5, perRun, batch: 50, prefix: 'lat' });
    latencies = [];
    measureHop1 = true;
    const latCpu0 = cpu();
    const latT0 = performance.now();
    await paced(grpcPort, lat.batches, 50, latencyRate, KEY);
    // What each process spent at that rate, in cores: near 2 in all, the machine is saturated and
    // the delay is queueing for CPU, not a wait in the pipeline.
    const latCpu1 = cpu();
    const latS = (performance.now() - latT0) / 1000;
    const latCores = Object.fromEntries(Object.keys(latCpu1).map((t) => [t, latCpu1[t] === undefined ? undefined : Number(((latCpu1[t] - latCpu0[t]) / latS).toFixed(2))]));
    await new Promise((r) => setTimeout(r, 2000));
    // a service that exited during the latency phase leaves its figures short: not a result
    stop.signal.throwIfAborted();
    await sub.close();
    if (sub1) {
      await sub1.close();
      hop1.sort((a, b) => a - b);
      console.error('ingest receipt -> events topic consumer: p50', percentile(hop1, 50), 'p99', percentile(hop1, 99), 'n', hop1.length);
    }
    subs = [];
    await bus.close();
    bus = undefined;
    latencies.sort((a, b) => a - b);
    memory.stop();
    return {
      spans: built.spans,
      // the ceiling of the neatroots.v1 rows: a null receiver taking the same exports, 4 connections x 8 in flight each
      neatroots_v1_ceiling: v1Ceil,
      baseline_ingest_to_kafka_spans_per_s: Math.round(built.spans / (ingestMs / 1000)),
      spans_per_s: Math.round(built.spans / (ms / 1000)),
      stored_spans_per_s: Math.round(built.spans / (storedMs / 1000)),
      stored_wall_s: Number((storedMs / 1000).toFixed(2)),
      per_run: perRun,
      question_service: question,
      question_tasks_taken_when_stored: tasksTaken,
      // counted in the database once the question service had settled: as many as sent and published
      stored_counted: storedCount,
      cpu_seconds: cpuS,
      redis_mb_in_out: [bytes1.in - bytes0.in, bytes1.out - bytes0.out].map((b) => Number((b / 1e6).toFixed(1))),
      load_average: os.loadavg().map((l) => Number(l.toFixed(1))),
      latency_at_spans_per_s: latencyRate,
      receipt_to_finding_p50_ms: percentile(latencies, 50),
      receipt_to_finding_p99_ms: percentile(latencies, 99),
      latency_samples: latencies.length,
      latency_settled_ms: settled,
      latency_phase_cpu_cores: latCores,
      idle_cpu_cores: idleCores,
      latency_phase_cpu_cores_total: Number(Object.values(latCores).reduce((a, b) => a + (b ?? 0), 0).toFixed(2)),
      stored_share_of_v1_ceiling: +(built.spans / (storedMs / 1000) / v1Ceil.spans_per_s).toFixed(3),
      ...(otlpRow ? { otlp: otlpRow } : {}),
      backlog,
      // each service's peak resident memory, and its heap and external memory at the highest sample
      memory: memory.report(),
    };
  }
}

module.exports = { benchDistributed, end };

if (require.main === module) {
  const args = require('./args').cli({
    usage: `
usage: node bench/distributed.js [SPANS] [--no-question] [--no-otlp] [--backlog] [--cap [--values FILE]] [--per-run N] [--latency-rate N]
  (with the services' environment: eval "$(deploy/local/services env)")
  SPANS              spans of the neatroots.v1 throughput phase (default 200000)
  --no-question      no question service (as before 2026-12-02)
  --no-otlp          no OTLP phase (the OTLP ceiling's own workload, until stored)
  --per-run N        spans a run (default 100); long runs show what a window's size costs each batch
  --latency-rate N   spans/s of the latency phase (default 2000)
  --backlog          the rule engine starts once every span is on the events topic, the question
                     service once the rule engine consumed them: each takes a backlog at once
  --cap              each service in a memory cgroup of the chart's memory limit for it, started as
                     the image starts it with the chart's variables for it (helm template of
                     helm/neatroots; needs helm and root): exits 1 when one is killed for
                     memory or runs out of heap; the peaks are in the output's "memory"
  --values FILE      with --cap: a values file for the chart (its limits, its services' env)
  --help             this text
  BENCH_DEADLINE_S: how long a wait for the services may take (default: a minute plus 5 ms a span)`,
    options: { 'no-question': { type: 'boolean' }, 'no-otlp': { type: 'boolean' }, backlog: { type: 'boolean' }, cap: { type: 'boolean' }, values: {}, 'per-run': { count: true }, 'latency-rate': { count: true } },
    positionals: [{ name: 'spans', count: true }],
  });
  let caps;
  try {
    if (args.cap) caps = chartCaps(args.values);
    else if (args.values) throw new Error('--values is for --cap');
    if (caps) memoryCap(`bench-probe-${process.pid}`, 1 << 30).remove();
  } catch (e) {
    process.stderr.write(`bench/distributed.js: ${e.message}\n`);
    process.exit(2);
  }
  benchDistributed({
    spans: args.spans ?? 200_000, question: !args['no-question'], otlp: !args['no-otlp'], backlog: !!args.backlog,
    ...(caps ? { caps } : {}),
    ...(args['per-run'] ? { perRun: args['per-run'] } : {}), ...(args['latency-rate'] ? { latencyRate: args['latency-rate'] } : {}),
  }).then((r) => {
    // run alone, a skipped run is a failure: nothing was measured
    if (r.skipped) {
      process.stderr.write(`bench/distributed.js: ${r.skipped}\n`);
      process.exit(1);
    }
    console.log(JSON.stringify(r, null, 2));
  }, (e) => {
    if (e?.setup) process.stderr.write(`bench/distributed.js: ${e.message}\n`);
    else console.error(e);
    process.exit(1);
  });
}
