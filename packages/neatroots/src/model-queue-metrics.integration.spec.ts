import { until } from '@neatroots/platform';
import { startHeldModel, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import type { EmbeddedApp } from './embedded';
import { search, SEARCH_QUESTION, startQuestionApp, type QuestionApp } from './question-app.test';

/**
 * An operator watching a slow model sees on /metrics what waits for it: the model queue's
 * requests under way and questions waiting (neatroots_model_queue), and the question task records
 * the question service has not processed yet (neatroots_bus_backlog on the questions topic).
 * Before, /metrics showed nothing of it until the model answered (neatroots_question_tasks_total
 * counts a batch once it is done).
 */
const KEY = 'queue-key';

let q: QuestionApp;
let app: EmbeddedApp;
let fake: FakeOpenAI;
let release: () => void = () => undefined;

beforeAll(async () => {
  // The model answers the questions asked of runs only once the test lets it (the rest at once).
  ({ fake, release } = await startHeldModel());
  q = await startQuestionApp({
    prefix: 'neatroots-model-queue',
    key: KEY,
    checks: { 'span.yaml': SEARCH_QUESTION },
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

/** The value of a sample on /metrics (undefined when it is not there). */
async function sample(name: string, labels: string): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${app.adminPort}/metrics`)).text();
  // The process's own labels (service="all") follow the sample's.
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels},`) || l.startsWith(`${name}{${labels}} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('/metrics while the model is slow', () => {
  it('shows the model queue\'s requests under way and the question tasks waiting, then both back to 0 once it answers', async () => {
    const questions = app.topics.questions.name;
    // Many runs' span questions: the local model's requests are under way, the rest wait.
    for (let i = 0; i < 12; i++) await app.bus.publish(app.topics.events, [search(`run-${i}`, `s${i}`, T0 + i)]);
    await until('a request under way and question task records waiting on /metrics', async () => {
      const active = await sample('neatroots_model_queue', 'endpoint="local",state="active"');
      const backlog = await sample('neatroots_bus_backlog', `topic="${questions}"`);
      return (active ?? 0) >= 1 && (backlog ?? 0) >= 1;
    }, 60_000);
    expect(fake.calls.filter((c) => c.kind === 'judge').length).toBeGreaterThanOrEqual(1);
    expect(await sample('neatroots_model_queue', 'endpoint="local",state="queued"')).toBeDefined();

    release();
    await until('nothing under way or waiting once the model answered', async () => {
      const active = await sample('neatroots_model_queue', 'endpoint="local",state="active"');
      const queued = await sample('neatroots_model_queue', 'endpoint="local",state="queued"');
      const backlog = await sample('neatroots_bus_backlog', `topic="${questions}"`);
      return active === 0 && queued === 0 && backlog === 0;
    }, 60_000);
  }, 150_000);
});
