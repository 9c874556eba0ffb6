'use strict';
// Patterns, the review queue and Insights over a big workspace: 100,000 checked sessions
// (150,000 procedure checks) and 300,000 findings over a year, 5 procedures of 10 rules,
// generated with SQL. Times, beside a plain count over the same tables measured in the
// same run:
//   - assigning every finding to its rule pattern (the sopops_patterns job's backfill,
//     1,000 findings a transaction, with suppression and the roll-up of their sessions),
//     then the steady state: one new session's findings;
//   - the review queue, the patterns list, one pattern, Insights (365-day window), each the
//     median of 5 after a warm-up;
//   - a verdict (acceptable) on the biggest pattern: its findings suppressed, its sessions
//     rolled up again.
// Beside each read's wall time, its statements' own times: every statement the read ran is
// run again under EXPLAIN (ANALYZE, FORMAT JSON) in a transaction like the one it ran in (its
// SET LOCAL too), and the planning and execution times the plans report are summed
// (plan_ms, with the statement count and the slowest one); the same for the plain counts.
// On PGlite (in this process), and on Postgres when NEATROOTS_PG_URL is set (a scratch
// database created and dropped on that server).
// Build first: npx tsc -b services/review libs/platform
//   node bench/review.js [--sessions 100000] [--only pglite,postgres]
const { performance } = require('node:perf_hooks');
const { migrate, openPglite, openPostgres, scratchDatabase } = require('@neatroots/platform');
const { ReviewSop } = require('@neatroots/review');

const WS = 'bench';
const PROCEDURES = 5;
const RULES = 10; // 6 steps, 3 never rules, 1 warning sign
const FINDINGS_PER_SESSION = 3;

const kindOf = (r) => (r < 6 ? 'step' : r < 9 ? 'never' : 'warning');
const indexOf = (r) => (r < 6 ? r + 1 : r < 9 ? r - 5 : 1);
const textOf = (p, r) => `Rule ${r} of procedure ${p}: do the thing the caller needs, in order, and say so.`;
const passOf = (r) => (r < 6 ? 'done' : r < 9 ? 'ok' : 'absent');

function lock() {
  return {
    procedures: Array.from({ length: PROCEDURES }, (_, p) => ({
      procedure_id: `proc-${p}`,
      name: `Procedure ${p}`,
      version: 'v1',
      goal: 'The caller is helped.',
      applies_when: null,
      rules: Array.from({ length: RULES }, (_, r) => ({ rule_id: `r_p${p}_${r}`, kind: kindOf(r), index: indexOf(r), text: textOf(p, r), tool: null, required: r < 3, when: null })),
    })),
    agents: [{ agent: 'agent', procedures: Array.from({ length: PROCEDURES }, (_, p) => `proc-${p}`), instructions: '' }],
  };
}

function checkBody(p) {
  return {
    procedure_id: `proc-${p}`, procedure_name: `Procedure ${p}`, procedure_version: 'v1', release_id: 'rel_bench', applicable: true, excluded_reason: null,
    route_reason: 'Listed by the agent.', result: 'deviated', checked_result: 'deviated', goal_reached: true, goal_reason: null,
    steps_applicable: 6, steps_done: 5, nevers_violated: 1, model: null, prompt_version: null,
    rules: Array.from({ length: RULES }, (_, r) => ({ rule_id: `r_p${p}_${r}`, kind: kindOf(r), index: indexOf(r), text: textOf(p, r), status: r === 0 ? 'skipped' : r === 6 ? 'violated' : passOf(r), evidence: [], reason: 'Decided: yes.', finding: r === 0 || r === 6, finding_id: null, pattern_id: null, suppressed: false, override: null })),
  };
}

async function generate(db, sessions) {
  await db.query('INSERT INTO projects (name) VALUES ($1) ON CONFLICT DO NOTHING', [WS]);
  await db.query(`INSERT INTO sop_releases (id, workspace, number, live, lock) VALUES ('rel_bench', $1, 1, true, $2::jsonb)`, [WS, JSON.stringify(lock())]);
  // A year of sessions, newest first by number; a quarter followed, a quarter partial, half deviated.
  await db.query(
    `INSERT INTO sop_sessions (id, workspace, external_id, agent, release_id, started_at, content_hash, body, status, result, checked_result, received_at, checked_at)
     SELECT 'ses_' || i, $1, 'ext-' || i, 'agent', 'rel_bench', t, md5(i::text), '{"turns":[]}'::jsonb, 'checked',
            CASE i % 4 WHEN 0 THEN 'followed' WHEN 1 THEN 'partial' ELSE 'deviated' END,
            CASE i % 4 WHEN 0 THEN 'followed' WHEN 1 THEN 'partial' ELSE 'deviated' END, t, t
       FROM generate_series(1, $2::int) i, LATERAL (SELECT now() - ((i::float8 / $2::int) * 364) * interval '1 day' AS t) x`,
    [WS, sessions],
  );
  for (let p = 0; p < PROCEDURES; p++) {
    const body = JSON.stringify(checkBody(p));
    // every session is checked on its procedure; every other one on the next procedure too
    await db.query(
      `INSERT INTO sop_checks (session_id, procedure_id, position, result, checked_result, body)
       SELECT 'ses_' || i, $1, 0, s.result, s.result, $2::jsonb FROM generate_series(1, $3::int) i JOIN sop_sessions s ON s.id = 'ses_' || i WHERE i % ${PROCEDURES} = $4`,
      [`proc-${p}`, body, sessions, p],
    );
    await db.query(
      `INSERT INTO sop_checks (session_id, procedure_id, position, result, checked_result, body)
       SELECT 'ses_' || i, $1, 1, 'followed', 'followed', $2::jsonb FROM generate_series(1, $3::int) i WHERE i % 2 = 0 AND (i + 1) % ${PROCEDURES} = $4`,
      [`proc-${p}`, body, sessions, p],
    );
  }
  // three findings a session, on three different rules of its procedure
  await db.query(
    `INSERT INTO sop_findings (id, workspace, session_id, procedure_id, release_id, rule_id, kind, index, text, status, evidence, reason, started_at, created_at)
     SELECT 'sf_' || i || '_' || k, $1, s.id, 'proc-' || (i % ${PROCEDURES}), 'rel_bench', 'r_p' || (i % ${PROCEDURES}) || '_' || r,
            CASE WHEN r < 6 THEN 'step' WHEN r < 9 THEN 'never' ELSE 'warning' END,
            CASE WHEN r < 6 THEN r + 1 WHEN r < 9 THEN r - 5 ELSE 1 END,
            'Rule ' || r || ' of procedure ' || (i % ${PROCEDURES}) || ': do the thing the caller needs, in order, and say so.',
            CASE WHEN r < 6 THEN 'skipped' WHEN r < 9 THEN 'violated' ELSE 'unheeded' END,
            jsonb_build_array(jsonb_build_object('turn', 1, 'quote', 'It is twelve euros, and the dish is lovely ' || (i % 97), 'source', 'transcript')),
            'Decided: yes.', s.started_at, s.started_at
       FROM generate_series(1, $2::int) i JOIN sop_sessions s ON s.id = 'ses_' || i,
            generate_series(0, ${FINDINGS_PER_SESSION - 1}) k, LATERAL (SELECT (i * 7 + k * 3) % ${RULES} AS r) rr`,
    [WS, sessions],
  );
  await db.exec('VACUUM ANALYZE');
}

async function time(fn) {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

async function median(fn, n = 5) {
  await fn();
  const ms = [];
  for (let i = 0; i < n; i++) ms.push((await time(fn)).ms);
  ms.sort((a, b) => a - b);
  return Math.round(ms[Math.floor(n / 2)] * 10) / 10;
}

/**
 * The statements `fn` runs on `db`, grouped by the transaction they ran in (null: on their own).
 * Reads only: they are run again under EXPLAIN ANALYZE.
 */
async function traced(db, fn) {
  const statements = [];
  let tx = 0;
  const spy = {
    kind: db.kind,
    query: (sql, params) => {
      statements.push({ sql, params, tx: null });
      return db.query(sql, params);
    },
    exec: (sql) => db.exec(sql),
    transaction: (body) => {
      const id = ++tx;
      return db.transaction((t) => body({ query: (sql, params) => (statements.push({ sql, params, tx: id }), t.query(sql, params)) }));
    },
    close: () => undefined,
  };
  await fn(spy);
  return statements;
}

/** EXPLAIN ANALYZE of each statement, in a transaction per group as it ran; summed planning + execution ms. */
async function planTimes(db, statements) {
  const groups = new Map();
  for (const s of statements) {
    const key = s.tx === null ? `solo${groups.size}` : `tx${s.tx}`;
    (groups.get(key) ?? groups.set(key, []).get(key)).push(s);
  }
  const times = [];
  for (const group of groups.values()) {
    await db.transaction(async (t) => {
      for (const s of group) {
        if (!/^\s*(SELECT|WITH)\b/i.test(s.sql)) {
          await t.query(s.sql, s.params);
          continue;
        }
        const res = await t.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${s.sql}`, s.params);
        const raw = Object.values(res.rows[0])[0];
        const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw)[0];
        times.push({ ms: plan['Planning Time'] + plan['Execution Time'], sql: s.sql.replace(/\s+/g, ' ').trim().slice(0, 70) });
      }
    });
  }
  const total = times.reduce((a, t) => a + t.ms, 0);
  const slowest = times.reduce((a, t) => (t.ms > a.ms ? t : a), { ms: 0, sql: '' });
  return { plan_ms: Math.round(total * 10) / 10, statements: times.length, slowest_ms: Math.round(slowest.ms * 10) / 10, slowest: slowest.sql };
}

/** A read's wall time (median of 5) and its statements' plan times. */
async function measured(db, read) {
  const ms = await median(() => read(db));
  const plans = await planTimes(db, await traced(db, read));
  return { ms, ...plans };
}

async function benchOn(kind, db, sessions) {
  await migrate(db);
  const t0 = performance.now();
  await generate(db, sessions);
  const generate_s = Math.round((performance.now() - t0) / 100) / 10;
  const jobs = { work: async () => {}, add: async () => 'x', run: async () => undefined, schedule: async () => {}, close: async () => {} };
  const review = new ReviewSop({ db, jobs });
  const q = review.queries;
  const count = (sql) => () => db.query(sql, [WS]);

  const assignAll = await time(() => review.assigner.assign(WS));
  // what autovacuum does to a table this size: the visibility map the index-only scans need
  await db.exec('VACUUM ANALYZE');
  // steady state: one more checked session with three findings
  await db.query(`INSERT INTO sop_sessions (id, workspace, external_id, agent, release_id, started_at, content_hash, body, status, result, checked_result) VALUES ('ses_new', $1, 'ext-new', 'agent', 'rel_bench', now(), 'x', '{}'::jsonb, 'checked', 'deviated', 'deviated')`, [WS]);
  await db.query(`INSERT INTO sop_checks (session_id, procedure_id, position, result, checked_result, body) VALUES ('ses_new', 'proc-0', 0, 'deviated', 'deviated', $1::jsonb)`, [JSON.stringify(checkBody(0))]);
  await db.query(
    `INSERT INTO sop_findings (id, workspace, session_id, procedure_id, release_id, rule_id, kind, index, text, status, started_at)
     SELECT 'sf_new_' || r, $1, 'ses_new', 'proc-0', 'rel_bench', 'r_p0_' || r, 'step', r + 1, 'Rule ' || r || ' of procedure 0: do the thing the caller needs, in order, and say so.', 'skipped', now() FROM generate_series(0, 2) r`,
    [WS],
  );
  const assignOne = await time(() => review.assigner.assign(WS));

  // the same reads on a given database (the traced one for the plans)
  const reads = {
    baseline_count_findings: (d) => d.query('SELECT count(*) FROM sop_findings WHERE workspace = $1', [WS]),
    baseline_count_sessions: (d) => d.query('SELECT count(*) FROM sop_sessions WHERE workspace = $1', [WS]),
    review_queue: (d) => new ReviewSop({ db: d, jobs }).queries.reviewQueue(WS, {}),
    insights: (d) => new ReviewSop({ db: d, jobs }).queries.insights(WS, {}),
  };
  const out = {
    db: kind,
    sessions,
    findings: sessions * FINDINGS_PER_SESSION + 3,
    generate_s,
    assign_all_s: Math.round(assignAll.ms / 100) / 10,
    assign_findings_per_s: Math.round(assignAll.value / (assignAll.ms / 1000)),
    assign_one_session_ms: Math.round(assignOne.ms),
    baseline_count_findings_ms: await median(count('SELECT count(*) FROM sop_findings WHERE workspace = $1')),
    baseline_count_sessions_ms: await median(count('SELECT count(*) FROM sop_sessions WHERE workspace = $1')),
    review_queue_ms: await median(() => q.reviewQueue(WS, {})),
    patterns_ms: await median(() => q.patterns(WS, {})),
    insights_ms: await median(() => q.insights(WS, {})),
  };
  // wall time beside the statements' own (EXPLAIN ANALYZE) times, for the reads with a target
  out.plans = {};
  for (const [name, read] of Object.entries(reads)) out.plans[name] = await measured(db, read);
  const biggest = (await q.patterns(WS, {})).items[0];
  out.pattern_ms = await median(() => q.pattern(WS, biggest.id, {}));
  const verdict = await time(() => q.giveVerdict(WS, biggest.id, { verdict: 'acceptable' }));
  out.verdict_on_biggest_pattern_ms = Math.round(verdict.ms);
  out.verdict_suppressed = verdict.value.suppressed_count;
  out.insights_after_verdict_ms = await median(() => q.insights(WS, {}));
  return out;
}

async function benchReview({ sessions = 100_000, only = ['pglite', 'postgres'] } = {}) {
  const rows = [];
  if (only.includes('pglite')) {
    const db = await openPglite();
    try {
      rows.push(await benchOn('pglite', db, sessions));
    } finally {
      await db.close();
    }
  }
  const url = process.env.NEATROOTS_PG_URL;
  if (only.includes('postgres') && url) {
    const scratch = await scratchDatabase(url, `neatroots_bench_review_${process.pid}`);
    const db = await openPostgres({ url: scratch.url, max: 4 });
    try {
      rows.push(await benchOn('postgres', db, sessions));
    } finally {
      await db.close();
      await scratch.drop();
    }
  } else if (only.includes('postgres')) rows.push({ db: 'postgres', skipped: 'set NEATROOTS_PG_URL (deploy/local/services env)' });
  return rows;
}

module.exports = { benchReview, generate, checkBody };
if (require.main === module) {
  // The command line is checked first: a bad one (or --help) ends here, before anything runs.
  const args = require('./args').cli({
    usage: `
usage: node bench/review.js [--sessions N] [--only pglite,postgres]
  --sessions N  checked sessions generated (default 100000)
  --only NAMES  these databases only, comma-separated (default: pglite,postgres; postgres needs
                NEATROOTS_PG_URL)
  --help        this text`,
    options: { sessions: { count: true }, only: { list: ['pglite', 'postgres'] } },
  });
  benchReview({ sessions: args.sessions ?? 100_000, only: args.only ?? ['pglite', 'postgres'] })
    .then((rows) => {
      for (const r of rows) console.log(JSON.stringify(r));
    })
    .catch((err) => {
      console.error(err);
      process.exit(1);
    });
}
