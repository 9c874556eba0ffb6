import type { Browser } from 'playwright-core';
import { NeatrootsClient } from '@neatroots/sdk';
import { startHeldModel, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { chromiumOrSkip, openSignedIn, pageErrors, shot, startBrowserApp, until, type BrowserApp } from './browser.test';

/**
 * An ended run whose questions still wait for a slow model does not read as checked and clean:
 * its page says how many wait and goes on following it (Live) until they are answered, then
 * shows the question's finding and stops. In a real browser against the embedded neatroots, the
 * model a local fake that holds its answers until the test lets it. Screenshot `run-questions-waiting`.
 */
const PROJECT = 'qwait';
const KEY = 'qwait-test-key';
const AGENT_KEY = 'qwait-test-agent-key';
const WRONG_SEARCH = `id: wrong-search
kind: yes_no
scope: span
when: live
ask: Was this search the wrong one?
`;
const LONG = 90_000;

const exe = chromiumOrSkip('the run page with questions waiting');

(exe ? describe : describe.skip)('the run page with questions waiting for the model', () => {
  let web: BrowserApp;
  let fake: FakeOpenAI;
  let client: NeatrootsClient;
  let browser: Browser;
  let url: string;
  let release: () => void = () => undefined;

  beforeAll(async () => {
    ({ fake, release } = await startHeldModel((q) => (q.ask.includes('wrong one') ? /no results/.exec(q.evidence)?.[0] : undefined)));
    web = await startBrowserApp(exe!, {
      prefix: 'nr-web-qwait',
      checks: { 'wrong-search.yaml': WRONG_SEARCH },
      config: { NEATROOTS_API_KEYS: `${PROJECT}=${KEY},${PROJECT}=${AGENT_KEY}:ingest` },
      models: { NEATROOTS_LLM_URL: fake.url, NEATROOTS_LLM_MODEL: 'llama-test', NEATROOTS_QUESTION_CACHE_TTL_MS: '0', NEATROOTS_QUESTION_BATCH_WAIT_MS: '5' },
    });
    ({ browser, url } = web);
    client = new NeatrootsClient({ address: `127.0.0.1:${web.app.ingest.grpcPort}`, apiKey: AGENT_KEY, flushIntervalMs: 20 });
  }, 240_000);

  afterAll(async () => {
    release();
    await client?.close();
    await web?.close();
    await fake?.close();
  });

  const errors = pageErrors();

  it('says how many questions wait, follows the ended run until they are answered, then shows the finding and stops', async () => {
    const t0 = Date.now() - 60_000;
    const run = client.startRun({ run_id: 'run-q', workflow: 'search' });
    run.span({ type: 'tool', name: 'search', tool: 'search', span_id: 's1', input: { q: 'refund policy' }, output: 'no results', start_ms: t0, end_ms: t0 + 20 });
    await run.end({ status: 'ok' });
    await until('the run ended, its question asked of the model', async () => {
      const res = await fetch(`${url}/v1/projects/${PROJECT}/runs/run-q`, { headers: { 'x-api-key': KEY } });
      const d = res.ok ? ((await res.json()) as { run: { end_status: string | null }; questions_pending: number }) : undefined;
      return d?.run.end_status === 'ok' && d.questions_pending > 0 && fake.calls.some((c) => c.kind === 'judge');
    }, LONG);

    const page = await openSignedIn(browser, { url, project: PROJECT, key: KEY, errors }, { viewport: { width: 1280, height: 860 } });
    await page.goto(`${url}/p/${PROJECT}/runs/run-q`);
    const waiting = page.locator('p.questions-pending');
    await waiting.filter({ hasText: /^\d+ questions? waiting for the model: this run is not done being checked\.$/ }).waitFor({ timeout: LONG });
    const status = page.getByRole('status', { name: 'Following the run' });
    // After a look at what is new, still following: the run ended, its questions did not.
    await page.waitForResponse((r) => new URL(r.url()).searchParams.has('since'), { timeout: LONG });
    await page.waitForResponse((r) => new URL(r.url()).searchParams.has('since'), { timeout: LONG });
    await status.filter({ hasText: /^\s*Live — updated \d/ }).waitFor({ timeout: LONG });
    expect(await page.getByText('No check raised anything on this run yet.').count()).toBe(1);
    await shot(page, 'run-questions-waiting');

    // The model answers: the question's finding shows, the line goes, and the page stops following.
    release();
    await page.locator('article[data-finding-id]', { hasText: 'wrong-search' }).waitFor({ timeout: LONG });
    await status.filter({ hasText: /^Run ended — stopped following at \d/ }).waitFor({ timeout: LONG });
    expect(await waiting.count()).toBe(0);
    await page.context().close();
  }, 240_000);
});
