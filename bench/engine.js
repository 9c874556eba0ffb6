'use strict';
// Rule engine alone: spans/s over a recorded fleet, against a baseline of the same engine
// with no checks (window bookkeeping only), measured in the same run. Also with the runs
// split over two engines on two threads, as two rule-engine replicas split the partitions.
const { performance } = require('node:perf_hooks');
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');
const { loadChecks, parseCheckFile, compileRuleSet, RuleEngine, SafeMatching } = require('@neatroots/checks');
const RE2 = require('re2');
const { MemoryWindowStore } = require('@neatroots/platform');
const { extraChecksYaml, fleet } = require('./checks');

function benchChecks() {
  const library = loadChecks({ home: false }).checks;
  const extra = parseCheckFile(extraChecksYaml(), 'bench/extra-checks.yaml', 'user').checks;
  return [...library, ...extra].filter((c) => c.kind === 'rule');
}

/**
 * The fleet's items, or only the runs of one shard (by run index, as partitions split runs).
 * With `bigEvery`, every so many spans carry a 50 KB output (a page read, a file), which the
 * patterns people write match off the event loop.
 */
function items({ spans, perRun, shard = 0, shards = 1, bigEvery = 0 }) {
  const out = [];
  const now = Date.now();
  const big = { page: 'lorem ipsum dolor sit amet 4111 1111 '.repeat(1400) };
  let n = 0;
  for (const item of fleet({ runs: Math.ceil(spans / perRun), perRun, startMs: now })) {
    const id = item.kind === 'span' ? item.span.run_id : item.run.run_id;
    if (Number(id.slice(4)) % shards !== shard) continue;
    if (bigEvery && item.kind === 'span' && ++n % bigEvery === 0) item.span.output = big;
    out.push({ project: 'bench', received_ms: now, item });
  }
  return out;
}

/**
 * `safe`: what the app runs (SafeMatching: long texts of user patterns off the event loop,
 * under the 50 ms limit). `inline`: every pattern on the event loop with no limit, as before
 * the matcher thread: the baseline for what the safety costs.
 */
async function runEngine(checks, envs, batch, mode = 'safe') {
  const matching = mode === 'safe' ? new SafeMatching() : undefined;
  const inline = (_c, p) => {
    const re = new RE2(p);
    return { test: (t) => re.test(t) };
  };
  const set = compileRuleSet(checks, matching ? matching.matcher : inline);
  const engine = new RuleEngine({ windows: new MemoryWindowStore(), rules: () => set, steering: () => false });
  let findings = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < envs.length; i += batch) {
    const out = await engine.process(envs.slice(i, i + batch));
    findings += out.findings.length;
    await out.commit();
  }
  const out = await engine.tick(Number.MAX_SAFE_INTEGER);
  findings += out.findings.length;
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  await matching?.close();
  // CPU time as well: on a machine others share, it moves far less than the wall time.
  return { ms, cpuMs: (cpu.user + cpu.system) / 1000, findings };
}

function inWorker(data) {
  return new Promise((resolve, reject) => {
    const w = new Worker(__filename, { workerData: data });
    w.once('message', resolve);
    w.once('error', reject);
  });
}

async function benchEngine({ spans = 1_000_000, perRun = 100, batch = 1000 } = {}) {
  const checks = benchChecks();
  const envs = items({ spans, perRun });
  const spanCount = envs.filter((e) => e.item.kind === 'span').length;
  // A round first, not counted: the JIT's warm-up, as --quick does (the first round's spans/s was
  // 10-25% under the next ones'). Then each way twice, alternating, the faster run counting: the
  // no-checks baseline too, which was one cold run beside a warmed best of two (its ratio was low).
  await runEngine([], envs, batch);
  await runEngine(checks, envs, batch);
  const best = (a, b) => (a.ms <= b.ms ? a : b);
  const rate = (r) => Math.round(spanCount / (r.ms / 1000));
  const baseRuns = [await runEngine([], envs, batch)];
  const inlineRuns = [await runEngine(checks, envs, batch, 'inline')];
  const fullRuns = [await runEngine(checks, envs, batch)];
  baseRuns.push(await runEngine([], envs, batch));
  inlineRuns.push(await runEngine(checks, envs, batch, 'inline'));
  fullRuns.push(await runEngine(checks, envs, batch));
  const base = best(...baseRuns);
  const inline = best(...inlineRuns);
  const full = best(...fullRuns);
  // One span in 100 with a 50 KB output: those go to the matcher thread for the user's patterns.
  const bigEnvs = items({ spans: Math.min(spans, 200_000), perRun, bigEvery: 100 });
  const bigSpans = bigEnvs.filter((e) => e.item.kind === 'span').length;
  let bigInline = await runEngine(checks, bigEnvs, batch, 'inline');
  let bigSafe = await runEngine(checks, bigEnvs, batch);
  bigInline = best(bigInline, await runEngine(checks, bigEnvs, batch, 'inline'));
  bigSafe = best(bigSafe, await runEngine(checks, bigEnvs, batch));
  // Two shards on two threads, started together, each warmed up and then run twice in step; the
  // figure is the slower shard's, of the faster round (before: one cold run each).
  const shards = await Promise.all([0, 1].map((shard) => inWorker({ spans, perRun, batch, shard, shards: 2 })));
  const twoRuns = [0, 1].map((i) => Math.round(spanCount / (Math.max(...shards.map((s) => s.runs[i].ms)) / 1000)));
  return {
    spans: spanCount,
    runs: Math.ceil(spans / perRun),
    rule_checks: checks.length,
    match_checks: checks.filter((c) => c.rule.type === 'match').length,
    baseline_spans_per_s: rate(base),
    // each counted run (after the warm-up round), the best of which is the figure
    baseline_runs_spans_per_s: baseRuns.map(rate),
    runs_spans_per_s: fullRuns.map(rate),
    inline_patterns_spans_per_s: Math.round(spanCount / (inline.ms / 1000)),
    spans_per_s: Math.round(spanCount / (full.ms / 1000)),
    spans_per_cpu_s: Math.round(spanCount / (full.cpuMs / 1000)),
    ratio_to_baseline: +(full.ms / base.ms).toFixed(2),
    big_outputs_inline_spans_per_s: Math.round(bigSpans / (bigInline.ms / 1000)),
    big_outputs_spans_per_s: Math.round(bigSpans / (bigSafe.ms / 1000)),
    big_outputs_findings: [bigInline.findings, bigSafe.findings],
    two_engines_two_threads_spans_per_s: Math.max(...twoRuns),
    two_engines_runs_spans_per_s: twoRuns,
    findings: full.findings,
    findings_inline: inline.findings,
    findings_two_engines: shards.reduce((a, s) => a + s.runs[0].findings, 0),
  };
}

if (!isMainThread && workerData) {
  const envs = items(workerData);
  const checks = benchChecks();
  (async () => {
    await runEngine(checks, envs, workerData.batch); // the warm-up round, not counted
    const runs = [await runEngine(checks, envs, workerData.batch), await runEngine(checks, envs, workerData.batch)];
    parentPort.postMessage({ runs });
  })();
}

module.exports = { benchEngine, benchEngineQuick };

/**
 * `--quick`: the one-thread figure and its no-checks baseline only, three times after a round of
 * warm-up: to compare two builds of the engine (run it in each checkout, alternating) on a
 * machine too busy for the rest.
 * Each run also says its spans per CPU second (the process's CPU time): what the engine costs
 * when others' jobs take the cores from it part of the time.
 */
async function benchEngineQuick({ spans, perRun = 100, batch = 1000 }) {
  const checks = benchChecks();
  const envs = items({ spans, perRun });
  const spanCount = envs.filter((e) => e.item.kind === 'span').length;
  const runs = [];
  // A round first, not counted: the JIT's warm-up (a rule engine runs for hours; the first round's
  // spans/s was 10-25% under the next ones').
  await runEngine([], envs, batch);
  await runEngine(checks, envs, batch);
  for (let i = 0; i < 3; i++) {
    const base = await runEngine([], envs, batch);
    const full = await runEngine(checks, envs, batch);
    runs.push({
      spans_per_s: Math.round(spanCount / (full.ms / 1000)),
      spans_per_cpu_s: Math.round(spanCount / (full.cpuMs / 1000)),
      baseline_spans_per_s: Math.round(spanCount / (base.ms / 1000)),
      findings: full.findings,
    });
  }
  return { spans: spanCount, rule_checks: checks.length, node_flags: process.execArgv, runs };
}

// As the rule engine runs in the servers: with their node flags (the young generation's size;
// bench/server-flags.js), as `npm run bench` runs this too.
// The command line is checked first: a bad one (or --help) ends here, before any relaunch.
const args = isMainThread && require.main === module ? require('./args').cli({
  usage: `
usage: node bench/engine.js [SPANS] [--quick]
  SPANS    spans of the recorded fleet (default 1000000)
  --quick  the one-thread figure and its no-checks baseline only, three times after a warm-up
  --help   this text`,
  options: { quick: { type: 'boolean' } },
  positionals: [{ name: 'spans', count: true }],
}) : undefined;
if (args && require('./server-flags').asServer()) {
  const spans = args.spans ?? 1_000_000;
  (args.quick ? benchEngineQuick({ spans }) : benchEngine({ spans })).then((r) => console.log(JSON.stringify(r, null, 2)), (e) => {
    console.error(e);
    process.exit(1);
  });
}
