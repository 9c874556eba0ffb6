const { loadChecks, parseCheckFile, compileRuleSet, RuleEngine, BudgetedRegex } = require('@neatroots/checks');
const { MemoryWindowStore } = require('@neatroots/platform');
const { extraChecksYaml, fleet } = require('./checks');
(async () => {
  const checks = [...loadChecks({ home: false }).checks, ...parseCheckFile(extraChecksYaml(), 'x.yaml', 'user').checks].filter(c => c.kind === 'rule');
  const items = []; const now = Date.now();
  for (const item of fleet({ runs: 3000, perRun: 100, startMs: now })) items.push({ project: 'b', received_ms: now, item });
  const set = compileRuleSet(checks, (c, p) => new BudgetedRegex(p, { checkId: c.id }));
  const e = new RuleEngine({ windows: new MemoryWindowStore(), rules: () => set });
  const t0 = performance.now();
  for (let i = 0; i < items.length; i += 1000) { const o = await e.process(items.slice(i, i + 1000)); await o.commit(); }
  console.log('spans/s', Math.round(300000 / ((performance.now() - t0) / 1000)));
})();
