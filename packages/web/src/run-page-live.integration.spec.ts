import type { Browser, BrowserContext, Page, Request } from 'playwright-core';
import { NeatrootsClient } from '@neatroots/sdk';
import { chromiumOrSkip, openSignedIn, pageErrors, shot, startBrowserApp, until, type BrowserApp } from './browser.test';

/**
 * The run page following a run still going, in a real browser against the embedded neatroots,
 * the run sent through ingest with the agent SDK: spans sent after the page opened show without
 * a reload, in place (the selected span and the rows in view stay put), with the findings a
 * shipped check raises on them; the run's end shows, and then the page stops asking. Each look
 * asks only for what is new (GET runs/{id}?since=), never the spans list again; a hidden tab
 * asks nothing. The page's clock is Playwright's: it flows as real time does, and is paused and
 * run forward to see that nothing is asked, with no sleeping. Screenshots `run-live-*`.
 */
const PROJECT = 'live';
const KEY = 'live-test-key';
const AGENT_KEY = 'live-test-agent-key';
/** Spans before the page opens: more than the run page's first page (500). */
const FIRST = 600;
const ROW = 30;
/** Longer than the page waits between looks (3 s), and than its longest wait after failures. */
const LONG = 90_000;
/** How long a test waits for what it sent to be stored. */
const WAIT = 60_000;

const exe = chromiumOrSkip('the run page following a run');

(exe ? describe : describe.skip)('the run page following a run', () => {
  let web: BrowserApp;
  let client: NeatrootsClient;
  let browser: Browser;
  let url: string;
  const t0 = Date.now() - 10 * 60_000;

  async function apiGet<T>(p: string): Promise<T> {
    const res = await fetch(`${url}/v1/projects/${PROJECT}/${p}`, { headers: { 'x-api-key': KEY } });
    if (!res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  }

  beforeAll(async () => {
    web = await startBrowserApp(exe!, { prefix: 'nr-web-live', config: { NEATROOTS_API_KEYS: `${PROJECT}=${KEY},${PROJECT}=${AGENT_KEY}:ingest` } });
    ({ browser, url } = web);
    client = new NeatrootsClient({ address: `127.0.0.1:${web.app.ingest.grpcPort}`, apiKey: AGENT_KEY, flushIntervalMs: 20 });
  }, 240_000);

  afterAll(async () => {
    await client?.close();
    await web?.close();
  });

  const errors = pageErrors();

  const signedIn = (ctx: BrowserContext): Promise<Page> => openSignedIn(ctx, { url, project: PROJECT, key: KEY, errors });

  /** The timeline's row at the top of its view: its label and how far the view is scrolled. */
  const topRow = (page: Page) =>
    page.evaluate<{ index: number; label: string | null }>(`(() => {
      const i = Math.floor(document.getElementById('spans').scrollTop / ${ROW});
      return { index: i, label: document.getElementById('spans-row-' + i)?.getAttribute('aria-label') ?? null };
    })()`);
  /** Scrolls the timeline to `y` (pixels), or to its end. */
  const scrollTo = (page: Page, y: number | 'end') =>
    page.evaluate(`(() => { const el = document.getElementById('spans'); el.scrollTop = ${y === 'end' ? 'el.scrollHeight' : y}; })()`);

  /** The page's clock stopped, then run `ms` forward: every timer due in that time fires, at once. */
  async function runClock(page: Page, ms: number): Promise<void> {
    await page.clock.pauseAt((await page.evaluate<number>('Date.now()')) + 10);
    await page.clock.runFor(ms);
  }

  /** Sets whether the tab is hidden, as the browser does when another tab is in front. */
  const setHidden = (page: Page, hidden: boolean) =>
    page.evaluate(`(() => {
      Object.defineProperty(document, 'hidden', { configurable: true, get: () => ${hidden} });
      document.dispatchEvent(new Event('visibilitychange'));
    })()`);

  it('shows spans, findings and the end of a run still going without a reload, asking only for what is new, then stops', async () => {
    // A run going: 600 steps under an agent span not sent yet (a parent is exported when it ends).
    const run = client.startRun({ run_id: 'run-live', workflow: 'support' });
    for (let i = 0; i < FIRST; i++) run.span({ type: 'llm', name: `step ${i}`, span_id: `b${i}`, parent_id: 'root', start_ms: t0 + 10 + i, end_ms: t0 + 11 + i, model: 'm' });
    await run.flush();
    await until(`${FIRST} spans stored`, async () => (await apiGet<{ run: { span_count: number } }>('runs/run-live')).run.span_count === FIRST, WAIT);

    const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    await ctx.clock.install();
    const page = await signedIn(ctx);
    const asked: URL[] = [];
    page.on('request', (r: Request) => {
      const u = new URL(r.url());
      if (u.pathname.startsWith(`/v1/projects/${PROJECT}/runs/run-live`)) asked.push(u);
    });
    const runReads = () => asked.filter((u) => u.pathname === `/v1/projects/${PROJECT}/runs/run-live`);
    const spanLists = () => asked.filter((u) => u.pathname === `/v1/projects/${PROJECT}/runs/run-live/spans`);

    await page.goto(`${url}/p/${PROJECT}/runs/run-live?span=b5`);
    const spans = page.getByRole('region', { name: 'Spans' });
    await spans.getByRole('heading', { name: `Spans (${FIRST}; ↑ ↓ to move)` }).waitFor({ timeout: LONG });
    const status = page.getByRole('status', { name: 'Following the run' });
    await status.filter({ hasText: /^\s*Live — updated \d/ }).waitFor({ timeout: LONG });
    const detail = page.getByRole('region', { name: 'Selected span' });
    await detail.getByRole('heading', { name: 'step 5' }).waitFor();
    // The first page and the rest: the spans list read once, for the 100 after the first 500.
    expect(spanLists()).toHaveLength(1);
    // It looks again while the run goes on: only what is new.
    await page.waitForRequest((r) => new URL(r.url()).searchParams.has('since'), { timeout: LONG });

    // The view scrolled down the run, away from the selected span.
    await scrollTo(page, 300 * ROW);
    await page.locator('#spans-row-300').waitFor();
    const before = await topRow(page);
    expect(before).toEqual({ index: 300, label: expect.stringMatching(/^step 300, llm/) });

    // The agent's span arrives (it started first: it goes at the top, the 600 under it), then
    // three identical failing calls (the shipped loop checks flag them).
    run.span({ type: 'agent', name: 'support agent', span_id: 'root', start_ms: t0, end_ms: t0 + 60_000 });
    for (let i = 0; i < 3; i++) {
      run.span({ type: 'tool', name: 'search', tool: 'search', span_id: `search-${i}`, parent_id: 'root', input: { q: 'order 7' }, error: 'upstream timeout', status: 'error', start_ms: t0 + 5_000 + i * 100, end_ms: t0 + 5_050 + i * 100 });
    }
    await run.flush();
    await spans.getByRole('heading', { name: `Spans (${FIRST + 4}; ↑ ↓ to move)` }).waitFor({ timeout: LONG });
    const findings = page.getByRole('complementary').getByRole('heading', { name: /^Findings \(/ });
    await page.locator('article[data-finding-id]', { hasText: 'Same tool called repeatedly with identical arguments' }).waitFor({ timeout: LONG });
    expect(await findings.textContent()).not.toBe('Findings (0)');

    // In place: the row at the top of the view is the same span, one row down (the agent's span
    // came before it), and the selected span and the link are as they were.
    expect(await topRow(page)).toEqual({ index: 301, label: before.label });
    await detail.getByRole('heading', { name: 'step 5' }).waitFor();
    expect(new URL(page.url()).searchParams.get('span')).toBe('b5');
    expect(await page.locator('[role=option][aria-selected=true]').count()).toBe(0);
    await shot(page, 'run-live-following');
    await scrollTo(page, 0);
    expect(await page.locator('#spans-row-0').getAttribute('aria-label')).toMatch(/^support agent, agent/);

    // The flagged calls, at the end of the timeline, with their markers.
    await scrollTo(page, 'end');
    await page.getByRole('option', { name: /^search, tool, error, .*finding/ }).first().waitFor();
    await page.getByRole('option', { name: /^search, tool, error/ }).first().click();
    await detail.getByRole('heading', { name: 'search' }).waitFor();
    await shot(page, 'run-live-flagged');

    // A hidden tab asks nothing however long it stays hidden; shown again, it looks at once.
    await setHidden(page, true);
    const hiddenAt = asked.length;
    await runClock(page, LONG);
    expect(asked.slice(hiddenAt)).toEqual([]);
    const looked = page.waitForRequest((r) => new URL(r.url()).searchParams.has('since'));
    await setHidden(page, false);
    await looked;
    await page.clock.resume();

    // The run ends: the page says so, with how long it ran, and stops following.
    await run.end({ status: 'error' });
    await status.filter({ hasText: /^Run ended — stopped following at \d/ }).waitFor({ timeout: LONG });
    const head = page.locator('header.run-head');
    await head.locator('.badge.end-error').waitFor();
    expect(await head.locator('p.meta').first().textContent()).toMatch(/error after \d/);
    await shot(page, 'run-live-ended');
    const endedAt = asked.length;
    await runClock(page, LONG);
    expect(asked.slice(endedAt).map(String)).toEqual([]);

    // Every look after the first read asked for what was new only: the run page with since,
    // never the spans list again (the run was never read whole again).
    const reads = runReads();
    expect(reads.length).toBeGreaterThanOrEqual(3);
    expect(reads[0].searchParams.has('since')).toBe(false);
    expect(reads.slice(1).filter((u) => !u.searchParams.get('since'))).toEqual([]);
    expect(spanLists()).toHaveLength(1);
    await ctx.close();
  }, 240_000);

  it('the runs list, on its first page, offers newer runs and says which ended, moving no row until asked', async () => {
    const running = async (want: string[], gone: string[]) =>
      until(`running runs ${want.join(', ')}`, async () => {
        const ids = (await apiGet<{ runs: { run_id: string }[] }>('runs?end_status=running')).runs.map((r) => r.run_id);
        return want.every((id) => ids.includes(id)) && !gone.some((id) => ids.includes(id));
      }, WAIT);
    const a = client.startRun({ run_id: 'run-a', workflow: 'support' });
    a.span({ type: 'llm', name: 'think', span_id: 'a1', start_ms: t0, end_ms: t0 + 10, model: 'm' });
    await a.flush();
    await running(['run-a'], []);
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    await ctx.clock.install();
    const page = await signedIn(ctx);
    const lists: string[] = [];
    page.on('request', (r) => new URL(r.url()).pathname === `/v1/projects/${PROJECT}/runs` && lists.push(r.url()));
    await page.goto(`${url}/p/${PROJECT}/runs?end_status=running`);
    const table = page.getByRole('table');
    await table.getByRole('link', { name: 'run-a' }).waitFor({ timeout: LONG });

    // Another run starts and run-a ends: one look (one request) says so, the rows stay.
    const b = client.startRun({ run_id: 'run-b', workflow: 'support' });
    b.span({ type: 'llm', name: 'think', span_id: 'b1', start_ms: t0, end_ms: t0 + 10, model: 'm' });
    await b.flush();
    await a.end({ status: 'ok' });
    await running(['run-b'], ['run-a']);
    const before = lists.length;
    const offer = page.getByRole('status', { name: 'Newer runs' });
    await runClock(page, 10_000);
    await offer.filter({ hasText: '1 new run, 1 ended — Show' }).waitFor({ timeout: LONG });
    expect(lists.length - before).toBe(1);
    expect(await table.getByRole('link', { name: 'run-a' }).count()).toBe(1);
    expect(await table.getByRole('link', { name: 'run-b' }).count()).toBe(0);
    await shot(page, 'run-live-runs-list-offer');
    await offer.getByRole('button', { name: 'Show' }).click();
    await table.getByRole('link', { name: 'run-b' }).waitFor();
    expect(await table.getByRole('link', { name: 'run-a' }).count()).toBe(0);
    expect(await offer.textContent()).toBe('');
    // Showing it asked nothing: the page read on the last look.
    expect(lists.length - before).toBe(1);
    await b.end({ status: 'ok' });
    await ctx.close();
  }, 120_000);

  it('the runs list does not call a run pushed to the next page by newer ones ended', async () => {
    const start = (id: string, at: number) => {
      const r = client.startRun({ run_id: id, workflow: 'paged' });
      r.span({ type: 'llm', name: 'think', span_id: `${id}-1`, start_ms: at, end_ms: at + 10, model: 'm' });
      return r;
    };
    const listed = async (want: string[]) =>
      until(`running runs ${want.join(', ')}`, async () => {
        const ids = (await apiGet<{ runs: { run_id: string }[] }>('runs?end_status=running&workflow=paged')).runs.map((r) => r.run_id);
        return want.every((id) => ids.includes(id));
      }, WAIT);
    const p1 = start('paged-1', t0 + 1_000);
    const p2 = start('paged-2', t0 + 2_000);
    await Promise.all([p1.flush(), p2.flush()]);
    await listed(['paged-1', 'paged-2']);
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    await ctx.clock.install();
    const page = await signedIn(ctx);
    // A first page of two: both running runs, none after them.
    await page.goto(`${url}/p/${PROJECT}/runs?end_status=running&workflow=paged&limit=2`);
    const table = page.getByRole('table');
    await table.getByRole('link', { name: 'paged-1' }).waitFor({ timeout: LONG });
    // A newer run starts: the page read again holds it and paged-2, and paged-1 is on the next page, still running.
    const p3 = start('paged-3', t0 + 3_000);
    await p3.flush();
    await listed(['paged-3']);
    const offer = page.getByRole('status', { name: 'Newer runs' });
    await runClock(page, 10_000);
    await offer.filter({ hasText: 'new run' }).waitFor({ timeout: LONG });
    expect(await offer.textContent()).toBe('1 new run — Show');
    await Promise.all([p1.end({ status: 'ok' }), p2.end({ status: 'ok' }), p3.end({ status: 'ok' })]);
    await ctx.close();
  }, 120_000);

  it('a tab shown again after a run wrote more than a page of spans and ended reads them all before it stops following', async () => {
    const run = client.startRun({ run_id: 'run-burst', workflow: 'burst' });
    run.span({ type: 'llm', name: 'first', span_id: 'b0', start_ms: t0, end_ms: t0 + 1, model: 'm' });
    await run.flush();
    await until('the run stored', async () => (await apiGet<{ runs: { run_id: string }[] }>('runs?workflow=burst')).runs.some((r) => r.run_id === 'run-burst'), WAIT);
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    await ctx.clock.install();
    const page = await signedIn(ctx);
    await page.goto(`${url}/p/${PROJECT}/runs/run-burst`);
    await page.getByRole('heading', { name: 'Spans (1; ↑ ↓ to move)' }).waitFor({ timeout: LONG });
    await setHidden(page, true);
    // While the tab is hidden: 700 more spans (more than one answer's 500) and the run's end.
    for (let i = 1; i <= 700; i++) run.span({ type: 'llm', name: `step ${i}`, span_id: `b${i}`, start_ms: t0 + i, end_ms: t0 + i + 1, model: 'm' });
    await run.end({ status: 'ok' });
    await until('the run ended with its 701 spans stored', async () => {
      const d = await apiGet<{ run: { end_status: string | null; span_count: number } }>('runs/run-burst');
      return d.run.end_status === 'ok' && d.run.span_count === 701;
    }, WAIT);
    await setHidden(page, false);
    const status = page.getByRole('status', { name: 'Following the run' });
    await status.filter({ hasText: /^Run ended — stopped following at \d/ }).waitFor({ timeout: LONG });
    await page.getByRole('heading', { name: 'Spans (701; ↑ ↓ to move)' }).waitFor({ timeout: LONG });
    await ctx.close();
  }, 120_000);

  it('does not follow a run that has ended', async () => {
    const done = client.startRun({ run_id: 'run-done', workflow: 'support' });
    done.span({ type: 'llm', name: 'answer', span_id: 'a1', start_ms: t0, end_ms: t0 + 10, model: 'm' });
    await done.end({ status: 'ok' });
    await until('the ended run', async () => (await apiGet<{ runs: { run_id: string }[] }>('runs?end_status=ok')).runs.some((r) => r.run_id === 'run-done'), WAIT);
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    await ctx.clock.install();
    const page = await signedIn(ctx);
    const asked: string[] = [];
    page.on('request', (r) => r.url().includes('/runs/run-done') && asked.push(r.url()));
    await page.goto(`${url}/p/${PROJECT}/runs/run-done`);
    await page.getByRole('heading', { name: 'Spans (1; ↑ ↓ to move)' }).waitFor({ timeout: LONG });
    const first = asked.length;
    await runClock(page, LONG);
    expect(asked.slice(first)).toEqual([]);
    expect(await page.getByRole('status', { name: 'Following the run' }).count()).toBe(0);
    await ctx.close();
  }, 120_000);

  it('reads a run once when the page moves to it from a run it read again after a 503', async () => {
    for (const id of ['run-from', 'run-to']) {
      const r = client.startRun({ run_id: id, workflow: 'support' });
      r.span({ type: 'llm', name: `answer of ${id}`, span_id: `${id}-1`, start_ms: t0, end_ms: t0 + 10, model: 'm' });
      await r.end({ status: 'ok' });
    }
    await until('both runs', async () => {
      const { runs } = await apiGet<{ runs: { run_id: string }[] }>('runs?end_status=ok');
      return ['run-from', 'run-to'].every((id) => runs.some((r) => r.run_id === id));
    }, WAIT);
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    await ctx.clock.install();
    const page = await signedIn(ctx);
    // The first read of run-from: 503, the review service away a moment; the page reads it again.
    let away = 1;
    await page.route(new RegExp(`/v1/projects/${PROJECT}/runs/run-from(\\?|$)`), (route) =>
      away-- > 0
        ? route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: { code: 'unavailable', message: 'review is restarting; retry shortly' } }) })
        : route.continue(),
    );
    const reads: string[] = [];
    page.on('request', (r) => {
      const p = new URL(r.url()).pathname;
      if (p.startsWith(`/v1/projects/${PROJECT}/runs/run-`)) reads.push(p.slice(`/v1/projects/${PROJECT}/runs/`.length));
    });
    await page.goto(`${url}/p/${PROJECT}/runs/run-from`);
    await page.getByText(/retry shortly.*trying again/).waitFor({ timeout: LONG });
    await runClock(page, 2_500);
    await page.locator('#spans-row-0[aria-label^="answer of run-from"]').waitFor({ timeout: LONG });
    expect(reads).toEqual(['run-from', 'run-from']);
    // In the page (no reload) to run-to: one read of it.
    await page.evaluate(`(() => { history.pushState(null, '', '/p/${PROJECT}/runs/run-to'); dispatchEvent(new PopStateEvent('popstate')); })()`);
    await page.locator('#spans-row-0[aria-label^="answer of run-to"]').waitFor({ timeout: LONG });
    await runClock(page, LONG);
    // The 503 (and the browser's line for it) was meant.
    for (let i = errors.length - 1; i >= 0; i--) if (errors[i].includes('status of 503')) errors.splice(i, 1);
    expect(reads.filter((r) => r === 'run-to')).toEqual(['run-to']);
    await ctx.close();
  }, 120_000);
});
