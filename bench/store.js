'use strict';
// The review service's hot write alone: runs and spans written as the StoreWriter writes a bus
// batch (one transaction of up to 2,000 items), on PGlite on its own thread (the embedded
// default) and on a Postgres server (NEATROOTS_PG_URL, in a scratch database dropped after).
//
// Two shapes side by side, interleaved round by round in one process so the machine's load
// falls on both alike, each round into a project of its own (the tables grow for both), each
// shape in a database of its own:
// - new: the statements of envelopeStatements as the writer sends them, in one db.batch (on
//   PGlite's thread: one message each way for the whole transaction), the spans and their
//   counters, replaced copies included, in one statement;
// - old: the write before that (the baseline): the same runs upsert and span insert sent one at
//   a time in db.transaction (BEGIN, runs, spans, COMMIT: a message each way apiece on PGlite),
//   the replacing of re-exported spans a second statement sent only when some were there before.
// The rounds write new spans only (the second statement of the old shape never runs).
//
// node bench/store.js [spans a round, default 20000] [rounds, default 4] [spans a run, default 100] [--busy]
// --busy keeps this thread about 80% busy meanwhile (a timer spinning 4 ms of each 5), as ingest
// and the rule engine keep it in the embedded default: every reply from PGlite's thread then
// waits for a turn of the event loop, which is what the one-message batch saves.
// Prints spans/s (wall) and spans per CPU second (others' jobs move wall time far more): this
// process's CPU (PGlite runs on a worker thread of it; with --busy, the spinning is counted
// too), plus, for Postgres, its server process serving the connection when /proc shows it (a
// server on this machine), with the load average.
const fs = require('node:fs');
const os = require('node:os');
const { performance } = require('node:perf_hooks');
const { migrate, openPgliteWorker, openPostgres, scratchDatabase } = require('@neatroots/platform');
const { envelopeStatements } = require('@neatroots/store');
const { fleet } = require('./checks');

const BATCH = 2_000;

/** The span insert before the change, with its counters (the replace went in a second statement). */
const OLD_INSERT = `WITH x AS (SELECT x.ord, x.p AS project, x.r AS run_id, x.s AS span_id, x.j AS payload, round(x.t)::bigint AS start_ms, x.t AS start_exact,
         x.e AS is_error, round(x.k)::bigint AS total_tokens, to_timestamp(x.m / 1000.0) AS received_at
  FROM ROWS FROM (json_to_recordset($1::json) AS (p text, r text, s text, j json, t float8, e boolean, k float8, m float8))
       WITH ORDINALITY AS x(p, r, s, j, t, e, k, m, ord)),
  ins AS (
    INSERT INTO spans (project, run_id, span_id, payload, start_ms, start_exact, is_error, total_tokens, received_at)
    SELECT project, run_id, span_id, payload, start_ms, start_exact, is_error, total_tokens, received_at FROM x ORDER BY ord
    ON CONFLICT (project, run_id, span_id) DO NOTHING
    RETURNING project, run_id, is_error, total_tokens
  ),
  d AS (
    SELECT project, run_id, count(*) AS n, count(*) FILTER (WHERE is_error) AS e, sum(total_tokens) AS t
    FROM ins GROUP BY project, run_id
  ),
  counted AS (
    UPDATE runs r SET span_count = r.span_count + d.n, error_count = r.error_count + d.e, total_tokens = r.total_tokens + d.t
    FROM d WHERE r.project = d.project AND r.run_id = d.run_id
  )
  SELECT count(*) AS inserted FROM ins`;

/**
 * The old statement's parameter: the rows with each span's JSON in them (key j). The write now
 * sends the spans' JSON apart, a line each ($3); put back, spliced as text.
 */
function oldRows(params) {
  if (typeof params[2] !== 'string') return params[0];
  const lines = params[2].split('\n');
  let i = 0;
  return params[0].replace(/\{"p":/g, () => `{"j":${lines[i++]},"p":`);
}

/** The write before: a statement at a time in a transaction, the old span statement. */
async function oldWrite(db, envs) {
  await db.transaction(async (tx) => {
    for (const st of envelopeStatements(envs)) {
      if (!st.sql.includes('INSERT INTO spans')) {
        await tx.query(st.sql, st.params);
        continue;
      }
      const rows = oldRows(st.params);
      const res = await tx.query(OLD_INSERT, [rows]);
      if (Number(res.rows[0].inserted) !== JSON.parse(rows).length) throw new Error('the benchmark writes new spans only');
    }
  });
}

/** The write as the StoreWriter sends it. */
async function newWrite(db, envs) {
  await db.batch(envelopeStatements(envs));
}

const SHAPES = { old: oldWrite, new: newWrite };

/**
 * CPU seconds the Postgres backend serving `db` (one connection) has used, from /proc; null
 * when the server is not a process of this machine.
 */
async function serverCpu(db) {
  const pid = (await db.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
  const file = `/proc/${pid}/stat`;
  if (!fs.existsSync(file)) return null;
  return () => {
    // utime and stime, fields 14 and 15, in clock ticks (100 a second on Linux); after the
    // command's name, which is in parentheses and may hold spaces
    const f = fs.readFileSync(file, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  };
}

/** One round of one shape: `spans` spans (`perRun` each, 64 runs at once) in batches of 2,000. */
async function round(db, write, project, spans, perRun, server) {
  const now = Date.now();
  const envs = [];
  for (const item of fleet({ runs: Math.ceil(spans / perRun), perRun, project, startMs: now })) envs.push({ project, received_ms: now, item });
  const c0 = process.cpuUsage();
  const s0 = server ? server() : 0;
  const t0 = performance.now();
  for (let i = 0; i < envs.length; i += BATCH) await write(db, envs.slice(i, i + BATCH));
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  const cpuS = (c.user + c.system) / 1e6 + (server ? server() - s0 : 0);
  // both shapes must leave the same counters: the spans stored, counted once
  const res = await db.query(
    `SELECT (SELECT sum(span_count) FROM runs WHERE project = $1) AS counted, (SELECT count(*) FROM spans WHERE project = $1) AS stored`,
    [project],
  );
  const { counted, stored } = res.rows[0];
  if (Number(counted) !== Number(stored) || Number(stored) !== spans) throw new Error(`${project}: runs count ${counted} spans, ${stored} stored of ${spans}`);
  return { wall: Math.round(spans / (ms / 1000)), cpu: Math.round(spans / cpuS) };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function compare(dbs, spans, rounds, perRun, servers = {}) {
  const out = { old: [], new: [] };
  for (let r = 0; r < rounds; r++) {
    // alternate which goes first, so neither always runs as the load changes the same way
    const order = r % 2 ? ['new', 'old'] : ['old', 'new'];
    for (const shape of order) out[shape].push(await round(dbs[shape], SHAPES[shape], `bench-${r}`, spans, perRun, servers[shape]));
  }
  const wall = (k) => median(out[k].map((x) => x.wall));
  const cpu = (k) => median(out[k].map((x) => x.cpu));
  return {
    new_spans_per_s: wall('new'), old_spans_per_s: wall('old'), ratio: +(wall('new') / wall('old')).toFixed(2),
    new_spans_per_cpu_s: cpu('new'), old_spans_per_cpu_s: cpu('old'), cpu_ratio: +(cpu('new') / cpu('old')).toFixed(2),
    rounds_new: out.new.map((x) => x.wall), rounds_old: out.old.map((x) => x.wall),
  };
}

/** Keeps this thread about 80% busy (4 ms spinning in each 5) until the returned function is called. */
function keepBusy() {
  let on = true;
  const spin = () => {
    if (!on) return;
    const end = performance.now() + 4;
    while (performance.now() < end);
    setTimeout(spin, 1);
  };
  spin();
  return () => (on = false);
}

async function benchStore({ spans = 20_000, rounds = 4, perRun = 100, busy = false } = {}) {
  const load = () => os.loadavg().map((x) => x.toFixed(1)).join(' ');
  const result = { spans_a_round: spans, spans_a_run: perRun, batch: BATCH, busy_thread: busy, load_before: load() };
  const stopBusy = busy ? keepBusy() : () => undefined;
  try {
    return await benchBoth(result, spans, rounds, perRun);
  } finally {
    stopBusy();
  }
}

async function benchBoth(result, spans, rounds, perRun) {
  const load = () => os.loadavg().map((x) => x.toFixed(1)).join(' ');
  const lite = { old: await openPgliteWorker(), new: await openPgliteWorker() };
  try {
    for (const shape of ['old', 'new']) await migrate(lite[shape]);
    result.pglite = await compare(lite, spans, rounds, perRun);
  } finally {
    await Promise.all([lite.old.close(), lite.new.close()]);
  }
  const url = process.env.NEATROOTS_PG_URL;
  if (!url) result.postgres = { skipped: 'set NEATROOTS_PG_URL (deploy/local/services env)' };
  else {
    const dbs = {};
    const scratch = {};
    const servers = {};
    try {
      for (const shape of ['old', 'new']) {
        scratch[shape] = await scratchDatabase(url, `neatroots_bench_store_${shape}_${process.pid}`);
        // one connection: the writes are one transaction at a time, and its backend's CPU is read
        dbs[shape] = await openPostgres({ url: scratch[shape].url, max: 1 });
        await migrate(dbs[shape]);
        servers[shape] = await serverCpu(dbs[shape]);
      }
      result.postgres = await compare(dbs, spans, rounds, perRun, servers);
      result.postgres.cpu_note = servers.new ? "this process's CPU and the server backend's" : "this process's CPU only: the server is not on this machine";
    } finally {
      for (const shape of ['old', 'new']) {
        await dbs[shape]?.close();
        await scratch[shape]?.drop();
      }
    }
  }
  result.load_after = load();
  return result;
}

module.exports = { benchStore };
if (require.main === module) {
  // The command line is checked first: a bad one (or --help) ends here, before anything runs.
  const args = require('./args').cli({
    usage: `
usage: node bench/store.js [SPANS] [ROUNDS] [PER_RUN] [--busy]
  SPANS    spans a round (default 20000)
  ROUNDS   rounds of each shape (default 4)
  PER_RUN  spans a run (default 100)
  --busy   this thread kept about 80% busy meanwhile
  --help   this text`,
    options: { busy: { type: 'boolean' } },
    positionals: [
      { name: 'spans', count: true },
      { name: 'rounds', count: true },
      { name: 'per_run', count: true },
    ],
  });
  benchStore({ spans: args.spans ?? 20_000, rounds: args.rounds ?? 4, perRun: args.per_run ?? 100, busy: args.busy === true })
    .then((r) => console.log(JSON.stringify(r, null, 2)))
    .catch((err) => {
      console.error(err);
      process.exit(1);
    });
}
