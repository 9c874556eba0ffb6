'use strict';
// The review service's hot write alone: runs and spans written as the StoreWriter writes a bus
// batch (one transaction of up to 2,000 items), on PGlite on its own thread (the embedded
// default) and on a Postgres server (NEATROOTS_PG_URL, in a scratch database dropped after).
//
// Two shapes side by side, interleaved round by round in one process so the machine's load
// falls on both alike, each round into a project of its own (the tables grow for both), each
// shape in a database of its own (the old one keeps an index the new one dropped):
// - new: RunsRepo.writeEnvelopes as it is (spans_order dropped by migration 0018: a run's page
//   reads the primary key's prefix and sorts; one-letter keys in the batch's JSON parameter);
// - old: the write before that (the baseline): the same statements with the columns' names as
//   the JSON parameter's keys, into a table that still has the spans_order index.
// Both insert new spans and count them by one statement (ON CONFLICT DO NOTHING RETURNING).
//
// node bench/store.js [spans a round, default 20000] [rounds, default 4] [spans a run, default 100]
// Prints spans/s (wall) and spans per CPU second (others' jobs move wall time far more): this
// process's CPU (PGlite runs on a worker thread of it), plus, for Postgres, its server process
// serving the connection when /proc shows it (a server on this machine), with the load average.
const fs = require('node:fs');
const os = require('node:os');
const { performance } = require('node:perf_hooks');
const { migrate, openPgliteWorker, openPostgres } = require('@neatroots/platform');
const { RunsRepo } = require('@neatroots/store');
const { fleet } = require('./checks');

const BATCH = 2_000;

/** The index migration 0018 dropped, as migration 0004 made it: the old shape's database has it. */
const SPANS_ORDER = `CREATE INDEX IF NOT EXISTS spans_order ON spans (project, run_id, (COALESCE(start_exact, 'Infinity'::double precision)), arrival)`;

const OLD_INSERT = `WITH x AS (
    SELECT x.ord, x.project, x.run_id, x.span_id, x.payload, round(x.start_ms)::bigint AS start_ms, x.start_ms AS start_exact,
           x.is_error, round(x.total_tokens)::bigint AS total_tokens, to_timestamp(x.received_ms / 1000.0) AS received_at
    FROM ROWS FROM (json_to_recordset($1::json) AS (project text, run_id text, span_id text, payload json, start_ms float8,
                                                     is_error boolean, total_tokens float8, received_ms float8))
         WITH ORDINALITY AS x(project, run_id, span_id, payload, start_ms, is_error, total_tokens, received_ms, ord)),
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
 * The baseline: the same repository with its span write as it was before (a benchmark only:
 * it overrides RunsRepo's private method by name). The rounds write new spans only, so the
 * second statement (replacing re-exported spans) never runs in either shape.
 */
class OldRunsRepo extends RunsRepo {
  async upsertSpans(rows) {
    for (let i = 0; i < rows.length; i += BATCH) {
      const batch = rows.slice(i, i + BATCH).map((r) => ({
        project: r.project, run_id: r.run_id, span_id: r.span.span_id, payload: r.span, start_ms: r.span.start_ms ?? null,
        is_error: r.span.status === 'error', total_tokens: tokens(r.span), received_ms: r.received_ms,
      }));
      const res = await this.db.query(OLD_INSERT, [JSON.stringify(batch)]);
      if (Number(res.rows[0].inserted) !== batch.length) throw new Error('the benchmark writes new spans only');
    }
  }
}

function tokens(s) {
  const u = s.usage;
  if (!u) return 0;
  return typeof u.total_tokens === 'number' ? u.total_tokens : (u.input_tokens ?? 0) + (u.output_tokens ?? 0);
}

const SHAPES = { old: OldRunsRepo, new: RunsRepo };

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
async function round(db, Repo, project, spans, perRun, server) {
  const now = Date.now();
  const envs = [];
  for (const item of fleet({ runs: Math.ceil(spans / perRun), perRun, project, startMs: now })) envs.push({ project, received_ms: now, item });
  const c0 = process.cpuUsage();
  const s0 = server ? server() : 0;
  const t0 = performance.now();
  for (let i = 0; i < envs.length; i += BATCH) await db.transaction((tx) => new Repo(tx).writeEnvelopes(envs.slice(i, i + BATCH)));
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

/** dbs.old has the spans_order index back, dbs.new is migrated as shipped. */
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

async function prepare(db, shape) {
  await migrate(db);
  if (shape === 'old') await db.exec(SPANS_ORDER);
}

async function benchStore({ spans = 20_000, rounds = 4, perRun = 100 } = {}) {
  const load = () => os.loadavg().map((x) => x.toFixed(1)).join(' ');
  const result = { spans_a_round: spans, spans_a_run: perRun, batch: BATCH, load_before: load() };
  const lite = { old: await openPgliteWorker(), new: await openPgliteWorker() };
  try {
    for (const shape of ['old', 'new']) await prepare(lite[shape], shape);
    result.pglite = await compare(lite, spans, rounds, perRun);
  } finally {
    await Promise.all([lite.old.close(), lite.new.close()]);
  }
  const url = process.env.NEATROOTS_PG_URL;
  if (!url) result.postgres = { skipped: 'set NEATROOTS_PG_URL (deploy/local/services env)' };
  else {
    const admin = await openPostgres({ url, max: 1 });
    const dbs = {};
    const servers = {};
    const names = { old: `neatroots_bench_store_old_${process.pid}`, new: `neatroots_bench_store_new_${process.pid}` };
    try {
      for (const shape of ['old', 'new']) {
        await admin.exec(`CREATE DATABASE ${names[shape]}`);
        const u = new URL(url);
        u.pathname = `/${names[shape]}`;
        // one connection: the writes are one transaction at a time, and its backend's CPU is read
        dbs[shape] = await openPostgres({ url: u.toString(), max: 1 });
        await prepare(dbs[shape], shape);
        servers[shape] = await serverCpu(dbs[shape]);
      }
      result.postgres = await compare(dbs, spans, rounds, perRun, servers);
      result.postgres.cpu_note = servers.new ? "this process's CPU and the server backend's" : "this process's CPU only: the server is not on this machine";
    } finally {
      for (const shape of ['old', 'new']) {
        await dbs[shape]?.close();
        await admin.exec(`DROP DATABASE IF EXISTS ${names[shape]}`);
      }
      await admin.close();
    }
  }
  result.load_after = load();
  return result;
}

module.exports = { benchStore };
if (require.main === module) {
  benchStore({ spans: Number(process.argv[2] ?? 20_000), rounds: Number(process.argv[3] ?? 4), perRun: Number(process.argv[4] ?? 100) })
    .then((r) => console.log(JSON.stringify(r, null, 2)))
    .catch((err) => {
      console.error(err);
      process.exit(1);
    });
}
