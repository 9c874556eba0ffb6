'use strict';
// Tests of the bench scripts themselves (not the product): how they report and how they fail.
// jest's projects do not pick up bench/; run them with node's own runner:
//   node --test bench/
const { test } = require('node:test');
const assert = require('node:assert/strict');

test('every share in the table is against the ceiling of its own protocol, exports and concurrency', () => {
  const { report } = require('./run');
  const otlpCeiling = { protocol: 'OTLP/gRPC', spans: 100_000, batch: 500, connections: 2, exports_in_flight: 8, spans_per_s: 100_000 };
  const v1Ceiling = { protocol: 'neatroots.v1', connections: 2, exports_in_flight: 8, spans_per_s: 200_000 };
  const { rows, broken } = report({
    ceiling: otlpCeiling,
    embedded: {
      neatroots_v1_ceiling: v1Ceiling, baseline_ingest_only_spans_per_s: 150_000, spans_per_s: 20_000, stored_spans_per_s: 10_000,
      memory_bus_spans_per_s: 30_000, memory_bus_stored_spans_per_s: 16_000, memory_windows_stored_spans_per_s: 12_000,
      latency_at_spans_per_s: 5000, receipt_to_finding_p50_ms: 3, receipt_to_finding_p99_ms: 20,
      otlp: { protocol: 'OTLP/gRPC', batch: 500, connections: 2, exports_in_flight: 8, stored_spans_per_s: 5_000 },
    },
    otlp: { otlp_grpc_spans_per_s: 50_000 },
  });
  assert.deepEqual(broken, []);
  const row = (start) => rows.find((r) => r[0].startsWith(start));
  // neatroots.v1 rows: shares of the null neatroots.v1 receiver (200,000), not of the OTLP one
  assert.match(row('embedded: neatroots.v1 ingest until everything is stored')[1], /^10000 spans\/s \(0\.050 of the neatroots\.v1 ceiling\)$/);
  assert.match(row('embedded: neatroots.v1 ingest to findings')[2], /ingest only: 150000 spans\/s \(0\.750 of the neatroots\.v1 ceiling\)/);
  // the OTLP rows: shares of the OTLP ceiling (100,000)
  assert.match(row('embedded: OTel SDK spans over OTLP/gRPC until everything is stored')[1], /^5000 spans\/s \(0\.050 of the OTLP\/gRPC ceiling\)$/);
  assert.match(row('ingest: OTel JS SDK spans over OTLP/gRPC')[1], /^50000 spans\/s \(0\.500 of the OTLP\/gRPC ceiling\)$/);
});

test('a baseline above its ceiling is reported as a broken comparison', () => {
  const { report } = require('./run');
  const { broken } = report({
    ceiling: { protocol: 'OTLP/gRPC', batch: 500, connections: 2, exports_in_flight: 8, spans_per_s: 100_000 },
    otlp: { otlp_grpc_spans_per_s: 130_000 },
  });
  assert.equal(broken.length, 1);
  assert.match(broken[0], /ingest, OTLP\/gRPC: 130000 spans\/s is 1\.300 of OTLP\/gRPC ceiling's 100000 spans\/s/);
});

test('a wait that stops progressing ends at its deadline, saying what was done of what', async () => {
  const { waitFor, within } = require('./wait');
  let consumed = 0;
  const read = async () => (consumed < 3 ? ++consumed : consumed);
  await assert.rejects(waitFor('review consumed (stored) items', read, 10, { ms: 300, everyMs: 10 }), /^Error: review consumed \(stored\) items: 3 of 10 after 0 s, the deadline/);
  // a promise that never settles (the bus never idle)
  await assert.rejects(within(new Promise(() => {}), 100, () => 'the embedded bus not idle, records left by topic: bench.events 12'), /the embedded bus not idle, records left by topic: bench\.events 12 after 0 s, the deadline/);
});

test('a wait ends as soon as a service exits, with the reason', async () => {
  const { waitFor } = require('./wait');
  const stop = new AbortController();
  const waiting = waitFor('the rule engine consumed items', async () => 0, 10, { ms: 3_600_000, everyMs: 10, signal: stop.signal });
  stop.abort(new Error('rule-engine exited (SIGKILL) before the bench was over'));
  await assert.rejects(waiting, /rule-engine exited \(SIGKILL\) before the bench was over/);
});

test('a read that fails is tried again until the deadline, which says why the last one failed', async () => {
  const { waitFor } = require('./wait');
  let n = 0;
  const read = async () => {
    if (++n > 2) throw new Error("rule-engine's /metrics did not answer within 10 s");
    return n;
  };
  await assert.rejects(waitFor('the rule engine consumed items', read, 10, { ms: 200, everyMs: 10 }),
    /the rule engine consumed items: 2 of 10 after 0 s, the deadline .*; the last read failed: rule-engine's \/metrics did not answer within 10 s/);
});

test('a service that does not stop on SIGTERM is killed after the grace time, and awaited', async () => {
  const { spawn } = require('node:child_process');
  const { end } = require('./distributed');
  const stubborn = spawn(process.execPath, ['-e', "process.on('SIGTERM', () => {}); console.log('ready'); setInterval(() => {}, 1000)"], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((r) => stubborn.stdout.once('data', r));
  await end(stubborn, 'stubborn', 200);
  assert.equal(stubborn.signalCode, 'SIGKILL');
  // a stopped one (SIGSTOP) takes its SIGTERM: it is continued too
  const stopped = spawn(process.execPath, ['-e', "console.log('ready'); setInterval(() => {}, 1000)"], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((r) => stopped.stdout.once('data', r));
  stopped.kill('SIGSTOP');
  await end(stopped, 'stopped', 60_000);
  assert.equal(stopped.signalCode, 'SIGTERM');
});

test("the main thread's CPU is its CPU time, not its event loop's busy time", { skip: process.platform !== 'linux' && 'reads /proc' }, () => {
  const { performance } = require('node:perf_hooks');
  const { mainThreadCpuMs } = require('./e2e');
  // blocked for 500 ms (as in a system call, or runnable but off a shared core): busy, not on the CPU
  const cpu0 = mainThreadCpuMs();
  const elu0 = performance.eventLoopUtilization();
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500);
  const busyMs = performance.eventLoopUtilization(elu0).active;
  const cpuMs = mainThreadCpuMs() - cpu0;
  assert.ok(busyMs >= 450, `busy ${busyMs} ms`);
  assert.ok(cpuMs < busyMs / 2, `CPU ${cpuMs} ms against busy ${busyMs} ms`);
  // and it does count the CPU the thread spends
  const spin0 = mainThreadCpuMs();
  let x = 0;
  for (let i = 0; i < 3e8; i++) x += i;
  assert.ok(mainThreadCpuMs() - spin0 > 0, String(x));
});

test("the flood fails (exit code 1), after printing its result, when the server's memory went past its ceiling", () => {
  const { report } = require('./flood');
  const result = (peak) => ({ flood: { accepted_spans_per_s: 4510, refused_spans_per_s: 76435 }, memory: { rss_peak_during_flood_mb: peak, ceiling_mb: 1024, under_ceiling: peak < 1024 } });
  const printed = [];
  const warned = [];
  assert.equal(report(result(1129), (s) => printed.push(s), (s) => warned.push(s)), 1);
  assert.deepEqual(JSON.parse(printed[0]), result(1129));
  assert.deepEqual(warned, ["flood: the server's resident memory peaked at 1129 MB, over its 1024 MB ceiling"]);
  printed.length = 0;
  assert.equal(report(result(989), (s) => printed.push(s), (s) => warned.push(s)), 0);
  assert.deepEqual(JSON.parse(printed[0]), result(989));
  assert.equal(warned.length, 1);
});

test("npm run bench fails too (its table printed, then the flood's failure) when the flood's server memory went past its ceiling", () => {
  const { report } = require('./run');
  const flood = (peak) => ({
    flood: { seconds: 60, exports_in_flight: 64, accepted_spans_per_s: 4510, refused_spans_per_s: 76435, accepted_export_p99_ms: 80 },
    baseline_unloaded: { accepted_spans_per_s: 9000, export_p99_ms: 20 },
    memory: { rss_peak_during_flood_mb: peak, ceiling_mb: 1024, under_ceiling: peak < 1024, rss_idle_mb: 300 },
  });
  const over = report({ flood: flood(1129) });
  assert.deepEqual(over.failed, ["flood: the server's resident memory peaked at 1129 MB, over its 1024 MB ceiling"]);
  assert.deepEqual(over.broken, []);
  assert.ok(over.rows.some((r) => r[1] === 'peak 1129 MB (ceiling 1024 MB)'));
  assert.deepEqual(report({ flood: flood(989) }).failed, []);
});

test("a NEATROOTS_HOME or port in the user's shell does not move the soak's and flood's server", () => {
  const { serverEnv } = require('./flood');
  const user = { NEATROOTS_HOME: '/home/me/.neatroots', NEATROOTS_GRPC_PORT: '4317', NEATROOTS_OTLP_PORT: '4318', NEATROOTS_HTTP_PORT: '8080', NEATROOTS_API_KEYS: 'me=secret', NEATROOTS_MAX_BACKLOG: '5000' };
  const env = serverEnv(user, '/tmp/neatroots-flood-x', { otlp: 1001, grpc: 1002, http: 1003 });
  assert.equal(env.NEATROOTS_HOME, '/tmp/neatroots-flood-x');
  assert.deepEqual([env.NEATROOTS_OTLP_PORT, env.NEATROOTS_GRPC_PORT, env.NEATROOTS_HTTP_PORT], ['1001', '1002', '1003']);
  assert.equal(env.NEATROOTS_API_KEYS, 'flood=flood-key');
  // a setting being compared still goes through
  assert.equal(env.NEATROOTS_MAX_BACKLOG, '5000');
});

test('a bad command line gets the usage and exit 2, --help the usage and exit 0, before anything runs', () => {
  const { spawnSync } = require('node:child_process');
  const path = require('node:path');
  const run = (...args) => spawnSync(process.execPath, args, { cwd: path.join(__dirname, '..'), encoding: 'utf8', timeout: 60_000 });
  const help = run('bench/e2e.js', '--help');
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /^usage: node bench\/e2e\.js \[SPANS\]/);
  for (const [args, said] of [
    [['bench/run.js', '--only', 'engin'], /bench\/run\.js: --only: unknown 'engin' \(names: engine, /],
    [['bench/run.js', '--spans'], /bench\/run\.js: Option '--spans <value>' argument missing/],
    [['bench/run.js', '--spans', 'lots'], /--spans: a whole number over 0, not 'lots'/],
    [['bench/engine.js', '--quick', '--spans', '200000'], /bench\/engine\.js: unknown option '--spans'/],
    [['bench/e2e.js', '--latency', '--variant', 'default'], /SPANS and --variant are for the throughput runs, not --latency/],
    [['bench/distributed.js', '20000', '--per-run'], /Option '--per-run <value>' argument missing/],
  ]) {
    const r = run(...args);
    assert.equal(r.status, 2, `${args.join(' ')}: exit ${r.status}\n${r.stdout}${r.stderr}`);
    assert.match(r.stderr, said);
    assert.match(r.stderr, /\nusage: node bench\//);
    assert.equal(r.stdout, '');
  }
});

test('replay, sop, review, precheck and store refuse a bad number or an unknown argument, naming it, with exit 2 before anything runs', async () => {
  const { execFile } = require('node:child_process');
  const path = require('node:path');
  // Before, each read its numbers with Number() and no check: `replay.js abc` and `store.js 20000
  // abc` ran with NaN, `precheck.js --rate -5` started the server, `sop.js` took any argument.
  const run = (args, env = {}) =>
    new Promise((resolve) => {
      execFile(process.execPath, args, { cwd: path.join(__dirname, '..'), env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) =>
        resolve({ status: err ? (err.code ?? null) : 0, signal: err?.signal ?? null, stdout, stderr }),
      );
    });
  const cases = [
    [['bench/replay.js', 'abc'], /^bench\/replay\.js: spans: a whole number over 0, not 'abc'\n/],
    [['bench/replay.js', '100000', '-3'], /^bench\/replay\.js: pairs: a whole number over 0, not '-3'\n/],
    [['bench/replay.js', '100000', '3', '--rate', '5'], /^bench\/replay\.js: unknown option '--rate'\n/],
    [['bench/sop.js', '5'], /^bench\/sop\.js: unexpected argument '5'\n/],
    [['bench/sop.js'], /^bench\/sop\.js: BENCH_MODEL_LATENCY_MS: a whole number of ms, 0 or over, not 'fast'\n/, { BENCH_MODEL_LATENCY_MS: 'fast' }],
    [['bench/review.js', '--sessions', 'lots'], /^bench\/review\.js: --sessions: a whole number over 0, not 'lots'\n/],
    [['bench/review.js', '--only', 'mysql'], /^bench\/review\.js: --only: unknown 'mysql' \(names: pglite, postgres\)\n/],
    [['bench/precheck.js', '--rate', '-5'], /^bench\/precheck\.js: --rate: a whole number, 0 or over, not '-5'\n/],
    [['bench/precheck.js', '--seconds', '0'], /^bench\/precheck\.js: --seconds: a whole number over 0, not '0'\n/],
    [['bench/precheck.js', '--rat', '100'], /^bench\/precheck\.js: unknown option '--rat'\n/],
    [['bench/store.js', '20000', 'abc'], /^bench\/store\.js: rounds: a whole number over 0, not 'abc'\n/],
    [['bench/store.js', '20000', '4', '100', '--bussy'], /^bench\/store\.js: unknown option '--bussy'\n/],
  ];
  const results = await Promise.all(cases.map(([args, , env]) => run(args, env)));
  cases.forEach(([args, said], i) => {
    const r = results[i];
    assert.equal(r.status, 2, `${args.join(' ')}: exit ${r.status} (${r.signal})\n${r.stdout}${r.stderr}`);
    assert.match(r.stderr, said, args.join(' '));
    assert.match(r.stderr, new RegExp(`\\n\\nusage: node ${args[0].replace('.', '\\.')}`), args.join(' '));
    assert.equal(r.stdout, '', args.join(' '));
  });
  // --help: the usage, exit 0
  for (const script of ['replay', 'sop', 'review', 'precheck', 'store']) {
    const help = await run([`bench/${script}.js`, '--help']);
    assert.equal(help.status, 0, `${script}: ${help.stderr}`);
    assert.match(help.stdout, new RegExp(`^usage: node bench/${script}\\.js`));
  }
  // --rate 0 (one check at a time) is a rate precheck.js takes
  const { parse } = require('./args');
  assert.deepEqual(parse({ options: { rate: { count: true, min: 0 } } }, ['--rate', '0']), { values: { rate: 0 } });
});

test("the rule engine's no-checks baseline and its two-thread row are measured as the figure beside them: warmed up, best of two", async () => {
  const { benchEngine } = require('./engine');
  const r = await benchEngine({ spans: 2000 });
  for (const [figure, runs] of [['baseline_spans_per_s', 'baseline_runs_spans_per_s'], ['spans_per_s', 'runs_spans_per_s'], ['two_engines_two_threads_spans_per_s', 'two_engines_runs_spans_per_s']]) {
    assert.equal(r[runs].length, 2, runs);
    assert.equal(r[figure], Math.max(...r[runs]), figure);
  }
});

test('the rule engine --quick (the command performance.md gives for the engine aim) reports three runs, each with its baseline', async () => {
  const { benchEngineQuick } = require('./engine');
  const r = await benchEngineQuick({ spans: 2000 });
  assert.equal(r.runs.length, 3);
  for (const run of r.runs) {
    for (const k of ['spans_per_s', 'spans_per_cpu_s', 'baseline_spans_per_s']) assert.ok(Number.isInteger(run[k]) && run[k] > 0, `${k}: ${run[k]}`);
  }
});

test('stored is counted: a span or a finding missing from the database fails the run, naming what is missing', async () => {
  const { migrate, openPgliteWorker } = require('@neatroots/platform');
  const { envelopeStatements } = require('@neatroots/store');
  const { fleet } = require('./checks');
  const { verifyStored } = require('./e2e');
  const db = await openPgliteWorker();
  try {
    await migrate(db);
    const now = Date.now();
    const envs = [...fleet({ runs: 2, perRun: 10, startMs: now })].map((item) => ({ project: 'bench', received_ms: now, item }));
    await db.batch(envelopeStatements(envs));
    assert.deepEqual(await verifyStored(db, { what: 'embedded', spans: 20 }), { spans: 20 });
    // one span sent that was not stored
    await assert.rejects(verifyStored(db, { what: 'embedded', spans: 21 }), /^Error: embedded: 20 spans stored of 21 sent$/);
    // a finding published that was not stored (none are): compared until the deadline
    await assert.rejects(verifyStored(db, { what: 'embedded', spans: 20, ids: new Set(['f1']), ms: 200 }), /embedded: findings stored: 0 of the 1 published after 0 s, the deadline/);
  } finally {
    await db.close();
  }
});

test('a run that fails closes what it started and removes its scratch folder', async () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const { full } = require('./e2e');
  const { benchCeiling } = require('./ceiling');
  // the scratch folders go to a folder of this test's own
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-test-'));
  const tmpBefore = process.env.TMPDIR;
  process.env.TMPDIR = tmp;
  const listening = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPServerWrap').length;
  // the servers' handles go once their close has run its course (a turn or so after close() resolves)
  const { waitUntil } = require('./wait');
  const closed = (what) => waitUntil(what, async () => ({ done: listening() <= before, state: `${listening()} servers listening, ${before} before` }), { ms: 20_000, everyMs: 20 });
  const before = listening();
  const garbage = Buffer.from([0xff, 0xff, 0xff]);
  try {
    // an export the null receiver cannot decode: the ceiling fails, and nothing is left listening
    await assert.rejects(benchCeiling({ work: { protocol: 'OTLP/gRPC', spans: 1, batch: 1, inflight: 1, connections: 2, bodies: [garbage] } }));
    await closed('servers listening after the ceiling failed');
    // an export ingest refuses: the embedded app is closed and its data folder removed
    await assert.rejects(full([garbage], 1, { batches: [], perBatch: 50, spans: 0 }, 5000), /INVALID_ARGUMENT/);
    await closed('servers listening after the embedded run failed');
    assert.deepEqual(fs.readdirSync(tmp), []);
  } finally {
    if (tmpBefore === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = tmpBefore;
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('bench/distributed.js alone without its services fails, naming the variables and how to set them', () => {
  const { spawnSync } = require('node:child_process');
  const path = require('node:path');
  const base = { ...process.env };
  for (const k of ['NEATROOTS_KAFKA_BROKERS', 'NEATROOTS_REDIS_URL', 'NEATROOTS_PG_URL']) delete base[k];
  const run = (env) => spawnSync(process.execPath, ['bench/distributed.js', '1000'], { cwd: path.join(__dirname, '..'), env, encoding: 'utf8', timeout: 60_000 });
  const unset = run(base);
  assert.equal(unset.status, 1, unset.stdout + unset.stderr);
  assert.equal(unset.stdout, '');
  assert.match(unset.stderr, /NEATROOTS_KAFKA_BROKERS, NEATROOTS_REDIS_URL, NEATROOTS_PG_URL not set: .*eval "\$\(deploy\/local\/services env\)"/);
  // set, but nothing answers there: each named, the password not shown
  const down = run({ ...base, NEATROOTS_KAFKA_BROKERS: '127.0.0.1:1', NEATROOTS_REDIS_URL: 'redis://127.0.0.1:1', NEATROOTS_PG_URL: 'postgres://bench:hunter2@127.0.0.1:1/bench' });
  assert.equal(down.status, 1, down.stdout + down.stderr);
  assert.match(down.stderr, /cannot reach Kafka at NEATROOTS_KAFKA_BROKERS \(127\.0\.0\.1:1: ECONNREFUSED\); Redis at NEATROOTS_REDIS_URL .*; Postgres at NEATROOTS_PG_URL \(postgres:\/\/bench:\*\*\*@127\.0\.0\.1:1\/bench\): ECONNREFUSED\. For the local services: eval/);
  assert.doesNotMatch(down.stderr, /hunter2/);
});

test("the replay row says what its ratio is: replay's CPU against the engine's", () => {
  const { report } = require('./run');
  const { rows } = report({
    replay: {
      spans: 100_000, rule_checks: 9, replay_rule_checks_spans_per_s: 74_600, baseline_engine_spans_per_s: 71_300, ratio_to_baseline: 0.97,
      pairs: 3, load_average: 4, replay_spans_per_s: 15_700, replay_seconds: 6.4, replay_cpu_s: 6.5, hand_wired_spans_per_s: 14_500, hand_wired_cpu_s: 6.6, cpu_ratio_to_hand_wired: 0.98, findings_same_as_hand_wired: true,
    },
  });
  const row = rows.find((r) => r[0].includes("the library's 9 rule checks"));
  assert.equal(row[1], '74600 spans/s');
  assert.equal(row[2], "the rule engine alone, item by item: 71300 spans/s; replay's CPU x0.97 the engine's (median of the pairs)");
});

test('--cap reads the chart\'s memory limits as Kubernetes quantities', () => {
  const { quantityBytes } = require('./cgroup');
  assert.equal(quantityBytes('512Mi'), 512 * 1048576);
  assert.equal(quantityBytes('1Gi'), 1073741824);
  assert.equal(quantityBytes('1.5Gi'), 1.5 * 1073741824);
  assert.equal(quantityBytes('800M'), 800e6);
  assert.equal(quantityBytes(1048576), 1048576);
  assert.throws(() => quantityBytes('lots'), /not a memory quantity: lots/);
});

test('a process over its memory cap is killed by the kernel, and the cap says so (root only)', (t) => {
  const { memoryCap, memoryCgroupRoot } = require('./cgroup');
  const { spawnSync } = require('node:child_process');
  const root = memoryCgroupRoot();
  if (!root.dir) return t.skip(root.why);
  const cap = memoryCap(`bench-test-${process.pid}`, 200 * 1048576);
  try {
    // 400 MB of Buffers (outside V8's heap limit): only the cgroup stops it
    const [file, args] = cap.command(process.execPath, ['-e', 'const a = []; for (let i = 0; i < 40; i++) a.push(Buffer.alloc(10 * 1048576, 1))']);
    const r = spawnSync(file, args);
    assert.equal(r.signal, 'SIGKILL');
    assert.equal(cap.oomKills(), 1);
  } finally {
    cap.remove();
  }
});

test('check-saves prints each count\'s save beside the full reload measured with it, and their ratio', () => {
  const { table, checkYaml } = require('./check-saves');
  const lines = table([{ checks: 100, save_ms_median: 2, full_reload_ms_median: 40 }, { checks: 1000, save_ms_median: 3, full_reload_ms_median: 400 }]).split('\n');
  assert.match(lines[0], /^checks\s+save \(median ms\)\s+full reload \(median ms\)\s+save \/ full reload$/);
  assert.match(lines[1], /^\s+100\s+2\.00\s+40\.00\s+0\.050$/);
  assert.match(lines[2], /^\s+1000\s+3\.00\s+400\.00\s+0\.007$/);
  // every check its own id, a `match` every fourth
  assert.match(checkYaml(0), /^id: save-00000\n[\s\S]*type: match/);
  assert.match(checkYaml(1), /^id: save-00001\n[\s\S]*type: requires_before/);
});
