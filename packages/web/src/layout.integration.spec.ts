import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Browser, ConsoleMessage, Page, Route } from 'playwright-core';
import { until } from '@neatroots/platform';
import { NeatrootsClient } from '@neatroots/sdk';
import { chromiumOrSkip, openSignedIn, pageErrors, shot, startBrowserApp, type BrowserApp } from './browser.test';

/**
 * The web app's layout and reading, in a real browser against the embedded neatroots: no page
 * wider than a phone's screen or than a laptop's with a very long run id, the ⚑ markers of a span
 * with many findings inside the spans list, durations and counts as a person reads them, a link's
 * API time shown in the time field, the check editor's preview, run count and Edit, "Loading…"
 * while a page reads the API, and a title per page. Screenshots `layout-*`.
 */
const PROJECT = 'layout';
const KEY = 'layout-test-key';
/** A run id of 165 characters with no place to break, as some tracers make them. */
const LONG = `run-long-${'a1b2c3d4e5f6'.repeat(14)}`.slice(0, 165);
/** The long step's duration: just under 2 minutes, which reads "2 min 0 s". */
const LONG_STEP_MS = 119_600;
/** The four checks that each flag the long step (a span with 4 findings). */
const SLOW = [1, 2, 3, 4];
const CHECKS = SLOW.map(
  (s) => `id: slow-${s}s
kind: rule
title: A step over ${s} s
rule:
  type: slow
  span: { name: long step }
  at_least_ms: ${s * 1000}
action: flag
`,
).join('---\n');
/** A check saved in the project's database, so the Checks list has an **Edit** for it. */
const EDIT_ME = `id: layout-edit-me
kind: rule
title: Refund without an order lookup
rule:
  type: requires_before
  call: { tool: [issue_refund] }
  requires: { tool: [lookup_order] }
`;
const FIXTURES = path.resolve(__dirname, '..', '..', '..', 'libs', 'sop', 'fixtures');
/** The demo's refund procedure: its refund step has a `when:`, which no model decides here (its reason names NEATROOTS_DECISION_MODEL_URL). */
const REFUND = fs.readFileSync(path.resolve(__dirname, '..', '..', 'neatroots', 'demo', 'procedures', 'refund-order.md'), 'utf8');
/**
 * A demo-like session whose order lookup is quoted whole (a JSON of 200 characters with no space
 * to break at), and no refund call: whether a refund was owed needs a model, and the refund
 * step's reason names NEATROOTS_DECISION_MODEL_URL.
 */
const REFUND_SESSION = {
  external_id: 'refund-long-quote',
  agent: 'support-agent',
  turns: [
    { role: 'user', text: 'Please refund order A2002, it arrived broken.' },
    { role: 'agent', text: 'Let me look the order up.' },
    { role: 'agent', text: 'Refunded.' },
  ],
  tool_calls: [
    { turn: 1, tool: 'lookup_order', input: { order_id: 'A2002', lines: Array.from({ length: 12 }, (_, i) => ({ sku: `SKU-${1000 + i}`, qty: i + 1 })) }, output: { owner: 'c-17', amount: 25 } },
  ],
};

const exe = chromiumOrSkip('the web app layout');

(exe ? describe : describe.skip)('the web app layout', () => {
  let web: BrowserApp;
  let client: NeatrootsClient;
  let browser: Browser;
  let url: string;
  let sessionId: string;
  /** The demo-like session (reasons naming NEATROOTS_DECISION_MODEL_URL, a long JSON quote) and the skipped payment's pattern. */
  let refundSessionId: string;
  let pattern: { pattern_id: string; name: string };

  async function api<T>(method: string, p: string, body?: unknown, root = 'projects'): Promise<T> {
    const res = await fetch(`${url}/v1/${root}/${PROJECT}/${p}`, {
      method,
      headers: { 'x-api-key': KEY, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text}`);
    return (text ? JSON.parse(text) : {}) as T;
  }
  const get = <T>(p: string, root = 'projects') => api<T>('GET', p, undefined, root);

  beforeAll(async () => {
    web = await startBrowserApp(exe!, { prefix: 'nr-web-layout', checks: { 'slow.yaml': CHECKS }, config: { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` } });
    ({ browser, url } = web);
    client = new NeatrootsClient({ address: `127.0.0.1:${web.app.ingest.grpcPort}`, apiKey: KEY, flushIntervalMs: 20 });

    const t0 = Date.now() - 5 * 60_000;
    // A run with one failed call and a step of just under 2 minutes that four checks flag.
    const slow = client.startRun({ run_id: 'run-slow', workflow: 'batch', session_id: 'sess-slow' });
    const root = slow.span({ type: 'agent', name: 'batch agent', span_id: 'root', start_ms: t0, end_ms: t0 + LONG_STEP_MS + 2000 });
    slow.span({ type: 'llm', name: 'long step', span_id: 'long', parent_id: root, model: 'm', start_ms: t0 + 1000, end_ms: t0 + 1000 + LONG_STEP_MS });
    slow.span({ type: 'tool', name: 'search', tool: 'search', span_id: 'fail', parent_id: root, error: 'upstream timeout', status: 'error', start_ms: t0 + 500, end_ms: t0 + 900 });
    await slow.end({ status: 'ok', final_output: 'Done.' });
    // A run whose id is 165 characters, with a problem (it ended with an error) so Home names it too.
    const long = client.startRun({ run_id: LONG, workflow: 'support', session_id: `session-${LONG}` });
    long.span({ type: 'tool', name: 'search', tool: 'search', span_id: 'l1', error: 'boom', status: 'error', start_ms: t0, end_ms: t0 + 100 });
    await long.end({ status: 'error' });

    // A workspace with its procedures published and one checked session of a long external id.
    await api('PUT', 'head', {
      files: [
        { path: 'procedures/card-payment.md', text: fs.readFileSync(path.join(FIXTURES, 'luigis', 'procedures', 'card-payment.md'), 'utf8') },
        { path: 'agents/payments-bot.yaml', text: fs.readFileSync(path.join(FIXTURES, 'luigis', 'agents', 'payments-bot.yaml'), 'utf8') },
        { path: 'procedures/refund-order.md', text: REFUND },
        { path: 'agents/support-agent.yaml', text: 'instructions: You are a support agent for an online shop.\nprocedures: [refund-order]\n' },
      ],
    }, 'workspaces');
    await api('POST', 'releases', undefined, 'workspaces');
    const session = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'sessions', 'payment-skipped', 'session.json'), 'utf8'));
    sessionId = (await api<{ id: string }>('POST', 'sessions', { ...session, external_id: `pay-${LONG}` }, 'workspaces')).id;
    refundSessionId = (await api<{ id: string }>('POST', 'sessions', REFUND_SESSION, 'workspaces')).id;
    for (const id of [sessionId, refundSessionId]) await until('the session checked', async () => (await get<{ status: string }>(`sessions/${id}`, 'workspaces')).status !== 'queued');
    // The skipped payment step is a finding: its pattern, once clustered.
    pattern = await until('the skipped step in the review queue', async () => (await get<{ items: { pattern_id: string; name: string }[] }>('review', 'workspaces')).items[0]);

    await api('POST', 'checks', { yaml: EDIT_ME });
    await until('the four slow findings', async () =>
      (await get<{ findings: { check_id: string; span_ids: string[] }[] }>('findings?run_id=run-slow&state=all')).findings.filter((f) => f.check_id.startsWith('slow-') && f.span_ids.includes('long')).length === SLOW.length,
    );
    await until('the long run stored with its problem', async () => (await get<{ findings: unknown[] }>(`findings?run_id=${LONG}`)).findings.length > 0);
  }, 240_000);

  afterAll(async () => {
    await client?.close();
    await web?.close();
  });

  /** Console errors, uncaught exceptions and a field's "does not conform" warning: none allowed. */
  const errors = pageErrors();

  const isError = (m: ConsoleMessage) => m.type() === 'error' || (m.type() === 'warning' && m.text().includes('does not conform'));
  const signedIn = (viewport = { width: 1280, height: 860 }): Promise<Page> =>
    openSignedIn(browser, { url, project: PROJECT, key: KEY, errors, isError }, { viewport, timezoneId: 'Europe/Berlin', locale: 'en-GB' });

  const P = () => `${url}/p/${PROJECT}`;

  /** Each page of the app, and what shows once it has read the API. */
  const PAGES: { name: string; path: () => string; ready: (page: Page) => Promise<unknown> }[] = [
    { name: 'home', path: () => '/', ready: (page) => Promise.all([page.locator('li.problem', { hasText: LONG }).waitFor(), page.getByText('No run was halted today').waitFor(), page.getByText('No check has been dismissed often.').waitFor()]) },
    { name: 'runs', path: () => '/runs', ready: (page) => page.locator('table.runs tbody tr', { hasText: LONG }).waitFor() },
    { name: 'run', path: () => `/runs/${LONG}?span=l1`, ready: (page) => page.getByRole('region', { name: 'Selected span' }).getByText('boom').waitFor() },
    { name: 'checks', path: () => '/checks', ready: (page) => page.locator('.checks-list tbody tr', { hasText: 'layout-edit-me' }).waitFor() },
    { name: 'sessions', path: () => '/sessions', ready: (page) => page.locator('table.sessions tbody tr', { hasText: LONG }).waitFor() },
    { name: 'session', path: () => `/sessions/${sessionId}`, ready: (page) => page.getByRole('region', { name: 'Transcript' }).locator('ol.turns > li').first().waitFor() },
    {
      name: 'session-long-quote',
      path: () => `/sessions/${refundSessionId}`,
      ready: async (page) => {
        await Promise.all([page.locator('table.rules td', { hasText: 'NEATROOTS_DECISION_MODEL_URL' }).first().waitFor(), page.locator('table.rules .quote-block', { hasText: 'SKU-1000' }).waitFor()]);
        await page.locator('table.rules').first().scrollIntoViewIfNeeded();
      },
    },
    {
      name: 'pattern',
      path: () => `/patterns/${pattern.pattern_id}`,
      // In view for the screenshot: its sessions, the session's id of 170 characters among them.
      ready: async (page) => {
        await page.locator('table.pattern-sessions tbody tr', { hasText: LONG }).waitFor();
        await page.locator('table.pattern-sessions').scrollIntoViewIfNeeded();
      },
    },
    { name: 'procedures', path: () => '/procedures', ready: (page) => page.getByRole('heading', { name: /^Live release 1/ }).waitFor() },
    { name: 'review', path: () => '/review', ready: (page) => page.getByRole('heading', { name: 'Review queue', level: 1 }).waitFor() },
    { name: 'insights', path: () => '/insights', ready: (page) => page.getByRole('heading', { name: 'Insights', level: 1 }).waitFor() },
    { name: 'models', path: () => '/settings/models', ready: (page) => page.getByRole('heading', { name: 'Settings → Models', level: 1 }).waitFor() },
  ];

  for (const width of [420, 1280]) {
    it(`no page is wider than a ${width} px screen, with a run id of ${LONG.length} characters`, async () => {
      const page = await signedIn({ width, height: 860 });
      const wide: string[] = [];
      for (const p of PAGES) {
        await page.goto(`${P()}${p.path()}`);
        await p.ready(page);
        // Whatever else the page reads has been answered and drawn.
        await page.waitForLoadState('networkidle');
        const { scroll, inner } = await page.evaluate<{ scroll: number; inner: number }>('({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth })');
        if (scroll > inner) wide.push(`${p.name}: ${scroll} px wide in ${inner}`);
        await shot(page, `layout-${width}-${p.name}`);
      }
      // The header's controls are on the screen: every page link and Sign out.
      for (const name of ['Home', 'Settings → Models', 'Sign out']) {
        const box = (await page.getByRole(name === 'Sign out' ? 'button' : 'link', { name, exact: true }).boundingBox())!;
        if (box.x + box.width > width) wide.push(`${name} ends at ${Math.round(box.x + box.width)} px`);
      }
      expect(wide).toEqual([]);
      await page.context().close();
    });
  }

  it('the run page stacks its columns on a narrow screen', async () => {
    const page = await signedIn({ width: 600, height: 860 });
    await page.goto(`${P()}/runs/run-slow`);
    await page.getByRole('heading', { name: /^Findings \(/ }).waitFor();
    const [spans, findings] = await Promise.all([page.locator('#spans').boundingBox(), page.getByRole('heading', { name: /^Findings \(/ }).boundingBox()]);
    expect(findings!.y).toBeGreaterThan(spans!.y + spans!.height - 1);
    expect(await page.evaluate<boolean>('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true);
    await page.context().close();
  });

  it('a span with 4 findings keeps its ⚑ markers inside the spans list', async () => {
    const page = await signedIn();
    await page.goto(`${P()}/runs/run-slow`);
    const row = page.getByRole('option', { name: /^long step,/ });
    await row.waitFor();
    await expect(row.getAttribute('aria-label')).resolves.toContain('4 findings');
    const markers = row.locator('.marker');
    await markers.first().waitFor();
    const outside = await page.locator('#spans').evaluate((list) => {
      const r = list.getBoundingClientRect();
      const inner = { left: r.left + list.clientLeft, right: r.left + list.clientLeft + list.clientWidth };
      return [...list.querySelectorAll('.marker')]
        .map((m) => m.getBoundingClientRect())
        .filter((m) => m.left < inner.left - 0.5 || m.right > inner.right + 0.5)
        .map((m) => `${Math.round(m.left)}–${Math.round(m.right)} outside ${Math.round(inner.left)}–${Math.round(inner.right)}`);
    });
    expect(outside).toEqual([]);
    // The four are all said: as one marker with their number, each finding's title on hover.
    await expect(row.locator('.cited').textContent()).resolves.toBe('⚑ 4');
    const title = (await markers.first().getAttribute('title')) ?? '';
    for (const s of SLOW) expect(title).toContain(`A step over ${s} s`);
    // Nothing to scroll sideways in the list.
    expect(await page.locator('#spans').evaluate((el) => el.scrollWidth <= el.clientWidth)).toBe(true);
    await row.click();
    await shot(page, 'layout-run-4-findings');
    await page.context().close();
  });

  it('the run page reads "1 error" and a step of 119,600 ms as "2 min 0 s"', async () => {
    const page = await signedIn();
    await page.goto(`${P()}/runs/run-slow`);
    const head = page.locator('.run-head p.meta');
    await head.waitFor();
    const text = (await head.textContent()) ?? '';
    expect(text).toContain(' · 1 error · ');
    expect(text).not.toContain('1 errors');
    const row = page.getByRole('option', { name: /^long step,/ });
    await expect(row.locator('.dur').textContent()).resolves.toBe('2 min 0 s');
    await page.context().close();
  });

  it("a link with the API's own time shows it in the time field, in local time, and keeps it on the next Filter", async () => {
    const page = await signedIn();
    const from = page.getByLabel('Started from');
    // Berlin is UTC+1 in January.
    for (const [given, local] of [
      ['2030-01-01T00:00:00Z', '2030-01-01T01:00'],
      ['2030-01-01T00:00:00+05:00', '2029-12-31T20:00'],
      ['2030-01-01', '2030-01-01T01:00'],
      ['2030-01-01T00:00:30.000Z', '2030-01-01T01:00:30'],
    ]) {
      await page.goto(`${P()}/runs?from=${encodeURIComponent(given)}`);
      await page.getByText('No runs.').waitFor();
      await expect(from.inputValue()).resolves.toBe(local);
    }
    await shot(page, 'layout-runs-from-link');
    // Filter again: the time stays (as the field says it), and so does the empty list.
    await page.goto(`${P()}/runs?from=${encodeURIComponent('2030-01-01T00:00:00Z')}&workflow=batch`);
    await page.getByText('No runs.').waitFor();
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL((u) => u.searchParams.get('from') === '2030-01-01T01:00' && u.searchParams.get('workflow') === 'batch', { timeout: 10_000 });
    await page.getByText('No runs.').waitFor();
    expect(await page.locator('table.runs').count()).toBe(0);
    // Cleared, the filter is gone and the runs are back.
    await from.fill('');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.locator('table.runs tbody tr', { hasText: 'run-slow' }).waitFor();
    expect(new URL(page.url()).searchParams.get('from')).toBeNull();
    await page.context().close();
  });

  it('the check editor marks a preview stale when the YAML changes, lets the run count be typed, and Edit brings the editor into view with the focus', async () => {
    const page = await signedIn({ width: 1280, height: 700 });
    await page.goto(`${P()}/checks`);
    await page.locator('.checks-list tbody tr', { hasText: 'layout-edit-me' }).waitFor();
    const editor = page.getByLabel('Check YAML');
    const yaml = EDIT_ME.replace('layout-edit-me', 'layout-preview');
    await editor.fill(yaml);
    await page.getByText('Valid.').waitFor();

    // Recent runs: cleared and typed 5 then 0 reads 50, and the preview asks for 50.
    const runs = page.getByLabel('Recent runs');
    await runs.click();
    await page.keyboard.press('Control+A');
    await page.keyboard.press('Backspace');
    await page.keyboard.type('5');
    await page.keyboard.type('0');
    await expect(runs.inputValue()).resolves.toBe('50');
    const asked = page.waitForRequest((r) => r.url().endsWith('/checks/preview'));
    await page.getByRole('button', { name: 'Preview on recent runs' }).click();
    expect((await asked).postDataJSON()).toMatchObject({ runs: 50 });
    const preview = page.getByRole('region', { name: 'Preview' });
    await preview.getByText(/would flag \d+ of \d+ runs/).waitFor();
    expect(await preview.getByText('The YAML has changed since this preview').count()).toBe(0);

    // Past 100, the count is 100 once the field is left.
    await runs.fill('500');
    await runs.press('Tab');
    await expect(runs.inputValue()).resolves.toBe('100');

    // The YAML changed: the preview says it no longer shows this check.
    await editor.fill(yaml.replace('title: Refund without an order lookup', 'title: Refund before lookup'));
    await preview.getByText('The YAML has changed since this preview').waitFor();
    await preview.scrollIntoViewIfNeeded();
    await shot(page, 'layout-checks-preview-stale');
    // Back as it was previewed: the preview holds again.
    await editor.fill(yaml);
    await preview.getByText('The YAML has changed since this preview').waitFor({ state: 'detached' });

    // Edit, from the list at the top of the page: the editor comes into view, focused, with the stored check.
    await page.evaluate('window.scrollTo(0, 0)');
    await page.getByRole('button', { name: 'Edit layout-edit-me' }).click();
    const stored = (await get<{ check: { yaml: string } }>('checks/layout-edit-me')).check.yaml;
    await page.waitForFunction(
      (text) => {
        const el = (globalThis as unknown as { document: { activeElement: { value?: string; getAttribute(n: string): string | null } | null } }).document.activeElement;
        return el?.getAttribute('aria-label') === 'Check YAML' && el.value === text;
      },
      stored,
    );
    const box = (await editor.boundingBox())!;
    const height = await page.evaluate<number>('window.innerHeight');
    expect(box.y).toBeGreaterThanOrEqual(0);
    expect(box.y).toBeLessThan(height - 100);
    await shot(page, 'layout-checks-edit');
    await page.context().close();
  });

  it('Home, Runs, Sessions and Checks say "Loading…" while the API answers, then show the data', async () => {
    const page = await signedIn();
    let open: () => void = () => {};
    let gate = Promise.resolve();
    await page.route('**/v1/**', async (route: Route) => {
      await gate;
      await route.continue();
    });
    const cases: [string, string, (p: Page) => Promise<unknown>][] = [
      ['Home', '/', (p) => p.locator('li.problem').first().waitFor()],
      ['Runs', '/runs', (p) => p.locator('table.runs tbody tr').first().waitFor()],
      ['Sessions', '/sessions', (p) => p.locator('table.sessions tbody tr').first().waitFor()],
      ['Checks', '/checks', (p) => p.locator('.checks-list tbody tr').first().waitFor()],
    ];
    for (const [name, p, ready] of cases) {
      gate = new Promise<void>((r) => (open = r));
      await page.goto(`${P()}${p}`);
      await page.getByRole('heading', { name, level: 1 }).waitFor();
      const loading = page.locator('[aria-busy="true"]', { hasText: 'Loading…' }).first();
      await loading.waitFor();
      await shot(page, `layout-loading-${name.toLowerCase()}`);
      open();
      await ready(page);
      await page.locator('[aria-busy="true"]').first().waitFor({ state: 'detached' });
      expect(await page.getByText('Loading…').count()).toBe(0);
    }
    await page.context().close();
  });

  it('each page has its own title, in the tab and in the history', async () => {
    const page = await signedIn();
    const title = (t: string) => page.waitForFunction((want) => (globalThis as unknown as { document: { title: string } }).document.title === want, t);
    await title('Home · neatroots');
    await page.getByRole('link', { name: 'Runs', exact: true }).click();
    await title('Runs · neatroots');
    await page.locator('table.runs tbody tr').first().waitFor();
    await page.getByRole('link', { name: 'run-slow', exact: true }).click();
    await title('Run run-slow · neatroots');
    await page.getByRole('link', { name: 'Checks', exact: true }).click();
    await title('Checks · neatroots');
    await page.goBack();
    await title('Run run-slow · neatroots');
    await page.goto(`${P()}/settings/models`);
    await title('Settings → Models · neatroots');
    // A session and a pattern are named as their headings name them, once read: not by their ids.
    await page.goto(`${P()}/sessions/${refundSessionId}`);
    await page.getByRole('heading', { name: /^Session refund-long-quote/, level: 1 }).waitFor();
    await title('Session refund-long-quote · neatroots');
    await page.getByRole('link', { name: 'Review', exact: true }).click();
    await title('Review · neatroots');
    await page.goto(`${P()}/patterns/${pattern.pattern_id}`);
    await title(`Pattern ${pattern.name} · neatroots`);
    await page.locator('table.pattern-sessions').getByRole('link', { name: `pay-${LONG}`, exact: true }).click();
    await title(`Session pay-${LONG} · neatroots`);
    await page.goBack();
    await title(`Pattern ${pattern.name} · neatroots`);
    expect(await page.evaluate<string>('document.title')).not.toContain(pattern.pattern_id);
    await page.context().close();
  });
});
