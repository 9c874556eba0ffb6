'use strict';
// sopops' checker, the function the review service runs per session (createCheckSession):
//   1. tool-only procedures (every step [tool: x, required], sessions with their tool calls), no
//      model: sessions checked per second, by the checker alone and through the review
//      service (sessions received, stored, checked by the sopops_check job at its default
//      concurrency, results and findings stored) on the embedded default (PGlite on its own
//      thread) and on a Postgres server (NEATROOTS_PG_URL; skipped without it), with the
//      statements each session cost and the database's floor in the same run (one trivial
//      statement's round trip: what no session can cost less than);
//   2. procedures a model decides, through the question service, against a fake
//      OpenAI-compatible model with a fixed latency (real HTTP, the real `openai` client):
//      sessions per second and model HTTP requests per rule decision, batched (the default
//      queue) beside one request per decision (maxBatch 1) in the same run, at the review
//      service's default of 16 sessions at once and under load (64 at once).
// Build first: npx tsc -b libs/sop libs/questions services/question services/review libs/platform
const { performance } = require('node:perf_hooks');
const { fakeChatServer } = require('./fake-model');
const { InlineJobs, migrate, openAiChatModel, openPgliteWorker, openPostgres, scratchDatabase } = require('@neatroots/platform');
const { QuestionAnswerer } = require('@neatroots/questions');
const { answererDecisions } = require('@neatroots/question');
const { compileFiles, createCheckSession, loadSopSettings, toLock } = require('@neatroots/sop');

const LATENCY_MS = Number(process.env.BENCH_MODEL_LATENCY_MS ?? 200);

function lockOf(files) {
  const c = compileFiles(files);
  if (c.errors.length) throw new Error(JSON.stringify(c.errors));
  return toLock(c);
}

const TOOL_FILES = {
  'procedures/take-order.md':
    '# Take an order\n\n## Steps\n1. Look up the account. [tool: lookup_account, required]\n2. Check the menu. [tool: menu, required]\n3. Place the order. [tool: place_order, required]\n4. Send the receipt. [tool: send_receipt, required]\n',
  'procedures/payment.md': '# Take a payment\n\n## Steps\n1. Verify the card. [tool: verify_card, required]\n2. Charge the card. [tool: charge, required]\n',
  'agents/phone-agent.yaml': 'procedures: [take-order, payment]\n',
};
const TOOL_LOCK = lockOf(TOOL_FILES);

// Six decisions per session: three steps, a never rule, a warning sign and the goal.
const MODEL_LOCK = lockOf({
  'procedures/take-order.md': `# Take an order
Goal: The order is placed and read back to the caller.

## Steps
1. Greet the caller with the name of the restaurant.
2. Look up the account of the caller. [tool: lookup_account, required]
3. Ask for the order.
4. Read the order back to the caller.

## Never
- Volunteer a price or a description of a dish.

## Warning signs
- The caller sounds upset. -> Offer a callback from the manager.
`,
  'agents/phone-agent.yaml': 'procedures: [take-order]\n',
});

/** The agent turn each tool is called at: in each procedure's order. */
const TOOL_TURN = { lookup_account: 1, menu: 1, place_order: 3, send_receipt: 5, verify_card: 3, charge: 5 };

function session(i, tools) {
  return {
    external_id: `s-${i}`,
    agent: 'phone-agent',
    release_id: null,
    started_at: null,
    transcript_ref: null,
    turns: [
      { role: 'user', text: `Hello, this is caller ${i}, I would like to order.` },
      { role: 'agent', text: "Welcome to Luigi's! Let me find your account." },
      { role: 'user', text: 'One margherita please.' },
      { role: 'agent', text: 'One margherita. Anything else?' },
      { role: 'user', text: 'No, that is all.' },
      { role: 'agent', text: 'So that is one margherita. Thank you, goodbye.' },
    ],
    tool_calls: tools.map((tool) => ({ turn: TOOL_TURN[tool], tool, input: { caller: i }, output: { ok: true }, error: null })),
  };
}

/** A chat-completions server that answers every decision of a request after a fixed delay. */
async function fakeModel() {
  let decisions = 0;
  const server = await fakeChatServer(({ messages }) => {
    const user = messages[messages.length - 1].content;
    const answers = [...user.matchAll(/^(q\d+) \(about subject S\d+\) (.*)$/gm)].map(([, id, ask]) => {
      decisions++;
      if (/Did the agent do this step\?/.test(ask)) return { id, p: 0.95, evidence: [{ turn: 1, quote: "Welcome to Luigi's!" }], reason: 'Done.' };
      if (/Was the goal reached\?/.test(ask)) return { id, p: 0.9, evidence: [], reason: 'Placed.' };
      return { id, p: 0.03, evidence: [], reason: 'Nothing shows it.' };
    });
    return JSON.stringify({ answers });
  }, LATENCY_MS);
  return {
    url: server.url,
    stats: () => ({ requests: server.requests(), decisions }),
    reset: () => ((decisions = 0), server.resetRequests()),
    close: server.close,
  };
}

/** Checks `n` sessions, `concurrency` at a time (the review service's check job concurrency). */
async function run(check, lock, n, concurrency, make) {
  let next = 0;
  const results = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const i = next++;
        results.push(await check({ lock, releaseId: 'bench', session: make(i) }));
      }
    }),
  );
  return { seconds: (performance.now() - t0) / 1000, results };
}

async function benchToolOnly(n) {
  const check = createCheckSession({});
  const tools = ['lookup_account', 'menu', 'place_order', 'send_receipt', 'verify_card', 'charge'];
  await run(check, TOOL_LOCK, 200, 4, (i) => session(i, tools)); // warm-up
  const { seconds, results } = await run(check, TOOL_LOCK, n, 4, (i) => session(i, tools));
  if (results.some((b) => b.result !== 'followed')) throw new Error('tool-only sessions should be followed');
  return { sessions: n, sessions_per_s: Math.round(n / seconds) };
}

/**
 * Counts what the review service asks of the database: statements (BEGIN and COMMIT count: on
 * PGlite each is a trip to the database thread, on Postgres a network round trip) and
 * transactions.
 */
function counting(db) {
  const n = { statements: 0, transactions: 0 };
  const wrapped = {
    kind: db.kind,
    query: (sql, params) => (n.statements++, db.query(sql, params)),
    exec: (sql) => (n.statements++, db.exec(sql)),
    transaction: (fn) => {
      n.transactions++;
      n.statements += 2;
      return db.transaction((tx) => fn({ query: (sql, params) => (n.statements++, tx.query(sql, params)) }));
    },
    close: () => db.close(),
  };
  return { db: wrapped, counts: n };
}

/** The floor under any session's cost: one trivial statement after another, and 16 at once. */
async function roundTrips(db, n = 2000) {
  let t0 = performance.now();
  for (let i = 0; i < n; i++) await db.query('SELECT 1');
  const serial = (performance.now() - t0) / n;
  t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next++ < n) await db.query('SELECT 1');
    }),
  );
  return { round_trip_ms: Math.round(serial * 1000) / 1000, statements_per_s_16_at_once: Math.round(n / ((performance.now() - t0) / 1000)) };
}

/**
 * Through the review service as the embedded deployment runs it (PGlite on its own thread),
 * or on a Postgres server: sessions received, stored, checked by the sopops_check job
 * (inline, 4 at a time), results stored.
 */
async function benchStored(rawDb, n, { concurrency } = {}) {
  const { SopSessions } = require('@neatroots/review/dist/sop/sessions');
  const { SopWorkspaces } = require('@neatroots/review/dist/sop/workspaces');
  const jobs = new InlineJobs();
  try {
    await migrate(rawDb);
    const floor = await roundTrips(rawDb);
    const { db, counts } = counting(rawDb);
    const workspaces = new SopWorkspaces(db);
    const files = Object.entries(TOOL_FILES).map(([path, text]) => ({ path, text }));
    await workspaces.push('bench', files);
    await workspaces.publish('bench');
    const sessions = new SopSessions(db, workspaces, jobs, createCheckSession({}));
    await sessions.start({ concurrency }); // unset: the review service's default
    const tools = ['lookup_account', 'menu', 'place_order', 'send_receipt', 'verify_card', 'charge'];
    const done = async () => Number((await rawDb.query("SELECT count(*)::int AS n FROM sop_sessions WHERE status <> 'queued'")).rows[0].n);
    counts.statements = counts.transactions = 0;
    const t0 = performance.now();
    // Sent as a fleet sends them: many at once (the api takes each POST on its own).
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < n) await sessions.receive('bench', session(next++, tools));
      }),
    );
    const received = (performance.now() - t0) / 1000;
    // Polled every 100 ms: a count scans the table, on the one thread the service needs.
    while ((await done()) < n) await new Promise((r) => setTimeout(r, 100));
    const seconds = (performance.now() - t0) / 1000;
    const checked = Number((await rawDb.query("SELECT count(*)::int AS n FROM sop_sessions WHERE status = 'checked' AND result = 'followed'")).rows[0].n);
    if (checked !== n) throw new Error(`${n - checked} sessions were not checked as followed`);
    return {
      db: rawDb.kind,
      check_concurrency: concurrency ?? require('@neatroots/review/dist/sop/sessions').SOP_CHECK_CONCURRENCY,
      sessions: n,
      sessions_per_s: Math.round(n / seconds),
      received_per_s: Math.round(n / received),
      statements_per_session: Math.round((counts.statements / n) * 100) / 100,
      transactions_per_session: Math.round((counts.transactions / n) * 100) / 100,
      ...floor,
    };
  } finally {
    await jobs.close();
  }
}

/**
 * The embedded default, beside its baseline in the same run: the same with one check at a
 * time, where nothing is coalesced (each session's read and save are statements of their own).
 */
async function benchEmbedded(n) {
  const on = async (sessions, opts) => {
    const db = await openPgliteWorker({});
    try {
      return await benchStored(db, sessions, opts);
    } finally {
      await db.close();
    }
  };
  const out = await on(n);
  out.baseline_one_check_at_a_time = await on(Math.min(n, 500), { concurrency: 1 });
  return out;
}

/** The same on a Postgres server (NEATROOTS_PG_URL), in a database of its own, dropped after. */
async function benchPostgres(n) {
  const url = process.env.NEATROOTS_PG_URL;
  if (!url) return { skipped: 'set NEATROOTS_PG_URL (deploy/local/services env)' };
  const scratch = await scratchDatabase(url, `neatroots_bench_sop_${process.pid}`);
  const db = await openPostgres({ url: scratch.url, max: 10 });
  try {
    return await benchStored(db, n);
  } finally {
    await db.close();
    await scratch.drop();
  }
}

async function benchModel(fake, { maxBatch, sessions, concurrency }) {
  const answerer = new QuestionAnswerer({
    decision: openAiChatModel({ role: 'decision', baseURL: fake.url, model: 'bench-decider', timeoutMs: 30_000 }),
    // The defaults of NEATROOTS_QUESTION_BATCH, _BATCH_WAIT_MS and NEATROOTS_DECISION_MODEL_CONCURRENCY.
    queue: { maxBatch, maxWaitMs: 10, maxConcurrent: 8 },
    cache: false,
    onError: () => undefined,
  });
  const check = createCheckSession({ gateway: answererDecisions(answerer), settings: loadSopSettings({}) });
  fake.reset();
  const { seconds, results } = await run(check, MODEL_LOCK, sessions, concurrency, (i) => session(i, ['lookup_account']));
  answerer.close();
  const { requests, decisions } = fake.stats();
  if (results.some((b) => b.checks[0].result !== 'followed')) throw new Error('scripted sessions should be followed');
  return {
    max_batch: maxBatch,
    concurrency,
    sessions,
    sessions_per_s: Math.round((sessions / seconds) * 10) / 10,
    decisions,
    model_requests: requests,
    requests_per_decision: Math.round((requests / decisions) * 1000) / 1000,
  };
}

async function benchSop({ toolSessions = 20_000, embeddedSessions = 2_000, modelSessions = 400 } = {}) {
  const out = { tool_only: await benchToolOnly(toolSessions), tool_only_embedded: null, tool_only_postgres: null, model_latency_ms: LATENCY_MS, model: [] };
  try {
    out.tool_only_embedded = await benchEmbedded(embeddedSessions);
  } catch (e) {
    out.tool_only_embedded = { skipped: `the review service's SOP side could not run: ${e.message}` };
  }
  try {
    out.tool_only_postgres = await benchPostgres(embeddedSessions);
  } catch (e) {
    out.tool_only_postgres = { skipped: `could not run on Postgres: ${e.message}` };
  }
  const { SOP_CHECK_CONCURRENCY } = require('@neatroots/review/dist/sop/sessions');
  const fake = await fakeModel();
  try {
    for (const concurrency of [SOP_CHECK_CONCURRENCY, 64]) {
      const n = concurrency === SOP_CHECK_CONCURRENCY ? Math.min(modelSessions, 80) : modelSessions;
      out.model.push(await benchModel(fake, { maxBatch: 8, sessions: n, concurrency }));
      out.model.push(await benchModel(fake, { maxBatch: 1, sessions: Math.min(n, 160), concurrency }));
    }
  } finally {
    await fake.close();
  }
  return out;
}

module.exports = { benchSop, benchEmbedded, benchPostgres };

if (require.main === module) {
  // The command line is checked first: a bad one (or --help) ends here, before anything runs.
  require('./args').cli({
    usage: `
usage: node bench/sop.js
  --help  this text
  BENCH_MODEL_LATENCY_MS: the fake model's latency a request, in ms (default 200)`,
    check: () => {
      const ms = process.env.BENCH_MODEL_LATENCY_MS;
      return ms !== undefined && !/^\d+$/.test(ms.trim()) ? `BENCH_MODEL_LATENCY_MS: a whole number of ms, 0 or over, not '${ms}'` : undefined;
    },
  });
  benchSop().then(
    (r) => console.log(JSON.stringify(r, null, 2)),
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
