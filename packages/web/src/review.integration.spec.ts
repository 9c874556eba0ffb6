import * as fs from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { DEMO_PROJECT, type EmbeddedApp } from 'neatroots';
import { loadDemoWorkspace } from '../../neatroots/src/demo-sop';
import { startFakeOpenAI, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { startFakeGitHub, type FakeGitHub } from '../../../libs/platform/src/github/fake-github.test';
import { chromiumOrSkip, openSignedIn, pageErrors, SCREENSHOTS, shot, startBrowserApp, until, type BrowserApp } from './browser.test';

/**
 * The reviewer's path in a real browser, on the embedded default with the demo data: the demo
 * workspace's procedures published and its sample sessions checked from their tool calls (a
 * skipped and an out-of-order lookup are findings on one rule), then the review queue, the
 * pattern page, a verdict and an override given by clicking, the state change seen in the
 * queue, a suggested edit written by the reasoning model (a scripted OpenAI-compatible server)
 * and applied as a draft, and Insights against what the API answers. No page may log a console
 * error.
 */
const STEP1 = '1. Look up the order. [tool: lookup_order, required]';
const REWORDED = '1. Look up the order by its number before refunding. [tool: lookup_order, required]';
const THIRD = '1. Look up the order by its number, then refund. [tool: lookup_order, required]';
const MEANWHILE = '1. Look up the order before anything else. [tool: lookup_order, required]';
const FOURTH = '1. Look up the order before anything else, by its number. [tool: lookup_order, required]';
const exe = chromiumOrSkip('the review pages in a browser');

interface QueueAnswer {
  items: { pattern_id: string; name: string; rule_text: string; review_state: string; sessions: number; examples: { external_id: string; excerpt: string }[] }[];
  counts: Record<string, number>;
  total: number;
}

(exe ? describe : describe.skip)('the review pages in a browser', () => {
  let reasoning: FakeOpenAI;
  /** A GitHub the workspace connects to for one test (a suggestion applied as a pull request). */
  let gh: FakeGitHub;
  let web: BrowserApp;
  let app: EmbeddedApp;
  let browser: Browser;
  let url: string;
  let key: string;
  /** Every page the test opened, with no console error and no uncaught exception. */
  const errors = pageErrors();
  /** The edit the reasoning model suggests: this line replaced with that one. */
  let edit = { find: STEP1, replace: REWORDED };

  async function wsGet<T>(p: string): Promise<T> {
    const res = await fetch(`${url}/v1/workspaces/${DEMO_PROJECT}/${p}`, { headers: { 'x-api-key': key } });
    if (!res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  }

  beforeAll(async () => {
    // The reasoning model names patterns and writes suggested edits (find and replace whole lines).
    reasoning = await startFakeOpenAI((call) => {
      const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
      const ids = [...user.matchAll(/^(q\d+) \(about subject/gm)].map((m) => m[1]);
      const suggest = (call.body.messages[0]?.content ?? '').startsWith('You edit standard operating procedures');
      const answer = suggest ? { rationale: 'Look the order up by its number first.', edits: [edit] } : { name: 'Skipped the order lookup' };
      return { json: { answers: ids.map((id) => ({ id, ...answer })) } };
    });
    gh = await startFakeGitHub();
    gh.addRepo('acme', 'ops', 'main', { 'procedures/README.md': 'The support procedures.\n' });
    web = await startBrowserApp(exe!, {
      prefix: 'nr-web-review',
      // the fake GitHub is on loopback over http: a connection may name it only when the setting does
      config: { NEATROOTS_GITHUB_API_URLS: gh.url },
      models: { NEATROOTS_REASONING_MODEL_URL: reasoning.url, NEATROOTS_REASONING_MODEL_NAME: 'reasoner-test' },
      demo: true,
    });
    ({ app, browser, url } = web);
    key = app.demoKey!;
    const demo = await loadDemoWorkspace(app.review.sop);
    for (const id of demo.samples) await until(`sample ${id} checked`, async () => (await app.review.sop.getSession(DEMO_PROJECT, id)).status !== 'queued');
    // Findings are put in patterns right after each check: wait for the queue to show them.
    await until('the demo findings in the review queue', async () => (await wsGet<QueueAnswer>('review')).items.length > 0);
  }, 240_000);

  afterAll(async () => {
    await web?.close();
    await reasoning?.close();
    await gh?.stop();
    process.stdout.write(`review pages: screenshots in ${SCREENSHOTS}\n`);
  });

  const signedIn = (): Promise<Page> => openSignedIn(browser, { url, project: DEMO_PROJECT, key, errors });

  it('the queue lists the demo pattern with its rule, examples and counts per state; Enter opens it', async () => {
    const queue = await wsGet<QueueAnswer>('review');
    const item = queue.items[0];
    expect(item.review_state).toBe('needs_review');
    const page = await signedIn();
    await page.getByRole('link', { name: 'Review', exact: true }).click();
    await page.getByRole('heading', { name: 'Review queue', level: 1 }).waitFor();
    const list = page.getByRole('listbox', { name: 'Review queue' });
    await list.getByRole('option').first().waitFor();
    expect(await list.getByRole('option').count()).toBe(queue.items.length);
    await expect(list.getByRole('option').first().getAttribute('aria-label')).resolves.toMatch(new RegExp(`^${escape(item.name)}, `));
    // The selected item beside the list: the rule's text and the example findings' excerpts.
    const detail = page.getByRole('region', { name: 'Selected pattern' });
    await expect(detail.locator('blockquote.rule-text').textContent()).resolves.toBe(item.rule_text);
    for (const e of item.examples) await detail.getByText(e.excerpt).first().waitFor();
    await expect(detail.locator('.example').count()).resolves.toBe(item.examples.length);
    // Counts per state, as the API gives them.
    const needs = page.getByRole('group', { name: 'Review states shown' }).locator('label', { hasText: 'needs review' });
    await expect(needs.locator('.count').textContent()).resolves.toBe(String(queue.counts.needs_review));
    await expect(needs.getByRole('checkbox').isChecked()).resolves.toBe(true);
    await shot(page, 'review-queue-light');
    await page.getByRole('button', { name: 'Switch to the dark theme' }).click();
    await shot(page, 'review-queue-dark');
    // From the keyboard: the list is one stop, Enter opens the selected pattern.
    await list.focus();
    await page.keyboard.press('Home');
    await page.keyboard.press('Enter');
    await page.waitForURL(new RegExp(`/patterns/${item.pattern_id}$`));
    await page.getByRole('heading', { name: new RegExp(`^${escape(item.name)}`), level: 1 }).waitFor();
    // A finding's session, and from its rule back to the pattern.
    const example = item.examples[0].external_id;
    await page.locator('table.pattern-sessions').getByRole('link', { name: example, exact: true }).click();
    await page.getByRole('heading', { name: new RegExp(`^Session ${escape(example)}`), level: 1 }).waitFor();
    await page.getByRole('link', { name: 'Its pattern' }).first().click();
    await page.waitForURL(new RegExp(`/patterns/${item.pattern_id}$`));
    await page.context().close();
  });

  it('a verdict with a note changes the state on the pattern page and in the queue; an override suppresses one finding', async () => {
    const item = (await wsGet<QueueAnswer>('review')).items[0];
    const page = await signedIn();
    // A shared link to the pattern opens it.
    await page.goto(`${url}/p/${DEMO_PROJECT}/patterns/${item.pattern_id}`);
    await page.getByRole('heading', { name: new RegExp(`^${escape(item.name)}`), level: 1 }).waitFor();
    const review = page.getByRole('region', { name: 'Review' });
    await expect(review.locator('.review-state .badge').first().textContent()).resolves.toBe('needs review');
    // The API returns no suggestions for it: the page shows no suggestions area.
    const before = await wsGet<{ suggestions: unknown[]; sessions: { finding_id: string; external_id: string; suppressed: boolean }[] }>(`patterns/${item.pattern_id}`);
    expect(before.suggestions).toEqual([]);
    expect(await page.locator('.suggestions').count()).toBe(0);
    expect(await page.locator('table.pattern-sessions tbody tr').count()).toBe(before.sessions.length);
    await shot(page, 'pattern-light');

    await review.getByLabel('Note (optional)').fill('Refunds this small skip the lookup on purpose.');
    await review.getByLabel('Reviewer').fill('ana');
    await review.getByRole('button', { name: 'Acceptable' }).click();
    await page.getByRole('status').filter({ hasText: /^Verdict acceptable saved: the pattern is closed, \d+ findings? suppressed\.$/ }).waitFor();
    await review.locator('.review-state .badge', { hasText: 'closed' }).waitFor();
    await review.locator('ol.history li', { hasText: 'Refunds this small skip the lookup on purpose.' }).waitFor();
    const closed = await wsGet<{ review_state: string; suppressed_count: number; verdict: { verdict: string; note: string; reviewer: string } }>(`patterns/${item.pattern_id}`);
    expect(closed).toMatchObject({ review_state: 'closed', verdict: { verdict: 'acceptable', note: 'Refunds this small skip the lookup on purpose.', reviewer: 'ana' } });
    expect(closed.suppressed_count).toBe(before.sessions.length);
    await expect(review.textContent()).resolves.toContain(`${closed.suppressed_count} suppressed (all time)`);

    // A second verdict: real. Its findings count again; the history keeps both, newest first.
    await review.getByRole('button', { name: 'Real mistake' }).click();
    await review.locator('.review-state .badge', { hasText: 'open' }).waitFor();
    await expect(review.locator('ol.history li').allTextContents()).resolves.toEqual([
      expect.stringMatching(/^real.*ana.*\(current\)$/),
      expect.stringMatching(/^acceptable.*ana.*Refunds this small skip the lookup on purpose\.$/),
    ]);
    // The regression set downloads as a file, from a blob: link the page makes (its Content-Security-Policy allows it).
    const [download] = await Promise.all([page.waitForEvent('download'), review.getByRole('button', { name: 'Download the regression set (JSON Lines)' }).click()]);
    expect(download.suggestedFilename()).toBe(`regression-${item.pattern_id}.jsonl`);
    const regression = await fetch(`${url}/v1/workspaces/${DEMO_PROJECT}/patterns/${item.pattern_id}/regression`, { headers: { 'x-api-key': key } });
    expect(fs.readFileSync((await download.path())!, 'utf8')).toBe(await regression.text());
    // The checker was wrong about one finding: that one alone is suppressed.
    const one = before.sessions[0];
    await page.getByRole('button', { name: `Checker wrong about ${one.external_id}` }).click();
    await page.getByRole('status').filter({ hasText: new RegExp(`^Finding on ${escape(one.external_id)} marked wrong: suppressed`) }).waitFor();
    const after = await wsGet<{ review_state: string; sessions: { finding_id: string; suppressed: boolean }[] }>(`patterns/${item.pattern_id}`);
    expect(after.review_state).toBe('open');
    expect(after.sessions.filter((s) => s.suppressed).map((s) => s.finding_id)).toEqual([one.finding_id]);
    await page.locator('table.pattern-sessions tbody tr', { hasText: one.external_id }).getByText('checker wrong (ana)').waitFor();
    await shot(page, 'pattern-verdicts-light');
    await page.getByRole('button', { name: 'Switch to the dark theme' }).click();
    await shot(page, 'pattern-verdicts-dark');

    // The queue: gone from needs review, listed under open.
    await page.getByRole('link', { name: 'Review', exact: true }).click();
    await page.getByRole('heading', { name: 'Review queue', level: 1 }).waitFor();
    const states = page.getByRole('group', { name: 'Review states shown' });
    await states.locator('label', { hasText: 'open' }).locator('.count', { hasText: /^1$/ }).waitFor();
    expect(await page.getByRole('listbox', { name: 'Review queue' }).getByRole('option', { name: new RegExp(`^${escape(item.name)},`) }).count()).toBe(0);
    await states.locator('label', { hasText: 'open' }).getByRole('checkbox').check();
    await page.waitForURL(/state=open/);
    await page.getByRole('listbox', { name: 'Review queue' }).getByRole('option', { name: new RegExp(`^${escape(item.name)},.*, open,`) }).waitFor();
    await shot(page, 'review-queue-open-dark');
    await page.context().close();
  });

  it('a verdict asking for a suggestion: the edit proposed, shown side by side, applied as a draft at head; the pattern is fixing', async () => {
    const item = (await wsGet<QueueAnswer>('review?state=open')).items[0];
    const page = await signedIn();
    await page.goto(`${url}/p/${DEMO_PROJECT}/patterns/${item.pattern_id}`);
    const review = page.getByRole('region', { name: 'Review' });
    await review.locator('.review-state .badge', { hasText: 'open' }).waitFor();
    await review.getByRole('checkbox', { name: /Suggest an edit to the procedure/ }).check();
    await review.getByRole('button', { name: 'Real mistake' }).click();
    // The line says it is being written (or, the model already done, that it is written: below).
    await page.getByRole('status').filter({ hasText: /^Verdict real saved: .* suppressed\. (A suggested edit is being written\.|The suggested edit is written: )/ }).waitFor();
    // The page reads the pattern again until the model's proposal is in.
    const suggestion = page.getByRole('region', { name: 'Suggestion' });
    await suggestion.locator('.badge', { hasText: 'proposed' }).waitFor({ timeout: 20_000 });
    await suggestion.locator('.badge', { hasText: 'current' }).waitFor();
    // The line that said it is being written now says it is written, the verdict's confirmation kept.
    await page.getByRole('status').filter({ hasText: /^Verdict real saved: .* suppressed\. The suggested edit is written: it is below, under Suggestions\.$/ }).waitFor();
    expect(await page.getByRole('status').filter({ hasText: 'being written' }).count()).toBe(0);
    await suggestion.getByText('Look the order up by its number first.').waitFor();
    await suggestion.getByRole('button', { name: 'Show the edit' }).click();
    const edit = page.getByLabel('The procedure before and after the suggested edit');
    // The diff is drawn once the suggestion's texts are read: wait for it before reading it.
    await edit.locator('.d-del').first().waitFor();
    await expect(edit.locator('.d-del').allTextContents()).resolves.toEqual([`-${STEP1}`]);
    await expect(edit.locator('.d-add').allTextContents()).resolves.toEqual([`+${REWORDED}`]);
    await shot(page, 'pattern-suggestion-light');
    await page.getByRole('button', { name: 'Switch to the dark theme' }).click();
    await shot(page, 'pattern-suggestion-dark');

    await suggestion.getByRole('button', { name: 'Apply' }).click();
    await page.getByRole('status').filter({ hasText: /^Suggestion applied: saved as a draft at head, it goes out with the next publish\.$/ }).waitFor();
    await suggestion.locator('.badge', { hasText: 'applied' }).waitFor();
    await review.locator('.review-state .badge', { hasText: 'fixing' }).waitFor();
    // A draft at head: the unpublished changes carry the reworded step.
    const head = await wsGet<{ diff: string }>('head');
    expect(head.diff).toContain(`+${REWORDED}`);
    const pattern = await wsGet<{ review_state: string; suggestions: { status: string }[] }>(`patterns/${item.pattern_id}`);
    expect(pattern.review_state).toBe('fixing');
    expect(pattern.suggestions[0].status).toBe('applied');
    await shot(page, 'pattern-applied-dark');
    // Published: the reworded step continues the rule's lineage, linked by the applied suggestion.
    const published = await fetch(`${url}/v1/workspaces/${DEMO_PROJECT}/releases`, { method: 'POST', headers: { 'x-api-key': key } });
    expect(published.status).toBe(201);
    await page.reload();
    const lineage = page.getByRole('region', { name: 'Lineage of the rule' }).locator('ol.lineage li');
    await lineage.nth(1).waitFor();
    await expect(lineage.allTextContents()).resolves.toEqual([
      expect.stringMatching(/^release 1 Look up the order\. · first wording/),
      expect.stringMatching(/^release 2 Look up the order by its number before refunding\. · an applied suggestion/),
    ]);
    await shot(page, 'pattern-lineage-dark');
    await page.context().close();
  });

  it('a suggestion asked for again: a failed one dismissed with a note; a proposed one that conflicts with head says why, with its lines and the agents it changes', async () => {
    const item = (await wsGet<QueueAnswer>('review?state=fixing')).items[0];
    const page = await signedIn();
    await page.goto(`${url}/p/${DEMO_PROJECT}/patterns/${item.pattern_id}`);
    const suggestions = page.getByRole('region', { name: /^Suggestion/ });
    // The verdict (real) asks for an edit and none is waiting: another can be asked for. The
    // model's edit looks for the step's first wording, which the release replaced: it fails.
    await suggestions.getByRole('button', { name: 'Suggest another edit' }).click();
    await page.getByText(/^(A suggested edit is being written\.|The suggested edit could not be written: )/).waitFor();
    const failed = suggestions.locator('li.suggestion', { has: page.locator('.badge', { hasText: 'failed' }) });
    await failed.waitFor({ timeout: 20_000 });
    await failed.locator('.error').first().waitFor();
    // The line that said it is being written now says it failed, and why (the suggestion's error).
    const why = await failed.locator('.error').first().textContent();
    await page.getByRole('alert').filter({ hasText: `The suggested edit could not be written: ${why}` }).waitFor();
    expect(await page.getByRole('status').filter({ hasText: 'being written' }).count()).toBe(0);
    await expect(failed.getByRole('button', { name: 'Write it again' }).isEnabled()).resolves.toBe(true);
    await failed.getByLabel('Why dismiss (optional)').fill('The step was reworded already.');
    await failed.getByRole('button', { name: 'Dismiss' }).click();
    await page.getByRole('status').filter({ hasText: /^Suggestion dismissed\.$/ }).waitFor();
    const dismissed = suggestions.locator('li.suggestion', { has: page.locator('.badge', { hasText: 'dismissed' }) });
    await dismissed.getByText('The step was reworded already.').waitFor();
    const listed = await wsGet<{ items: { id: string; status: string; note: string | null; path: string }[] }>(`suggestions?pattern=${item.pattern_id}`);
    expect(listed.items.find((s) => s.status === 'dismissed')).toMatchObject({ note: 'The step was reworded already.' });

    // The model now edits the current wording: proposed. Then the same line changes at head.
    edit = { find: REWORDED, replace: THIRD };
    await suggestions.getByRole('button', { name: 'Suggest another edit' }).click();
    const proposed = suggestions.locator('li.suggestion', { has: page.locator('.badge', { hasText: 'proposed' }) });
    await proposed.locator('.badge', { hasText: 'current' }).waitFor({ timeout: 20_000 });
    expect(await suggestions.getByRole('button', { name: /^Suggest (another|an) edit$/ }).count()).toBe(0);
    const file = listed.items[0].path;
    const at = await wsGet<{ text: string }>(`head/${file}`);
    expect(at.text).toContain(REWORDED);
    const saved = await fetch(`${url}/v1/workspaces/${DEMO_PROJECT}/head/${file}`, {
      method: 'PUT',
      headers: { 'x-api-key': key, 'content-type': 'text/markdown' },
      body: at.text.replace(REWORDED, MEANWHILE),
    });
    expect(saved.status).toBe(200);
    await page.reload();
    await proposed.locator('.badge', { hasText: 'conflict' }).waitFor();
    await proposed.locator('.conflict-why').waitFor();
    await expect(proposed.getByRole('button', { name: 'Apply' }).isDisabled()).resolves.toBe(true);
    await proposed.getByRole('button', { name: 'Show the edit' }).click();
    const since = proposed.getByLabel('Changes since it was written');
    await since.locator('table.conflicts tbody tr').first().waitFor();
    const view = await wsGet<{ since_written: { reason: string; conflicts: { line: number }[] }; plan: { agents: { agent: string }[] } }>(
      `suggestions/${(await wsGet<{ items: { id: string; status: string }[] }>(`suggestions?pattern=${item.pattern_id}&status=proposed`)).items[0].id}`,
    );
    await expect(since.locator('p.error').textContent()).resolves.toBe(view.since_written.reason);
    await expect(since.locator('table.conflicts tbody tr td').allTextContents()).resolves.toEqual([String(view.since_written.conflicts[0].line), REWORDED, MEANWHILE, THIRD]);
    // Each agent whose compiled instructions change, with its diff.
    expect(view.plan.agents.length).toBeGreaterThan(0);
    const plan = proposed.getByLabel('Agents whose instructions change');
    await expect(plan.locator('details summary').allTextContents()).resolves.toEqual(view.plan.agents.map((a) => expect.stringContaining(a.agent)));
    await plan.locator('details summary').first().click();
    await plan.locator('pre.diff .d-add', { hasText: THIRD.replace(/ \[tool:.*$/, '') }).first().waitFor();
    await shot(page, 'pattern-suggestion-conflict-light');
    await page.context().close();
  });

  it('a suggestion applied as a pull request whose connection is then deleted says so, and is dismissed from the page: no longer followed', async () => {
    // The proposed one left by the test before conflicts with head: rewritten against head's wording, it is current.
    const old = (await wsGet<{ items: { id: string; pattern_id: string }[] }>('suggestions?status=proposed')).items[0];
    const patternId = old.pattern_id;
    edit = { find: MEANWHILE, replace: FOURTH };
    const page = await signedIn();
    await page.goto(`${url}/p/${DEMO_PROJECT}/patterns/${patternId}`);
    await page.locator(`li.suggestion[aria-label="Suggestion ${old.id}"]`).getByRole('button', { name: 'Rewrite against the current text' }).click();
    // It says it is being rewritten, then (once the model is done) that it is written.
    await page.getByRole('status').filter({ hasText: /^(Suggestion rewritten|The suggested edit is written: )/ }).waitFor();
    const proposed = await until('the rewritten suggestion proposed', async () =>
      (await wsGet<{ items: { id: string; status: string }[] }>(`suggestions?pattern=${patternId}&status=proposed`)).items.find((x) => x.id !== old.id),
    );
    const item = page.locator(`li.suggestion[aria-label="Suggestion ${proposed.id}"]`);
    await item.locator('.badge', { hasText: 'current' }).waitFor({ timeout: 20_000 });
    await page.getByRole('status').filter({ hasText: /^The suggested edit is written: it is below, under Suggestions\.$/ }).waitFor();

    // The workspace connects to GitHub: Apply opens a pull request.
    const connect = await fetch(`${url}/v1/workspaces/${DEMO_PROJECT}/github`, {
      method: 'PUT',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ repository: 'acme/ops', path: 'procedures', api_url: gh.url, token: gh.token }),
    });
    expect(connect.status).toBe(200);
    await item.getByRole('button', { name: 'Apply' }).click();
    await page.getByRole('status').filter({ hasText: /^Suggestion applied: a pull request is open, .*\/acme\/ops\/pull\/1\.$/ }).waitFor();
    await item.locator('.badge', { hasText: 'pr open' }).waitFor();

    // The connection deleted: the pull request cannot be followed. Once a look is due (at most
    // once a minute; made due here), the page says so and how to stop following it.
    const removed = await fetch(`${url}/v1/workspaces/${DEMO_PROJECT}/github`, { method: 'DELETE', headers: { 'x-api-key': key } });
    expect(removed.status).toBeLessThan(300);
    await app.db.query(`UPDATE sop_suggestions SET pr_checked_at = now() - interval '1 hour' WHERE id = $1`, [proposed.id]);
    await page.reload();
    await item.locator('p.error', { hasText: 'dismiss the suggestion to stop following it' }).waitFor();
    await item.locator('.badge', { hasText: 'pr open' }).waitFor();
    await shot(page, 'pattern-suggestion-pr-unfollowed-light');

    // Dismissed from the page, with a note: the pull request is no longer followed.
    await item.getByLabel('Why dismiss (optional)').fill('The repository moved; the pull request is handled there.');
    await item.getByRole('button', { name: 'Dismiss' }).click();
    await page.getByRole('status').filter({ hasText: 'Suggestion dismissed: its pull request is no longer followed (it stays on GitHub).' }).waitFor();
    await item.locator('.badge', { hasText: 'dismissed' }).waitFor();
    await item.getByText('The repository moved; the pull request is handled there.').waitFor();
    expect(await item.getByRole('button', { name: 'Dismiss' }).count()).toBe(0);
    const view = await wsGet<{ status: string; note: string | null; pr_url: string | null }>(`suggestions/${proposed.id}`);
    expect(view).toMatchObject({ status: 'dismissed', note: 'The repository moved; the pull request is handled there.', pr_url: expect.stringContaining('/acme/ops/pull/1') });
    await page.context().close();
  });

  it('Insights shows the tiles, the procedures, the follow rate by week and the top patterns as the API says', async () => {
    const api = await wsGet<{
      tiles: { sessions: number; follow_rate: number | null; findings: number; suppressed: number };
      scoreboard: { procedure_id: string; procedure_name: string; sessions: number; follow_rate: number | null; weekly_follow_rate: (number | null)[] }[];
      ladder: { pattern_id: string; procedure_id: string; name: string; findings: number }[];
    }>('insights?days=90');
    expect(api.tiles.sessions).toBeGreaterThan(0);
    const page = await signedIn();
    // What the page asks the API for Insights (it used to ask once more per week of its chart).
    const asked: string[] = [];
    page.on('request', (r) => void (/\/insights\?/.test(r.url()) && asked.push(r.url())));
    await page.getByRole('link', { name: 'Insights', exact: true }).click();
    await page.getByRole('heading', { name: 'Insights', level: 1 }).waitFor();
    const tiles = page.getByRole('region', { name: 'Totals' });
    await tiles.locator('.tile', { hasText: 'Sessions checked' }).locator('.tile-value', { hasText: String(api.tiles.sessions) }).waitFor();
    await expect(tiles.locator('.tile', { hasText: 'Suppressed (apart)' }).locator('.tile-value').textContent()).resolves.toBe(String(api.tiles.suppressed));
    await expect(tiles.locator('.tile', { hasText: 'Findings' }).locator('.tile-value').textContent()).resolves.toBe(String(api.tiles.findings));
    const rows = page.locator('table.scoreboard tbody tr');
    await rows.first().waitFor();
    expect(await rows.locator('th').allTextContents()).toEqual(api.scoreboard.map((s) => s.procedure_name));
    // The follow-rate chart: a line per procedure with a rate in the last 12 weeks, from the
    // scoreboard's weekly rates (the demo's sessions are all this week), and one call for all of it.
    const chart = page.getByRole('img', { name: 'Follow rate per procedure, by week' });
    await chart.waitFor();
    const drawn = api.scoreboard.filter((s) => s.weekly_follow_rate.slice(-12).some((r) => r !== null));
    expect(drawn.length).toBeGreaterThan(0);
    expect(drawn.length).toBe(api.scoreboard.filter((s) => s.follow_rate !== null).length);
    expect(await chart.locator('.series').count()).toBe(drawn.length);
    expect(asked).toHaveLength(1);
    // The ladder: the demo rule's pattern, its findings.
    const ladder = page.getByRole('listbox', { name: 'Top patterns' });
    await expect(ladder.getByRole('option').count()).resolves.toBe(api.ladder.length);
    await expect(ladder.getByRole('option').first().getAttribute('aria-label')).resolves.toMatch(new RegExp(`^${escape(api.ladder[0].name)}, .*, ${api.ladder[0].findings} findings`));
    await shot(page, 'insights-light');
    await page.getByRole('button', { name: 'Switch to the dark theme' }).click();
    await shot(page, 'insights-dark');
    // The top pattern's procedure alone: its row's link is the filter.
    const theirs = api.scoreboard.find((p) => p.procedure_id === api.ladder[0].procedure_id)!;
    await rows.locator('th a', { hasText: theirs.procedure_name }).click();
    await page.waitForURL(/procedure=/);
    // The narrowed answer replaces the table: one procedure's row.
    await page.locator('table.scoreboard tbody tr').nth(1).waitFor({ state: 'detached' });
    await expect(page.locator('table.scoreboard tbody tr th').allTextContents()).resolves.toEqual([theirs.procedure_name]);
    // Enter on the ladder opens the pattern (ladder rows: the listbox is one stop).
    await ladder.focus();
    await page.keyboard.press('Home');
    await page.keyboard.press('Enter');
    await page.waitForURL(new RegExp(`/patterns/${api.ladder[0].pattern_id}$`));
    await page.context().close();
  });

  it('Insights compares two releases as the API says: sessions, follow rate and each rule pattern per session', async () => {
    const api = await wsGet<{
      from: { number: number };
      to: { number: number };
      procedures: { procedure_name: string; from: { sessions: number }; to: { sessions: number }; rules: { name: string; from: { findings: number }; to: { findings: number } }[] }[];
    }>('insights/compare');
    // The demo's sessions ran on release 1; release 2 was published by the suggestion's test.
    expect([api.from.number, api.to.number]).toEqual([1, 2]);
    const page = await signedIn();
    await page.getByRole('link', { name: 'Insights', exact: true }).click();
    const table = page.getByRole('table', { name: 'Release 1 against release 2' });
    await table.waitFor();
    const procRows = table.locator('tr.procedure-row');
    await expect(procRows.locator('th').allTextContents()).resolves.toEqual(api.procedures.map((p) => expect.stringContaining(p.procedure_name)));
    await expect(procRows.locator('td:nth-of-type(1)').allTextContents()).resolves.toEqual(api.procedures.map((p) => `${p.from.sessions} → ${p.to.sessions}`));
    const rules = api.procedures.flatMap((p) => p.rules);
    expect(rules.length).toBeGreaterThan(0);
    // Each rule's findings in their own column, each count with its word.
    const findings = (n: number) => `${n} finding${n === 1 ? '' : 's'}`;
    await expect(table.locator('tr.rule-row td:nth-of-type(4)').allTextContents()).resolves.toEqual(rules.map((r) => `${findings(r.from.findings)} → ${findings(r.to.findings)}`));
    await table.scrollIntoViewIfNeeded();
    await shot(page, 'insights-compare-light');
    // The releases compared: the live one against the one before it, and never one against itself.
    const picked = page.getByRole('form', { name: 'Releases compared' });
    await expect(picked.getByLabel('From').inputValue()).resolves.toBe('1');
    await expect(picked.getByLabel('To').inputValue()).resolves.toBe('2');
    await expect(picked.getByLabel('To').locator('option[value="1"]').isDisabled()).resolves.toBe(true);
    await page.context().close();
  });

  it('reaches Review and Insights from the keyboard', async () => {
    const page = await signedIn();
    const reached: string[] = [];
    for (let i = 0; i < 14; i++) {
      await page.keyboard.press('Tab');
      reached.push(await page.evaluate<string>("document.activeElement?.textContent?.trim() ?? ''"));
    }
    expect(reached).toEqual(expect.arrayContaining(['Review', 'Insights']));
    await page.context().close();
  });
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
