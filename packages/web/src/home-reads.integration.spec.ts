import type { BrowserContext, Page } from 'playwright-core';
import { chromiumOrSkip, openSignedIn, pageErrors, shot, startBrowserApp, type BrowserApp } from './browser.test';

/**
 * Home's reads, counted, as a user moves about the app against the embedded neatroots: Home
 * reads each of its lists once when it is opened (the open problems, the problems it finds
 * today's halts in, the checks' stats), once more only for a read the API said will pass (503
 * `unavailable`, read again 2 s later), once each again when the user comes back to it from
 * another page, and nothing when its own link is followed while it is shown. (The run page has
 * its own such test, run-page-live.integration.spec; 0ee2c2c stopped both reading twice on
 * navigation after a retry.) The page's clock is Playwright's, run forward past the longest
 * wait between reads. Screenshot `home-reads`.
 */
const PROJECT = 'reads';
const KEY = 'home-reads-key';
/** Longer than the app's longest wait between two reads (30 s). */
const LONG = 90_000;

const exe = chromiumOrSkip("Home's reads");

(exe ? describe : describe.skip)("Home's reads", () => {
  let web: BrowserApp;

  beforeAll(async () => {
    web = await startBrowserApp(exe!, { prefix: 'nr-web-home-reads', config: { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` } });
  }, 240_000);

  afterAll(async () => {
    await web?.close();
  });

  const errors = pageErrors();

  /** Home's reads by what they read: `open` (the open problems), `all` (today's halts), `stats`. */
  function homeReads(ctx: BrowserContext): string[] {
    const seen: string[] = [];
    ctx.on('request', (r) => {
      const u = new URL(r.url());
      if (u.pathname === `/v1/projects/${PROJECT}/findings`) seen.push(u.searchParams.get('state') === 'open' ? 'open' : 'all');
      else if (u.pathname === `/v1/projects/${PROJECT}/checks/stats`) seen.push('stats');
    });
    return seen;
  }

  const counted = (reads: string[]) => ({ open: reads.filter((r) => r === 'open').length, all: reads.filter((r) => r === 'all').length, stats: reads.filter((r) => r === 'stats').length });

  const runClock = (page: Page, ms: number) => page.clock.runFor(ms);

  /** The page's clock past every wait, a few seconds at a time, each read it makes taken in real time. */
  async function settle(page: Page): Promise<void> {
    for (let i = 0; i < 6; i++) {
      await runClock(page, LONG / 6);
      await page.waitForTimeout(300);
    }
  }

  const shown = async (page: Page) => {
    await page.getByRole('region', { name: 'Problems now' }).getByText('No open problems.').waitFor({ timeout: 60_000 });
    await page.getByRole('region', { name: 'Runs halted today' }).getByText('No run was halted today.').waitFor({ timeout: 60_000 });
  };

  it('reads each list once on each visit, again only after a 503 that will pass, and not on its own link', async () => {
    const ctx = await web.browser.newContext({ viewport: { width: 1280, height: 860 } });
    await ctx.clock.install();
    // The first read of the open problems on Home: 503, the review service away a moment.
    let away = 1;
    await ctx.route(
      (u) => u.pathname === `/v1/projects/${PROJECT}/findings` && u.searchParams.get('state') === 'open',
      (route) =>
        away-- > 0
          ? route.fulfill({ status: 503, headers: { 'retry-after': '5' }, contentType: 'application/json', body: JSON.stringify({ error: { code: 'unavailable', message: 'review is restarting; retry shortly' } }) })
          : route.continue(),
    );
    const reads = homeReads(ctx);
    const page = await openSignedIn(ctx, { url: web.url, project: PROJECT, key: KEY, errors });
    await page.getByText(/retry shortly.*trying again/).waitFor({ timeout: 60_000 });
    await runClock(page, 2_500);
    await shown(page);
    await settle(page);
    // Signed in, Home read its three lists, and the open problems again after the 503.
    expect(counted(reads)).toEqual({ open: 2, all: 1, stats: 1 });
    reads.length = 0;

    // To Runs and back to Home, in the page (the header's links): each list read once.
    await page.getByRole('link', { name: 'Runs', exact: true }).click();
    await page.getByRole('heading', { name: 'Runs', level: 1 }).waitFor();
    await page.getByRole('link', { name: 'Home', exact: true }).click();
    await shown(page);
    await settle(page);
    expect(counted(reads)).toEqual({ open: 1, all: 1, stats: 1 });

    // Home's own link while Home is shown: nothing read again.
    await page.getByRole('link', { name: 'Home', exact: true }).click();
    await settle(page);
    await shown(page);
    expect(counted(reads)).toEqual({ open: 1, all: 1, stats: 1 });
    await shot(page, 'home-reads');
    // The 503 (and the browser's line for it) was meant.
    for (let i = errors.length - 1; i >= 0; i--) if (errors[i].includes('status of 503')) errors.splice(i, 1);
    await ctx.close();
  }, 180_000);
});
