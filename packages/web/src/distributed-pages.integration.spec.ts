import type { Browser, Page } from 'playwright-core';
import { internalClientOptions, requireService } from '@neatroots/platform';
import { NeatrootsClient } from '@neatroots/sdk';
import { SopGrpcClient } from '@neatroots/api';
import { runDemoFleet } from '../../neatroots/src/demo';
import { loadDemoWorkspace } from '../../neatroots/src/demo-sop';
import { REFUND_HALT_CHECK } from '../../neatroots/src/test-app.test';
import { Cluster } from '../../../test/distributed/cluster';
import { chromiumOrSkip, launch, openSignedIn, pageErrors, requireBuiltApp, SCREENSHOTS, shot, until } from './browser.test';

/**
 * The web app as the api service serves it in the distributed deployment: review, question, the
 * rule engine, ingest and the api each their own process (`neatroots serve --target ...`) on the
 * real Kafka, Redis and Postgres (a database and topic prefix of the spec's own), the demo's
 * procedures and sample fleet sent to it, a database halt rule saved through the API with
 * steering on, and a run followed live. Each page is driven in Chromium: Home, Runs, a run (live,
 * halted, a span selected, a finding dismissed and reopened), Checks (a preview), Sessions and a
 * session, Procedures, Review and a pattern (a verdict), Insights, Settings → Models. No page may
 * log a console error or get a 4xx/5xx answer it did not ask for; the GitHub connection of a
 * workspace without one answers 404 as the docs say (it answered 500: the review service's Sop
 * handlers let an error thrown at once escape, and grpc-js answered it UNKNOWN).
 * Screenshots `distributed-*`.
 */
const SUITE = 'the web app against the distributed deployment';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const exe = kafka && redis && pg ? chromiumOrSkip(SUITE) : null;
const PROJECT = 'demo';
const KEY = `distributed-pages-${Date.now().toString(36)}`;

(exe ? describe : describe.skip)(SUITE, () => {
  let cluster: Cluster;
  let sop: SopGrpcClient;
  let client: NeatrootsClient;
  let browser: Browser;
  let url: string;
  let fleet: { runIds: string[] };
  let samples: string[];
  /** Answers of 400 and more the pages got, as `<status> <method> <url>`: none is expected. */
  const failed: string[] = [];
  const errors = pageErrors();
  afterEach(() => {
    expect(failed.splice(0)).toEqual([]);
  });

  beforeAll(async () => {
    requireBuiltApp();
    cluster = new Cluster({ kafka: kafka!, redis: redis!, pg: pg! }, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}`, NEATROOTS_STEERING: PROJECT });
    await cluster.init();
    await cluster.start('review');
    await Promise.all([cluster.start('question'), cluster.start('rule-engine')]);
    await Promise.all([cluster.start('ingest'), cluster.start('api')]);
    url = `http://127.0.0.1:${cluster.ports.http}`;
    sop = new SopGrpcClient(`127.0.0.1:${cluster.ports.review}`, 30_000, internalClientOptions(cluster.env.NEATROOTS_INTERNAL_TOKEN));
    const demo = await loadDemoWorkspace(sop);
    samples = demo.samples;
    // The halt rule, saved as the app saves it: the rule engine takes it from the review service.
    const saved = await fetch(`${url}/v1/projects/${PROJECT}/checks`, { method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json' }, body: JSON.stringify({ yaml: REFUND_HALT_CHECK }) });
    expect(saved.status).toBe(200);
    await until('the halt rule in the rule engine', async () => {
      const res = await fetch(`${url}/v1/projects/${PROJECT}/checks`, { headers: { 'x-api-key': KEY } });
      return ((await res.json()) as { checks: { id: string; in_effect: boolean }[] }).checks.some((c) => c.id === 'refund-without-lookup' && c.in_effect);
    });
    fleet = await runDemoFleet({ address: `127.0.0.1:${cluster.ports.grpc}`, apiKey: KEY, onEvent: () => undefined, stepMs: 20 });
    for (const id of samples) await until(`sample ${id} checked`, async () => (await sop.getSession(PROJECT, id)).status !== 'queued', 60_000);
    await until('the demo findings in the review queue', async () => {
      const res = await fetch(`${url}/v1/workspaces/${PROJECT}/review`, { headers: { 'x-api-key': KEY } });
      return ((await res.json()) as { items: unknown[] }).items.length > 0;
    });
    client = new NeatrootsClient({ address: `127.0.0.1:${cluster.ports.grpc}`, apiKey: KEY, flushIntervalMs: 20 });
    // The rule engine reads database checks and steering again every few seconds: a probe run halts once it has both.
    await until(
      'the halt rule halting in the rule engine',
      async () => {
        const id = `run-probe-${Date.now()}`;
        const probe = client.startRun({ run_id: id, workflow: 'probe' });
        probe.span({ type: 'tool', name: 'issue_refund', tool: 'issue_refund', span_id: 'p1', input: { order: 1 }, output: 'done', start_ms: Date.now(), end_ms: Date.now() + 1 });
        await probe.end({ status: 'ok' });
        const seen = async () => {
          const res = await fetch(`${url}/v1/projects/${PROJECT}/findings?run_id=${id}`, { headers: { 'x-api-key': KEY } });
          const { findings } = (await res.json()) as { findings: { check_id: string; halt_suppressed: boolean }[] };
          return findings.some((f) => f.check_id === 'refund-without-lookup' && !f.halt_suppressed);
        };
        for (let i = 0; i < 20; i++) {
          if (await seen()) return true;
          await new Promise((r) => setTimeout(r, 250));
        }
        return false;
      },
      90_000,
    );
    browser = await launch(exe!);
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await client?.close();
    sop?.close();
    await cluster?.close();
    process.stdout.write(`${SUITE}: screenshots in ${SCREENSHOTS} (distributed-*)\n`);
  }, 120_000);

  async function signedIn(): Promise<Page> {
    const page = await openSignedIn(browser, { url, project: PROJECT, key: KEY, errors });
    page.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${r.request().method()} ${r.url()}`);
    });
    return page;
  }

  const runOf = (prefix: string) => fleet.runIds.find((id) => id.startsWith(`${prefix}-`))!;

  it('follows a run live until its halt reaches the agent, and Home lists it halted today', async () => {
    const page = await signedIn();
    const t0 = Date.now();
    const run = client.startRun({ run_id: 'run-live', workflow: 'refunds' });
    await run.whenSubscribed();
    run.span({ type: 'llm', name: 'chat', span_id: 'l1', input: 'refund order 9', output: 'on it', start_ms: t0, end_ms: t0 + 10 });
    await run.flush();
    // Stored by review from Kafka a moment after ingest took it: the page is opened once it is there.
    await until('run-live stored', async () => (await fetch(`${url}/v1/projects/${PROJECT}/runs/run-live`, { headers: { 'x-api-key': KEY } })).ok);
    await page.goto(`${url}/p/${PROJECT}/runs/run-live`);
    const main = page.locator('main');
    await main.getByText(/Live — updated/).waitFor();
    await main.getByText('Spans (1;').waitFor();
    // A refund with no lookup: the halt rule halts the run, and the page following it shows it.
    run.span({ type: 'tool', name: 'issue_refund', tool: 'issue_refund', span_id: 'l2', input: { order: 9 }, output: 'done', start_ms: t0 + 100, end_ms: t0 + 150 });
    await run.flush();
    await main.getByText('Spans (2;').waitFor();
    await main.getByText('Halt sent: the run was stopped').waitFor({ timeout: 45_000 });
    await until('the agent halted', async () => run.halted);
    await shot(page, 'distributed-run-live-halted');
    await run.end({ status: 'interrupted' });
    await main.getByText(/Run ended — stopped following at/).waitFor({ timeout: 45_000 });
    await page.getByRole('link', { name: 'Home', exact: true }).click();
    const halted = page.getByRole('region', { name: 'Runs halted today' });
    await halted.getByRole('link', { name: 'run-live' }).waitFor();
    const problems = page.getByRole('region', { name: 'Problems now' });
    await problems.getByText(`run ${runOf('run-mail')}`).first().waitFor();
    await shot(page, 'distributed-home');
    await page.context().close();
  }, 120_000);

  it('lists the runs, and shows a run with its spans, a span whole, and findings dismissed and reopened', async () => {
    const page = await signedIn();
    await page.getByRole('link', { name: 'Runs', exact: true }).click();
    const rows = page.locator('table.runs tbody tr');
    await rows.filter({ hasText: runOf('run-crash') }).waitFor();
    expect(await rows.count()).toBeGreaterThanOrEqual(fleet.runIds.length);
    await shot(page, 'distributed-runs');
    const mail = runOf('run-mail');
    await rows.filter({ hasText: mail }).getByRole('link', { name: mail }).click();
    const main = page.locator('main');
    await main.getByText('Findings (4)').waitFor();
    await main.getByText('I have emailed you the invoice.').waitFor();
    // A span selected is read whole (GET .../spans/{id}): its input and error.
    await page.getByText('tool send_email').first().click();
    await main.getByText('SMTP 451 temporary failure').first().waitFor();
    await main.getByText('"template": "invoice"').waitFor();
    const card = main.getByRole('article', { name: 'Finding: Same tool called repeatedly with identical arguments' });
    await card.getByRole('button', { name: 'Dismiss' }).click();
    await card.getByRole('button', { name: 'Reopen' }).waitFor();
    await card.getByText(/Dismissed/).first().waitFor();
    await shot(page, 'distributed-run-dismissed');
    await card.getByRole('button', { name: 'Reopen' }).click();
    await card.getByRole('button', { name: 'Dismiss' }).waitFor();
    await page.context().close();
  }, 90_000);

  it('shows Checks with the database halt rule, and previews a check on the recent runs', async () => {
    const page = await signedIn();
    await page.getByRole('link', { name: 'Checks', exact: true }).click();
    const row = page.locator('main table tbody tr', { hasText: 'refund-without-lookup' });
    await row.getByText('database').waitFor();
    await row.getByText('halt').waitFor();
    await page.getByRole('button', { name: 'Preview on recent runs' }).click();
    await page.locator('main').getByText(/Previewed on the \d+ most recent runs of project demo/).waitFor({ timeout: 45_000 });
    await shot(page, 'distributed-checks-preview');
    await page.context().close();
  }, 90_000);

  it('shows the sessions, a session checked against its procedures, and checks it again', async () => {
    const page = await signedIn();
    await page.getByRole('link', { name: 'Sessions', exact: true }).click();
    const main = page.locator('main');
    await main.getByRole('link', { name: 'sample-refund-skipped' }).waitFor();
    await main.getByRole('link', { name: `run:${runOf('run-refund-bad')}` }).waitFor();
    await main.getByRole('link', { name: 'sample-refund-out-of-order' }).click();
    await main.getByText('Refund an order').first().waitFor();
    await main.getByText('out of order').first().waitFor();
    await page.getByRole('button', { name: 'Check again' }).click();
    await main.getByText('Queued to be checked again.').waitFor();
    await shot(page, 'distributed-session');
    await page.context().close();
  }, 90_000);

  it('shows Procedures, the review queue, a pattern given a verdict, Insights and Settings → Models', async () => {
    const page = await signedIn();
    const main = page.locator('main');
    await page.getByRole('link', { name: 'Procedures', exact: true }).click();
    await page.getByRole('heading', { name: /^Live release 1/, level: 2 }).waitFor();
    await main.getByText('Look up the order.').first().waitFor();
    await shot(page, 'distributed-procedures');
    await page.getByRole('link', { name: 'Review', exact: true }).click();
    await main.getByText('Open the pattern to give a verdict').waitFor();
    await shot(page, 'distributed-review');
    const review = (await (await fetch(`${url}/v1/workspaces/${PROJECT}/review`, { headers: { 'x-api-key': KEY } })).json()) as { items: { pattern_id: string }[] };
    await page.goto(`${url}/p/${PROJECT}/patterns/${review.items[0].pattern_id}`);
    await page.getByRole('button', { name: 'Real mistake' }).click();
    await main.getByText(/Verdict real saved/).waitFor();
    await main.getByText('Lineage of the rule').waitFor();
    await shot(page, 'distributed-pattern');
    await page.getByRole('link', { name: 'Insights', exact: true }).click();
    await page.getByRole('region', { name: 'Totals' }).waitFor();
    await shot(page, 'distributed-insights');
    await page.getByRole('link', { name: 'Settings → Models', exact: true }).click();
    await main.getByText(/Every LLM answer is also put to the fast classifier/).waitFor();
    await page.context().close();
  }, 90_000);

  it('takes a session of 5 MB, as in-process, and shows it with its transcript', async () => {
    // Under the 8 MiB POST .../sessions takes: review's gRPC port refused the api's request over 4 MiB
    // (502 answer_too_large), and the api refused review's replies over 4 MiB (the transcript).
    const turns = Array.from({ length: 40 }, (_, i) => ({ role: i % 2 ? 'agent' : 'user', text: `turn ${i} ${'x'.repeat(120_000)}` }));
    const body = JSON.stringify({ external_id: 'big-session', agent: 'support-agent', turns });
    expect(body.length).toBeGreaterThan(4.5 * 1024 * 1024);
    const res = await fetch(`${url}/v1/workspaces/${PROJECT}/sessions`, { method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json' }, body });
    const sent = (await res.json()) as { id: string };
    expect([res.status, sent]).toEqual([202, expect.objectContaining({ external_id: 'big-session' })]);
    await until('the big session checked', async () => (await sop.getSession(PROJECT, sent.id)).status !== 'queued', 60_000);
    const page = await signedIn();
    await page.goto(`${url}/p/${PROJECT}/sessions/${sent.id}`);
    const main = page.locator('main');
    await main.getByText('Transcript', { exact: true }).waitFor();
    await main.getByText(/^turn 39 x+/).waitFor();
    await shot(page, 'distributed-session-5mb');
    await page.context().close();
  }, 120_000);

  it('answers a workspace’s GitHub connection 404 when review has GitHub connections off, as in-process', async () => {
    const page = await signedIn();
    // As the app's pages call the API: from the page, with the key.
    const answer = await page.evaluate(
      async ({ ws, key }) => {
        const res = await fetch(`/v1/workspaces/${ws}/github`, { headers: { 'x-api-key': key } });
        return { status: res.status, body: (await res.json()) as unknown };
      },
      { ws: PROJECT, key: KEY },
    );
    expect(answer).toEqual({ status: 404, body: { error: { code: 'not_found', message: 'GitHub connections are not served by this review service' } } });
    // That 404 is the one asked for (the browser logs it on the console too).
    expect(failed.splice(0)).toEqual([`404 GET ${url}/v1/workspaces/${PROJECT}/github`]);
    const logged = errors.findIndex((e) => e.includes('status of 404'));
    expect(logged).toBeGreaterThanOrEqual(0);
    errors.splice(logged, 1);
    await page.context().close();
  }, 60_000);
  it('reads a page again by itself once the review service is back from a restart, and signs in once it can check the key', async () => {
    // Signed in before (signing in asks the API, which asks review).
    const page = await signedIn();
    const runPage = await signedIn();
    const home = await signedIn();
    const review = cluster.procs.find((p) => p.target === 'review')!;
    await cluster.stop(review);
    await home.reload();
    const problems = home.getByRole('region', { name: 'Problems now' });
    await problems.getByText(/the review service cannot answer right now.*; trying again$/).waitFor();
    // Opened while review is away: the api answers 503 "retry shortly"; the pages say so and try again.
    await page.goto(`${url}/p/${PROJECT}/runs`);
    const main = page.locator('main');
    await main.getByText(/the review service cannot answer right now.*; trying again$/).waitFor();
    await runPage.goto(`${url}/p/${PROJECT}/runs/${runOf('run-mail')}`);
    await runPage.locator('main').getByText(/the review service cannot answer right now.*; trying again$/).waitFor();
    await shot(runPage, 'distributed-run-review-away');
    // Signing in while review is away: the key cannot be checked (503), which the page says, not
    // that the key is wrong, and it tries the key again by itself (it said the 503 and stopped).
    const signIn = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    signIn.on('console', (m) => m.type() === 'error' && errors.push(`${signIn.url()}: ${m.text()}`));
    signIn.on('pageerror', (e) => errors.push(`${signIn.url()}: ${e.message}`));
    signIn.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${r.request().method()} ${r.url()}`);
    });
    await signIn.goto(`${url}/`);
    await signIn.getByLabel('Project').fill(PROJECT);
    await signIn.getByLabel('API key').fill(KEY);
    await signIn.getByRole('button', { name: 'Sign in' }).click();
    const alert = signIn.getByRole('alert');
    await alert.getByText(/^the review service cannot answer right now.*\(503\); trying again$/).waitFor();
    await shot(signIn, 'distributed-sign-in-review-away');
    let asked = 0;
    signIn.on('request', (r) => void (r.url().includes(`/v1/projects/${PROJECT}/runs`) && asked++));
    await until('the sign-in asked again by itself', async () => asked > 0, 30_000);
    expect(await signIn.getByText(/not valid|does not open/).count()).toBe(0);
    // Editing the key while it is being tried again stops that: the alert goes and nothing is asked
    // (the first try again comes 2 s after the 503).
    const edits = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    edits.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${r.request().method()} ${r.url()}`);
    });
    edits.on('console', (m) => m.type() === 'error' && !m.text().includes('status of 503') && errors.push(`${edits.url()}: ${m.text()}`));
    await edits.goto(`${url}/`);
    await edits.getByLabel('Project').fill(PROJECT);
    await edits.getByLabel('API key').fill(KEY);
    await edits.getByRole('button', { name: 'Sign in' }).click();
    await edits.getByRole('alert').getByText(/\(503\); trying again$/).waitFor();
    let askedAfterEdit = 0;
    edits.on('request', (r) => void (r.url().includes(`/v1/projects/${PROJECT}/runs`) && askedAfterEdit++));
    await edits.getByLabel('API key').fill(`${KEY}-edited`);
    await edits.waitForTimeout(6_000);
    expect({ asked: askedAfterEdit, alerts: await edits.getByRole('alert').count() }).toEqual({ asked: 0, alerts: 0 });
    await edits.close();
    await cluster.start('review');
    // Signed in once review answers, with nothing clicked again.
    await signIn.getByRole('heading', { name: 'Home', level: 1 }).waitFor({ timeout: 90_000 });
    await shot(signIn, 'distributed-sign-in-review-back');
    // No reload: each page reads again and shows what it shows.
    await main.locator('table.runs tbody tr', { hasText: runOf('run-crash') }).waitFor({ timeout: 60_000 });
    await runPage.locator('main').getByText('Findings (4)').waitFor({ timeout: 60_000 });
    expect(await runPage.locator('main').getByText(/cannot answer right now/).count()).toBe(0);
    await problems.getByText(`run ${runOf('run-mail')}`).first().waitFor({ timeout: 60_000 });
    await shot(runPage, 'distributed-run-review-back');
    // The 503s (and the browser's lines for them) were the review service away, as meant.
    expect(failed.splice(0).every((f) => f.startsWith('503 GET '))).toBe(true);
    for (let i = errors.length - 1; i >= 0; i--) if (errors[i].includes('status of 503')) errors.splice(i, 1);
    await home.context().close();
    await runPage.context().close();
    await page.context().close();
    await signIn.context().close();
  }, 240_000);
});
