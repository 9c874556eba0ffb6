import type { Browser, Response } from 'playwright-core';
import type { Envelope } from '@neatroots/spans';
import { FindingsRepo, RunsRepo } from '@neatroots/store';
import { chromiumOrSkip, hold, openSignedIn, pageErrors, shot, startBrowserApp, type BrowserApp } from './browser.test';

/**
 * The run page of a run with more findings than its answer carries (the newest 500), in a real
 * browser against the embedded neatroots, the run still going: the page says it shows the newest
 * 500 of how many, reads the older ones when asked, and while it follows the run each look
 * carries only the findings written since (none when nothing was), a new one showing as it comes.
 * A run of 50,000 findings was one answer of 75 MB the distributed api could not take, and each
 * look at a run of 15,000 was 22.7 MB. Screenshot `run-findings-newest`.
 */
const PROJECT = 'many';
const KEY = 'many-test-key';
const FINDINGS = 520;
const LONG = 90_000;

const exe = chromiumOrSkip('the run page of a run with many findings');

(exe ? describe : describe.skip)('the run page of a run with many findings', () => {
  let web: BrowserApp;
  let browser: Browser;
  let url: string;
  let findings: FindingsRepo;
  let runs: RunsRepo;
  const t0 = Date.now() - 10 * 60_000;

  const span = (run_id: string, i: number): Envelope => ({
    project: PROJECT,
    received_ms: t0,
    item: { kind: 'span', span: { run_id, span_id: `s${i}`, type: 'tool', name: `fetch ${i}`, tool: 'fetch', status: 'ok', start_ms: t0 + i * 10, end_ms: t0 + i * 10 + 5 } },
  });
  const slow = (i: number, title = `Slow call ${i}`, run_id = 'many') => ({
    id: `${run_id === 'many' ? 'f' : `${run_id}-f`}${String(i).padStart(5, '0')}`, check_id: 'slow-tool-call', run_id, project: PROJECT, status: 'raised' as const, span_ids: [`s${i % 5}`], count: 1,
    action: 'flag' as const, title, guidance: 'Look again', at_ms: t0 + i, kind: 'rule' as const, source: 'library' as const,
  });

  beforeAll(async () => {
    web = await startBrowserApp(exe!, { prefix: 'nr-web-findings', config: { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` } });
    ({ browser, url } = web);
    // A run not ended (the page follows it) of 5 spans and 520 findings.
    runs = new RunsRepo(web.app.db);
    await runs.writeEnvelopes(Array.from({ length: 5 }, (_, i) => span('many', i)));
    findings = new FindingsRepo(web.app.db);
    await findings.apply(Array.from({ length: FINDINGS }, (_, i) => slow(i)));
  }, 240_000);

  afterAll(() => web?.close());

  const errors = pageErrors();

  it('says it shows the newest 500 of 520, gets a new finding while following with looks that carry only what changed, and reads the older ones', async () => {
    const page = await openSignedIn(browser, { url, project: PROJECT, key: KEY, errors }, { viewport: { width: 1280, height: 860 } });
    /** The findings each look (GET runs/many?since=) carried. */
    const looks: Promise<{ scope: string; ids: string[] }>[] = [];
    page.on('response', (res: Response) => {
      const u = new URL(res.url());
      if (u.pathname === `/v1/projects/${PROJECT}/runs/many` && u.searchParams.has('since')) {
        looks.push(res.json().then((d: { findings_scope: string; findings: { id: string }[] }) => ({ scope: d.findings_scope, ids: d.findings.map((f) => f.id) })));
      }
    });
    await page.goto(`${url}/p/${PROJECT}/runs/many`);
    await page.getByRole('heading', { name: `Findings (${FINDINGS})` }).waitFor({ timeout: LONG });
    const cut = page.getByRole('note').filter({ hasText: 'Showing the newest' });
    await cut.filter({ hasText: `Showing the newest 500 of ${FINDINGS} findings.` }).waitFor();
    await page.getByRole('status', { name: 'Following the run' }).filter({ hasText: /Live — updated/ }).waitFor({ timeout: LONG });

    // A look with nothing new carries no finding.
    await page.waitForResponse((r) => new URL(r.url()).searchParams.has('since'), { timeout: LONG });
    expect(await looks[0]).toEqual({ scope: 'changed', ids: [] });

    // A finding raised while the page follows the run shows, and the look that brought it carried just it.
    await findings.apply([slow(FINDINGS, 'A new slow call')]);
    const card = page.locator('article[data-finding-id="f00520"]');
    await page.getByRole('heading', { name: `Findings (${FINDINGS + 1})` }).waitFor({ timeout: LONG });
    await page.getByRole('button', { name: 'Show more' }).click();
    await page.getByRole('button', { name: 'Show more' }).click();
    await page.getByRole('button', { name: 'Show more' }).click();
    await page.getByRole('button', { name: 'Show more' }).click();
    await page.getByRole('button', { name: 'Show more' }).click();
    await card.waitFor();
    expect(await card.textContent()).toContain('A new slow call');
    await cut.filter({ hasText: `Showing the newest 501 of ${FINDINGS + 1} findings.` }).waitFor();
    const carried = await Promise.all(looks);
    expect(carried.every((l) => l.scope === 'changed')).toBe(true);
    expect([...new Set(carried.flatMap((l) => l.ids))]).toEqual(['f00520']);
    await page.getByRole('heading', { name: /^Findings \(/ }).scrollIntoViewIfNeeded();
    await shot(page, 'run-findings-newest');

    // The older ones, read when asked: every finding of the run then, and no note.
    await cut.getByRole('button', { name: 'Show older findings' }).click();
    await cut.waitFor({ state: 'detached' });
    await page.locator('article[data-finding-id="f00000"]').waitFor();
    expect(await page.getByRole('heading', { name: `Findings (${FINDINGS + 1})` }).count()).toBe(1);
  }, 180_000);

  it('a look that reads several answers (more spans stored than one holds) shows the findings of each', async () => {
    await runs.writeEnvelopes([span('busy', 0)]);
    const page = await openSignedIn(browser, { url, project: PROJECT, key: KEY, errors }, { viewport: { width: 1280, height: 860 } });
    await page.goto(`${url}/p/${PROJECT}/runs/busy`);
    await page.getByRole('status', { name: 'Following the run' }).filter({ hasText: /Live — updated/ }).waitFor({ timeout: LONG });
    // The next look held until a finding and then 600 spans are stored: its first answer carries
    // the finding and 500 spans, the second the other 100 spans and no finding.
    const held = await hold(page, (u) => u.pathname === `/v1/projects/${PROJECT}/runs/busy` && u.searchParams.has('since'));
    await held.asked;
    await findings.apply([slow(1, 'Found while busy', 'busy')]);
    await runs.writeEnvelopes(Array.from({ length: 600 }, (_, i) => span('busy', i + 1)));
    held.release();
    await page.getByRole('heading', { name: 'Spans (601; ↑ ↓ to move)' }).waitFor({ timeout: LONG });
    await page.locator('article[data-finding-id="busy-f00001"]', { hasText: 'Found while busy' }).waitFor({ timeout: LONG });
    expect(await page.getByRole('heading', { name: 'Findings (1)' }).count()).toBe(1);
  }, 180_000);
});
