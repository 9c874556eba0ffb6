'use strict';
// The question path's CPU in one process, stage by stage: the rule engine's question scheduler
// (with the workflows' plans picking `wrong-tool-or-arguments`, so every tool call is asked
// about, as in bench/distributed.js), the questions topic's records written as the topic writes
// them (questionTaskRecords, then QUESTIONS_TOPIC.encode), read back (questionTasksFromBytes) and
// answered by the question service's processor with the fast classifier (windows in memory, no
// bus, no database).
// Prints the process's CPU seconds per 100,000 spans for each stage: steadier on a loaded machine
// than a distributed run's spans/s. Build first (npx tsc -b libs/questions libs/messages).
//   node bench/question-path.js [SPANS] [--checkout DIR]
// --checkout DIR runs the code of another checkout (its built libs and its bench/checks.js), for
// alternating with a build before a change.
const path = require('node:path');

function cli(argv) {
  const out = { spans: 100_000, checkout: path.join(__dirname, '..') };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--checkout') {
      if (!argv[i + 1]) throw new Error("--checkout: a directory, missing");
      out.checkout = path.resolve(argv[++i]);
    } else if (/^\d+$/.test(a) && Number(a) > 0) out.spans = Number(a);
    else throw new Error(/^-/.test(a) ? `unknown option '${a}'` : `spans: a whole number over 0, not '${a}'`);
  }
  return out;
}

async function benchQuestionPath({ spans, checkout }) {
  const need = (m) => require(require.resolve(m, { paths: [checkout] }));
  const { loadChecks } = need('@neatroots/checks');
  const { MemoryWindowStore } = need('@neatroots/platform');
  const { QuestionScheduler, questionSet, QuestionProcessor, QuestionAnswerer, MemoryPlanStore } = need('@neatroots/questions');
  const { questionTaskRecords, QUESTIONS_TOPIC, questionTasksFromBytes } = need('@neatroots/messages');
  const { fleet, TOOLS } = require(path.join(checkout, 'bench/checks.js'));
  const set = questionSet(loadChecks({ home: false }).checks);
  const plans = new MemoryPlanStore();
  for (const workflow of ['wf-0', 'wf-1', 'wf-2']) {
    await plans.put({ project: 'bench', workflow, tools: [...TOOLS], picks: [{ id: 'wrong-tool-or-arguments', params: { tools: TOOLS.join(', ') } }], written: [], planned_by: 'heuristic', at_ms: Date.now() });
  }
  const scheduler = new QuestionScheduler({ windows: new MemoryWindowStore(), questions: () => set, plans });
  const processor = new QuestionProcessor({ answerer: new QuestionAnswerer({ backend: 'classifier', cache: false }), windows: new MemoryWindowStore() });
  const now = Date.now();
  const envs = [];
  for (const item of fleet({ runs: Math.ceil(spans / 100), perRun: 100, startMs: now })) envs.push({ project: 'bench', received_ms: now, item });
  const cpu = () => {
    const u = process.cpuUsage();
    return u.user + u.system;
  };
  const us = { scheduler: 0, encode: 0, decode: 0, answer: 0 };
  let tasks = 0;
  let records = 0;
  let bytes = 0;
  let findings = 0;
  const t0 = cpu();
  // Steps of 500 items, as the rule engine's (the fleet interleaves 64 runs).
  for (let i = 0; i < envs.length; i += 500) {
    let a = cpu();
    const out = await scheduler.process(envs.slice(i, i + 500));
    await out.commit();
    let b = cpu();
    us.scheduler += b - a;
    a = b;
    const recs = questionTaskRecords(out.tasks).map((r) => QUESTIONS_TOPIC.encode(r.value));
    b = cpu();
    us.encode += b - a;
    a = b;
    const read = [];
    for (const r of recs) {
      bytes += r.length;
      records++;
      read.push(...questionTasksFromBytes(r));
    }
    b = cpu();
    us.decode += b - a;
    a = b;
    tasks += read.length;
    const done = await processor.process(read);
    findings += done.findings.length;
    await done.commit();
    us.answer += cpu() - a;
  }
  const per100k = (x) => Number((x / 1e6 / (spans / 100_000)).toFixed(3));
  return {
    spans, tasks, records, record_kb: Number((bytes / records / 1024).toFixed(2)), findings,
    cpu_s_per_100k_spans: { total: per100k(cpu() - t0), ...Object.fromEntries(Object.entries(us).map(([k, v]) => [k, per100k(v)])) },
  };
}

if (require.main === module) {
  let args;
  try {
    args = cli(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`bench/question-path.js: ${e.message}\nusage: node bench/question-path.js [SPANS] [--checkout DIR]\n`);
    process.exit(2);
  }
  benchQuestionPath(args).then(
    (r) => console.log(JSON.stringify(r, null, 2)),
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}

module.exports = { benchQuestionPath };
