import type { Browser, ConsoleMessage, Page } from 'playwright-core';
import type { FindingMessage } from '@neatroots/messages';
import { until } from '@neatroots/platform';
import { NeatrootsClient } from '@neatroots/sdk';
import { FindingsRepo } from '@neatroots/store';
import { chromiumOrSkip, openSignedIn, pageErrors, shot, startBrowserApp, type BrowserApp } from './browser.test';

/**
 * The web app on a big fleet, in a real browser against the embedded neatroots: more open
 * problems than a page, more review patterns than the API's default page, two releases to
 * compare with many findings per session, and a run whose spans come in pages. Problems are
 * written to the store as the rule engine writes them (FindingsRepo.apply); the run is sent
 * through ingest with the agent SDK; the workspace is pushed, published and checked through the
 * sopops API (checked from tool calls, no decision model).
 */
const PROJECT = 'fleet';
const KEY = 'fleet-test-key';
/** A second project, its workspace fresh: nothing published, nothing at head. */
const FRESH = 'fresh';
const FRESH_KEY = 'fresh-test-key';
const PROBLEMS = 230;
const STEPS = 60;
const SPANS = 700;

const exe = chromiumOrSkip('the web app on a big fleet');

/** A procedure of STEPS required steps, step i done by calling tool t{i}. */
function procedure(goal: string): string {
  const steps = Array.from({ length: STEPS }, (_, i) => `${i + 1}. Do task ${i + 1}. [tool: t${i + 1}, required]`);
  return `# Run the fleet tasks\nGoal: ${goal}\n\n## Steps\n${steps.join('\n')}\n`;
}

/**
 * A session of the fleet bot that called these tools (a step before the last called one and not
 * called is skipped: a finding). `silent`: the agent never spoke (not_measurable, its findings kept).
 */
function session(externalId: string, tools: number[], silent = false) {
  return {
    external_id: externalId,
    agent: 'fleet-bot',
    release_id: null,
    started_at: new Date().toISOString(),
    transcript_ref: null,
    turns: [
      { role: 'user', text: 'Run the tasks, please.' },
      { role: 'agent', text: silent ? '' : 'Done.' },
    ],
    tool_calls: tools.map((t) => ({ turn: 1, tool: `t${t}`, input: {}, output: { ok: true }, error: null })),
  };
}

(exe ? describe : describe.skip)('the web app on a big fleet', () => {
  let web: BrowserApp;
  let client: NeatrootsClient;
  let browser: Browser;
  let url: string;
  /** Console errors and uncaught exceptions of the pages opened: none allowed, but for a failure a test causes on purpose. */
  const errors = pageErrors();
  let allowed: RegExp | null = null;

  async function get<T>(root: 'projects' | 'workspaces', p: string): Promise<T> {
    const res = await fetch(`${url}/v1/${root}/${PROJECT}/${p}`, { headers: { 'x-api-key': KEY } });
    if (!res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  }

  async function ws(method: string, p: string, body?: unknown): Promise<{ id?: string; status?: string }> {
    const res = await fetch(`${url}/v1/workspaces/${PROJECT}${p}`, {
      method,
      headers: { 'x-api-key': KEY, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : {};
  }

  async function checked(externalId: string, tools: number[], silent = false): Promise<void> {
    const { id } = await ws('POST', '/sessions', session(externalId, tools, silent));
    await until(`${externalId} checked`, async () => (await ws('GET', `/sessions/${id}`)).status !== 'queued');
  }

  beforeAll(async () => {
    web = await startBrowserApp(exe!, { prefix: 'nr-web-fleet', config: { NEATROOTS_API_KEYS: `${PROJECT}=${KEY},${FRESH}=${FRESH_KEY}` } });
    ({ browser, url } = web);
    const { app } = web;
    client = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: KEY, flushIntervalMs: 20 });

    // More open problems than Home reads at once, as the rule engine writes them: one per run, a minute apart.
    const t = Date.now() - PROBLEMS * 60_000;
    const problems: FindingMessage[] = Array.from({ length: PROBLEMS }, (_, i) => ({
      id: `f-${i}`, project: PROJECT, run_id: `job-${i}`, workflow: 'batch', check_id: 'run-failed', status: 'raised', span_ids: [], count: 1,
      action: 'flag', title: `Run job-${i} ended with an error`, guidance: 'Check what was done.', at_ms: t + i * 60_000, priority: 0, kind: 'rule', source: 'library',
    }));
    await new FindingsRepo(app.db).apply(problems);

    // A run of 700 spans under one parent: the first 500 come with the run, the rest in a page.
    const long = client.startRun({ run_id: 'run-long', workflow: 'batch' });
    const t0 = Date.now() - 60_000;
    const root = long.span({ type: 'agent', name: 'batch agent', span_id: 'root', start_ms: t0, end_ms: t0 + SPANS + 10 });
    for (let i = 1; i < SPANS; i++) long.span({ type: 'llm', name: `step ${i}`, span_id: `s${i}`, parent_id: root, start_ms: t0 + i, end_ms: t0 + i + 1 });
    await long.end({ status: 'ok' });

    // The workspace: release 1, a session skipping 59 of 60 steps and one where the agent never
    // spoke (not_measurable) skipping 29; release 2, a session skipping 19.
    const head = (goal: string) => ({
      files: [
        { path: 'procedures/fleet-tasks.md', text: procedure(goal) },
        { path: 'agents/fleet-bot.yaml', text: 'instructions: |\n  You run the fleet tasks.\nprocedures: [fleet-tasks]\n' },
      ],
    });
    await ws('PUT', '/head', head('Every task is done.'));
    await ws('POST', '/releases');
    await checked('fleet-1', [STEPS]);
    await checked('fleet-silent', [30], true);
    await ws('PUT', '/head', head('Every task is done, in order.'));
    await ws('POST', '/releases');
    await checked('fleet-2', [...Array.from({ length: 40 }, (_, i) => i + 1), STEPS]);
    await until('59 patterns in the review queue', async () => (await get<{ total: number }>('workspaces', 'review?limit=500')).total === STEPS - 1);
    await until('700 spans stored', async () => (await get<{ run: { span_count: number } }>('projects', 'runs/run-long')).run.span_count === SPANS, 120_000);
  }, 240_000);

  afterAll(async () => {
    await client?.close();
    await web?.close();
  });

  afterEach(() => {
    allowed = null;
  });

  const isError = (m: ConsoleMessage) => m.type() === 'error' && !(allowed && allowed.test(`${m.text()} ${m.location().url}`));
  const signedIn = (project = PROJECT, key = KEY): Promise<Page> => openSignedIn(browser, { url, project, key, errors, isError });

  /** Every open problem the API has, page by page. */
  async function openProblems(): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | null = null;
    do {
      const r: { findings: { id: string }[]; next_cursor: string | null } = await get('projects', `findings?state=open&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      ids.push(...r.findings.map((f) => f.id));
      cursor = r.next_cursor;
    } while (cursor);
    return ids;
  }

  it("Home shows the newest 200 open problems, says older ones follow, and shows them all on Show more", async () => {
    const all = await openProblems();
    expect(all.length).toBeGreaterThanOrEqual(PROBLEMS);
    const page = await signedIn();
    const section = page.getByRole('region', { name: 'Problems now' });
    const shown = section.locator('li.problem');
    await section.getByText('The newest 200 open problems; older ones follow.').waitFor();
    expect(await shown.count()).toBe(200);
    await shot(page, 'fleet-home-200');
    await section.getByRole('button', { name: 'Show 200 more' }).click();
    await section.getByText(`All ${all.length} open problems.`).waitFor();
    expect(await shown.count()).toBe(all.length);
    // Every open problem once, the oldest among them.
    const links = await shown.locator('a').evaluateAll((els) => els.map((e) => new URL((e as unknown as { href: string }).href).searchParams.get('finding')));
    expect(links.sort()).toEqual([...all].sort());
    expect(links).toContain('f-0');
    expect(await section.getByRole('button', { name: /^Show/ }).count()).toBe(0);
    await page.context().close();
  });

  it('the review queue lists every pattern waiting, past the API’s default page of 50', async () => {
    const queue = await get<{ items: { pattern_id: string; name: string }[]; total: number }>('workspaces', 'review?limit=500');
    expect(queue.total).toBe(STEPS - 1);
    expect(queue.items).toHaveLength(STEPS - 1);
    const page = await signedIn();
    await page.getByRole('link', { name: 'Review', exact: true }).click();
    await page.getByRole('heading', { name: `${STEPS - 1} patterns; ↑ ↓ to move, Enter to open` }).waitFor();
    // The last pattern is in the list: End selects it.
    const list = page.getByRole('listbox', { name: 'Review queue' });
    await list.focus();
    await page.keyboard.press('End');
    await page.waitForURL(new RegExp(`item=${queue.items[STEPS - 2].pattern_id}$`));
    await expect(page.getByRole('option', { selected: true }).getAttribute('id')).resolves.toBe(`queue-row-${STEPS - 2}`);
    await shot(page, 'fleet-review-queue-59');
    await page.context().close();
  });

  it('Insights keeps the releases compared in the link when a top pattern, the window or the procedure is picked', async () => {
    const page = await signedIn();
    await page.goto(`${url}/p/${PROJECT}/insights?days=90&from=1&to=2`);
    const ladder = page.getByRole('listbox', { name: 'Top patterns' });
    await ladder.getByRole('option').nth(2).click();
    await page.waitForURL(/row=/);
    const q = () => new URL(page.url()).searchParams;
    expect([q().get('from'), q().get('to'), q().get('days')]).toEqual(['1', '2', '90']);
    await page.locator('label', { hasText: /^Window/ }).locator('select').selectOption('30');
    await page.waitForURL(/days=30/);
    expect([q().get('from'), q().get('to'), q().get('row')]).toEqual(['1', '2', null]);
    await page.locator('label', { hasText: /^Procedure/ }).locator('select').selectOption('fleet-tasks');
    await page.waitForURL(/procedure=fleet-tasks/);
    expect([q().get('from'), q().get('to'), q().get('days')]).toEqual(['1', '2', '30']);
    // The procedure's row in the table narrows the page the same way.
    await page.goto(`${url}/p/${PROJECT}/insights?days=90&from=1&to=2`);
    await page.locator('table.scoreboard th a', { hasText: 'Run the fleet tasks' }).click();
    await page.waitForURL(/procedure=fleet-tasks/);
    expect([q().get('from'), q().get('to'), q().get('days')]).toEqual(['1', '2', '90']);
    const picked = page.getByRole('form', { name: 'Releases compared' });
    await expect(picked.getByLabel('From').inputValue()).resolves.toBe('1');
    await expect(picked.getByLabel('To').inputValue()).resolves.toBe('2');
    await page.context().close();
  });

  it('Compare releases shows findings per measurable session as a plain number with its change, as the API counts it', async () => {
    type Side = { sessions: number; findings: number; rate: number | null; results: { not_measurable: number } };
    const cmp = await get<{ procedures: { from: Side; to: Side }[] }>('workspaces', 'insights/compare');
    const p = cmp.procedures[0];
    // Release 1: 59 findings in its measurable session; the session where the agent never spoke
    // (29 findings) is left out, as the rules' rates leave it out: 59, not 88 / 2 = 44.
    expect([p.from.sessions, p.from.results.not_measurable, p.from.findings]).toEqual([2, 1, 59 + 29]);
    expect([p.from.rate, p.to.rate]).toEqual([59, 19]);
    const page = await signedIn();
    await page.goto(`${url}/p/${PROJECT}/insights`);
    const table = page.getByRole('table', { name: 'Release 1 against release 2' });
    await table.waitFor();
    await expect(table.locator('tr.procedure-row td:nth-of-type(3)').textContent()).resolves.toBe('59 → 19 (−40)');
    await expect(table.locator('tr.procedure-row td:nth-of-type(3) .change').getAttribute('class')).resolves.toContain('better');
    // A rule's findings per session, as plain: one finding in the one session of release 1, none in release 2's.
    const rule = table.locator('tr.rule-row', { has: page.getByRole('link', { name: 'Do task 30', exact: true }) });
    await expect(rule.locator('td:nth-of-type(3)').textContent()).resolves.toBe('1 → 0 (−1)');
    // Its findings are counted in their own column, not under Sessions, each count with its word;
    // that column counts every session's, the silent one's too (task 1 was skipped in both of release 1's).
    await expect(table.locator('thead th').allTextContents()).resolves.toEqual([
      'Procedure, rule',
      'Sessions (release 1 → release 2)',
      'Follow rate',
      'Findings per measurable session',
      'Findings (all sessions)',
      'Suppressed',
    ]);
    await expect(rule.locator('td:nth-of-type(1)').textContent()).resolves.toBe('');
    await expect(rule.locator('td:nth-of-type(4)').textContent()).resolves.toBe('1 finding → 0 findings');
    const first = table.locator('tr.rule-row', { has: page.getByRole('link', { name: 'Do task 1', exact: true }) });
    await expect(first.locator('td:nth-of-type(3)').textContent()).resolves.toBe('1 → 0 (−1)');
    await expect(first.locator('td:nth-of-type(4)').textContent()).resolves.toBe('2 findings → 0 findings');
    await expect(table.locator('tr.procedure-row td:nth-of-type(4)').textContent()).resolves.toBe(`${p.from.findings} findings → ${p.to.findings} findings`);
    await page.getByText('Findings per measurable session leave out the not_measurable sessions and their findings').waitFor();
    await table.scrollIntoViewIfNeeded();
    await shot(page, 'fleet-insights-compare');
    await page.context().close();
  });

  it('a fresh workspace says nothing is published or saved yet: no release to compare, head not said to equal a live release', async () => {
    const releases = (await (await fetch(`${url}/v1/workspaces/${FRESH}/releases`, { headers: { 'x-api-key': FRESH_KEY } })).json()) as { items: unknown[] };
    expect(releases.items).toEqual([]);
    const page = await signedIn(FRESH, FRESH_KEY);
    await page.getByRole('link', { name: 'Insights', exact: true }).click();
    const compare = page.getByRole('region', { name: 'Compare releases' });
    await compare.getByText('No release yet: publish head (Procedures) and then another release to compare the sessions checked on each.').waitFor();
    expect(await compare.getByText(/One release so far/).count()).toBe(0);
    await shot(page, 'fleet-fresh-insights');
    await page.getByRole('link', { name: 'Procedures', exact: true }).click();
    await page.getByText('Nothing published yet (sopops publish makes head the first release).').waitFor();
    await page.getByText('Nothing is saved at head yet: write a file below, then publish it.').waitFor();
    expect(await page.getByText('Head is the same as the live release.').count()).toBe(0);
    await shot(page, 'fleet-fresh-procedures');
    await page.context().close();
  });

  it('the run page keeps the spans it has when a later page of spans fails, and says so beside them', async () => {
    const page = await signedIn();
    // The connection drops on the second page of spans.
    allowed = /Failed to load resource.*\/runs\/run-long\/spans/;
    await page.route(/\/v1\/projects\/fleet\/runs\/run-long\/spans\?/, (route) => route.abort('connectionreset'));
    await page.goto(`${url}/p/${PROJECT}/runs/run-long`);
    const alert = page.getByRole('region', { name: 'Spans', exact: true }).getByRole('alert');
    await alert.waitFor();
    await expect(alert.textContent()).resolves.toMatch(/^The spans after the first 500 could not be loaded: neatroots could not be reached/);
    await page.getByRole('heading', { name: `Spans (500 of ${SPANS}; ↑ ↓ to move)` }).waitFor();
    const rows = page.getByRole('listbox', { name: 'Spans in order' }).getByRole('option');
    await expect(rows.first().getAttribute('aria-label')).resolves.toMatch(/^batch agent,/);
    await expect(rows.nth(1).getAttribute('aria-label')).resolves.toMatch(/^step 1,/);
    await page.getByRole('heading', { name: 'Run run-long' }).waitFor();
    await shot(page, 'fleet-run-spans-failed');
    await page.context().close();
  });
});
