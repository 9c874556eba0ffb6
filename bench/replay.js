'use strict';
// `neatroots replay` over a recorded fleet (a JSON Lines file of 100,000 spans), against
// baselines measured in the same run, in alternated pairs (the machine is shared: each pair
// prints the load average and the CPU seconds of both sides):
// - the hand-wired replay as it was before the composition root (the Replayer of the commit
//   before 2d81e74, on today's libraries): the rule engine, the question scheduler and the
//   question processor called directly, item by item, no bus and no service modules. Issue 7
//   asks replay on the composition root to cost no more than this.
// - the rule engine library alone over the same file, item by item (rule checks only): the floor.
// The full replay answers the library's question checks with the built-in fast classifier, as
// the command does with no model configured; so does the hand-wired one. Both must print the
// same findings in the same order (checked).
//   node bench/replay.js [SPANS] [PAIRS]
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const { loadChecks, compileRuleSet, RuleEngine, SafeMatching, windowKey } = require('@neatroots/checks');
const { MemoryWindowStore, loadModelConfig } = require('@neatroots/platform');
const {
  LOCAL_LLM_POLICY,
  MemoryPlanStore,
  Planner,
  QuestionAnswerer,
  QuestionProcessor,
  QuestionScheduler,
  questionSet,
} = require('@neatroots/questions');
const { itemRunId } = require('@neatroots/spans');
const { Replayer, readItems } = require('neatroots');
const { questionServiceConfig } = require('neatroots/dist/questions');
const { fleet } = require('./checks');

function writeFleet(file, spans, perRun) {
  const lines = [];
  for (const item of fleet({ runs: Math.ceil(spans / perRun), perRun, startMs: 1_700_000_000_000 })) {
    lines.push(JSON.stringify(item.kind === 'span' ? item.span : item.run));
  }
  fs.writeFileSync(file, `${lines.join('\n')}\n`);
}

/** Wall time and CPU seconds (user + system, every thread of this process) of `fn`. */
async function measured(fn) {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const findings = await fn();
  const cpu = process.cpuUsage(cpu0);
  return { ms: performance.now() - t0, cpuS: (cpu.user + cpu.system) / 1e6, findings };
}

/** The command's path: the Replayer (startServices on the replay platform) fed from the file. */
function viaReplay(file, checks, models) {
  return measured(async () => {
    const findings = [];
    const r = new Replayer({ checks, models, onFinding: (f) => findings.push(f.id + f.status), log: () => undefined });
    try {
      for await (const item of readItems([file])) await r.push(item);
      await r.end();
    } finally {
      await r.close();
    }
    return findings;
  });
}

function itemTime(item) {
  return item.kind === 'span' ? (item.span.end_ms ?? item.span.start_ms) : item.run.ts_ms;
}

function itemProject(item, projects) {
  const run = itemRunId(item);
  const explicit = item.kind === 'span' ? item.span.project : item.kind === 'run_start' ? item.run.project : undefined;
  if (explicit) projects.set(run, explicit);
  return projects.get(run) ?? 'default';
}

/**
 * The hand-wired replay before the composition root, step for step: per item, what is due
 * fires, the engine takes the item, the scheduler the same item, and its questions are
 * answered at once; at the end every wait fires and the answerer is let go idle.
 */
function viaHandWired(file, checks, models) {
  return measured(async () => {
    const findings = [];
    const onFinding = (f) => findings.push(f.id + f.status);
    const matching = new SafeMatching({ warn: () => undefined });
    const set = compileRuleSet(checks, matching.matcher);
    const engine = new RuleEngine({ windows: new MemoryWindowStore(() => 0), rules: () => set, steering: () => true });
    let clock = 0;
    const asked = questionSet(models === false ? [] : checks);
    let q;
    if (asked.questions.length) {
      const c = models ? questionServiceConfig(models) : {};
      const answerer = new QuestionAnswerer({ ...c.models, backend: c.backend, queue: c.queue, decisionQueue: c.decisionQueue, localQueue: c.localQueue, cache: c.cache, onError: () => undefined });
      const library = asked.questions.filter((x) => x.source === 'library');
      const plans = library.length ? new MemoryPlanStore() : undefined;
      const planner = new Planner({
        library,
        chat: answerer.llm() ? (messages) => answerer.chat({ messages, json: true, maxTokens: 1500 }, { wait: true }) : undefined,
        now: () => clock,
        onError: () => undefined,
      });
      q = {
        answerer,
        scheduler: new QuestionScheduler({
          windows: new MemoryWindowStore(() => 0),
          questions: () => asked,
          plans,
          policy: answerer.localStandsIn() ? LOCAL_LLM_POLICY : undefined,
          planCacheMs: 0,
          now: () => clock,
        }),
        processor: new QuestionProcessor({ answerer, windows: new MemoryWindowStore(() => 0), plans, planner, awaitPlans: true, log: () => undefined }),
      };
    }
    const projects = new Map();
    const keys = new Set();
    const emit = async (out) => {
      for (const f of out.findings) onFinding(f);
      await out.commit();
    };
    for await (const item of readItems([file])) {
      const t = itemTime(item);
      if (t !== undefined && t > clock) clock = t;
      const project = itemProject(item, projects);
      const env = { project, received_ms: clock, item };
      keys.add(windowKey(project, itemRunId(item)));
      await emit(await engine.tick(clock));
      await emit(await engine.process([env]));
      if (q) {
        const due = await q.scheduler.process([env]);
        if (due.tasks.length) {
          const out = await q.processor.process(due.tasks);
          for (const f of out.findings) onFinding(f);
          await out.commit();
        }
        await due.commit();
      }
    }
    await emit(await engine.tick(clock, { keys: [...keys], all: true }));
    await matching.close();
    if (q) {
      await q.processor.idle();
      await q.answerer.idle();
      q.answerer.close();
    }
    return findings;
  });
}

/** The floor: the rule engine alone over the same items (rule checks only). */
function viaEngine(file, checks) {
  return viaHandWired(file, checks, false);
}

const sameFindings = (a, b) => a.findings.length === b.findings.length && a.findings.every((f, i) => f === b.findings[i]);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function benchReplay({ spans = 100_000, perRun = 100, pairs = 3, log = () => undefined } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-bench-replay-'));
  const file = path.join(dir, 'fleet.jsonl');
  try {
    writeFleet(file, spans, perRun);
    const all = loadChecks({ home: false }).checks;
    const rules = all.filter((c) => c.kind === 'rule');
    const models = loadModelConfig({});
    // Warm the JIT on both paths before anything counts.
    await viaHandWired(file, all, models);
    await viaReplay(file, all, models);
    const runs = { hand: [], replay: [], engine: [], rules: [] };
    let same = true;
    for (let i = 0; i < pairs; i++) {
      const load = os.loadavg()[0].toFixed(1);
      // Alternated: which side goes first swaps every pair.
      const order = i % 2 ? ['replay', 'hand'] : ['hand', 'replay'];
      const got = {};
      for (const side of order) got[side] = side === 'hand' ? await viaHandWired(file, all, models) : await viaReplay(file, all, models);
      got.engine = await viaEngine(file, rules);
      got.rules = await viaReplay(file, rules, false);
      same &&= sameFindings(got.hand, got.replay) && sameFindings(got.engine, got.rules);
      for (const k of Object.keys(runs)) runs[k].push(got[k]);
      log(
        `pair ${i + 1} (load ${load}): hand-wired ${(got.hand.ms / 1000).toFixed(2)} s, ${got.hand.cpuS.toFixed(2)} CPU s; ` +
          `replay ${(got.replay.ms / 1000).toFixed(2)} s, ${got.replay.cpuS.toFixed(2)} CPU s (x${(got.replay.cpuS / got.hand.cpuS).toFixed(2)} CPU)`,
      );
    }
    const cpu = (k) => +median(runs[k].map((r) => r.cpuS)).toFixed(2);
    const rate = (k) => Math.round(spans / (median(runs[k].map((r) => r.ms)) / 1000));
    return {
      spans,
      pairs,
      rule_checks: rules.length,
      question_checks: all.length - rules.length,
      load_average: +os.loadavg()[0].toFixed(1),
      hand_wired_cpu_s: cpu('hand'),
      replay_cpu_s: cpu('replay'),
      cpu_ratio_to_hand_wired: +median(runs.hand.map((h, i) => runs.replay[i].cpuS / h.cpuS)).toFixed(2),
      hand_wired_spans_per_s: rate('hand'),
      replay_spans_per_s: rate('replay'),
      replay_seconds: +(median(runs.replay.map((r) => r.ms)) / 1000).toFixed(2),
      baseline_engine_spans_per_s: rate('engine'),
      replay_rule_checks_spans_per_s: rate('rules'),
      ratio_to_baseline: +median(runs.engine.map((e, i) => runs.rules[i].cpuS / e.cpuS)).toFixed(2),
      findings: runs.replay[0].findings.length,
      rule_findings: runs.rules[0].findings.length,
      findings_same_as_hand_wired: same,
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

module.exports = { benchReplay, viaReplay, viaHandWired, writeFleet };

if (require.main === module) {
  // The command line is checked first: a bad one (or --help) ends here, before anything runs.
  const args = require('./args').cli({
    usage: `
usage: node bench/replay.js [SPANS] [PAIRS]
  SPANS   spans of the recorded fleet (default 100000)
  PAIRS   alternated pairs of replay and its baselines (default 3)
  --help  this text`,
    positionals: [
      { name: 'spans', count: true },
      { name: 'pairs', count: true },
    ],
  });
  benchReplay({ spans: args.spans ?? 100_000, pairs: args.pairs ?? 3, log: (m) => console.log(m) }).then(
    (r) => console.log(JSON.stringify(r, null, 2)),
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
