'use strict';
// A long run of the embedded deployment at a steady rate: `neatroots start` as a child process
// (its own data folder, loopback only) takes SOAK_RATE spans/s (default 2,000) for SOAK_MINUTES
// (default 10), a fleet of runs that never repeats its run ids, as a production fleet's. Every
// SOAK_SAMPLE_S seconds (default 30) it records the server's resident memory, its JS heap (in use, and its size), its memory outside the heap, the data folder's size and the bus's backlog (records accepted, not processed yet).
// Prints the samples, and the first and last thirds' medians side by side: memory and disk that
// keep growing at a steady rate are a leak or an unbounded store; flat ones are the design.
//   SOAK_MINUTES=3 node bench/soak.js
const fs = require('node:fs');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const grpc = require('@grpc/grpc-js');
const { buildBatches } = require('./e2e');
const { startServer, rotating, rssOf, freePort, KEY, PREFIX } = require('./flood');

function du(dir) {
  let sum = 0;
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      try {
        if (e.isDirectory()) walk(p);
        else sum += fs.statSync(p).size;
      } catch {
        // removed meanwhile (a segment compacted away)
      }
    }
  };
  walk(dir);
  return sum;
}

async function startAfterKill(server, env) {
  server.proc.kill('SIGKILL');
  await new Promise((res) => server.proc.once('exit', res));
  const t0 = performance.now();
  const again = await startServer({ ...env, NEATROOTS_ADMIN_PORT: '0' }, server.home);
  const s = Math.round((performance.now() - t0) / 100) / 10;
  again.proc.kill('SIGTERM');
  await new Promise((res) => again.proc.once('exit', res));
  return s;
}

async function metrics(port) {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const name = line.slice(0, line.search(/[{ ]/));
    out[name] = (out[name] ?? 0) + Number(line.split(' ').pop());
  }
  return out;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};

async function benchSoak({
  minutes = Number(process.env.SOAK_MINUTES ?? 10),
  rate = Number(process.env.SOAK_RATE ?? 2000),
  sampleS = Number(process.env.SOAK_SAMPLE_S ?? 30),
} = {}) {
  const spansPerBatch = 100;
  // 2,000 runs of 100 spans, sent again under other run ids pass after pass.
  const { batches, spans } = buildBatches({ spans: 200_000, perRun: 100, batch: spansPerBatch, prefix: PREFIX });
  const perBatch = spans / batches.length;
  const admin = await freePort();
  // Settings in this environment (NEATROOTS_*) go to the server: a comparison of one setting. Not
  // its data folder, ports or key: startServer sets the bench's own after them, and the admin port
  // is the bench's own here.
  const settings = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('NEATROOTS_')));
  const serverEnv = { ...settings, NEATROOTS_ADMIN_PORT: String(admin), ...(process.env.SOAK_NODE_OPTIONS ? { NODE_OPTIONS: process.env.SOAK_NODE_OPTIONS } : {}) };
  const server = await startServer(serverEnv);
  const pid = server.proc.pid;
  const client = new grpc.Client(`127.0.0.1:${server.ports.grpc}`, grpc.credentials.createInsecure(), { 'grpc.max_send_message_length': 64 << 20 });
  const md = new grpc.Metadata();
  md.set('x-api-key', KEY);
  const take = rotating(batches);
  const samples = [];
  const r = { accepted: 0, refused: 0, failed: 0 };
  try {
    const t0 = performance.now();
    const end = t0 + minutes * 60_000;
    const interval = (perBatch / rate) * 1000;
    let sent = 0;
    let nextSample = t0 + sampleS * 1000;
    const pending = new Set();
    while (performance.now() < end) {
      const due = t0 + sent * interval;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((res) => setTimeout(res, wait));
      sent++;
      const call = new Promise((resolve) =>
        client.makeUnaryRequest('/neatroots.v1.Ingest/Export', (b) => b, (b) => b, take(), md, { deadline: Date.now() + 30_000 }, (e) => {
          if (!e) r.accepted += perBatch;
          else if (e.code === grpc.status.RESOURCE_EXHAUSTED) r.refused += perBatch;
          else r.failed += perBatch;
          resolve();
        }));
      pending.add(call);
      call.then(() => pending.delete(call));
      if (performance.now() >= nextSample) {
        nextSample += sampleS * 1000;
        const m = await metrics(admin);
        samples.push({
          at_s: Math.round((performance.now() - t0) / 1000),
          accepted: Math.round(r.accepted),
          refused: Math.round(r.refused),
          backlog: m.neatroots_bus_backlog ?? NaN,
          rss_mb: Math.round(rssOf(pid) / 1048576),
          heap_used_mb: Math.round((m.neatroots_nodejs_heap_size_used_bytes ?? NaN) / 1048576),
          heap_total_mb: Math.round((m.neatroots_nodejs_heap_size_total_bytes ?? NaN) / 1048576),
          external_mb: Math.round((m.neatroots_nodejs_external_memory_bytes ?? NaN) / 1048576),
          data_mb: Math.round(du(server.home) / 1048576),
          wal_mb: Math.round(du(path.join(server.home, 'data', 'pg', 'pg_wal')) / 1048576),
        });
        console.error(JSON.stringify(samples[samples.length - 1]));
      }
    }
    await Promise.all(pending);
    const seconds = (performance.now() - t0) / 1000;
    const third = Math.max(1, Math.floor(samples.length / 3));
    const first = samples.slice(0, third);
    const last = samples.slice(-third);
    const pair = (k) => [median(first.map((s) => s[k])), median(last.map((s) => s[k]))];
    return {
      minutes,
      rate_asked_spans_per_s: rate,
      accepted_spans_per_s: Math.round(r.accepted / seconds),
      refused_spans: Math.round(r.refused),
      failed_spans: r.failed,
      runs: Math.round(r.accepted / 100),
      first_and_last_third_medians: { rss_mb: pair('rss_mb'), heap_used_mb: pair('heap_used_mb'), data_mb: pair('data_mb'), wal_mb: pair('wal_mb') },
      // Killed (SIGKILL) at the end, then started again on its data folder: what a crash costs at the next start.
      start_after_kill_s: await startAfterKill(server, serverEnv),
      samples,
    };
  } finally {
    client.close();
    if (server.proc.exitCode === null && server.proc.signalCode === null) {
      server.proc.kill('SIGTERM');
      await new Promise((res) => server.proc.once('exit', res));
    }
    if (process.env.SOAK_KEEP) console.error(`data folder kept: ${server.home}\n${server.output.join('').split('\n').slice(-40).join('\n')}`);
    else fs.rmSync(server.home, { recursive: true, force: true });
  }
}

module.exports = { benchSoak };

if (require.main === module) benchSoak().then((r) => console.log(JSON.stringify(r, null, 2)), (e) => (console.error(e), process.exit(1)));
