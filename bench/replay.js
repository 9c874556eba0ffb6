'use strict';
// `neatroots replay` over a recorded fleet (a JSON Lines file of 100,000 spans), against a
// baseline measured in the same run: the rule engine library run directly over the same file,
// item by item as replay feeds it (what is due fired before each item, every wait at the end),
// without the composition root (no bus, no service modules). The ratio is what the wiring
// adds to that floor. The full replay also answers the library's question checks with the
// built-in fast classifier, as the command does with no model configured.
//   node bench/replay.js [SPANS]
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const { loadChecks, compileRuleSet, RuleEngine, SafeMatching, windowKey } = require('@neatroots/checks');
const { MemoryWindowStore, loadModelConfig } = require('@neatroots/platform');
const { itemRunId } = require('@neatroots/spans');
const { Replayer, readItems } = require('neatroots');
const { fleet } = require('./checks');

function writeFleet(file, spans, perRun) {
  const lines = [];
  for (const item of fleet({ runs: Math.ceil(spans / perRun), perRun, startMs: 1_700_000_000_000 })) {
    lines.push(JSON.stringify(item.kind === 'span' ? item.span : item.run));
  }
  fs.writeFileSync(file, `${lines.join('\n')}\n`);
}

/** The command's path: the Replayer (startServices on the replay platform) fed from the file. */
async function viaReplay(file, checks, models) {
  const findings = [];
  const t0 = performance.now();
  const r = new Replayer({ checks, models, onFinding: (f) => findings.push(f.id + f.status), log: () => undefined });
  try {
    for await (const item of readItems([file])) await r.push(item);
    await r.end();
  } finally {
    await r.close();
  }
  return { ms: performance.now() - t0, findings };
}

/** The floor: the rule engine alone over the same items, as the hand-wired replay ran it. */
async function viaEngine(file, checks) {
  const findings = [];
  const t0 = performance.now();
  const matching = new SafeMatching({ warn: () => undefined });
  const set = compileRuleSet(checks, matching.matcher);
  const engine = new RuleEngine({ windows: new MemoryWindowStore(() => 0), rules: () => set, steering: () => true });
  const projects = new Map();
  const keys = new Set();
  let clock = 0;
  const take = async (out) => {
    for (const f of out.findings) findings.push(f.id + f.status);
    await out.commit();
  };
  for await (const item of readItems([file])) {
    const t = item.kind === 'span' ? (item.span.end_ms ?? item.span.start_ms) : item.run.ts_ms;
    if (t !== undefined && t > clock) clock = t;
    const run = itemRunId(item);
    const explicit = item.kind === 'span' ? item.span.project : item.kind === 'run_start' ? item.run.project : undefined;
    if (explicit) projects.set(run, explicit);
    const project = projects.get(run) ?? 'default';
    keys.add(windowKey(project, run));
    await take(await engine.tick(clock));
    await take(await engine.process([{ project, received_ms: clock, item }]));
  }
  await take(await engine.tick(clock, { keys: [...keys], all: true }));
  await matching.close();
  return { ms: performance.now() - t0, findings };
}

async function benchReplay({ spans = 100_000, perRun = 100 } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-bench-replay-'));
  const file = path.join(dir, 'fleet.jsonl');
  try {
    writeFleet(file, spans, perRun);
    const all = loadChecks({ home: false }).checks;
    const rules = all.filter((c) => c.kind === 'rule');
    const models = loadModelConfig({});
    // Each way twice, alternating, the faster run counting: the first runs also warm the JIT.
    const best = (a, b) => (a.ms <= b.ms ? a : b);
    let base = await viaEngine(file, rules);
    let rulesOnly = await viaReplay(file, rules, false);
    let full = await viaReplay(file, all, models);
    base = best(base, await viaEngine(file, rules));
    rulesOnly = best(rulesOnly, await viaReplay(file, rules, false));
    full = best(full, await viaReplay(file, all, models));
    const rate = (r) => Math.round(spans / (r.ms / 1000));
    const same = rulesOnly.findings.length === base.findings.length && rulesOnly.findings.every((f, i) => f === base.findings[i]);
    return {
      spans,
      rule_checks: rules.length,
      question_checks: all.length - rules.length,
      baseline_engine_spans_per_s: rate(base),
      replay_rule_checks_spans_per_s: rate(rulesOnly),
      ratio_to_baseline: +(rulesOnly.ms / base.ms).toFixed(2),
      replay_spans_per_s: rate(full),
      replay_seconds: +(full.ms / 1000).toFixed(2),
      findings: full.findings.length,
      rule_findings: rulesOnly.findings.length,
      rule_findings_same_as_baseline: same,
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

module.exports = { benchReplay };

if (require.main === module) {
  benchReplay({ spans: Number(process.argv[2] ?? 100_000) }).then((r) => console.log(JSON.stringify(r, null, 2)));
}
