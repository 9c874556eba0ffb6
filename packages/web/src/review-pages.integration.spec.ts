import type { Browser, Page } from 'playwright-core';
import { DEMO_PROJECT } from 'neatroots';
import { loadDemoWorkspace } from '../../neatroots/src/demo-sop';
import { chromiumOrSkip, hold, openSignedIn, pageErrors, SCREENSHOTS, shot, startBrowserApp, until, type BrowserApp } from './browser.test';

/**
 * The procedure and review pages' details in a real browser, on the embedded default with the
 * demo data (its procedures published, its sample sessions checked from their tool calls):
 * Procedures, Insights and Settings → Models say they are loading until their data comes (and
 * Insights while a newly picked window is read); Settings → Models shows each question's recall;
 * a removed YAML `---` in head's diff is a removed line, not a file's header; a double click on
 * Publish makes one release; Insights' top patterns give findings per session as Compare
 * releases does; a link to a session's turn goes to that turn; and a review queue link to a
 * pattern that is not in the queue says so. No page may log a console error.
 */
const AGENT_FILE = 'agents/support-agent.yaml';
const exe = chromiumOrSkip('the review pages (loading, publishing, models, diffs, links) in a browser');

interface Releases {
  items: { number: number; live: boolean }[];
}
interface InsightsAnswer {
  window: { from: string; to: string };
  ladder: { pattern_id: string; name: string; rate: number; findings: number }[];
}

(exe ? describe : describe.skip)('the review pages (loading, publishing, models, diffs, links) in a browser', () => {
  let web: BrowserApp;
  let browser: Browser;
  let url: string;
  let key: string;
  /** The demo's sample sessions by external id. */
  const samples = new Map<string, string>();
  /** Every page the test opened, with no console error and no uncaught exception. */
  const errors = pageErrors();

  async function wsCall<T>(p: string, init: RequestInit = {}): Promise<T> {
    const res = await fetch(`${url}/v1/workspaces/${DEMO_PROJECT}/${p}`, { ...init, headers: { 'x-api-key': key, ...(init.headers ?? {}) } });
    if (!res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  }

  beforeAll(async () => {
    web = await startBrowserApp(exe!, { prefix: 'nr-web-review-pages', demo: true });
    ({ browser, url } = web);
    const { app } = web;
    key = app.demoKey!;
    const demo = await loadDemoWorkspace(app.review.sop);
    for (const id of demo.samples) {
      const s = await until(`sample ${id} checked`, async () => {
        const got = await app.review.sop.getSession(DEMO_PROJECT, id);
        return got.status !== 'queued' && got;
      });
      samples.set(s.external_id!, id);
    }
    // Findings are put in patterns right after each check: Insights' top patterns need them.
    await until('the demo findings in the review queue', async () => (await wsCall<{ items: unknown[] }>('review')).items.length > 0);
  }, 240_000);

  afterAll(async () => {
    await web?.close();
    process.stdout.write(`review pages (loading, publishing, models, diffs, links): screenshots in ${SCREENSHOTS} (review-pages-*)\n`);
  });

  const signedIn = (viewport = { width: 1440, height: 900 }): Promise<Page> => openSignedIn(browser, { url, project: DEMO_PROJECT, key, errors }, { viewport });

  it('Procedures, Insights and Settings → Models say Loading… until their data comes', async () => {
    const page = await signedIn();
    const pages = [
      { link: 'Procedures', heading: 'Procedures', data: page.getByRole('heading', { name: /^Live release \d+/, level: 2 }) },
      { link: 'Insights', heading: 'Insights', data: page.getByRole('region', { name: 'Totals' }) },
      { link: 'Settings → Models', heading: 'Settings → Models', data: page.getByText('No question has been answered by an LLM yet.') },
    ];
    for (const p of pages) {
      const held = await hold(page, (u) => u.pathname.startsWith('/v1/'));
      await page.getByRole('link', { name: p.link, exact: true }).click();
      await page.getByRole('heading', { name: p.heading, level: 1 }).waitFor();
      await held.asked;
      // The API has not answered: the page says it is loading, and is marked busy.
      const loading = page.locator('main').locator('[aria-busy="true"]', { hasText: 'Loading…' }).or(page.locator('main[aria-busy="true"]', { hasText: 'Loading…' }));
      await loading.waitFor();
      await shot(page, `review-pages-loading-${p.link.replace(/\W+/g, '-').toLowerCase()}`);
      held.release();
      await p.data.waitFor();
      await page.locator('main').getByText('Loading…').waitFor({ state: 'detached' });
      expect(await page.locator('main[aria-busy="true"], main [aria-busy="true"]').count()).toBe(0);
    }
    await page.context().close();
  });

  it('Insights says it is loading a newly picked window, and then shows that window', async () => {
    const week = await wsCall<InsightsAnswer>('insights?days=7');
    const page = await signedIn();
    await page.goto(`${url}/p/${DEMO_PROJECT}/insights`);
    const sentence = page.locator('main p.meta', { hasText: /^Sessions from / });
    await sentence.waitFor();
    const held = await hold(page, (u) => u.pathname.endsWith('/insights'));
    await page.getByRole('form', { name: 'Window and procedure' }).locator('select').first().selectOption('7');
    await held.asked;
    // The 90 days' numbers are still drawn while the week's are read: the page says they are being replaced.
    const busy = page.locator('main [aria-busy="true"]');
    await busy.getByText('Loading…').waitFor();
    await expect(busy.getByRole('region', { name: 'Totals' }).count()).resolves.toBe(1);
    await shot(page, 'review-pages-insights-window-loading');
    held.release();
    await busy.waitFor({ state: 'detached' });
    expect(await page.locator('main').getByText('Loading…').count()).toBe(0);
    const from = await page.evaluate((iso) => new Date(iso).toLocaleDateString(), week.window.from);
    await expect(sentence.textContent()).resolves.toContain(`Sessions from ${from} to `);
    await page.context().close();
  });

  it('Settings → Models shows each question’s recall, and says a question needs it at 90% to go to the classifier first', async () => {
    const page = await signedIn();
    // 95% agreement over 40 answers, but the classifier caught only 60% of the LLM's problems: the LLM answers first.
    await page.route(
      (u) => u.pathname.endsWith('/models/agreement'),
      (route) =>
        route.fulfill({
          status: 200,
          contentType: 'application/json',
          body: JSON.stringify({
            questions: [
              { question_key: 'ignored-tool-error:9f8e7d6c', check_id: 'ignored-tool-error', ask: 'Did the agent carry on as if a failed tool call had worked?', answers: 40, agreed: 38, rate: 0.95, recall: 0.6, classifier_first: false, trained: 40 },
              { question_key: 'unfinished-task:12345678', check_id: 'unfinished-task', ask: 'Did the agent leave the task unfinished?', answers: 40, agreed: 40, rate: 1, classifier_first: true, trained: 40 },
            ],
          }),
        }),
    );
    await page.getByRole('link', { name: 'Settings → Models', exact: true }).click();
    const table = page.locator('main table');
    await table.locator('tbody tr').nth(1).waitFor();
    const headers = await table.locator('thead th').allTextContents();
    expect(headers).toContain('Recall');
    const cells = async (row: number) => Object.fromEntries((await table.locator('tbody tr').nth(row).locator('td').allTextContents()).map((c, i) => [headers[i], c]));
    await expect(cells(0)).resolves.toMatchObject({ Agreement: '95%', Recall: '60%', 'Answered first by': 'LLM' });
    // No problem found by the LLM: no recall to give.
    await expect(cells(1)).resolves.toMatchObject({ Agreement: '100%', Recall: '—', 'Answered first by': 'Fast classifier' });
    await expect(page.locator('main').textContent()).resolves.toMatch(/agrees on at least 90% of at least 30 answers.*caught at least 90% of the problems the LLM found.*recall/);
    await shot(page, 'review-pages-models-recall');
    await page.context().close();
  });

  it('a removed YAML `---` in head’s diff is a removed line, not a file’s header', async () => {
    const at = await wsCall<{ text: string }>(`head/${AGENT_FILE}`);
    const put = (text: string) => wsCall(`head/${AGENT_FILE}`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: text });
    // Published with a document marker first; head then drops it.
    await put(`---\n${at.text}`);
    const published = await fetch(`${url}/v1/workspaces/${DEMO_PROJECT}/releases`, { method: 'POST', headers: { 'x-api-key': key } });
    expect(published.status).toBe(201);
    await put(at.text);
    const head = await wsCall<{ diff: string }>('head');
    expect(head.diff.split('\n')).toEqual(expect.arrayContaining([`--- a/${AGENT_FILE}`, `+++ b/${AGENT_FILE}`, '----']));

    const page = await signedIn();
    await page.getByRole('link', { name: 'Procedures', exact: true }).click();
    const diff = page.getByLabel('Unified diff of head against the live release');
    await diff.locator('span').first().waitFor();
    const lines = await diff.locator('span').evaluateAll((spans) => spans.map((s) => [s.className, (s.textContent ?? '').replace(/\n$/, '')]));
    expect(lines).toEqual([
      ['d-file', `--- a/${AGENT_FILE}`],
      ['d-file', `+++ b/${AGENT_FILE}`],
      ['d-hunk', expect.stringMatching(/^@@ /)],
      ['d-del', '----'],
      ...at.text
        .replace(/\n$/, '')
        .split('\n')
        .map((l) => ['d-ctx', ` ${l}`]),
    ]);
    await diff.scrollIntoViewIfNeeded();
    await shot(page, 'review-pages-diff-yaml-marker');
    await page.context().close();
  });

  it('a double click on Publish makes one release', async () => {
    // Something to publish: the agent's instructions reworded at head.
    const at = await wsCall<{ text: string }>(`head/${AGENT_FILE}`);
    await wsCall(`head/${AGENT_FILE}`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: at.text.replace('Confirm the customer', 'Always confirm the customer') });
    const changed = await wsCall<{ changed: unknown[] }>('head');
    expect(changed.changed.length).toBeGreaterThan(0);
    const before = await wsCall<Releases>('releases');
    const live = before.items.find((r) => r.live)!.number;
    const page = await signedIn();
    // Each publish the page asks for, and its answer.
    const posts: string[] = [];
    const answers: Promise<unknown>[] = [];
    page.on('request', (r) => {
      if (r.method() !== 'POST' || !/\/releases$/.test(r.url())) return;
      posts.push(`${r.method()} ${new URL(r.url()).pathname}`);
      answers.push(r.response());
    });
    await page.getByRole('link', { name: 'Procedures', exact: true }).click();
    const publish = page.getByRole('button', { name: `Publish head as release ${live + 1}` });
    await publish.dblclick();
    // The page reads head again: nothing is left to publish.
    await page.getByText('Head is the same as the live release.').waitFor();
    await Promise.all(answers);
    expect(posts).toEqual([`POST /v1/workspaces/${DEMO_PROJECT}/releases`]);
    const after = await wsCall<Releases>('releases');
    expect(after.items.map((r) => r.number).sort((a, b) => a - b)).toEqual([...before.items.map((r) => r.number), live + 1].sort((a, b) => a - b));
    await page.getByRole('status').filter({ hasText: `Published release ${live + 1}: it is live.` }).waitFor();
    await page.getByRole('heading', { name: new RegExp(`^Live release ${live + 1} `), level: 2 }).waitFor();
    await shot(page, 'review-pages-published-once');
    await page.context().close();
  });

  it('Insights’ top patterns give findings per session, the same figure as Compare releases', async () => {
    const window = await wsCall<InsightsAnswer>('insights?days=90');
    const top = window.ladder[0];
    // The demo's sessions were all checked on release 1: its side of the comparison is the window's.
    const cmp = await wsCall<{ procedures: { rules: { pattern_id: string; from: { rate: number } }[] }[] }>('insights/compare?from=1');
    const rule = cmp.procedures.flatMap((p) => p.rules).find((r) => r.pattern_id === top.pattern_id)!;
    expect(rule.from.rate).toBe(top.rate);
    const figure = String(Math.round(top.rate * 100) / 100);

    const page = await signedIn();
    await page.goto(`${url}/p/${DEMO_PROJECT}/insights?from=1`);
    const ladder = page.getByRole('listbox', { name: 'Top patterns' });
    const row = ladder.getByRole('option').first();
    await row.waitFor();
    await expect(page.locator('.ladder-head').textContent()).resolves.toContain('Findings per session');
    await expect(row.locator('.ladder-row > span.num').first().textContent()).resolves.toBe(figure);
    await expect(row.getAttribute('aria-label')).resolves.toContain(`, ${figure} findings per session, `);
    const compared = page.locator('table.compare tr.rule-row', { has: page.getByRole('link', { name: top.name, exact: true }) });
    await expect(compared.locator('td:nth-of-type(3)').textContent()).resolves.toMatch(new RegExp(`^${figure.replace('.', '\\.')} → `));
    await ladder.scrollIntoViewIfNeeded();
    await shot(page, 'review-pages-insights-per-session');
    await page.context().close();
  });

  it('a link to a session’s turn goes to that turn once the transcript is drawn, opened or reloaded', async () => {
    const id = samples.get('sample-refund-out-of-order')!;
    const page = await signedIn({ width: 1280, height: 700 });
    // In the page: turn 3 of the whole transcript (not the quoted turns alone, drawn first), in view.
    const turn = "document.querySelector('#turn-3.role-agent')";
    const inView = `(() => { const b = ${turn}?.getBoundingClientRect(); return !!b && b.top >= 0 && b.bottom <= innerHeight; })()`;
    // A function, not a string: a string is eval'd in the page, which the app's Content-Security-Policy refuses.
    const atTurn = (why: string) =>
      page
        .waitForFunction(
          () => {
            type El = { matches(s: string): boolean; getBoundingClientRect(): { top: number; bottom: number } };
            const d = (globalThis as unknown as { document: { querySelector(s: string): El | null; activeElement: unknown }; innerHeight: number });
            const t = d.document.querySelector('#turn-3.role-agent');
            const b = t?.getBoundingClientRect();
            return !!t && !!b && b.top >= 0 && b.bottom <= d.innerHeight && t.matches(':target') && d.document.activeElement === t;
          },
          undefined,
          { timeout: 15_000 },
        )
        .catch(() => {
          throw new Error(`turn 3 not in view, outlined and focused ${why}`);
        });
    await page.goto(`${url}/p/${DEMO_PROJECT}/sessions/${id}#turn-3`);
    await atTurn('when the link is opened');
    await shot(page, 'review-pages-turn-link');
    await page.reload();
    await atTurn('after a reload');
    // The turn is below the fold at the top of the page: the page went there.
    await page.evaluate('window.scrollTo(0, 0)');
    expect(await page.evaluate<boolean>(inView)).toBe(false);
    await page.context().close();
  });

  it('a review queue link to a pattern that is not in the queue says so, and selects no other', async () => {
    const queue = await wsCall<{ items: { pattern_id: string; name: string }[] }>('review');
    expect(queue.items.length).toBeGreaterThan(0);
    const page = await signedIn();
    await page.getByRole('link', { name: 'Review', exact: true }).click();
    await page.getByRole('heading', { name: 'Review queue', level: 1 }).waitFor();
    const reviewUrl = page.url().split('?')[0];
    await page.goto(`${reviewUrl}?item=pat_nope`);
    const list = page.getByRole('listbox', { name: 'Review queue' });
    await list.getByRole('option').first().waitFor();
    const detail = page.getByRole('region', { name: 'Selected pattern' });
    await detail.getByRole('alert').filter({ hasText: 'Pattern pat_nope is not here (it may have been merged or removed).' }).waitFor();
    expect(await list.locator('[role="option"][aria-selected="true"]').count()).toBe(0);
    expect(await detail.getByRole('link').count()).toBe(0);
    await shot(page, 'review-pages-item-gone');
    // A pattern that is in the queue is selected and shown.
    const first = queue.items[0];
    await page.goto(`${reviewUrl}?item=${encodeURIComponent(first.pattern_id)}`);
    await detail.getByRole('link', { name: 'Open the pattern to give a verdict' }).waitFor();
    expect(await detail.getByRole('alert').count()).toBe(0);
    expect(await list.locator('[role="option"][aria-selected="true"]').count()).toBe(1);
    await page.context().close();
  });
});
