'use strict';
// Rule engine alone: spans/s over a recorded fleet, against a baseline of the same engine
// with no checks (window bookkeeping only), measured in the same run.
const { performance } = require('node:perf_hooks');
const { loadChecks, parseCheckFile, compileRuleSet, RuleEngine, BudgetedRegex } = require('@neatroots/checks');
const { MemoryWindowStore } = require('@neatroots/platform');
const { extraChecksYaml, fleet } = require('./checks');

async function runEngine(checks, items, batch) {
  const set = compileRuleSet(checks, (c, p) => new BudgetedRegex(p, { checkId: c.id }));
  const engine = new RuleEngine({ windows: new MemoryWindowStore(), rules: () => set, steering: () => false });
  let findings = 0;
  const t0 = performance.now();
  for (let i = 0; i < items.length; i += batch) {
    const out = await engine.process(items.slice(i, i + batch));
    findings += out.findings.length;
    await out.commit();
  }
  const out = await engine.tick(Number.MAX_SAFE_INTEGER);
  findings += out.findings.length;
  return { ms: performance.now() - t0, findings };
}

async function benchEngine({ spans = 1_000_000, perRun = 100, batch = 1000 } = {}) {
  const library = loadChecks({ home: false }).checks;
  const extra = parseCheckFile(extraChecksYaml(), 'bench/extra-checks.yaml', 'user').checks;
  const checks = [...library, ...extra];
  const runs = Math.ceil(spans / perRun);
  const items = [];
  const now = Date.now();
  for (const item of fleet({ runs, perRun, startMs: now })) items.push({ project: 'bench', received_ms: now, item });
  const spanCount = items.filter((e) => e.item.kind === 'span').length;
  const rules = checks.filter((c) => c.kind === 'rule').length;
  const base = await runEngine([], items, batch);
  const full = await runEngine(checks, items, batch);
  return {
    spans: spanCount,
    runs,
    rule_checks: rules,
    match_checks: checks.filter((c) => c.kind === 'rule' && c.rule.type === 'match').length,
    baseline_spans_per_s: Math.round(spanCount / (base.ms / 1000)),
    spans_per_s: Math.round(spanCount / (full.ms / 1000)),
    ratio_to_baseline: +(full.ms / base.ms).toFixed(2),
    findings: full.findings,
  };
}

module.exports = { benchEngine };

if (require.main === module) {
  benchEngine({ spans: Number(process.argv[2] ?? 1_000_000) }).then((r) => console.log(JSON.stringify(r, null, 2)));
}
