import type { Browser, ConsoleMessage, Page } from 'playwright-core';
import type { Envelope } from '@neatroots/spans';
import { FindingsRepo, RunsRepo } from '@neatroots/store';
import { chromiumOrSkip, hold, openSignedIn, pageErrors, shot, startBrowserApp, type BrowserApp } from './browser.test';

/**
 * The run page with large runs, in a real browser against the embedded neatroots: a run of 40
 * spans whose outputs are 3.9 MB each is listed without them (the page read 149 MB before), and
 * the span selected is read whole, its output to its last words; a link to a span or finding
 * that is not in the run says so, and a link to a span past a long run's first page shows it
 * before that page is read. Screenshots `run-large-*`.
 */
const PROJECT = 'large';
const KEY = 'large-test-key';
const SPANS = 40;
const OUTPUT_CHARS = 3_900_000;
/** The last words of span i's output: shown only when the whole output was read. */
const tail = (i: number) => `END OF OUTPUT ${i}`;
/** Findings on the run `flagged` (6 spans). */
const FINDINGS = 2000;
/** Spans of the run `paged`: more than the run page's first page of spans (500). */
const PAGED = 510;

/**
 * Counts, per React commit, the finding cards that rendered in it: React calls the DevTools
 * hook on each commit (production builds too); a card's <article> fiber is a new object when
 * its card rendered again and the same one when its memo kept it.
 */
const RENDER_SPY = `(() => {
  let last = new Set();
  window.__cardRenders = [];
  window.__REACT_DEVTOOLS_GLOBAL_HOOK__ = {
    supportsFiber: true, renderers: new Map(), inject() { return 1; }, onScheduleFiberRoot() {}, onPostCommitFiberRoot() {}, onCommitFiberUnmount() {}, checkDCE() {},
    onCommitFiberRoot(_id, root) {
      const now = new Set();
      let rendered = 0;
      const stack = [root.current];
      while (stack.length) {
        const f = stack.pop();
        if (f.tag === 5 && f.type === 'article' && f.stateNode && f.stateNode.hasAttribute('data-finding-id')) {
          now.add(f);
          if (!last.has(f)) rendered++;
        }
        if (f.sibling) stack.push(f.sibling);
        if (f.child) stack.push(f.child);
      }
      last = now;
      window.__cardRenders.push(rendered);
    },
  };
})()`;

const exe = chromiumOrSkip('the run page with large runs');

(exe ? describe : describe.skip)('the run page with large runs', () => {
  let web: BrowserApp;
  let browser: Browser;
  let url: string;
  const t0 = Date.now() - 10 * 60_000;

  const span = (run_id: string, i: number, over: Record<string, unknown> = {}): Envelope => ({
    project: PROJECT,
    received_ms: t0,
    item: { kind: 'span', span: { run_id, span_id: `s${i}`, type: 'tool', name: `fetch page ${i}`, tool: 'fetch', status: 'ok', start_ms: t0 + i * 10, end_ms: t0 + i * 10 + 5, ...over } },
  });

  beforeAll(async () => {
    web = await startBrowserApp(exe!, { prefix: 'nr-web-large', config: { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` } });
    ({ browser, url } = web);
    const { app } = web;
    const runs = new RunsRepo(app.db);
    // 40 spans of 3.9 MB (each within NEATROOTS_MAX_ITEM_CHARS), written a few at a time.
    for (let i = 0; i < SPANS; i += 4) {
      await runs.writeEnvelopes(
        Array.from({ length: 4 }, (_, k) => span('huge', i + k, { input: { url: `https://example.com/${i + k}` }, output: `${'x'.repeat(OUTPUT_CHARS - 20)} ${tail(i + k)}` })),
      );
    }
    // A run of 6 spans with 2,000 findings, each citing one of them.
    await runs.writeEnvelopes(Array.from({ length: 6 }, (_, i) => span('flagged', i)));
    const findings = new FindingsRepo(app.db);
    for (let i = 0; i < FINDINGS; i += 500) {
      await findings.apply(
        Array.from({ length: 500 }, (_, k) => ({
          id: `f${i + k}`, check_id: `check-${(i + k) % 40}`, run_id: 'flagged', project: PROJECT, status: 'raised' as const, span_ids: [`s${(i + k) % 6}`], count: 1,
          action: 'flag' as const, title: `Finding ${i + k}`, guidance: 'Look again', at_ms: t0 + i + k, kind: 'rule' as const, source: 'library' as const,
        })),
      );
    }
    // A run longer than the first page of spans.
    for (let i = 0; i < PAGED; i += 255) await runs.writeEnvelopes(Array.from({ length: 255 }, (_, k) => span('paged', i + k)));
  }, 240_000);

  afterAll(() => web?.close());

  const errors = pageErrors();
  /** A console error a test causes on purpose (the browser logs a 404 it was answered): not an error of the page. */
  let allowed: RegExp | null = null;
  afterEach(() => {
    allowed = null;
  });

  /**
   * A signed-in page; the bytes of the API's answers it read since (decoded: what the tab
   * holds, whatever the compression), once `settled` has waited for the bodies seen so far.
   */
  async function signedIn(): Promise<{ page: Page; apiBytes: () => number; settled: () => Promise<unknown> }> {
    const isError = (m: ConsoleMessage) => m.type() === 'error' && !allowed?.test(`${m.text()} ${m.location().url}`);
    const page = await openSignedIn(browser, { url, project: PROJECT, key: KEY, errors, isError }, { viewport: { width: 1280, height: 860 } });
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

  it('on a run of 2,000 findings, moving between spans renders no finding card again, and 100 cards are shown until Show more', async () => {
    const { page } = await signedIn();
    await page.addInitScript(RENDER_SPY);
    await page.goto(`${url}/p/${PROJECT}/runs/flagged?span=s0`);
    const side = page.getByRole('heading', { name: `Findings (${FINDINGS})` });
    await side.waitFor();
    await page.getByRole('region', { name: 'Selected span' }).getByRole('heading', { name: 'fetch page 0' }).waitFor();
    const cards = page.locator('article[data-finding-id]');
    expect(await cards.count()).toBe(100);
    const renders = () => page.evaluate(() => (globalThis as unknown as { __cardRenders: number[] }).__cardRenders.slice());
    // The spy saw the cards render once (it works), then: each ArrowDown a commit, no card in it.
    expect((await renders()).reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(100);
    await page.getByRole('listbox', { name: 'Spans in order' }).focus();
    for (let i = 1; i <= 4; i++) {
      const before = (await renders()).length;
      await page.keyboard.press('ArrowDown');
      await page.getByRole('region', { name: 'Selected span' }).getByRole('heading', { name: `fetch page ${i}` }).waitFor();
      const after = (await renders()).slice(before);
      expect(after.length).toBeGreaterThan(0);
      expect(after).toEqual(after.map(() => 0));
    }
    await shot(page, 'run-large-findings');
    await page.getByRole('button', { name: 'Show more' }).click();
    await cards.nth(199).waitFor();
    expect(await cards.count()).toBe(200);
    // The newest 500 of the 2,000 are read (the run page's answer carries no more), 200 of them shown.
    expect(await page.getByText(`200 of 500 shown.`).count()).toBe(1);
    expect(await page.getByText(`Showing the newest 500 of ${FINDINGS} findings.`).count()).toBe(1);
  }, 120_000);

  it('a link to a span that is not in the run says it is looking for it, then that it is not in the run', async () => {
    const { page } = await signedIn();
    allowed = /status of 404 .*\/runs\/flagged\/spans\/gone-span/;
    const held = await hold(page, (u) => u.pathname.endsWith('/runs/flagged/spans/gone-span'));
    await page.goto(`${url}/p/${PROJECT}/runs/flagged?span=gone-span`);
    const detail = page.getByRole('region', { name: 'Selected span' });
    await held.asked;
    await detail.getByText('Looking for span gone-span…').waitFor();
    expect(await detail.getByText('Select a span').count()).toBe(0);
    held.release();
    await detail.getByRole('alert').filter({ hasText: 'Span gone-span is not in this run.' }).waitFor();
    expect(await detail.getByText(/Looking for span|Select a span/).count()).toBe(0);
    // The run's spans are still there to pick.
    expect(await page.getByRole('option').count()).toBe(6);
    await shot(page, 'run-large-span-gone');
  }, 60_000);

  it('a link to a finding that is not in the run says so', async () => {
    const { page } = await signedIn();
    await page.goto(`${url}/p/${PROJECT}/runs/flagged?finding=gone-finding`);
    await page.getByRole('heading', { name: `Findings (${FINDINGS})` }).waitFor();
    const detail = page.getByRole('region', { name: 'Selected span' });
    await detail.getByRole('alert').filter({ hasText: 'Finding gone-finding is not in this run.' }).waitFor();
    expect(await detail.getByText('Select a span').count()).toBe(0);
    await shot(page, 'run-large-finding-gone');
    // A finding that is there still shows the span it cites.
    await page.goto(`${url}/p/${PROJECT}/runs/flagged?finding=f3`);
    await detail.getByRole('heading', { name: 'fetch page 3' }).waitFor();
    expect(await detail.getByRole('alert').count()).toBe(0);
  }, 60_000);

  it('a link to a span past a long run\'s first page shows the span while that page is still being read', async () => {
    const { page } = await signedIn();
    const later = await hold(page, (u) => u.pathname.endsWith('/runs/paged/spans'));
    await page.goto(`${url}/p/${PROJECT}/runs/paged?span=s${PAGED - 1}`);
    await later.asked;
    const detail = page.getByRole('region', { name: 'Selected span' });
    await detail.getByRole('heading', { name: `fetch page ${PAGED - 1}` }).waitFor();
    await page.getByRole('heading', { name: /^Spans \(500 so far;/ }).waitFor();
    later.release();
    await page.getByRole('heading', { name: `Spans (${PAGED}; ↑ ↓ to move)` }).waitFor();
    await detail.getByRole('heading', { name: `fetch page ${PAGED - 1}` }).waitFor();
  }, 60_000);
});
