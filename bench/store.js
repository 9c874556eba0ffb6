'use strict';
// The review service's hot write alone: spans and runs into the embedded database (PGlite on
// its own thread), batched as the StoreWriter does.
const { performance } = require('node:perf_hooks');
const { openPgliteWorker, migrate } = require('@neatroots/platform');
const { RunsRepo } = require('@neatroots/store');
const { fleet } = require('./checks');

async function benchStore({ spans = 50_000, perRun = 100, batch = 500 } = {}) {
  const db = await openPgliteWorker();
  await migrate(db);
  const repo = new RunsRepo(db);
  const now = Date.now();
  const envs = [];
  for (const item of fleet({ runs: Math.ceil(spans / perRun), perRun, startMs: now })) envs.push({ project: 'bench', received_ms: now, item });
  const t0 = performance.now();
  for (let i = 0; i < envs.length; i += batch) await db.transaction((tx) => new RunsRepo(tx).writeEnvelopes(envs.slice(i, i + batch)));
  const ms = performance.now() - t0;
  void repo;
  await db.close();
  return { spans, store_spans_per_s: Math.round(spans / (ms / 1000)) };
}

module.exports = { benchStore };
if (require.main === module) benchStore({ spans: Number(process.argv[2] ?? 50_000) }).then((r) => console.log(JSON.stringify(r)));
