'use strict';
// The question service under a fleet-like load, against a fake OpenAI-compatible model with a
// fixed latency (real HTTP, the real `openai` client): questions per second and model HTTP
// requests with batching and caching off, batching alone, and batching with caching. Then the
// fast classifier's answers per second. Build first: npx tsc -b libs/questions services/question libs/platform
const { performance } = require('node:perf_hooks');
const { loadChecks, parseCheck } = require('@neatroots/checks');
const { MemoryBus, MemoryWindowStore, openAiChatModel } = require('@neatroots/platform');
const { FastClassifier, QuestionScheduler, questionSet } = require('@neatroots/questions');
const { startQuestionService } = require('@neatroots/question');
const { QUESTIONS_TOPIC, questionTaskRecords } = require('@neatroots/messages');
const { fakeChatServer } = require('./fake-model');

const LATENCY_MS = Number(process.env.BENCH_MODEL_LATENCY_MS ?? 200);

/** A chat-completions server that answers every question of a batch after a fixed delay. */
async function fakeModel() {
  let questions = 0;
  const server = await fakeChatServer(({ messages }) => {
    const system = messages[0].content;
    const user = messages[messages.length - 1].content;
    if (system.startsWith('You check the work')) {
      const [blocks, qs = ''] = user.split('\n### Questions\n');
      const evidence = new Map();
      for (const part of blocks.split(/^### Evidence /m).slice(1)) {
        const nl = part.indexOf('\n');
        evidence.set(part.slice(0, nl).trim(), part.slice(nl + 1));
      }
      const answers = [...qs.matchAll(/^(q\d+) \(about evidence (E\d+)\)/gm)].map((m) => {
        questions++;
        const bad = (evidence.get(m[2]) ?? '').includes('"amount":-');
        return bad ? { id: m[1], p: 0.95, quote: '"amount":-' } : { id: m[1], p: 0.05, quote: '' };
      });
      return JSON.stringify({ answers });
    }
    if (system.startsWith('You take a second look')) {
      const answers = [...user.matchAll(/^### Case (q\d+)$/gm)].map((m) => ({ id: m[1], holds: true, quote: '"amount":-' }));
      return JSON.stringify({ answers });
    }
    return 'Use a positive amount.';
  }, LATENCY_MS);
  return {
    url: server.url,
    stats: () => ({ requests: server.requests(), questions }),
    reset: () => ((questions = 0), server.resetRequests()),
    close: server.close,
  };
}

/**
 * A fleet: `runs` runs of support agents, drawn from `shapes` distinct run shapes (fleets run
 * the same workflows on the same common requests, so whole runs repeat word for word), arriving
 * in waves of `shapes` runs: the same shape comes back later, not only at the same moment.
 */
function fleet({ runs, shapes, callsPerRun }) {
  const waves = [];
  let items;
  const t0 = Date.now();
  for (let r = 0; r < runs; r++) {
    if (r % shapes === 0) waves.push((items = []));
    const shape = r % shapes;
    const run_id = `run-${r}`;
    const at = t0 + r;
    items.push({ project: 'bench', received_ms: at, item: { kind: 'run_start', run: { event: 'run_start', run_id, workflow: 'support', tools: [{ name: 'lookup_order' }, { name: 'refund' }], user_message: `Help with order ${shape}` } } });
    for (let c = 0; c < callsPerRun; c++) {
      const refund = c === callsPerRun - 1;
      const span = {
        run_id,
        span_id: `s${c}`,
        type: 'tool',
        name: refund ? 'refund' : 'lookup_order',
        tool: refund ? 'refund' : 'lookup_order',
        input: refund ? { order: shape, amount: shape % 10 === 0 ? -20 : 20 + shape } : { order: shape, page: c },
        output: refund ? { ok: true } : `order ${shape}: 2 items, shipped ${c} days ago, carrier UPS, tracking 1Z${shape}${c}`,
        status: 'ok',
      };
      items.push({ project: 'bench', received_ms: at, item: { kind: 'span', span } });
    }
    items.push({ project: 'bench', received_ms: at, item: { kind: 'run_end', run: { event: 'run_end', run_id, status: 'ok', final_output: `Order ${shape} has shipped and your refund is on its way.` } } });
  }
  return waves;
}

function questions() {
  const library = loadChecks({ home: false }).checks.filter((c) => c.kind !== 'rule' && c.source === 'library');
  const own = [
    parseCheck({ id: 'negative-amount', kind: 'yes_no', scope: 'span', ask: 'Did this call pass a negative amount?', evidence: { spans: { tool: ['refund'] } } }, 'bench.yaml', 'user'),
    parseCheck({ id: 'refund-claim', kind: 'yes_no', scope: 'trace', when: 'end', ask: 'Does the final response claim a refund the tools do not show?', evidence: { final_output: true } }, 'bench.yaml', 'user'),
  ];
  return questionSet([...library, ...own]);
}

async function runMode(model, items, set, mode) {
  const queue =
    mode === 'off'
      ? { maxBatch: 1, maxWaitMs: 0, maxConcurrent: 8, dedup: false, maxQueue: 100_000 }
      : { maxBatch: 8, maxWaitMs: 10, maxConcurrent: 8, maxQueue: 100_000 };
  const bus = new MemoryBus();
  const service = await startQuestionService({
    bus,
    windows: new MemoryWindowStore(),
    models: { decision: openAiChatModel({ role: 'decision', baseURL: model.url, model: 'bench-judge', timeoutMs: 30_000 }) },
    questions: () => set.questions,
    queue,
    cache: mode === 'off' || mode === 'batching' ? false : {},
    // The 30-answer switch would move questions to the classifier part-way through; off here,
    // so the rows compare batching and caching alone.
    routing: { minAnswers: Number.MAX_SAFE_INTEGER },
    auditRate: 0,
    consumers: 8,
    log: () => undefined,
  });
  // The scheduler as the rule engine runs it: a bus batch at a time, tasks onto the questions topic.
  const scheduler = new QuestionScheduler({ windows: new MemoryWindowStore(), questions: () => set });
  let tasks = 0;
  model.reset();
  const t0 = performance.now();
  for (const wave of items) {
    for (let i = 0; i < wave.length; i += 50) {
      const out = await scheduler.process(wave.slice(i, i + 50));
      tasks += out.tasks.length;
      await bus.publish(QUESTIONS_TOPIC, questionTaskRecords(out.tasks));
      await out.commit();
    }
    await bus.idle();
    await service.idle();
  }
  const ms = performance.now() - t0;
  const findings = service.metrics.findings;
  await service.close();
  await bus.close();
  const { requests } = model.stats();
  return { mode, questions: tasks, model_requests: requests, questions_per_request: +(tasks / requests).toFixed(2), questions_per_s: Math.round(tasks / (ms / 1000)), seconds: +(ms / 1000).toFixed(2), findings };
}

function benchClassifier(n = 200_000) {
  const c = new FastClassifier();
  const q = parseCheck({ id: 'upsell', kind: 'yes_no', scope: 'trace', ask: 'Did the agent push an upgrade the user did not ask for?', evidence: { final_output: true } }, 'bench.yaml', 'user');
  const pii = loadChecks({ home: false }).checks.find((x) => x.id === 'personal-data-in-answer');
  const docs = Array.from({ length: 500 }, (_, i) => ({
    spans: Array.from({ length: 5 }, (_, j) => ({ id: `s${j}`, type: 'tool', name: 'lookup', tool: 'lookup', status: 'ok', input: `{"order":${i},"page":${j}}`, output: `Order ${i} found: ${j + 1} items, shipped on 2024-05-${10 + (j % 9)}, carrier UPS, tracking 1Z${i}${j}99` })),
    // One answer in ten shows the problem (and so also gets a quote).
    final_output: i % 10 === 0 ? `Order ${i} has shipped. While you are here, upgrade to Premium for faster delivery!` : `Order ${i} has shipped and will arrive on Friday.`,
  }));
  for (let i = 0; i < 400; i++) c.learn(q, docs[(i * 5) % docs.length], { p: ((i * 5) % docs.length) % 10 === 0 ? 0.95 : 0.03 });
  const rate = (question) => {
    for (let i = 0; i < 5_000; i++) c.answer(question, docs[i % docs.length]);
    const t0 = performance.now();
    let flagged = 0;
    for (let i = 0; i < n; i++) if (c.answer(question, docs[i % docs.length]).flagged) flagged++;
    const s = (performance.now() - t0) / 1000;
    return { answers_per_s: Math.round(n / s), us_per_answer: +((s / n) * 1e6).toFixed(1), flagged };
  };
  return { trained_model: rate(q), library_heuristic: rate(pii), evidence_chars: JSON.stringify(docs[0]).length };
}

async function benchQuestions({ runs = 160, shapes = 40, callsPerRun = 3 } = {}) {
  const model = await fakeModel();
  const set = questions();
  const items = fleet({ runs, shapes, callsPerRun });
  const rows = [];
  for (const mode of ['off', 'batching', 'batching+caching']) rows.push(await runMode(model, items, set, mode));
  await model.close();
  const off = rows[0].model_requests;
  return {
    load: { runs, distinct_run_shapes: shapes, waves: items.length, tool_calls_per_run: callsPerRun, question_checks: set.questions.length, model_latency_ms: LATENCY_MS },
    modes: rows.map((r) => ({ ...r, fewer_requests_than_off: +(off / r.model_requests).toFixed(1) })),
    classifier: benchClassifier(),
  };
}

module.exports = { benchQuestions };

if (require.main === module) {
  benchQuestions().then((r) => console.log(JSON.stringify(r, null, 2)));
}
