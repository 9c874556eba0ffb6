import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { createLogger, loadModelConfig } from '@neatroots/platform';
import type { Envelope } from '@neatroots/spans';
import { RunsRepo } from '@neatroots/store';
import { startEmbedded, type EmbeddedApp } from 'neatroots';
import { testConfig } from '../../neatroots/src/test-app.test';
import { chromiumOrSkip, launch, requireBuiltApp, shot } from './browser.test';

/**
 * The run page with large runs, in a real browser against the embedded neatroots: a run of 40
 * spans whose outputs are 3.9 MB each is listed without them (the page read 149 MB before), and
 * the span selected is read whole, its output to its last words. Screenshots `run-large-*`.
 */
const PROJECT = 'large';
const KEY = 'large-test-key';
const SPANS = 40;
const OUTPUT_CHARS = 3_900_000;
/** The last words of span i's output: shown only when the whole output was read. */
const tail = (i: number) => `END OF OUTPUT ${i}`;

const exe = chromiumOrSkip('the run page with large runs');

(exe ? describe : describe.skip)('the run page with large runs', () => {
  let home: string;
  let app: EmbeddedApp;
  let browser: Browser;
  let url: string;
  const t0 = Date.now() - 10 * 60_000;

  const span = (run_id: string, i: number, over: Record<string, unknown> = {}): Envelope => ({
    project: PROJECT,
    received_ms: t0,
    item: { kind: 'span', span: { run_id, span_id: `s${i}`, type: 'tool', name: `fetch page ${i}`, tool: 'fetch', status: 'ok', start_ms: t0 + i * 10, end_ms: t0 + i * 10 + 5, ...over } },
  });

  beforeAll(async () => {
    requireBuiltApp();
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'nr-web-large-'));
    app = await startEmbedded({
      config: testConfig(home, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` }),
      models: loadModelConfig({}),
      inMemoryDb: true,
      watch: false,
      log: createLogger({ level: 'error' }),
    });
    url = `http://127.0.0.1:${app.httpPort}`;
    const runs = new RunsRepo(app.db);
    // 40 spans of 3.9 MB (each within NEATROOTS_MAX_ITEM_CHARS), written a few at a time.
    for (let i = 0; i < SPANS; i += 4) {
      await runs.writeEnvelopes(
        Array.from({ length: 4 }, (_, k) => span('huge', i + k, { input: { url: `https://example.com/${i + k}` }, output: `${'x'.repeat(OUTPUT_CHARS - 20)} ${tail(i + k)}` })),
      );
    }
    browser = await launch(exe!);
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    if (home) fs.rmSync(home, { recursive: true, force: true });
  });

  const errors: string[] = [];
  afterEach(() => {
    expect(errors.splice(0)).toEqual([]);
  });

  /**
   * A signed-in page; the bytes of the API's answers it read since (decoded: what the tab
   * holds, whatever the compression), once `settled` has waited for the bodies seen so far.
   */
  async function signedIn(): Promise<{ page: Page; apiBytes: () => number; settled: () => Promise<unknown> }> {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const page = await ctx.newPage();
    page.on('console', (m) => m.type() === 'error' && errors.push(`${page.url()}: ${m.text()}`));
    page.on('pageerror', (e) => errors.push(`${page.url()}: ${e.message}`));
    await page.goto(`${url}/`);
    await page.getByLabel('Project').fill(PROJECT);
    await page.getByLabel('API key').fill(KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Home', level: 1 }).waitFor();
    let bytes = 0;
    const reading: Promise<unknown>[] = [];
    page.on('response', (res) => {
      if (new URL(res.url()).pathname.startsWith('/v1/')) reading.push(res.body().then((b) => (bytes += b.length), () => undefined));
    });
    return { page, apiBytes: () => bytes, settled: () => Promise.all(reading) };
  }

  it('lists a run of 40 spans of 3.9 MB without their outputs (under 5 MB read), and shows the selected span\'s output whole', async () => {
    const { page, apiBytes, settled } = await signedIn();
    await page.goto(`${url}/p/${PROJECT}/runs/huge`);
    const spans = page.getByRole('region', { name: 'Spans' });
    await spans.getByRole('heading', { name: `Spans (${SPANS}; ↑ ↓ to move)` }).waitFor({ timeout: 120_000 });
    await settled();
    // Every span listed, none of their outputs: 40 x 3.9 MB is 156 MB.
    expect(apiBytes()).toBeLessThan(5_000_000);
    expect(await page.getByRole('option').count()).toBeGreaterThan(10);

    // Selecting a span reads it whole: its output to its last words.
    await page.getByRole('option', { name: /^fetch page 7,/ }).click();
    const detail = page.getByRole('region', { name: 'Selected span' });
    await detail.getByRole('heading', { name: 'fetch page 7' }).waitFor();
    await detail.locator('pre', { hasText: tail(7) }).waitFor({ timeout: 60_000 });
    await settled();
    // One span whole, not the run: 3.9 MB more, not 156.
    expect(apiBytes()).toBeLessThan(5_000_000 + OUTPUT_CHARS + 100_000);
    await shot(page, 'run-large-selected');
  }, 180_000);
});
