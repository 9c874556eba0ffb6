import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Browser, BrowserContext, ConsoleMessage, Page } from 'playwright-core';
import { NeatrootsClient } from '@neatroots/sdk';
import { RunsRepo, SopSessionsRepo } from '@neatroots/store';
import type { EmbeddedApp } from 'neatroots';
import { parseJudgePrompt, startFakeOpenAI, type FakeCall, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { chromiumOrSkip, openSignedIn, pageErrors, shot, startBrowserApp, takeCspViolations, until, type BrowserApp } from './browser.test';

/**
 * The web app in a real browser, against the embedded neatroots booted here: real spans sent
 * through ingest with the agent SDK, findings raised by the shipped checks, a question answered
 * by a scripted OpenAI-compatible model, and the pages read and clicked as a user would.
 */
const PROJECT = 'shop';
const KEY = 'app-test-key';
/** The agents' key: it sends the runs the pages show, and opens none of them. */
const AGENT_KEY = 'app-test-agent-key';
const QUOTE = 'refund declined: order 7 belongs to another customer';
const BIG = 5000;
/** The model's draft for "refunds issued without looking up the order first". */
const DRAFT = {
  check: 'rule',
  id: 'refund-before-lookup',
  title: 'Refund before lookup',
  rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } },
};
/** A check with a mistake on line 5 (rule.type), as a person might type it. */
const MISTAKE = `id: refund-needs-lookup
kind: rule
title: Refund without an order lookup
rule:
  type: requires_befor
  call: { tool: [issue_refund] }
  requires: { tool: [lookup_order] }
`;

const exe = chromiumOrSkip('the web app in a browser');

(exe ? describe : describe.skip)('the web app in a browser', () => {
  let fake: FakeOpenAI;
  let web: BrowserApp;
  let app: EmbeddedApp;
  let client: NeatrootsClient;
  let browser: Browser;
  let url: string;

  /** The API as the app calls it, to check what a click changed. */
  async function apiGet<T>(p: string): Promise<T> {
    const res = await fetch(`${url}/v1/projects/${PROJECT}/${p}`, { headers: { 'x-api-key': KEY } });
    if (!res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  }

  const t0 = Date.now() - 60_000;
  /** While set, the model answers the procedures' questions only once it resolves. */
  let sopGate: Promise<void> | null = null;

  beforeAll(async () => {
    const shop = `id: refund-without-lookup
kind: rule
title: Refund without an order lookup
rule:
  type: requires_before
  call: { tool: issue_refund }
  requires: { tool: lookup_order }
guidance: Stop. Call {requires} before {tool}.
action: halt
---
# the library's run-failed, as a user's own copy: it overrides the library's
id: run-failed
kind: rule
title: Run ended with an error or was interrupted
rule:
  type: run_end
  ends: [error, interrupted]
guidance: Check what was already done before you continue.
action: flag
group: ending
---
id: refund-claimed-after-decline
kind: yes_no
scope: trace
ask: Did the agent tell the customer a refund went through after the refund tool declined it?
evidence:
  spans: { type: tool }
  fields: [input, output, status]
  final_output: true
when: end
flag_at: 0.8
guidance: Only confirm refunds the refund tool confirmed.
---
# the model never gives this one a usable answer: it is not checked, and the run page says so
id: rude-to-customer
kind: yes_no
scope: trace
ask: Was the agent rude to the customer?
evidence:
  final_output: true
when: end
guidance: Be polite.
`;
    const rude = (q: { ask: string }) => q.ask.startsWith('Was the agent rude');
    // The procedures' questions (sopops): the card payment's one is its goal, reached in both sessions.
    const sopQuestions = (call: FakeCall) =>
      call.body.messages[0]?.content.startsWith('You check whether an AI agent followed')
        ? [...(call.body.messages.find((m) => m.role === 'user')?.content ?? '').matchAll(/^(q\d+) \(about subject/gm)].map((m) => m[1])
        : null;
    fake = await startFakeOpenAI(async (call) => {
      // A test holds the procedures' questions to see a session while it is queued.
      if (sopGate && sopQuestions(call)) await sopGate;
      // The rude question is left out of every batch's answers; asked again alone, the reply is not JSON.
      return call.kind === 'judge' && parseJudgePrompt(call).every(rude) ? { content: 'I would rather not say.' }
      : sopQuestions(call) ? { json: { answers: sopQuestions(call)!.map((id) => ({ id, p: 0.95, evidence: [], reason: 'The card was charged and the receipt sent.' })) } }
      : call.kind === 'judge' ? { json: { answers: parseJudgePrompt(call).filter((q) => !rude(q)).map((q) => ({ id: q.id, ...(q.ask.includes('refund went through') ? { p: 0.97, quote: QUOTE } : { p: 0.02 }) })) } }
      : call.kind === 'second_look' ? { json: { holds: true, quote: QUOTE } }
      : call.kind === 'note' ? { content: 'Check the order before refunding.' }
      // Checks → New check: a concern about an order of calls is drafted as a rule.
      : call.kind === 'draft' ? { json: DRAFT }
      : { json: {} };
    });
    web = await startBrowserApp(exe!, {
      prefix: 'nr-web',
      checks: { 'shop.yaml': shop },
      config: { NEATROOTS_API_KEYS: `${PROJECT}=${KEY},${PROJECT}=${AGENT_KEY}:ingest`, NEATROOTS_STEERING: PROJECT },
      // No answer cache: a session checked again asks the model again, as one whose model failed does (a test holds those answers).
      models: { NEATROOTS_LLM_URL: fake.url, NEATROOTS_LLM_MODEL: 'llama-test', NEATROOTS_QUESTION_CACHE_TTL_MS: '0' },
    });
    ({ app, browser, url } = web);
    client = new NeatrootsClient({ address: `127.0.0.1:${app.ingest.grpcPort}`, apiKey: AGENT_KEY, flushIntervalMs: 20 });
    await seed();
  }, 240_000);

  afterAll(async () => {
    await client?.close();
    await web?.close();
    await fake?.close();
  });

  /** The runs the pages show, sent as an agent sends them. */
  async function seed(): Promise<void> {
    // A looping run: three identical failing calls, under one agent span (one problem, group loop).
    const loop = client.startRun({ run_id: 'run-loop', workflow: 'support', session_id: 'sess-1' });
    const root = loop.span({ type: 'agent', name: 'support agent', span_id: 'root', start_ms: t0, end_ms: t0 + 4000 });
    loop.span({ type: 'llm', name: 'plan', span_id: 'plan', parent_id: root, start_ms: t0 + 10, end_ms: t0 + 400, model: 'm' });
    for (let i = 0; i < 3; i++) {
      loop.span({
        type: 'tool', name: 'search', tool: 'search', span_id: `search-${i}`, parent_id: root,
        input: { q: 'order 7' }, error: 'upstream timeout', status: 'error', start_ms: t0 + 500 + i * 1000, end_ms: t0 + 1400 + i * 1000,
      });
    }
    await loop.end({ status: 'error' });
    // The question's run: the tool declined, the answer says otherwise.
    const q = client.startRun({ run_id: 'run-refund', workflow: 'refunds', session_id: 'sess-2', tools: [{ name: 'lookup_order' }, { name: 'issue_refund' }] });
    q.span({ type: 'tool', name: 'lookup_order', tool: 'lookup_order', span_id: 'lookup', input: { order: 7 }, output: { ok: true }, start_ms: t0 + 100, end_ms: t0 + 200 });
    q.span({ type: 'tool', name: 'issue_refund', tool: 'issue_refund', span_id: 'refund', input: { order: 7 }, output: QUOTE, start_ms: t0 + 300, end_ms: t0 + 500 });
    await q.end({ status: 'ok', final_output: 'Your refund for order 7 went through.' });
    // A halted run: a refund with no lookup (the user's own halt rule, steering on).
    const h = client.startRun({ run_id: 'run-halt', workflow: 'refunds' });
    h.span({ type: 'tool', name: 'issue_refund', tool: 'issue_refund', span_id: 'h1', input: { order: 9 }, output: 'done', start_ms: t0 + 100, end_ms: t0 + 150 });
    await h.flush();
    // A run of 5,000 spans.
    const big = client.startRun({ run_id: 'run-big', workflow: 'batch' });
    for (let i = 0; i < BIG; i++) big.span({ type: 'llm', name: `step ${i}`, span_id: `b${i}`, start_ms: t0 + i, end_ms: t0 + i + 1 });
    await big.end({ status: 'ok' });

    await until('the loop problem', async () => (await apiGet<{ findings: unknown[] }>('findings?run_id=run-loop')).findings.length > 0);
    await until('the question finding', async () =>
      (await apiGet<{ findings: { check_id: string }[] }>('findings?run_id=run-refund')).findings.some((f) => f.check_id === 'refund-claimed-after-decline'),
    );
    await until('the halt', async () => (await apiGet<{ findings: unknown[] }>('findings?run_id=run-halt')).findings.length > 0);
    await until('the question no model answered', async () =>
      (await apiGet<{ not_checked: { check_id: string }[] }>('runs/run-refund')).not_checked.some((n) => n.check_id === 'rude-to-customer'),
    );
    await until('5,000 spans stored', async () => (await apiGet<{ run: { span_count: number } }>('runs/run-big')).run.span_count === BIG, 120_000);
  }

  /** Console errors and uncaught exceptions of the pages opened signed in: none allowed. */
  const errors = pageErrors();
  /**
   * The API's refusals a test provokes on purpose (a check with a mistake: 400, a file that does
   * not compile: 422): the browser logs each as "Failed to load resource", and only those, at
   * that path with that status, are not errors of the page.
   */
  const refusals: { path: string; status: number }[] = [];
  const expectRefusal = (path: string, status: number) => refusals.push({ path, status });
  afterEach(() => {
    refusals.length = 0;
  });

  /** A console error is the page's unless it is a refusal the test expects. */
  function isError(m: ConsoleMessage): boolean {
    if (m.type() !== 'error') return false;
    const at = m.location().url;
    return !refusals.some((r) => at && new URL(at).pathname.endsWith(r.path) && m.text().includes(`status of ${r.status} `));
  }
  const signedIn = (ctx?: BrowserContext): Promise<Page> => openSignedIn(ctx ?? browser, { url, project: PROJECT, key: KEY, errors, isError });

  it('signs in with a project key, refuses a wrong one, and signs out', async () => {
    const page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
    await page.goto(`${url}/`);
    await page.getByLabel('Project').fill(PROJECT);
    await page.getByLabel('API key').fill('not-the-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toBe('That API key is not valid.');
    // Trying a key is not being signed out: no "sign in again" note.
    expect(await page.getByText('sign in again').count()).toBe(0);
    await shot(page, 'sign-in-refused');
    expect(await page.evaluate<number>('sessionStorage.length')).toBe(0);
    // The agents' key sends spans only: it is no key for the app.
    await page.getByLabel('API key').fill(AGENT_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('That key may only send spans').waitFor();
    await expect(page.getByRole('alert').textContent()).resolves.toBe('That key may only send spans (scope ingest): sign in with a full key of the project.');
    expect(await page.evaluate<number>('sessionStorage.length')).toBe(0);

    await page.getByLabel('API key').fill(KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Home', level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe(`/p/${PROJECT}/`);
    expect(await page.evaluate<string | null>("sessionStorage.getItem('neatroots.session')")).toContain(KEY);

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to neatroots' }).waitFor();
    expect(await page.evaluate<string | null>("sessionStorage.getItem('neatroots.session')")).toBeNull();
    await page.context().close();
  });

  it('Home shows the problems by group, headed by the most specific, the run halted today, in light and dark', async () => {
    // "Today" is the browser's, from midnight: the browser's clock stays at the moment the halt
    // was raised, so a run of the suite that crosses midnight still finds it halted today.
    const [halt] = (await apiGet<{ findings: { raised_at: string }[] }>('findings?run_id=run-halt')).findings;
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    await ctx.clock.setFixedTime(Date.parse(halt.raised_at));
    const page = await signedIn(ctx);
    const loop = page.getByRole('region', { name: 'Group loop' });
    await loop.getByText('Same tool called repeatedly with identical arguments').waitFor();
    // The error streak is the same incident: under the head, not a problem of its own.
    await expect(loop.locator('.related').first().textContent()).resolves.toContain('Tool calls keep failing');
    expect(await loop.locator('li.problem').count()).toBe(1);
    const halted = page.getByRole('region', { name: 'Runs halted today' });
    await halted.getByRole('link', { name: 'run-halt' }).waitFor();
    await shot(page, 'home-light');
    await page.getByRole('button', { name: 'Switch to the dark theme' }).click();
    expect(await page.evaluate<string>('document.documentElement.dataset.theme')).toBe('dark');
    const bg = await page.evaluate<string>('getComputedStyle(document.body).backgroundColor');
    expect(bg).not.toBe('rgb(255, 255, 255)');
    await shot(page, 'home-dark');
    // The halted run's page says what reached the agent: the note and the halt.
    await halted.getByRole('link', { name: 'run-halt' }).click();
    const card = page.getByRole('article', { name: 'Finding: Refund without an order lookup' });
    await card.getByText('Halt sent: the run was stopped').waitFor();
    await expect(card.locator('.sent').textContent()).resolves.toMatch(/^Note sent to the agent /);
    await shot(page, 'run-halted-dark');
    await page.context().close();
  });

  it('pages through the runs with the cursor, and filters by workflow, end status and session', async () => {
    const page = await signedIn();
    await page.goto(`${url}/p/${PROJECT}/runs?limit=2`);
    const seen: string[] = [];
    for (let i = 0; i < 10; i++) {
      await page.locator('table.runs tbody tr').first().waitFor();
      const ids = await page.locator('table.runs tbody tr td:first-child').allTextContents();
      expect(ids.length).toBeLessThanOrEqual(2);
      seen.push(...ids);
      if (i === 0) await shot(page, 'runs-page-1');
      const next = page.getByRole('link', { name: 'Next page' });
      if (!(await next.count())) break;
      const before = page.url();
      await next.click();
      await page.waitForURL((u) => u.toString() !== before);
      await page.locator('table.runs tbody tr td:first-child').first().filter({ hasNotText: ids[0] }).waitFor({ timeout: 10_000 });
    }
    const all = (await apiGet<{ runs: { run_id: string }[] }>('runs')).runs.map((r) => r.run_id);
    expect(seen).toEqual(all);
    expect(new Set(seen)).toEqual(new Set(['run-loop', 'run-refund', 'run-halt', 'run-big']));

    await page.getByLabel('Workflow').fill('refunds');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/workflow=refunds/);
    await page.locator('table.runs tbody tr').first().waitFor();
    expect((await page.locator('table.runs tbody tr td:first-child').allTextContents()).sort()).toEqual(['run-halt', 'run-refund']);
    // The halted run never ended: End "running" within the workflow; then a session alone.
    await page.getByLabel('End').selectOption('running');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/end_status=running/);
    await page.locator('table.runs tbody tr td:first-child', { hasText: /^run-halt$/ }).waitFor();
    expect(await page.locator('table.runs tbody tr td:first-child').allTextContents()).toEqual(['run-halt']);
    await page.goto(`${url}/p/${PROJECT}/runs?session_id=sess-1`);
    await page.locator('table.runs tbody tr').first().waitFor();
    expect(await page.locator('table.runs tbody tr td:first-child').allTextContents()).toEqual(['run-loop']);
    await expect(page.getByLabel('Session').inputValue()).resolves.toBe('sess-1');
    await shot(page, 'runs-filtered');
    await page.context().close();
  });

  it('the run page lists the spans in order under their parent, with the finding beside the spans it cites', async () => {
    const page = await signedIn();
    await page.goto(`${url}/p/${PROJECT}/runs/run-loop`);
    const rows = page.getByRole('listbox', { name: 'Spans in order' }).getByRole('option');
    await rows.first().waitFor();
    const labels = await rows.evaluateAll((els) => els.map((e) => e.getAttribute('aria-label') ?? ''));
    expect(labels.map((l) => l.split(',')[0])).toEqual(['support agent', 'plan', 'search', 'search', 'search']);
    // Nested: the children sit deeper than the agent span.
    const pads = await page.locator('.span-name').evaluateAll((els) => els.map((e) => parseFloat((e as unknown as { style: { paddingLeft: string } }).style.paddingLeft)));
    expect(pads[1]).toBeGreaterThan(pads[0]);
    // Errors marked.
    expect(await page.locator('.vrow .is-error').count()).toBe(3);

    const { findings } = await apiGet<{ findings: { id: string; check_id: string; span_ids: string[] }[] }>('runs/run-loop');
    const repeat = findings.find((f) => f.check_id === 'repeated-tool-call')!;
    expect(repeat.span_ids.length).toBeGreaterThan(0);
    for (const id of repeat.span_ids) {
      const i = ['root', 'plan', 'search-0', 'search-1', 'search-2'].indexOf(id);
      await expect(rows.nth(i).locator(`[data-finding-marker="${repeat.id}"]`).count()).resolves.toBe(1);
    }
    expect(await rows.nth(1).locator('[data-finding-marker]').count()).toBe(0);
    // Following the finding's cited span selects it and shows its error.
    await page.getByRole('article', { name: 'Finding: Same tool called repeatedly with identical arguments' }).getByRole('button', { name: 'search' }).first().click();
    await page.waitForURL(/span=search-/);
    await expect(page.getByRole('region', { name: 'Selected span' }).textContent()).resolves.toContain('upstream timeout');
    await shot(page, 'run-loop-light');
    await page.context().close();
  });

  it("shows a question finding's quote marked in the span, with its label", async () => {
    const page = await signedIn();
    await page.goto(`${url}/p/${PROJECT}/runs/run-refund`);
    const card = page.getByRole('article', { name: /^Finding: Did the agent tell the customer/ });
    await card.waitFor();
    await expect(card.locator('.confidence strong').textContent()).resolves.toBe('Very likely (LLM judgment)');
    await page.getByRole('option', { name: /^issue_refund,/ }).click();
    const mark = page.getByRole('region', { name: 'Selected span' }).locator('mark.quote');
    await expect(mark.textContent()).resolves.toBe(QUOTE);
    // The question no model could answer: listed as not checked, with why (never shown as a pass).
    const notChecked = page.getByRole('region', { name: /^Not checked/ });
    const detail = await apiGet<{ not_checked: { check_id: string; reason: string }[] }>('runs/run-refund');
    await expect(notChecked.locator('li').allTextContents()).resolves.toEqual(detail.not_checked.map((n) => expect.stringContaining(n.check_id)));
    await notChecked.getByText(detail.not_checked.find((n) => n.check_id === 'rude-to-customer')!.reason).waitFor();
    await shot(page, 'run-quote-light');
    await page.getByRole('button', { name: 'Switch to the dark theme' }).click();
    await shot(page, 'run-quote-dark');
    await page.context().close();
  });

  it('dismisses a finding and reopens it, through the API', async () => {
    const page = await signedIn();
    await page.goto(`${url}/p/${PROJECT}/runs/run-refund`);
    const card = page.getByRole('article', { name: /^Finding: Did the agent tell the customer/ });
    const id = await card.getAttribute('data-finding-id');
    const state = async () => (await apiGet<{ findings: { id: string; state: string }[] }>('runs/run-refund')).findings.find((f) => f.id === id)!.state;
    expect(await state()).not.toBe('dismissed');
    await card.getByRole('button', { name: 'Dismiss' }).click();
    await card.getByText('Dismissed', { exact: true }).waitFor();
    expect(await state()).toBe('dismissed');
    await shot(page, 'run-dismissed');
    await card.getByRole('button', { name: 'Reopen' }).click();
    await card.getByRole('button', { name: 'Dismiss' }).waitFor();
    expect(await state()).not.toBe('dismissed');
    await page.context().close();
  });

  it('a shared link opens the same view after sign-in', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const page = await ctx.newPage();
    await page.goto(`${url}/p/${PROJECT}/runs/run-loop?span=search-1`);
    await expect(page.getByLabel('Project').inputValue()).resolves.toBe(PROJECT);
    await page.getByLabel('API key').fill(KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Run run-loop' }).waitFor();
    expect(page.url()).toBe(`${url}/p/${PROJECT}/runs/run-loop?span=search-1`);
    const selected = page.getByRole('option', { selected: true });
    await expect(selected.getAttribute('id')).resolves.toBe('spans-row-3');
    await ctx.close();
  });

  it('a link whose path does not decode (a malformed % escape) is No such page, not a blank app', async () => {
    const page = await signedIn();
    for (const p of [`/p/${PROJECT}/runs/%zz`, `/p/${PROJECT}/sessions/%E0%A4%A`, `/p/${PROJECT}/patterns/%`, '/p/%zz/', '/p/%zz/runs/r1']) {
      await page.goto(`${url}${p}`);
      await page.getByRole('heading', { name: 'No such page', level: 1 }).waitFor();
      await expect(page.title()).resolves.toBe('No such page · neatroots');
    }
    // Its Home goes to the project signed in to (uncaught errors fail the test in afterEach).
    await page.getByRole('main').getByRole('link', { name: 'Home' }).click();
    await page.getByRole('heading', { name: 'Home', level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe(`/p/${PROJECT}/`);
    await page.goto(`${url}/p/${PROJECT}/runs/%zz`);
    await page.getByRole('main').getByRole('link', { name: 'Home' }).click();
    await page.getByRole('heading', { name: 'Home', level: 1 }).waitFor();
    await page.context().close();
  });

  it("an agent's bidi control characters show as markers in ids and names, and reverse none of the app's own words", async () => {
    // A workflow ending in a right-to-left override, and an id that reads run2-exe.doc where it is not shown.
    const id = 'run2-\u202ecod.exe';
    const shownId = 'run2-⟨U+202E⟩cod.exe';
    const r = client.startRun({ run_id: id, workflow: 'wf\u202e', session_id: 'sess-rtl' });
    r.span({ type: 'tool', name: 'lookup_order', tool: 'lookup\u2067_order', span_id: 'x1', input: { order: 'gnp.exe\u202e' }, start_ms: t0, end_ms: t0 + 10 });
    await r.end({ status: 'ok' });
    await until('the bidi run', async () => {
      const res = await fetch(`${url}/v1/projects/${PROJECT}/runs/${encodeURIComponent(id)}`, { headers: { 'x-api-key': KEY } });
      return res.ok && ((await res.json()) as { run: { end_status: string | null } }).run.end_status === 'ok';
    });

    const page = await signedIn();
    await page.goto(`${url}/p/${PROJECT}/runs/${encodeURIComponent(id)}?span=x1`);
    const heading = page.getByRole('heading', { level: 1 });
    await heading.getByText(shownId).waitFor();
    await expect(heading.textContent()).resolves.toBe(`Run ${shownId}`);
    await expect(page.title()).resolves.toBe(`Run ${shownId} · neatroots`);
    const meta = page.locator('.run-head p.meta');
    await expect(meta.textContent()).resolves.toMatch(/^wf⟨U\+202E⟩ · session sess-rtl · started .* · ok after .* · 1 span · 0 tokens · all runs$/);
    // The info line reads left to right past the workflow: the run's end before "all runs", as written.
    const end = (await meta.locator('.badge').boundingBox())!;
    const allRuns = (await meta.getByRole('link', { name: 'all runs' }).boundingBox())!;
    expect(allRuns.x).toBeGreaterThan(end.x + end.width);
    // Each name keeps its direction to itself.
    const workflow = meta.locator('bdi', { hasText: 'wf⟨U+202E⟩' });
    await expect(workflow.evaluate((el) => (globalThis as unknown as { getComputedStyle(e: unknown): { unicodeBidi: string } }).getComputedStyle(el).unicodeBidi)).resolves.toBe('isolate');
    // The span's tool, and its input, show theirs too.
    const detail = page.getByRole('region', { name: 'Selected span' });
    await expect(detail.locator('p.meta').textContent()).resolves.toContain('tool lookup⟨U+2067⟩_order');
    await expect(detail.locator('pre').first().textContent()).resolves.toContain('gnp.exe⟨U+202E⟩');
    await shot(page, 'run-bidi');

    // The runs list: the link names the run as it is.
    await page.goto(`${url}/p/${PROJECT}/runs?workflow=${encodeURIComponent('wf\u202e')}`);
    const link = page.locator('table.runs tbody tr').getByRole('link');
    await expect(link.textContent()).resolves.toBe(shownId);
    await expect(page.locator('table.runs tbody tr td').nth(1).textContent()).resolves.toBe('wf⟨U+202E⟩');
    await link.click();
    await page.getByRole('heading', { level: 1 }).getByText(shownId).waitFor();
    expect(new URL(page.url()).pathname).toBe(`/p/${PROJECT}/runs/${encodeURIComponent(id)}`);
    await page.context().close();
  });

  it('another site cannot show the app in a frame, where its buttons could be clicked through a page laid over them', async () => {
    const page = await (await browser.newContext()).newPage();
    const refused = page.waitForEvent('console', (m) => m.text().includes('Content Security Policy'));
    await page.setContent(`<iframe src="${url}/p/${PROJECT}/runs/run-loop" width="800" height="600"></iframe>`);
    expect((await refused).text()).toContain("frame-ancestors 'none'");
    // The helper saw it too (and fails any test that did not expect one).
    expect(takeCspViolations()).toEqual([expect.stringContaining("frame-ancestors 'none'")]);
    const frame = page.frames()[1];
    expect(frame.url().startsWith(url)).toBe(false);
    await page.context().close();
  });

  it('reaches the main controls with the keyboard', async () => {
    const page = await signedIn();
    const reached: string[] = [];
    for (let i = 0; i < 12; i++) {
      await page.keyboard.press('Tab');
      reached.push(await page.evaluate<string>("document.activeElement?.textContent?.trim() ?? ''"));
    }
    expect(reached).toEqual(expect.arrayContaining(['Skip to content', 'Home', 'Runs', 'Checks', 'Sessions', 'Procedures', 'Settings → Models', 'Dark theme', 'Sign out']));
    // Runs from the keyboard; then the spans list is one stop, moved with the arrow keys.
    await page.getByRole('link', { name: 'Runs', exact: true }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Runs', level: 1 }).waitFor();
    await page.goto(`${url}/p/${PROJECT}/runs/run-loop`);
    await page.getByRole('listbox', { name: 'Spans in order' }).focus();
    await page.keyboard.press('Home');
    await page.keyboard.press('ArrowDown');
    await page.waitForURL(/span=plan/);
    await page.keyboard.press('End');
    await page.waitForURL(/span=search-2/);
    await page.context().close();
  });

  it('a 5,000-span run renders only a window of rows, and End reaches the last span', async () => {
    const page = await signedIn();
    await page.goto(`${url}/p/${PROJECT}/runs/run-big`);
    await page.getByRole('heading', { name: `Spans (${BIG}; ↑ ↓ to move)` }).waitFor({ timeout: 30_000 });
    const rows = page.getByRole('listbox', { name: 'Spans in order' }).getByRole('option');
    const n = await rows.count();
    expect(n).toBeGreaterThan(10);
    expect(n).toBeLessThan(100);
    await page.getByRole('listbox', { name: 'Spans in order' }).focus();
    await page.keyboard.press('End');
    await page.waitForURL(new RegExp(`span=b${BIG - 1}$`));
    await page.getByRole('option', { name: new RegExp(`^step ${BIG - 1},`) }).waitFor();
    expect(await rows.count()).toBeLessThan(100);
    await shot(page, 'run-5000-spans');
    await page.context().close();
  });

  it('Checks shows its list while the findings pages are still being read, then fills in what they add', async () => {
    const page = await signedIn();
    // Every findings read held: the list must not wait for them (it waited for four, 1.4 s each, with many findings).
    const held: (() => Promise<void>)[] = [];
    await page.route(/\/v1\/projects\/[^/]+\/findings\?/, (route) => {
      held.push(() => route.continue());
    });
    await page.goto(`${url}/p/${PROJECT}/checks`);
    await page.locator('.checks-list tbody tr').first().waitFor({ timeout: 30_000 });
    const listed = (await apiGet<{ checks: { id: string }[] }>('checks')).checks.map((c) => c.id).sort();
    expect((await page.locator('.checks-list tbody tr td:first-child').allTextContents()).sort()).toEqual(expect.arrayContaining(listed));
    expect(held.length).toBeGreaterThan(0);
    expect(await page.locator('[aria-busy="true"]').count()).toBe(0);
    // Let them through: the page takes them in without an error.
    for (const go of held) await go();
    await page.unroute(/\/v1\/projects\/[^/]+\/findings\?/);
    await expect(page.locator('.checks-list tbody tr').count()).resolves.toBeGreaterThanOrEqual(listed.length);
    await page.context().close();
  });

  it('Checks and Settings → Models show what the API says', async () => {
    const page = await signedIn();
    await page.getByRole('link', { name: 'Checks' }).click();
    await page.getByRole('heading', { name: 'Checks', level: 1 }).waitFor();
    const stats = (await apiGet<{ checks: { check_id: string }[] }>('checks/stats')).checks.map((c) => c.check_id).sort();
    const listed = (await apiGet<{ checks: { id: string; in_effect: boolean }[] }>('checks')).checks;
    await page.locator('tbody tr').first().waitFor();
    // Every check in effect (library, the user's file), those with findings among them.
    const shown = (await page.locator('.checks-list tbody tr td:first-child').allTextContents()).sort();
    expect(shown).toEqual(listed.map((c) => c.id).sort());
    expect(shown).toEqual(expect.arrayContaining(stats));
    expect(shown.length).toBeGreaterThan(stats.length);
    // Kind, source and action, beside precision: the user's halt rule, a library check that flags.
    const row = (id: string) => page.locator('.checks-list tbody tr', { has: page.locator('td:first-child', { hasText: new RegExp(`^${id}$`) }) });
    await expect(row('refund-without-lookup').locator('td').allTextContents()).resolves.toEqual(['refund-without-lookup', 'rule', 'user', 'halt', '1', '0', '100%', 'Running', '']);
    await expect(row('repeated-tool-call').locator('td').nth(2).textContent()).resolves.toBe('library');
    await expect(row('repeated-tool-call').locator('td').nth(3).textContent()).resolves.toBe('flag');
    // What a check overrides, as the API lists it: the user's run-failed over the library's.
    const overriding = listed.filter((c) => (c as { overrides?: unknown[] }).overrides?.length).map((c) => c.id);
    expect(overriding).toEqual(['run-failed']);
    await expect(row('run-failed').locator('td').nth(2).textContent()).resolves.toBe('useroverrides library (ending.yaml)');
    await expect(row('refund-without-lookup').locator('[data-overrides]').count()).resolves.toBe(0);
    // Only a rule a person saved can be switched to halt here: not a library check, not a file's.
    expect(await page.getByRole('button', { name: /^Switch .* to halt$/ }).count()).toBe(0);
    await shot(page, 'checks');
    await page.getByRole('link', { name: 'Settings → Models' }).click();
    await page.getByRole('heading', { name: 'Settings → Models' }).waitFor();
    const questions = (await apiGet<{ questions: { check_id: string; question_key: string; ask: string }[] }>('models/agreement')).questions;
    // The LLM answered the questions that run on every agent with tools: each is a row, with the
    // question's text as its check asks it now.
    expect(questions.length).toBeGreaterThan(0);
    expect(questions.every((q) => q.ask.length > 20)).toBe(true);
    await page.locator('tbody tr').first().waitFor();
    expect(await page.locator('tbody tr').count()).toBe(questions.length);
    const asked = await page.locator('tbody tr td:nth-child(2)').allTextContents();
    expect(asked).toEqual(questions.map((q) => `${q.ask}${q.question_key}`));
    await shot(page, 'models');
    await page.context().close();
  });

  /** What the API itself answers for a check given in YAML (the page must show the same). */
  interface PreviewAnswer {
    error: { problems: { field: string; line: number; reason: string }[] };
    flagged: { run_id: string }[];
    runs: { flagged: number; checked: number };
    bounds: string;
  }
  async function apiPreview(yaml: string, runs = 20): Promise<{ status: number; body: PreviewAnswer }> {
    const res = await fetch(`${url}/v1/projects/${PROJECT}/checks/preview`, {
      method: 'POST',
      headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ yaml, runs }),
    });
    return { status: res.status, body: (await res.json()) as PreviewAnswer };
  }

  it('writes a check with a mistake and sees the error at its line, previews it on recent runs, saves it and switches it to halt', async () => {
    expectRefusal(`/v1/projects/${PROJECT}/checks/validate`, 400);
    const page = await signedIn();
    // Live validation asks checks/validate (nothing run); preview is asked for only on the button.
    const asked: string[] = [];
    page.on('request', (r) => { const m = /\/checks\/(validate|preview)$/.exec(new URL(r.url()).pathname); if (m) asked.push(m[1]); });
    await page.goto(`${url}/p/${PROJECT}/checks`);
    const editor = page.getByLabel('Check YAML');
    await editor.fill(MISTAKE);
    // The API's own validation, as `checks validate` says it: the field and its line.
    const refused = await apiPreview(MISTAKE);
    expect(refused.status).toBe(400);
    const problem = refused.body.error.problems[0];
    expect(problem).toMatchObject({ field: 'rule.type', line: 5 });
    const problems = page.getByRole('list', { name: 'Problems' });
    await problems.waitFor();
    await expect(problems.locator('li').allTextContents()).resolves.toEqual([`line 5: check refund-needs-lookup: rule.type: ${problem.reason}`]);
    await expect(page.locator('.gutter .bad-line').allTextContents()).resolves.toEqual(['✕ 5\n']);
    expect(await page.getByRole('button', { name: 'Save' }).isDisabled()).toBe(true);
    await problems.scrollIntoViewIfNeeded();
    await shot(page, 'checks-mistake-at-line');
    // The problem's line button puts the cursor on that line.
    await problems.getByRole('button', { name: 'line 5' }).click();
    expect(await editor.evaluate((el) => { const t = el as unknown as { value: string; selectionStart: number; selectionEnd: number }; return t.value.slice(t.selectionStart, t.selectionEnd); })).toBe('  type: requires_befor');

    const fixed = MISTAKE.replace('requires_befor\n', 'requires_before\n');
    await editor.fill(fixed);
    await page.getByText('Valid.').waitFor();
    expect(await page.getByRole('list', { name: 'Problems' }).count()).toBe(0);
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.filter((a) => a !== 'validate')).toEqual([]);

    // Preview on recent runs: the runs the API's preview flags, and nothing saved.
    const expected = (await apiPreview(fixed)).body;
    expect(expected.flagged.map((r) => r.run_id)).toEqual(['run-halt']);
    await page.getByRole('button', { name: 'Preview on recent runs' }).click();
    const preview = page.getByRole('region', { name: 'Preview' });
    await preview.getByText(`would flag ${expected.runs.flagged} of ${expected.runs.checked} runs`).waitFor();
    await expect(preview.locator('.flagged-runs > li > a').allTextContents()).resolves.toEqual(['run-halt']);
    await preview.getByText(expected.bounds).waitFor();
    expect((await apiGet<{ checks: { id: string }[] }>('checks')).checks.map((c) => c.id)).not.toContain('refund-needs-lookup');
    await preview.scrollIntoViewIfNeeded();
    await shot(page, 'checks-preview');

    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText('Saved refund-needs-lookup: in effect now.').waitFor();
    const saved = (await apiGet<{ check: { source: string; action: string; origin: string } }>('checks/refund-needs-lookup')).check;
    expect(saved).toMatchObject({ source: 'database', action: 'flag', origin: 'app' });
    const row = page.locator('.checks-list tbody tr', { has: page.locator('td:first-child', { hasText: /^refund-needs-lookup$/ }) });
    await row.locator('td', { hasText: /^database$/ }).waitFor();
    // A rule this person saved can halt: the switch calls the API, and the list says halt.
    await page.getByRole('button', { name: 'Switch refund-needs-lookup to halt' }).click();
    await page.getByText(/^refund-needs-lookup now halts/).waitFor();
    expect((await apiGet<{ check: { action: string } }>('checks/refund-needs-lookup')).check.action).toBe('halt');
    await row.locator('td .badge.halt').waitFor();
    expect(await page.getByRole('button', { name: 'Switch refund-needs-lookup to halt' }).count()).toBe(0);
    await shot(page, 'checks-saved-halt');
    // Edit: the check as stored (the project set, now halting) back in the editor.
    await page.getByRole('button', { name: 'Edit refund-needs-lookup' }).click();
    const stored = (await apiGet<{ check: { yaml: string } }>('checks/refund-needs-lookup')).check.yaml;
    expect(stored).toMatch(/^action: halt$/m);
    // The editor takes the text on React's next effect, after the click returns: wait for it (once seen read too early).
    for (let i = 0; i < 100 && (await editor.inputValue()) !== stored; i++) await page.waitForTimeout(20);
    await expect(editor.inputValue()).resolves.toBe(stored);
    await page.context().close();
  });

  it('drafts a new check from a plain-language concern and shows it before anything is saved', async () => {
    const page = await signedIn();
    await page.goto(`${url}/p/${PROJECT}/checks`);
    await page.getByLabel('New check from a concern').fill('refunds issued without looking up the order first');
    await page.getByRole('button', { name: 'Draft' }).click();
    await page.getByText('Drafted a rule (not saved): read it, preview it, then save it.').waitFor();
    const text = await page.getByLabel('Check YAML').inputValue();
    expect(text).toMatch(/^id: refund-before-lookup$/m);
    expect(text).toMatch(/type: requires_before/);
    await page.getByText('Valid.').waitFor();
    // Shown, not saved.
    expect((await apiGet<{ checks: { id: string }[] }>('checks')).checks.map((c) => c.id)).not.toContain('refund-before-lookup');
    await page.getByLabel('Check YAML').scrollIntoViewIfNeeded();
    await shot(page, 'checks-draft');
    await page.getByRole('button', { name: 'Switch to the dark theme' }).click();
    await shot(page, 'checks-draft-dark');
    await page.context().close();
  });

  it('a run whose spans retention deleted says so, with its counts and findings kept', async () => {
    const old = client.startRun({ run_id: 'run-old', workflow: 'support' });
    for (let i = 0; i < 3; i++) old.span({ type: 'tool', name: 'search', tool: 'search', span_id: `o${i}`, input: { q: 'same' }, start_ms: t0 + i, end_ms: t0 + i + 1 });
    await old.end({ status: 'ok', final_output: 'done' });
    await until('the old run stored', async () => (await apiGet<{ run: { span_count: number }; findings: unknown[] }>('runs/run-old').catch(() => null))?.findings.length);
    // Forty days old, as if it had run then; then the retention pass of a 30-day retention.
    await app.db.query(`UPDATE runs SET started_at = started_at - interval '40 days', last_seen_at = last_seen_at - interval '40 days' WHERE run_id = 'run-old'`);
    expect(await new RunsRepo(app.db).expireSpans(Date.now() - 30 * 24 * 60 * 60_000)).toEqual({ runs: 1, spans: 3 });

    const page = await signedIn();
    await page.goto(`${url}/p/${PROJECT}/runs/run-old`);
    const note = page.getByRole('note').filter({ hasText: 'deleted by retention' });
    await note.waitFor();
    const detail = await apiGet<{ run: { span_count: number; spans_expired_at: string }; spans: unknown[]; findings: { title: string }[] }>('runs/run-old');
    expect(detail.spans).toEqual([]);
    expect(detail.run.spans_expired_at).not.toBeNull();
    await page.getByText(`${detail.run.span_count} spans`, { exact: false }).first().waitFor();
    await page.locator('[aria-labelledby="findings-h"]').getByText(detail.findings[0].title).first().waitFor();
    await shot(page, 'run-expired-light');
    await page.context().close();
  });

  describe('sopops pages', () => {
    const FIXTURES = path.resolve(__dirname, '..', '..', '..', 'libs', 'sop', 'fixtures');
    const CARD = fs.readFileSync(path.join(FIXTURES, 'luigis', 'procedures', 'card-payment.md'), 'utf8');
    const ids: Record<string, string> = {};

    /** The sopops API as `sopops push`/`publish` and an agent's integration call it. */
    async function ws(method: string, p: string, body?: unknown, type = 'application/json'): Promise<{ status: number; body: { id?: string; status?: string } | null }> {
      const res = await fetch(`${url}/v1/workspaces/${PROJECT}${p}`, {
        method,
        headers: { 'x-api-key': KEY, ...(body !== undefined ? { 'content-type': type } : {}) },
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      });
      const text = await res.text();
      if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text}`);
      return { status: res.status, body: text ? JSON.parse(text) : null };
    }

    beforeAll(async () => {
      await ws('PUT', '/head', {
        files: [
          { path: 'procedures/card-payment.md', text: CARD },
          { path: 'agents/payments-bot.yaml', text: fs.readFileSync(path.join(FIXTURES, 'luigis', 'agents', 'payments-bot.yaml'), 'utf8') },
        ],
      });
      await ws('POST', '/releases');
      // Oldest first, so the skipped one is the newest.
      for (const name of ['payment-followed', 'payment-skipped']) {
        const session = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'sessions', name, 'session.json'), 'utf8'));
        ids[name] = (await ws('POST', '/sessions', session)).body!.id!;
        await until(`${name} checked`, async () => (await ws('GET', `/sessions/${ids[name]}`)).body!.status !== 'queued');
      }
    }, 60_000);

    it('Sessions lists them newest first and filters by result, in the URL', async () => {
      const page = await signedIn();
      await page.getByRole('link', { name: 'Sessions', exact: true }).click();
      await page.getByRole('heading', { name: 'Sessions', level: 1 }).waitFor();
      await page.locator('table.sessions tbody tr').first().waitFor();
      const cells = async () => (await page.locator('table.sessions tbody tr').allTextContents());
      const rows = await cells();
      expect(rows).toHaveLength(2);
      expect(rows[0]).toMatch(/^pay-3payments-bot.*checkeddeviated$/);
      expect(rows[1]).toMatch(/^pay-1payments-bot.*checkedfollowed$/);
      await shot(page, 'sop-sessions');
      await page.getByLabel('Result').selectOption('deviated');
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.waitForURL(/result=deviated/);
      // The filtered list replaces the rows: wait for its answer (one row, pay-3), not for the old rows to go.
      await page.locator('table.sessions tbody tr').nth(1).waitFor({ state: 'detached' });
      await page.locator('table.sessions tbody tr', { hasText: 'pay-3' }).first().waitFor();
      expect((await cells()).map((r) => r.slice(0, 5))).toEqual(['pay-3']);
      await shot(page, 'sop-sessions-deviated');
      await page.context().close();
    });

    it('the session page shows a skipped required step as a finding, with its reason, and the whole transcript with the evidence marked in its turn', async () => {
      const page = await signedIn();
      await page.goto(`${url}/p/${PROJECT}/sessions/${ids['payment-skipped']}`);
      await page.getByRole('heading', { name: /^Session pay-3/, level: 1 }).waitFor();
      const panel = page.getByRole('region', { name: /^Take a card payment/ });
      await expect(panel.getByRole('heading', { level: 2 }).textContent()).resolves.toMatch(/deviated$/);
      const step1 = panel.locator('tbody tr').first();
      await expect(step1.locator('td').first().textContent()).resolves.toBe('Step 1Find the order.');
      await expect(step1.locator('td').nth(1).textContent()).resolves.toBe('skippedfinding');
      await expect(step1.locator('td').nth(2).textContent()).resolves.toContain('lookup_order was never called');
      // The whole transcript, every turn in order, each turn's tool calls after it (GET .../transcript).
      const turns = page.getByRole('region', { name: 'Transcript' }).locator('ol.turns > li');
      await turns.nth(3).waitFor();
      await expect(turns.locator('.turn-text').allTextContents()).resolves.toEqual(['Charge my card for the pizza, please.', 'Charged your card on file.', 'Receipt?', 'Emailed it to you.']);
      await expect(turns.nth(3).locator('.tool-call code').textContent()).resolves.toBe('send_receipt {"email":"on file"}');
      // The charge's evidence links to its turn, where the quote is marked in the turn's tool call.
      await panel.locator('tbody tr').nth(1).getByRole('link', { name: 'turn 1' }).click();
      await page.waitForURL(/#turn-1$/);
      const turn = page.locator('#turn-1');
      await expect(turn.locator('.turn-text').textContent()).resolves.toBe('Charged your card on file.');
      await expect(turn.locator('.tool-call mark.quote').allTextContents()).resolves.toEqual(['charge_card {"amount":18}']);
      // A turn nothing quoted has nothing marked.
      expect(await page.locator('#turn-0 mark').count()).toBe(0);
      await shot(page, 'sop-session-light');
      await page.getByRole('button', { name: 'Switch to the dark theme' }).click();
      await shot(page, 'sop-session-dark');
      await page.context().close();
    });

    it('a session whose transcript retention emptied says so and still shows the turns its checks quote', async () => {
      const id = ids['payment-skipped'];
      // Received 100 days ago, then the pass of a 90-day transcript retention; its receipt put back after, for the tests that list sessions.
      await app.db.query(`UPDATE sop_sessions SET received_at = received_at - interval '100 days' WHERE id = $1`, [id]);
      expect(await new SopSessionsRepo(app.db).expireTranscripts(Date.now() - 90 * 24 * 60 * 60_000)).toBe(1);
      await app.db.query(`UPDATE sop_sessions SET received_at = received_at + interval '100 days' WHERE id = $1`, [id]);
      const transcript = await ws('GET', `/sessions/${id}/transcript`);
      expect(transcript.body).toMatchObject({ turns: [], tool_calls: [], transcript_expired_at: expect.any(String) });
      const page = await signedIn();
      await page.goto(`${url}/p/${PROJECT}/sessions/${id}`);
      await page.getByRole('note').filter({ hasText: 'The transcript was deleted by retention' }).waitFor();
      // the check and its evidence stay: the charge's quote, in its turn
      const panel = page.getByRole('region', { name: /^Take a card payment/ });
      await expect(panel.getByRole('heading', { level: 2 }).textContent()).resolves.toMatch(/deviated$/);
      await expect(page.locator('#turn-1 mark.quote').allTextContents()).resolves.toEqual(['charge_card {"amount":18}']);
      expect(await page.locator('.turn-text').count()).toBe(0);
      await shot(page, 'sop-session-transcript-expired-light');
      await page.context().close();
    });

    it('a session checked while the model failed is marked in the Sessions list and says why on its page as a warning, not as a failure; Check again checks it again and the warning goes', async () => {
      // Pinned to release 1: checked again on the same procedures, whatever is live by then.
      const sent = { ...JSON.parse(fs.readFileSync(path.join(FIXTURES, 'sessions', 'payment-followed', 'session.json'), 'utf8')), external_id: 'pay-model-failed', release_id: 1 };
      const id = (await ws('POST', '/sessions', sent)).body!.id!;
      await until('pay-model-failed checked', async () => (await ws('GET', `/sessions/${id}`)).body!.status === 'checked');
      // As a check's last try leaves a session when the model failed on some questions: checked, with an error saying so.
      const error = `the model failed on 2 questions (the model's answer was not JSON; and 1 more), so their rules are not checked: send the session again, or POST …/sessions/${id}/recheck, once the model is back`;
      await app.db.query('UPDATE sop_sessions SET error = $2 WHERE id = $1', [id, error]);
      const page = await signedIn();
      // The list marks it (a yellow badge, the error as its title), not a cleanly checked one, nor as failed.
      await page.goto(`${url}/p/${PROJECT}/sessions`);
      const row = page.locator('table.sessions tbody tr', { hasText: 'pay-model-failed' });
      await row.waitFor();
      const marker = row.locator('.badge.warn');
      await expect(marker.textContent()).resolves.toBe('not every rule checked');
      await expect(marker.getAttribute('title')).resolves.toBe(error);
      await expect(row.locator('.badge.status-checked').textContent()).resolves.toBe('checked');
      expect(await row.locator('.error').count()).toBe(0);
      expect(await page.locator('table.sessions tbody tr', { hasText: 'pay-1' }).locator('.badge.warn').count()).toBe(0);
      expect(await page.getByText('not every rule checked').count()).toBe(1);
      await shot(page, 'sop-sessions-model-failed');
      await row.getByRole('link', { name: 'pay-model-failed' }).click();
      await page.getByRole('heading', { name: /^Session pay-model-failed/, level: 1 }).waitFor();
      const warning = page.getByRole('note').filter({ hasText: 'Not every rule was checked' });
      await expect(warning.textContent()).resolves.toBe(`Not every rule was checked: ${error}`);
      // a warning: not said as a failure, nor as an alert
      expect(await page.getByText('Check failed').count()).toBe(0);
      expect(await page.getByRole('alert').count()).toBe(0);
      await expect(page.locator('.badge.status-checked').textContent()).resolves.toBe('checked');
      await shot(page, 'sop-session-model-failed-light');
      await page.getByRole('button', { name: 'Switch to the dark theme' }).click();
      await shot(page, 'sop-session-model-failed-dark');
      // Check again: POST …/recheck; the model's answers are held, so the page shows the session queued.
      let answer!: () => void;
      sopGate = new Promise<void>((r) => (answer = r));
      const reads: string[] = [];
      page.on('request', (r) => void (new URL(r.url()).pathname.endsWith(`/sessions/${id}`) && reads.push(r.url())));
      await page.getByRole('button', { name: 'Check again' }).click();
      await page.getByRole('status').filter({ hasText: 'Queued to be checked again.' }).waitFor();
      await page.getByText('Waiting to be checked: this page reads the session again until the check is done.').waitFor();
      await page.locator('.badge.status-queued', { hasText: 'queued' }).waitFor();
      expect(await page.getByRole('button', { name: 'Check again' }).count()).toBe(0);
      // Still queued, the page reads it again by itself (no reload).
      await until('the queued session read again', async () => reads.length >= 3);
      await shot(page, 'sop-session-queued-dark');
      // The model answers: checked again, the session has no error, and the page shows it without a reload.
      sopGate = null;
      answer();
      await page.locator('.badge.status-checked', { hasText: 'checked' }).waitFor();
      await page.getByRole('button', { name: 'Check again' }).waitFor();
      expect(await page.getByText(/^Waiting to be checked/).count()).toBe(0);
      expect(await page.getByRole('note').filter({ hasText: 'Not every rule was checked' }).count()).toBe(0);
      const after = (await ws('GET', `/sessions/${id}`)).body as { status: string; error: string | null } | null;
      expect(after).toMatchObject({ status: 'checked', error: null });
      await page.getByRole('heading', { name: /^Session pay-model-failed/, level: 1 }).waitFor();
      await shot(page, 'sop-session-checked-again-dark');
      // and the list no longer marks it
      await page.goto(`${url}/p/${PROJECT}/sessions`);
      await page.locator('table.sessions tbody tr', { hasText: 'pay-model-failed' }).waitFor();
      expect(await page.getByText('not every rule checked').count()).toBe(0);
      await page.context().close();
    });

    it('Procedures shows the live release, a file with a mistake refused at its line, a file saved at head as a diff, and publishes it', async () => {
      const page = await signedIn();
      await page.getByRole('link', { name: 'Procedures', exact: true }).click();
      await page.getByRole('heading', { name: /^Live release 1/ }).waitFor();
      await page.getByText('Head is the same as the live release.').waitFor();
      await expect(page.locator('.lock-rules li').allTextContents()).resolves.toEqual([
        'Step 1 Find the order.requiredtool: lookup_order',
        'Step 2 Charge the card on file.requiredtool: charge_card',
        'Step 3 Email the receipt.requiredtool: send_receipt',
      ]);
      // A mistake: sopc's error shown at its line, as the API answers it, and nothing saved.
      expectRefusal(`/v1/workspaces/${PROJECT}/head/agents/payments-bot.yaml`, 422);
      const BAD = '# the payments bot\nprocedures: [card-payment, nope]\n';
      const refused = await fetch(`${url}/v1/workspaces/${PROJECT}/head/agents/payments-bot.yaml`, {
        method: 'PUT', headers: { 'x-api-key': KEY, 'content-type': 'text/yaml' }, body: BAD,
      });
      expect(refused.status).toBe(422);
      const issue = ((await refused.json()) as { error: { issues: { file: string; line: number; message: string }[] } }).error.issues[0];
      expect(issue.file).toBe('agents/payments-bot.yaml');
      await page.getByLabel('Path').fill('agents/payments-bot.yaml');
      await page.getByLabel('File text').fill(BAD);
      await page.getByRole('button', { name: 'Save at head' }).click();
      await page.getByText('Not saved: head would not compile with agents/payments-bot.yaml.').waitFor();
      await expect(page.getByRole('list', { name: 'Problems' }).locator('li').allTextContents()).resolves.toEqual([`line ${issue.line}: ${issue.message}`]);
      await expect(page.locator('.gutter .bad-line').allTextContents()).resolves.toEqual([`✕ ${issue.line}\n`]);
      await page.getByText('Head is the same as the live release.').waitFor();
      await page.getByRole('list', { name: 'Problems' }).scrollIntoViewIfNeeded();
      await shot(page, 'sop-procedures-mistake');
      // A file saved at head through the editor: the unpublished diff.
      // A file saved at head, opened from head (GET head/{path}), edited in place.
      await page.getByLabel('Path').fill('procedures/card-payment.md');
      await page.getByRole('button', { name: 'Open procedures/card-payment.md' }).click();
      await page.getByText(/^Opened procedures\/card-payment.md as saved at head/).waitFor();
      const fileText = page.getByLabel('File text');
      await expect(fileText.inputValue()).resolves.toBe(CARD);
      // The new wording ends in what an author (or a model's suggestion) could hide a reversal in: it shows as a marker.
      await fileText.fill((await fileText.inputValue()).replace('Email the receipt.', 'Text the receipt as \u202egnp.exe'));
      await page.getByRole('button', { name: 'Save at head' }).click();
      await page.getByText('Saved procedures/card-payment.md at head. Publish to make it live.').waitFor();
      const diff = page.getByLabel('Unified diff of head against the live release');
      await diff.waitFor();
      await expect(diff.locator('.d-del').allTextContents()).resolves.toEqual(expect.arrayContaining([expect.stringContaining('-3. Email the receipt.')]));
      await expect(diff.locator('.d-add').allTextContents()).resolves.toEqual(expect.arrayContaining(['+3. Text the receipt as ⟨U+202E⟩gnp.exe [tool: send_receipt, required]\n']));
      await shot(page, 'sop-procedures-diff');
      await page.getByRole('button', { name: 'Switch to the dark theme' }).click();
      await shot(page, 'sop-procedures-diff-dark');
      // Publish: head becomes release 2, live, with the reworded step; nothing is left unpublished.
      await page.getByRole('button', { name: 'Publish head as release 2' }).click();
      await page.getByText('Published release 2: it is live.').waitFor();
      await page.getByRole('heading', { name: /^Live release 2/ }).waitFor();
      await page.getByText('Head is the same as the live release.').waitFor();
      await page.locator('.lock-rules li', { hasText: 'Step 3 Text the receipt as ⟨U+202E⟩gnp.exe' }).waitFor();
      const live = (await ws('GET', '/releases/live')).body as unknown as { number: number };
      expect(live.number).toBe(2);
      await page.context().close();
    });

    it('Write a file at head refuses a path with . or .. segments before asking the API: no other file is written than the one named', async () => {
      type HeadAnswer = { files: { path: string }[]; diff: string };
      const before = (await ws('GET', '/head')).body as unknown as HeadAnswer;
      const page = await signedIn();
      const puts: string[] = [];
      page.on('request', (r) => void (r.method() === 'PUT' && puts.push(r.url())));
      await page.getByRole('link', { name: 'Procedures', exact: true }).click();
      await page.getByRole('heading', { name: /^Live release/ }).waitFor();
      await page.getByLabel('File text').fill('instructions: Somewhere else.\nprocedures: [card-payment]\n');
      // The browser would resolve `..` in the URL: procedures/../agents/x.yaml would write agents/x.yaml, ../escape.md ask another route.
      for (const named of ['procedures/../agents/x.yaml', '../escape.md', 'procedures/./x.md', '/agents/x.yaml', 'agents//x.yaml']) {
        await page.getByLabel('Path').fill(named);
        await page.getByRole('button', { name: 'Save at head' }).click();
        await page.getByRole('alert').filter({ hasText: `Not saved: a path may not contain . or .. segments, empty segments or a leading / (${named})` }).waitFor();
      }
      await shot(page, 'sop-procedures-dot-path');
      expect(puts).toEqual([]);
      const after = (await ws('GET', '/head')).body as unknown as HeadAnswer;
      expect(after.files.map((f) => f.path)).toEqual(before.files.map((f) => f.path));
      expect(after.diff).toBe(before.diff);
      await page.context().close();
    });
  });
});
