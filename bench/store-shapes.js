'use strict';
// Which shape the spans table should have (issue 13: "choose by measurement on both PGlite and
// Postgres"): the storage write alone, the StoreWriter's statements (a row per span, their
// counters in the same statement) against one row per run per batch (the batch's spans of the run
// as a JSON array, their ids as text[]), alternated round by round in one database.
//
// The chunk shape leaves out what the row shape does besides inserting: the runs' counters, and
// the replacing of a re-exported span. With `--keys`, it also writes a narrow per-span key table
// (project, run, span id), the least a chunk shape needs to tell a re-exported span from a new
// one and to write nothing twice for a redelivered batch.
//
// node bench/store-shapes.js [--postgres] [--keys] [rounds, default 4]
// --postgres: on NEATROOTS_PG_URL, in a scratch database dropped after; else PGlite on its thread.
const { performance } = require('node:perf_hooks');
const { migrate, openPgliteWorker, openPostgres, scratchDatabase } = require('@neatroots/platform');
const { envelopeStatements } = require('@neatroots/store');
const { fleet } = require('./checks');

const BATCH = 2_000;
const SPANS = 20_000;

const CHUNKS = `INSERT INTO bench_span_chunks (project, run_id, span_ids, payload)
  SELECT x.p, x.r, ARRAY(SELECT json_array_elements_text(x.i)), x.j FROM json_to_recordset($1::json) AS x(p text, r text, i json, j json)`;
const KEYS = `INSERT INTO bench_span_keys (project, run_id, span_id)
  SELECT x.p, x.r, x.s FROM json_to_recordset($1::json) AS x(p text, r text, s text) ON CONFLICT DO NOTHING`;

async function open(postgres) {
  if (!postgres) {
    const db = await openPgliteWorker();
    return { db, done: () => db.close() };
  }
  const url = process.env.NEATROOTS_PG_URL;
  if (!url) throw new Error('--postgres: set NEATROOTS_PG_URL (eval "$(deploy/local/services env)")');
  const scratch = await scratchDatabase(url, `bench_shapes_${Date.now().toString(36)}`);
  const db = await openPostgres({ url: scratch.url, max: 1 });
  return { db, done: async () => (await db.close(), await scratch.drop()) };
}

/** The chunk shape's statements for one batch: the runs as the writer upserts them, then one row per run. */
function chunkStatements(part, project, keys) {
  const st = envelopeStatements(part).filter((s) => !s.sql.includes('INSERT INTO spans'));
  const byRun = new Map();
  for (const e of part) {
    if (e.item.kind !== 'span') continue;
    const k = e.item.span.run_id;
    if (!byRun.has(k)) byRun.set(k, []);
    byRun.get(k).push(e.item.span);
  }
  const rows = [...byRun].map(([r, spans]) => ({ p: project, r, i: spans.map((s) => s.span_id), j: spans }));
  st.push({ sql: CHUNKS, params: [JSON.stringify(rows)] });
  if (keys) st.push({ sql: KEYS, params: [JSON.stringify(rows.flatMap((x) => x.i.map((s) => ({ p: project, r: x.r, s }))))] });
  return st;
}

async function main() {
  const args = process.argv.slice(2);
  const postgres = args.includes('--postgres');
  const keys = args.includes('--keys');
  const rounds = Number(args.find((a) => /^\d+$/.test(a)) ?? 4);
  const { db, done } = await open(postgres);
  try {
    await migrate(db);
    await db.exec(`CREATE TABLE bench_span_chunks (project text, run_id text, seq bigserial, span_ids text[], payload json, PRIMARY KEY (project, run_id, seq));
      CREATE TABLE bench_span_keys (project text, run_id text, span_id text, PRIMARY KEY (project, run_id, span_id))`);
    const out = { rows: [], chunks: [] };
    for (let r = 0; r < rounds; r++) {
      // alternate which goes first, so neither always runs as the load changes the same way
      for (const shape of r % 2 ? ['chunks', 'rows'] : ['rows', 'chunks']) {
        const project = `bench-${shape}-${r}`;
        const now = Date.now();
        const envs = [];
        for (const item of fleet({ runs: SPANS / 100, perRun: 100, project, startMs: now })) envs.push({ project, received_ms: now, item });
        const t0 = performance.now();
        for (let i = 0; i < envs.length; i += BATCH) {
          const part = envs.slice(i, i + BATCH);
          await db.batch(shape === 'rows' ? envelopeStatements(part) : chunkStatements(part, project, keys));
        }
        out[shape].push(Math.round(SPANS / ((performance.now() - t0) / 1000)));
      }
    }
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    console.log(JSON.stringify({ database: postgres ? 'postgres' : 'pglite', chunk_keys: keys, rows_spans_per_s: out.rows, chunks_spans_per_s: out.chunks, ratio: +(median(out.chunks) / median(out.rows)).toFixed(2) }, null, 2));
  } finally {
    await done();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
