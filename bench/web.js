'use strict';
// Every page of the web app on the demo data, measured in the browser: the embedded default
// booted here as `neatroots start` boots it (the demo project, its SOP workspace published and
// its sample sessions checked, the sample fleet replayed through gRPC ingest), then each page
// opened in headless Chromium, signed in, by a full navigation. For each page:
//   - load: from the navigation's start to the page's content visible (its data rendered, no
//     "Loading…" left), read in the page as performance.now() when first seen (polled each
//     animation frame, so to within ~16 ms); the first (cold) load and the median of the rest;
//   - baselines, in the same run and the same tab: the page's main API call alone, fetched by
//     the page (fetch and read the body), median of the same count; and a first row, the app's
//     shell alone (a navigation to a page that calls no API: loading the app itself);
//   - console errors and uncaught exceptions the page logged (there must be none).
// The app must be built (npm run build); Chromium from CHROMIUM_PATH or /usr/bin/chromium
// (scripts/chromium.sh installs it).
// Build first: npx tsc -b packages/neatroots && npm run build -w @neatroots/web
//   node bench/web.js [--repeat 5]
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');
const { createLogger, loadConfig, loadModelConfig } = require('@neatroots/platform');
const { DEMO_PROJECT, startEmbedded } = require('neatroots');
const { runDemoFleet } = require('neatroots/dist/demo');
const { loadDemoWorkspace } = require('neatroots/dist/demo-sop');

function arg(name, def) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : def;
}

const REPEAT = Number(arg('repeat', '5'));
const DIST = path.resolve(__dirname, '..', 'packages', 'web', 'dist', 'index.html');
const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => p && fs.existsSync(p));

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/**
 * Seen in the page: the content a page shows once its data is in (`sel`, one of a list), with
 * no loading state left in main. Returns performance.now() (ms since the navigation started).
 */
function READY(sel) {
  const m = document.querySelector('main#main');
  if (!m || m.getAttribute('aria-busy') === 'true' || m.querySelector('[aria-busy="true"]') || m.textContent.includes('Loading…')) return null;
  return sel.every((s) => document.querySelector(s)) ? performance.now() : null;
}
async function until(what, fn, ms = 120_000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function main() {
  if (!fs.existsSync(DIST)) throw new Error('the web app is not built: run npm run build -w @neatroots/web');
  if (!CHROMIUM) throw new Error('no Chromium: set CHROMIUM_PATH or run scripts/chromium.sh');
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'nr-bench-web-'));
  const app = await startEmbedded({
    config: loadConfig({
      NEATROOTS_HOME: home,
      NEATROOTS_OTLP_PORT: '0',
      NEATROOTS_OTLP_HTTP_PORT: '0',
      NEATROOTS_GRPC_PORT: '0',
      NEATROOTS_HTTP_PORT: '0',
      NEATROOTS_ADMIN_PORT: '0',
    }),
    models: loadModelConfig({}),
    demo: true,
    inMemoryDb: true,
    watch: false,
    log: createLogger({ level: 'error' }),
  });
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  try {
    const url = `http://127.0.0.1:${app.httpPort}`;
    const key = app.demoKey;
    const get = async (p) => (await fetch(`${url}${p}`, { headers: { 'x-api-key': key } })).json();
    const demo = await loadDemoWorkspace(app.review.sop);
    const fleet = await runDemoFleet({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: key, onEvent: () => {} });
    for (const id of demo.samples) await until(`sample ${id} checked`, async () => (await app.review.sop.getSession(DEMO_PROJECT, id)).status !== 'queued');
    await until('the fleet stored', async () => (await get(`/v1/projects/${DEMO_PROJECT}/runs?limit=100`)).runs.length >= fleet.runs);
    const P = `/v1/projects/${DEMO_PROJECT}`;
    const W = `/v1/workspaces/${DEMO_PROJECT}`;
    const runs = (await get(`${P}/runs?limit=100`)).runs;
    // The run page on the demo's biggest run.
    const run = runs.reduce((a, b) => (b.span_count > a.span_count ? b : a));
    const session = (await get(`${W}/sessions`)).items[0];
    const queue = await get(`${W}/review`);
    const pattern = queue.items[0];
    process.stdout.write(
      `demo: ${fleet.runs} runs (${fleet.spans} spans), ${demo.samples.length} sample sessions, ${queue.items.length} patterns in the review queue; ${REPEAT} loads a page\n`,
    );

    const base = `/p/${DEMO_PROJECT}`;
    const pages = [
      // The baseline of every row's navigation: the app's shell alone (no API call: a page that does not exist).
      { name: 'app shell (no data)', path: `${base}/no-such-page`, ready: ['main h1'], api: '/healthz' },
      { name: 'Home', path: `${base}/`, ready: ['section[aria-labelledby=problems-h] > :not(h2)', 'section[aria-labelledby=halted-h] > :not(h2)', 'section[aria-labelledby=noisy-h] > :not(h2)'], api: `${P}/findings?state=open` },
      { name: 'Runs', path: `${base}/runs`, ready: ['table.runs tbody tr'], api: `${P}/runs` },
      { name: `A run (${run.span_count} spans)`, path: `${base}/runs/${encodeURIComponent(run.run_id)}`, ready: ['section.timeline [role=option]'], api: `${P}/runs/${encodeURIComponent(run.run_id)}` },
      { name: 'Checks', path: `${base}/checks`, ready: ['table.checks-list tbody tr'], api: `${P}/checks` },
      { name: 'Sessions', path: `${base}/sessions`, ready: ['table.sessions tbody tr'], api: `${W}/sessions` },
      session && { name: 'A session', path: `${base}/sessions/${session.id}`, ready: ['main h1'], api: `${W}/sessions/${session.id}` },
      { name: 'Procedures', path: `${base}/procedures`, ready: ['#live', '#unpublished'], api: `${W}/releases` },
      { name: 'Review queue', path: `${base}/review`, ready: ['[role=listbox] [role=option]'], api: `${W}/review` },
      pattern && { name: 'A pattern', path: `${base}/patterns/${pattern.pattern_id}`, ready: ['main h1'], api: `${W}/patterns/${pattern.pattern_id}` },
      { name: 'Insights', path: `${base}/insights`, ready: ['section.tiles', 'section[aria-labelledby=score-h]'], api: `${W}/insights` },
      { name: 'Settings → Models', path: `${base}/settings/models`, ready: ['main table tbody tr, main .empty'], api: `${P}/models/agreement` },
    ].filter(Boolean);

    const page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
    let errors = [];
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${url}/`);
    await page.getByLabel('Project').fill(DEMO_PROJECT);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Home', level: 1 }).waitFor();

    const rows = [];
    for (const p of pages) {
      errors = [];
      const loads = [];
      for (let i = 0; i < REPEAT; i++) {
        await page.goto(`${url}${p.path}`, { waitUntil: 'commit' });
        const h = await page.waitForFunction(READY, p.ready, { polling: 'raf', timeout: 30_000 });
        loads.push(await h.jsonValue());
      }
      const calls = [];
      for (let i = 0; i < REPEAT; i++) {
        calls.push(
          await page.evaluate(
            async ([u, k]) => {
              const t = performance.now();
              await (await fetch(u, { headers: { 'x-api-key': k, accept: 'application/json' } })).text();
              return performance.now() - t;
            },
            [p.api, key],
          ),
        );
      }
      rows.push({ page: p.name, first: loads[0], load: median(loads.slice(1).length ? loads.slice(1) : loads), api: median(calls), apiPath: p.api.replace(/^\/v1\/(projects|workspaces)\/[^/]+\//, ''), errors: errors.length });
    }

    const w = Math.max(...rows.map((r) => r.page.length));
    process.stdout.write(`\n${'page'.padEnd(w)}  first load  load (median)  its main API call alone (median)      console errors\n`);
    for (const r of rows) {
      process.stdout.write(
        `${r.page.padEnd(w)}  ${r.first.toFixed(0).padStart(7)} ms  ${r.load.toFixed(0).padStart(10)} ms  ${r.api.toFixed(1).padStart(7)} ms  GET ${r.apiPath.padEnd(22).slice(0, 22)}  ${r.errors}\n`,
      );
    }
    const slow = rows.filter((r) => r.load >= 1000 || r.first >= 1000);
    const noisy = rows.filter((r) => r.errors > 0);
    process.stdout.write(`\n${slow.length ? `over one second: ${slow.map((r) => r.page).join(', ')}` : 'every page under one second'}; ${noisy.length ? `console errors on ${noisy.map((r) => r.page).join(', ')}` : 'no console errors'}\n`);
  } finally {
    await browser.close();
    await app.close();
    fs.rmSync(home, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${err.stack ?? err}\n`);
  process.exit(1);
});
