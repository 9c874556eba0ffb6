import { until } from '@neatroots/platform';
import { startHeldModel, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import type { EmbeddedApp } from './embedded';
import { END_QUESTION, runEnd, search, SEARCH_QUESTION, startQuestionApp, type QuestionApp } from './question-app.test';

/**
 * A run whose questions wait for a slow model says so on its page (questions_pending): before,
 * an ended run read `findings 0, not_checked 0` (checked and clean) for as long as the model
 * took, then gained its question findings. Here the fake model holds its answers until the test
 * lets it.
 */
const KEY = 'pending-key';

let q: QuestionApp;
let app: EmbeddedApp;
let fake: FakeOpenAI;
let release: () => void = () => undefined;

beforeAll(async () => {
  // Run questions are answered only once the test lets the model: a search asked about was the wrong one.
  ({ fake, release } = await startHeldModel((q) => (q.ask.includes('wrong one') ? /result s\d/.exec(q.evidence)?.[0] : undefined)));
  q = await startQuestionApp({
    prefix: 'neatroots-questions-pending',
    key: KEY,
    checks: { 'span.yaml': SEARCH_QUESTION, 'end.yaml': END_QUESTION },
    llmUrl: fake.url,
  });
  ({ app } = q);
}, 120_000);

afterAll(async () => {
  release();
  await q?.close();
  await fake?.close();
}, 60_000);

const T0 = Date.now();
const end = runEnd;

interface RunPage {
  run: { end_status: string | null };
  findings: { check_id: string; span_ids: string[] }[];
  not_checked: { check_id: string; reason: string | null }[];
  questions_pending: number;
}
async function runPage(run: string): Promise<RunPage | undefined> {
  const res = await fetch(`http://127.0.0.1:${app.httpPort}/v1/projects/shop/runs/${run}`, { headers: { 'x-api-key': KEY } });
  return res.ok ? ((await res.json()) as RunPage) : undefined;
}

describe("a run's questions waiting for a slow model", () => {
  it('are counted in questions_pending until the model answers, then the count is 0 and the findings are there', async () => {
    await app.bus.publish(app.topics.events, [search('run-1', 's1', T0), search('run-1', 's2', T0 + 1_000), end('run-1', T0 + 2_000)]);
    // The run has ended and no question is answered: it looks clean, but says its questions wait.
    const waiting = await until("run-1's questions waiting on its page", async () => {
      const p = await runPage('run-1');
      return p && p.run.end_status === 'ok' && p.questions_pending >= 3 ? p : undefined;
    }, 60_000);
    expect(fake.calls.filter((c) => c.kind === 'judge').length).toBeGreaterThanOrEqual(1);
    expect(waiting.findings.filter((f) => f.check_id === 'wrong-search')).toEqual([]);
    expect(waiting.not_checked).toEqual([]);

    release();
    // A page that stops following at 0 has the findings (the review service stores them as they
    // come off the bus: a task whose answer raised one waits for it to be stored).
    const done = await until("run-1's questions answered", async () => {
      const p = await runPage('run-1');
      return p && p.questions_pending === 0 ? p : undefined;
    }, 60_000);
    expect(done).toMatchObject({ findings: expect.arrayContaining([expect.objectContaining({ check_id: 'wrong-search' })]), not_checked: [] });
    for (const f of done.findings.filter((x) => x.check_id === 'wrong-search')) expect(['s1', 's2']).toContain(f.span_ids[0]);
    expect(done.not_checked).toEqual([]);
  }, 150_000);

  it('a question whose task the question service keeps failing on is set aside: no longer waiting, and listed as not checked with why', async () => {
    // The question service cannot read run-dead's question findings: every try of its tasks fails, and the bus sets them aside.
    const qf = await app.windows<unknown>(':q');
    const load = qf.load.bind(qf);
    qf.load = (keys, members) => (keys.some((k) => k.endsWith('\u0000run-dead')) ? Promise.reject(new Error('the findings window cannot be read')) : load(keys, members));
    try {
      await app.bus.publish(app.topics.events, [search('run-dead', 'd1', T0), end('run-dead', T0 + 1_000)]);
      // Before, its tasks stayed counted as waiting for ever: the ended run's page kept saying so, and kept polling.
      const page = await until("run-dead's questions set aside and no longer waiting", async () => {
        const p = await runPage('run-dead');
        return p && p.run.end_status === 'ok' && p.questions_pending === 0 && p.not_checked.some((n) => n.check_id === 'wrong-search') ? p : undefined;
      }, 90_000);
      const why = page.not_checked.find((n) => n.check_id === 'wrong-search')!.reason;
      expect(why).toContain('set this question aside after repeated failures');
      expect(why).toContain('the findings window cannot be read');
      // The set-aside record is listed in the project's dead letters (its letter named no project before).
      const res = await fetch(`http://127.0.0.1:${app.httpPort}/v1/projects/shop/dead-letters`, { headers: { 'x-api-key': KEY } });
      const letters = (await res.json()) as { dead_letters: { source: string; run_id: string | null }[] };
      expect(letters.dead_letters.some((l) => l.source.includes('.questions/') && l.run_id === 'run-dead')).toBe(true);
    } finally {
      qf.load = load;
    }
  }, 150_000);
});
