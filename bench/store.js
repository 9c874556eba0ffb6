'use strict';
// The review service's hot write alone: runs and spans written as the StoreWriter writes a bus
// batch (one transaction of up to 2,000 items), on PGlite on its own thread (the embedded
// default) and on a Postgres server (NEATROOTS_PG_URL, in a scratch database dropped after).
//
// Two shapes side by side, interleaved round by round in one process so the machine's load
// falls on both alike, each round into a project of its own (the tables grow for both):
// - new: RunsRepo.writeEnvelopes as it is, spans inserted and counted by the same statement
//   from the rows the insert returns;
// - old: the write before that (the baseline): spans upserted, then every touched run's
//   counters recounted from all its stored spans (three statements a batch).
//
// node bench/store.js [spans a round, default 20000] [rounds, default 4] [spans a run, default 100]
// The old shape's recount reads every stored span of each run a batch touches, so the gap
// between the shapes grows with the runs' length: try 1000 spans a run, 64,000 a round.
const os = require('node:os');
const { performance } = require('node:perf_hooks');
const { migrate, openPgliteWorker, openPostgres } = require('@neatroots/platform');
const { RunsRepo } = require('@neatroots/store');
const { fleet } = require('./checks');

const BATCH = 2_000;
const ROWS_PER_STATEMENT = 500;

/**
 * The baseline: the same repository with its span write as it was before the counters were
 * kept by the insert. It overrides RunsRepo's private methods by name (a benchmark only).
 */
class OldRunsRepo extends RunsRepo {
  async upsertRuns(patches) {
    this.touched = patches;
    return super.upsertRuns(patches);
  }

  async upsertSpans(rows) {
    const db = this.db;
    for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
      const batch = rows.slice(i, i + ROWS_PER_STATEMENT).map((r) => ({
        project: r.project, run_id: r.run_id, span_id: r.span.span_id, payload: r.span, start_ms: r.span.start_ms ?? null,
        is_error: r.span.status === 'error', total_tokens: tokens(r.span), received_ms: r.received_ms,
      }));
      await db.query(
        `INSERT INTO spans (project, run_id, span_id, payload, start_ms, start_exact, is_error, total_tokens, received_at)
         SELECT x.project, x.run_id, x.span_id, x.payload, round(x.start_ms)::bigint, x.start_ms, x.is_error,
                round(x.total_tokens)::bigint, to_timestamp(x.received_ms / 1000.0)
         FROM ROWS FROM (json_to_recordset($1::json) AS (project text, run_id text, span_id text, payload json, start_ms float8,
                                                          is_error boolean, total_tokens float8, received_ms float8))
              WITH ORDINALITY AS x(project, run_id, span_id, payload, start_ms, is_error, total_tokens, received_ms, ord)
         ORDER BY x.ord
         ON CONFLICT (project, run_id, span_id) DO UPDATE SET
           payload = EXCLUDED.payload, start_ms = EXCLUDED.start_ms, start_exact = EXCLUDED.start_exact, is_error = EXCLUDED.is_error,
           total_tokens = EXCLUDED.total_tokens, received_at = EXCLUDED.received_at`,
        [JSON.stringify(batch)],
      );
    }
    const runs = this.touched;
    for (let i = 0; i < runs.length; i += ROWS_PER_STATEMENT) {
      const part = runs.slice(i, i + ROWS_PER_STATEMENT);
      await db.query(
        `UPDATE runs r SET span_count = s.n, error_count = s.e, total_tokens = s.t
         FROM (
           SELECT sp.project, sp.run_id, count(*) AS n, count(*) FILTER (WHERE sp.is_error) AS e,
                  COALESCE(sum(sp.total_tokens), 0) AS t
           FROM spans sp
           JOIN unnest($1::text[], $2::text[]) AS k(project, run_id) ON sp.project = k.project AND sp.run_id = k.run_id
           GROUP BY sp.project, sp.run_id
         ) s
         WHERE r.project = s.project AND r.run_id = s.run_id`,
        [part.map((p) => p.project), part.map((p) => p.run_id)],
      );
    }
  }
}

function tokens(s) {
  const u = s.usage;
  if (!u) return 0;
  return typeof u.total_tokens === 'number' ? u.total_tokens : (u.input_tokens ?? 0) + (u.output_tokens ?? 0);
}

const SHAPES = { old: OldRunsRepo, new: RunsRepo };

/** One round of one shape: `spans` spans (64 runs at once, `perRun` each) in batches of 2,000. */
async function round(db, Repo, project, spans, perRun) {
  const now = Date.now();
  const envs = [];
  for (const item of fleet({ runs: Math.ceil(spans / perRun), perRun, project, startMs: now })) envs.push({ project, received_ms: now, item });
  const t0 = performance.now();
  for (let i = 0; i < envs.length; i += BATCH) await db.transaction((tx) => new Repo(tx).writeEnvelopes(envs.slice(i, i + BATCH)));
  const ms = performance.now() - t0;
  // both shapes must leave the same counters: the spans stored, counted once
  const res = await db.query(
    `SELECT (SELECT sum(span_count) FROM runs WHERE project = $1) AS counted, (SELECT count(*) FROM spans WHERE project = $1) AS stored`,
    [project],
  );
  const { counted, stored } = res.rows[0];
  if (Number(counted) !== Number(stored)) throw new Error(`${project}: runs count ${counted} spans, ${stored} stored`);
  return Math.round(spans / (ms / 1000));
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function compare(db, spans, rounds, perRun) {
  const out = { old: [], new: [] };
  for (let r = 0; r < rounds; r++) {
    // alternate which goes first, so neither always writes into the smaller table
    const order = r % 2 ? ['new', 'old'] : ['old', 'new'];
    for (const shape of order) out[shape].push(await round(db, SHAPES[shape], `bench-${shape}-${r}`, spans, perRun));
  }
  return {
    new_spans_per_s: median(out.new), old_spans_per_s: median(out.old), ratio: +(median(out.new) / median(out.old)).toFixed(2),
    rounds_new: out.new, rounds_old: out.old,
  };
}

async function benchStore({ spans = 20_000, rounds = 4, perRun = 100 } = {}) {
  const load = () => os.loadavg().map((x) => x.toFixed(1)).join(' ');
  const result = { spans_a_round: spans, spans_a_run: perRun, batch: BATCH, load_before: load() };
  const lite = await openPgliteWorker();
  try {
    await migrate(lite);
    result.pglite = await compare(lite, spans, rounds, perRun);
  } finally {
    await lite.close();
  }
  const url = process.env.NEATROOTS_PG_URL;
  if (!url) result.postgres = { skipped: 'set NEATROOTS_PG_URL (deploy/local/services env)' };
  else {
    const admin = await openPostgres({ url, max: 1 });
    const name = `neatroots_bench_store_${process.pid}`;
    await admin.exec(`CREATE DATABASE ${name}`);
    const u = new URL(url);
    u.pathname = `/${name}`;
    const db = await openPostgres({ url: u.toString(), max: 2 });
    try {
      await migrate(db);
      result.postgres = await compare(db, spans, rounds, perRun);
    } finally {
      await db.close();
      await admin.exec(`DROP DATABASE IF EXISTS ${name}`);
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
