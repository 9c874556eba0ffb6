'use strict';
// The embedded default on a disk that fills up: `neatroots start` with its data folder on a small
// tmpfs (FULL_DISK_MB, default 120; mounting it needs root), exports of 500 items one after the
// other until 30 were refused; then a stop (SIGTERM) and a start on a copy of the data folder on
// a disk with room, which processes what was left. Prints the refusals' codes and reasons, what
// /healthz answered after them, the error lines logged in the next 10 s, how long the stop took,
// what a start on the still full disk did, and the spans of the acknowledged exports against those
// stored and the dead letters (none should be set aside for a full disk). FULL_DISK_ON_FAILING=exit:
// the server runs with NEATROOTS_ON_FAILING=exit, and the bench says whether and when it exited by itself.
//   node bench/full-disk.js
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const { buildBatches } = require('./e2e');
const { fleet } = require('./checks');
const { startServer, freePort, KEY, PREFIX } = require('./flood');

const BATCH = 500;

/** The bus's backlog on /metrics (records accepted, not processed yet), or NaN. */
async function backlog(port) {
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    let n = 0;
    for (const line of text.split('\n')) if (line.startsWith('neatroots_bus_backlog')) n += Number(line.split(' ').pop());
    return n;
  } catch {
    return NaN;
  }
}

async function stop(server, waitMs) {
  const t0 = Date.now();
  server.proc.kill('SIGTERM');
  const exited = await Promise.race([
    new Promise((r) => server.proc.once('exit', () => r(true))),
    new Promise((r) => setTimeout(() => r(false), waitMs)),
  ]);
  if (!exited) {
    server.proc.kill('SIGKILL');
    await new Promise((r) => server.proc.once('exit', r));
  }
  return { exited, ms: Date.now() - t0 };
}

async function benchFullDisk({ mb = Number(process.env.FULL_DISK_MB ?? 120) } = {}) {
  const mnt = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${mb}m`, 'tmpfs', mnt], { stdio: 'pipe' });
  } catch (e) {
    fs.rmSync(mnt, { recursive: true, force: true });
    throw new Error(`cannot mount a ${mb} MB tmpfs at ${mnt} (root needed): ${String(e.stderr || e.message).trim()}`);
  }
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-full-copy-'));
  try {
    const home = path.join(mnt, 'home');
    fs.mkdirSync(home);
    const { batches } = buildBatches({ spans: 200_000, perRun: 100, batch: BATCH, prefix: PREFIX });
    const fullAdmin = await freePort();
    // FULL_DISK_ON_FAILING=exit: the server stops by itself once its bus log failed (no SIGTERM).
    const onFailing = process.env.FULL_DISK_ON_FAILING ?? 'stay';
    const server = await startServer({ NEATROOTS_ADMIN_PORT: String(fullAdmin), NEATROOTS_ON_FAILING: onFailing }, home);
    const exitedBy = new Promise((r) => server.proc.once('exit', (code) => r({ code, at: Date.now() })));
    const client = new grpc.Client(`127.0.0.1:${server.ports.grpc}`, grpc.credentials.createInsecure(), { 'grpc.max_send_message_length': 64 << 20 });
    const md = new grpc.Metadata();
    md.set('x-api-key', KEY);
    const refusals = {};
    const refusedMs = [];
    let acked = 0;
    let refused = 0;
    let firstRefusal = 0;
    for (let i = 0; i < batches.length && refused < 30; i++) {
      const t = Date.now();
      const err = await new Promise((res) =>
        client.makeUnaryRequest('/neatroots.v1.Ingest/Export', (b) => b, (b) => b, batches[i], md, { deadline: Date.now() + 30_000 }, res),
      );
      if (!err) {
        if (refused) throw new Error(`export ${i} was acknowledged after a refusal: the bus log took writes again`);
        acked++;
        continue;
      }
      if (!refused) firstRefusal = Date.now();
      refused++;
      refusedMs.push(Date.now() - t);
      const k = `${grpc.status[err.code]}: ${err.details}`;
      refusals[k] = (refusals[k] ?? 0) + 1;
    }
    client.close();
    if (onFailing === 'exit') {
      const out = await Promise.race([exitedBy, new Promise((r) => setTimeout(() => r(undefined), 120_000))]);
      if (!out) {
        server.proc.kill('SIGKILL');
        await exitedBy;
      }
      const lines = server.output.join('').split('\n');
      const said = lines.find((l) => l.includes('NEATROOTS_ON_FAILING=exit')) ?? lines.filter((l) => !l.includes('"level":"error"')).slice(-5).join(' | ');
      return { disk_mb: mb, on_failing: onFailing, exports_acknowledged: acked, exports_refused: refused, exited_by_itself: out ? { code: out.code, ms_after_the_first_refusal: out.at - firstRefusal } : 'no (killed after 120 s)', said };
    }
    // What a supervisor sees, and what the log says while the consumers retry (10 s).
    await new Promise((r) => setTimeout(r, 1_500));
    const live = await fetch(`http://127.0.0.1:${fullAdmin}/healthz`).then(async (r) => ({ status: r.status, body: await r.json() }), (e) => ({ error: String(e) }));
    const quiet = server.output.length;
    await new Promise((r) => setTimeout(r, 10_000));
    const errorLines = server.output.slice(quiet).join('').split('\n').filter((l) => /"level":(50|"error")|\bERROR\b/.test(l)).length;
    const mark = server.output.length;
    const stopped = await stop(server, Number(process.env.FULL_DISK_STOP_WAIT_MS ?? 120_000));
    // FULL_DISK_LOG=file: what the server said from the stop on
    if (process.env.FULL_DISK_LOG) fs.writeFileSync(process.env.FULL_DISK_LOG, server.output.slice(mark).join(''));
    // A start on the disk still full (as a supervisor restarting it would): how it ends.
    let fullStart;
    try {
      const s2 = await startServer({ NEATROOTS_ADMIN_PORT: String(await freePort()) }, home);
      fullStart = 'serving';
      await stop(s2, 60_000);
    } catch (e) {
      fullStart = String(e.message).split('\n').filter((l) => /ENOSPC|no space|error/i.test(l)).slice(0, 3).join(' | ').slice(0, 400) || String(e.message).slice(0, 200);
    }
    // Room again: the data folder copied to a disk with space, and started there.
    execFileSync('cp', ['-a', home, copy]);
    const adminPort = await freePort();
    const again = await startServer({ NEATROOTS_ADMIN_PORT: String(adminPort) }, path.join(copy, 'home'));
    // The acknowledged exports' spans (the batches hold run items too).
    let items = 0;
    let spans = 0;
    for (const item of fleet({ runs: 2_000, perRun: 100, project: undefined, prefix: PREFIX })) {
      if (items++ >= acked * BATCH) break;
      if (item.kind === 'span') spans++;
    }
    // Until the bus's backlog is 0 (processed and stored), then stopped: its database read after it, exactly.
    const end = Date.now() + 180_000;
    while (Date.now() < end && (await backlog(adminPort)) !== 0) await new Promise((r) => setTimeout(r, 1_000));
    await stop(again, 120_000);
    const { PGlite } = require('@electric-sql/pglite');
    const db = await PGlite.create(path.join(copy, 'home', 'data', 'pg'));
    const stored = (await db.query('SELECT count(*)::int AS n FROM spans')).rows[0].n;
    const deadLetters = (await db.query('SELECT count(*)::int AS n FROM dead_letters')).rows[0].n;
    await db.close();
    return {
      disk_mb: mb,
      exports_acknowledged: acked,
      exports_refused: refused,
      refusals,
      refused_ms_max: Math.max(...refusedMs),
      healthz_after_refusals: live,
      error_lines_in_10_s_after: errorLines,
      stop: { exited: stopped.exited, ms: stopped.ms },
      start_on_the_full_disk: fullStart,
      spans_acknowledged: spans,
      spans_stored_after_a_start_with_room: stored,
      dead_letters: deadLetters,
    };
  } finally {
    try {
      execFileSync('umount', [mnt], { stdio: 'pipe' });
    } catch {
      // left mounted: said by the error above
    }
    fs.rmSync(mnt, { recursive: true, force: true });
    fs.rmSync(copy, { recursive: true, force: true });
  }
}

module.exports = { benchFullDisk };

if (require.main === module) benchFullDisk().then((r) => console.log(JSON.stringify(r, null, 2)), (e) => (console.error(e.message ?? e), process.exit(1)));
