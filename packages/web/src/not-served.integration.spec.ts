import type { INestApplication } from '@nestjs/common';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { apiUrl, createApi, ReviewGrpcClient } from '@neatroots/api';
import { chromiumOrSkip, launch, requireBuiltApp, shot } from './browser.test';

/**
 * Two 503s the web app tells apart, against the api serving it: an api set up without the
 * review side and without a question service (a bare api: nothing but its review link, and that
 * review service away, as while it restarts: its real gRPC client, at an address where nothing
 * listens). A page of a part this api does not serve (Settings → Models, Insights: 503
 * `not_served`, no Retry-After) says so once and reads nothing again, however long it stays open;
 * a page the review service's absence fails (Runs: 503 `unavailable`, Retry-After: 5) says
 * "trying again" and reads again by itself. (Every 503 used to be read again every 30 s for ever,
 * the page saying "trying again" of a part that never comes.) The page's clock is Playwright's,
 * run forward past the longest wait between reads. Screenshots `not-served-*`.
 */
const SUITE = 'the web app against an api that does not serve a part';
const exe = chromiumOrSkip(SUITE);
const PROJECT = 'bare';
const KEY = 'not-served-web-key';
/** Longer than the app's longest wait between two reads (30 s), several times over. */
const LONG = 120_000;

(exe ? describe : describe.skip)(SUITE, () => {
  let app: INestApplication;
  let review: ReviewGrpcClient;
  let browser: Browser;
  let url: string;
  const errors: string[] = [];

  beforeAll(async () => {
    requireBuiltApp();
    // Port 1: nothing listens there, so every call to review fails UNAVAILABLE.
    review = new ReviewGrpcClient('127.0.0.1:1', 5_000);
    app = await createApi({ queries: review, resolveKey: (k) => (k === KEY ? { project: PROJECT, scope: 'api' } : null), port: 0, host: '127.0.0.1', logger: false });
    url = apiUrl(app);
    browser = await launch(exe!);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    review?.close();
  });

  afterEach(() => {
    // The browser logs each 503 as a failed resource: those are the answers this spec is about.
    expect(errors.splice(0).filter((e) => !e.includes('status of 503'))).toEqual([]);
  });

  /** A page signed in (the session as the sign-in page keeps it: signing in reads runs, which review's absence fails), its clock Playwright's. */
  async function open(): Promise<{ ctx: BrowserContext; page: Page }> {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await ctx.addInitScript(`sessionStorage.setItem('neatroots.session', ${JSON.stringify(JSON.stringify({ project: PROJECT, key: KEY }))})`);
    await ctx.clock.install();
    const page = await ctx.newPage();
    page.on('console', (m) => m.type() === 'error' && errors.push(`${page.url()}: ${m.text()}`));
    page.on('pageerror', (e) => errors.push(`${page.url()}: ${e.message}`));
    return { ctx, page };
  }

  /** The API reads of `path` (under the project or the workspace) the page made. */
  function reads(page: Page, path: string): string[] {
    const seen: string[] = [];
    page.on('request', (r) => {
      const p = new URL(r.url()).pathname;
      if (p === `/v1/projects/${PROJECT}/${path}` || p === `/v1/workspaces/${PROJECT}/${path}`) seen.push(p);
    });
    return seen;
  }

  async function runClock(page: Page, ms: number): Promise<void> {
    await page.clock.pauseAt((await page.evaluate<number>('Date.now()')) + 10);
    await page.clock.runFor(ms);
  }

  it.each([
    ['settings/models', 'models/agreement', /^model agreement is not served by this api \(no question service in its configuration\) \(503\)/],
    ['insights', 'insights', /^review \(patterns, verdicts, insights\) is not served by this api \(503\)/],
  ])('/%s: a part this api does not serve is said once, not "trying again", and not read again', async (route, path, said) => {
    const { ctx, page } = await open();
    const asked = reads(page, path);
    await page.goto(`${url}/p/${PROJECT}/${route}`);
    const main = page.locator('main');
    await main.getByRole('alert').getByText(said).waitFor({ timeout: 60_000 });
    // Past the longest wait between reads four times over, each read it would make taken in real time.
    for (let i = 0; i < 8; i++) {
      await runClock(page, LONG / 8);
      await page.waitForTimeout(500);
    }
    await main.getByRole('alert').getByText(said).waitFor();
    expect({ asked: asked.length, tryingAgain: await main.getByText(/trying again/).count() }).toEqual({ asked: 1, tryingAgain: 0 });
    await shot(page, `not-served-${path.replace('/', '-')}`);
    await ctx.close();
  }, 90_000);

  it('/runs: the review service away a moment is said "trying again" and read again by itself', async () => {
    const { ctx, page } = await open();
    const asked = reads(page, 'runs');
    await page.goto(`${url}/p/${PROJECT}/runs`);
    await page.locator('main').getByText(/^the review service cannot answer right now .*\(503\); trying again$/).waitFor({ timeout: 60_000 });
    // Read again 2 s after the 503, then 4 s after the next: the page's clock moved a second at
    // a time (each answer taken in real time before it moves on), at most a minute of it.
    for (let s = 0; s < 60 && asked.length < 3; s++) {
      await runClock(page, 1_000);
      await page.waitForTimeout(250);
    }
    expect(asked.length).toBeGreaterThanOrEqual(3);
    await page.locator('main').getByText(/\(503\); trying again$/).waitFor();
    await shot(page, 'not-served-review-away');
    await ctx.close();
  }, 90_000);
});
