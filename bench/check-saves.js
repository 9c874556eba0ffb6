'use strict';
// What saving one check costs as a project's checks grow: an embedded neatroots (PGlite in
// memory), checks saved one by one through the api (POST /v1/projects/{p}/checks, as the CLI,
// the app and the MCP tools save them), and at each count the time of a few more saves beside
// the time of one full reload of the check set (every check file read and every check parsed
// and compiled again, with nothing kept from the load before: what each save used to cost),
// measured in the same run. A save that costs
// what it changes stays flat as the count grows; the full reload grows with it. Build first
// (npm run build, or npx tsc -b packages/neatroots).
//   node bench/check-saves.js [--counts 100,500,1000] [--saves 20]
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { performance } = require('node:perf_hooks');

const KEY = 'bench-check-saves';
const PROJECT = 'bench';

/** A rule check of its own (a `match` every fourth: its pattern is compiled too). */
function checkYaml(i) {
  const rule =
    i % 4 === 0
      ? `  type: match\n  span: { tool: [tool_${i}] }\n  pattern: 'secret-${i}-[0-9]{4}'\n  in: [output]`
      : `  type: requires_before\n  call: { tool: [tool_${i}] }\n  requires: { tool: [lookup] }`;
  return `id: save-${String(i).padStart(5, '0')}\nkind: rule\ntitle: bench save ${i}\nrule:\n${rule}\n`;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
}

/**
 * `counts`: the numbers of checks saved at which to measure (ascending); `saves`: how many saves
 * and full reloads are timed at each. Returns one row a count.
 */
async function benchCheckSaves({ counts, saves }) {
  const { createLogger, loadConfig } = require('@neatroots/platform');
  const { startEmbedded } = require('neatroots');
  const { DisabledChecks, SafeMatching, loadChecks } = require('@neatroots/checks');
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-bench-saves-'));
  const config = loadConfig({
    NEATROOTS_HOME: home, NEATROOTS_OTLP_PORT: '0', NEATROOTS_OTLP_HTTP_PORT: '0', NEATROOTS_GRPC_PORT: '0', NEATROOTS_HTTP_PORT: '0', NEATROOTS_ADMIN_PORT: '0',
    NEATROOTS_API_KEYS: `${PROJECT}=${KEY}`, NEATROOTS_MEMORY_CEILING_MB: '0',
  });
  let app;
  try {
    app = await startEmbedded({ config, inMemoryDb: true, watch: false, log: createLogger({ level: 'error' }) });
    const base = `http://127.0.0.1:${app.httpPort}`;
    let saved = 0;
    // A connection a request (no keep-alive: a connection left idle while the baseline runs
    // would be closed by the server under the next save).
    const request = (method, p, body) =>
      new Promise((resolve, reject) => {
        const req = http.request(`${base}${p}`, { method, agent: false, headers: { 'x-api-key': KEY, 'content-type': 'application/json' } }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode, text }));
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end(body === undefined ? undefined : JSON.stringify(body));
      });
    const save = async () => {
      const res = await request('POST', `/v1/projects/${PROJECT}/checks`, { yaml: checkYaml(saved), by: 'cli' });
      if (res.status !== 200) throw new Error(`save ${saved}: HTTP ${res.status} ${res.text}`);
      saved++;
    };
    const rows = [];
    for (const n of counts) {
      while (saved < n - saves) await save();
      const saveMs = [];
      while (saved < n) {
        const t = performance.now();
        await save();
        saveMs.push(performance.now() - t);
      }
      // The baseline: every check parsed and compiled again, as each save did before (the
      // project's database checks as the api lists them, with the data folder's files).
      const listed = JSON.parse((await request('GET', `/v1/projects/${PROJECT}/checks`)).text);
      const database = listed.checks.filter((c) => c.source === 'database').map((c) => ({ id: c.id, yaml: c.yaml, origin: c.origin }));
      if (database.length !== n) throw new Error(`the api lists ${database.length} database checks, not ${n}`);
      const reloadMs = [];
      for (let i = 0; i < saves; i++) {
        const matching = new SafeMatching({ disabled: new DisabledChecks() });
        const t = performance.now();
        matching.compile(loadChecks({ home, projects: [], database, lenient: true }).checks);
        reloadMs.push(performance.now() - t);
        await matching.close();
      }
      rows.push({ checks: n, save_ms_median: +median(saveMs).toFixed(2), full_reload_ms_median: +median(reloadMs).toFixed(2) });
    }
    return rows;
  } finally {
    await app?.close();
    fs.rmSync(home, { recursive: true, force: true });
  }
}

/** The rows as a table: the per-save time beside the full reload's, and their ratio. */
function table(rows) {
  const lines = ['checks  save (median ms)  full reload (median ms)  save / full reload'];
  for (const r of rows) {
    lines.push(`${String(r.checks).padStart(6)}  ${r.save_ms_median.toFixed(2).padStart(16)}  ${r.full_reload_ms_median.toFixed(2).padStart(23)}  ${(r.save_ms_median / r.full_reload_ms_median).toFixed(3).padStart(18)}`);
  }
  return lines.join('\n');
}

module.exports = { benchCheckSaves, checkYaml, table };
if (require.main === module) {
  const args = require('./args').cli({
    usage: `
usage: node bench/check-saves.js [--counts N,N,...] [--saves K]
  --counts  the numbers of checks saved at which to measure, ascending (default 100,500,1000)
  --saves   saves and full reloads timed at each count (default 20)
  --help    this text`,
    options: { counts: { type: 'string' }, saves: { type: 'string', count: true } },
    check: (v) => {
      if (v.counts === undefined) return undefined;
      const ns = String(v.counts).split(',').map((x) => x.trim());
      if (!ns.every((x) => /^\d+$/.test(x) && Number(x) > 0)) return `--counts: whole numbers over 0, comma-separated, not '${v.counts}'`;
      if (ns.some((x, i) => i > 0 && Number(x) <= Number(ns[i - 1]))) return `--counts: ascending, not '${v.counts}'`;
      return undefined;
    },
  });
  const saves = args.saves ?? 20;
  const counts = args.counts ? String(args.counts).split(',').map(Number) : [100, 500, 1000];
  if (counts[0] < saves) {
    process.stderr.write(`bench/check-saves.js: --counts: the first count (${counts[0]}) is below --saves (${saves})\n`);
    process.exit(2);
  }
  benchCheckSaves({ counts, saves })
    .then((rows) => {
      console.log(table(rows));
      console.log(JSON.stringify(rows));
    })
    .catch((err) => {
      console.error(err);
      process.exit(1);
    });
}
