import type { Browser } from 'playwright-core';
import { DISABLED_CHECKS_BOARD, DisabledChecks, shareDisabledChecks, type DisabledCheck } from '@neatroots/checks';
import { RedisSharedCache, requireService } from '@neatroots/platform';
import { Cluster } from '../../../test/distributed/cluster';
import { chromiumOrSkip, launch, openSignedIn, pageErrors, requireBuiltApp, SCREENSHOTS, shot } from './browser.test';

/**
 * The Checks page's "Disabled" badge in the distributed deployment: a rule engine on another
 * machine disabled a check for a slow pattern and keeps it on the deployment's board in Redis
 * (shareDisabledChecks, the rule engine's own code, on the real Redis under the deployment's
 * prefix: this process stands for that rule engine); the api service (`neatroots serve --target
 * api`, beside review, on the real Redis, Kafka and Postgres) reads the board for GET
 * .../checks/disabled and serves the web app, whose Checks page shows the check with the badge
 * and its reason. Once that rule engine takes its entry off (a stop), the page read again shows
 * no badge. (The page was tested embedded only, where the list is a file in the home folder.)
 * Screenshot `distributed-checks-disabled`.
 */
const SUITE = 'the Checks page against the distributed deployment: a check a rule engine disabled';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const exe = kafka && redis && pg ? chromiumOrSkip(SUITE) : null;
const PROJECT = 'slow';
const KEY = `checks-disabled-${Date.now().toString(36)}`;
const SLOW: DisabledCheck = {
  check_id: 'slow-letters',
  pattern: '\\p{L}{1,30}z',
  source: 'user',
  reason: 'pattern took over 212 ms on one span (limit 50 ms); skipped until neatroots restarts',
  ms: 212,
  limit_ms: 50,
  since: new Date().toISOString(),
};

(exe ? describe : describe.skip)(SUITE, () => {
  let cluster: Cluster;
  let browser: Browser;
  let cache: RedisSharedCache;
  let stopSharing: (() => Promise<void>) | undefined;
  let url: string;
  const errors = pageErrors();
  /** Answers of 400 and more the page got: none is expected. */
  const failed: string[] = [];
  afterEach(() => {
    expect(failed.splice(0)).toEqual([]);
  });

  beforeAll(async () => {
    requireBuiltApp();
    cluster = new Cluster({ kafka: kafka!, redis: redis!, pg: pg! }, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` });
    await cluster.init();
    await cluster.start('review');
    await cluster.start('api');
    url = `http://127.0.0.1:${cluster.ports.http}`;
    // The rule engine's side: its list of disabled checks kept on the deployment's board.
    cache = new RedisSharedCache({ url: redis!, prefix: cluster.prefix, onError: (err) => errors.push(`redis: ${String(err)}`) });
    await cache.connect();
    browser = await launch(exe!);
  }, 240_000);

  afterAll(async () => {
    await stopSharing?.();
    await browser?.close();
    await cache?.close();
    await cluster?.close();
    process.stdout.write(`${SUITE}: screenshots in ${SCREENSHOTS} (distributed-checks-disabled)\n`);
  }, 120_000);

  it('shows the badge with its reason while the rule engine lists the check on the board, and none once it takes it off', async () => {
    const list = new DisabledChecks();
    stopSharing = shareDisabledChecks(cache.board(DISABLED_CHECKS_BOARD), list);
    list.add(SLOW);
    const page = await openSignedIn(browser, { url, project: PROJECT, key: KEY, errors });
    page.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${r.request().method()} ${r.url()}`);
    });
    await page.getByRole('link', { name: 'Checks', exact: true }).click();
    const row = page.locator('main table tbody tr', { hasText: 'slow-letters' });
    const badge = row.getByText('Disabled: slow pattern (212 ms over 50 ms)');
    // The rule engine's write and the page's read race: the page is read again until it is there.
    for (let i = 0; i < 30 && !(await badge.isVisible()); i++) {
      await page.waitForTimeout(1_000);
      if (!(await badge.isVisible())) await page.reload();
      await page.locator('main table, main p.empty').first().waitFor({ timeout: 30_000 });
    }
    await badge.waitFor({ timeout: 5_000 });
    expect(await badge.getAttribute('title')).toContain(`${SLOW.reason} (pattern ${SLOW.pattern}`);
    await row.getByText('user').waitFor();
    await shot(page, 'distributed-checks-disabled');
    // The rule engine stops: its entry is taken off the board, and the page read again has no badge.
    await stopSharing();
    stopSharing = undefined;
    await page.reload();
    await page.getByRole('heading', { name: 'Checks', level: 1 }).waitFor();
    await page.locator('main table, main p.empty').first().waitFor({ timeout: 30_000 });
    expect(await page.getByText(/Disabled: slow pattern/).count()).toBe(0);
    await page.context().close();
  }, 120_000);
});
