'use strict';
// The embedded database's write-ahead log, with and without neatroots' checkpoints
// (NEATROOTS_DB_CHECKPOINT_MB): PGlite on its own thread in a folder, as `neatroots start` opens
// it (openPgliteWorker), WAL_ROWS rows of about 400 bytes written 500 a statement; then the
// process killed (no close) and the database opened again. PGlite runs Postgres as one user with
// no checkpointer and max_wal_size fixed at 1 GB. Prints, for each way: rows/s written, the
// checkpoints and their times, pg_wal's size, the time to open the database after the kill, and
// the ratios.
//   node bench/wal.js                 (WAL_ROWS=1900000: about 1 GB of log)
//   WAL_ROWS=400000 node bench/wal.js
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

function dirBytes(dir) {
  let sum = 0;
  for (const f of fs.readdirSync(dir, { withFileTypes: true })) if (f.isFile()) sum += fs.statSync(path.join(dir, f.name)).size;
  return sum;
}

async function child(dir, mode, rows) {
  const { openPgliteWorker, DEFAULT_CHECKPOINT_WAL_BYTES } = require('@neatroots/platform');
  const checkpoints = [];
  let t = Date.now();
  const db = await openPgliteWorker({
    dataDir: dir,
    checkpointWalBytes: mode === 'checkpoints' ? DEFAULT_CHECKPOINT_WAL_BYTES : 0,
    onCheckpoint: (c) => checkpoints.push(Math.round(c.ms)),
  });
  const openMs = Date.now() - t;
  if (mode === 'open') return { open_ms: openMs, rows: (await db.query('SELECT count(*)::int AS n FROM t')).rows[0].n };
  await db.exec('CREATE TABLE IF NOT EXISTS t (run text, i int, p json, PRIMARY KEY (run, i))');
  const payload = JSON.stringify({ name: 'tool', input: { q: 'x'.repeat(200) }, output: 'y'.repeat(150) });
  t = Date.now();
  for (let n = 0; n < rows; ) {
    const values = [];
    const params = [];
    for (let i = 0; i < 500; i++, n++) {
      params.push(`run${n % 1000}`, n, payload);
      values.push(`($${3 * i + 1}, $${3 * i + 2}, $${3 * i + 3})`);
    }
    await db.query(`INSERT INTO t VALUES ${values.join(',')}`, params);
  }
  const ms = Date.now() - t;
  const wal = (await db.query(`SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint AS total FROM pg_control_checkpoint()`)).rows[0].total;
  return { rows, rows_per_s: Math.round((rows / ms) * 1000), wal_written_mb: Math.round(Number(wal) / 2 ** 20), checkpoints_ms: checkpoints, pg_wal_mb: Math.round(dirBytes(path.join(dir, 'pg_wal')) / 2 ** 20) };
}

if (process.argv[2] === '--child') {
  child(process.argv[3], process.argv[4], Number(process.argv[5])).then((r) => {
    process.stdout.write(JSON.stringify(r));
    process.exit(0); // no close: a crash, as far as the database knows
  });
} else {
  const rows = Number(process.env.WAL_ROWS ?? 1_900_000);
  // WAL_PAIRS pairs (default 1), the order switched each pair: the machine is noisy
  const pairs = Number(process.env.WAL_PAIRS ?? 1);
  const all = [];
  for (let p = 0; p < pairs; p++) {
    const out = {};
    for (const mode of p % 2 ? ['checkpoints', 'pglite-alone'] : ['pglite-alone', 'checkpoints']) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-wal-'));
      const run = (m) => {
        const r = spawnSync(process.execPath, [__filename, '--child', dir, m, String(rows)], { encoding: 'utf8', maxBuffer: 1 << 20 });
        if (r.status !== 0) throw new Error(`${m} failed: ${r.stderr}`);
        return JSON.parse(r.stdout);
      };
      const { checkpoints_ms: cps, ...written } = run(mode);
      const opened = run('open');
      out[mode] = { ...written, checkpoints: cps.length, checkpoint_ms_range: cps.length ? [Math.min(...cps), Math.max(...cps)] : null, open_after_kill_ms: opened.open_ms, rows_after_kill: opened.rows };
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const ratio = (k) => Math.round((out.checkpoints[k] / out['pglite-alone'][k]) * 100) / 100;
    out.ratio = { rows_per_s: ratio('rows_per_s'), wal_written: ratio('wal_written_mb'), pg_wal: ratio('pg_wal_mb'), open_after_kill: ratio('open_after_kill_ms') };
    all.push(out);
    console.error(JSON.stringify(out.ratio));
  }
  console.log(JSON.stringify(all.length === 1 ? all[0] : all, null, 2));
}
