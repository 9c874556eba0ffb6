import { until } from '@neatroots/platform';
import type { EmbeddedApp } from './embedded';
import { END_QUESTION, runEnd, search, SEARCH_QUESTION, startQuestionApp, type QuestionApp } from './question-app.test';

/**
 * A question service far behind (past NEATROOTS_MAX_QUESTION_BACKLOG records waiting) is handed
 * no new questions: the run page says which of a run's questions were not asked and why, in
 * `not_checked`. Before, they were dropped without a trace and the run read as checked and
 * clean. Here a consumer group that never finishes its first batch stands for the slow model:
 * the backlog is what its slowest group has not taken.
 */
const KEY = 'shed-key';

let q: QuestionApp;
let app: EmbeddedApp;
let release: () => void = () => undefined;

beforeAll(async () => {
  q = await startQuestionApp({ prefix: 'neatroots-question-shed', key: KEY, checks: { 'span.yaml': SEARCH_QUESTION, 'end.yaml': END_QUESTION }, env: { NEATROOTS_MAX_QUESTION_BACKLOG: '1' } });
  ({ app } = q);
}, 120_000);

afterAll(async () => {
  release();
  await q?.close();
}, 60_000);

const T0 = Date.now();
const end = runEnd;

interface NotChecked { check_id: string; anchor: string; span_ids: string[]; reason: string | null }
async function notChecked(run: string): Promise<NotChecked[] | undefined> {
  const res = await fetch(`http://127.0.0.1:${app.httpPort}/v1/projects/shop/runs/${run}`, { headers: { 'x-api-key': KEY } });
  if (!res.ok) return undefined;
  return ((await res.json()) as { not_checked: NotChecked[] }).not_checked;
}

describe('questions the rule engine did not hand to a question service far behind', () => {
  it('are listed in the run page\'s not_checked with why, and counted on /metrics', async () => {
    const hung = new Promise<void>((r) => (release = r));
    const stuck = await app.bus.subscribe(app.topics.questions, { group: 'stuck', fromBeginning: true }, () => hung);
    try {
      const questions = app.topics.questions.name;
      // Two other runs' questions: the first record held, the second waiting, past the bound of 1.
      await app.bus.publish(app.topics.events, [search('other-1', 'o1', T0)]);
      await until('one question record waiting', () => app.bus.backlog(questions) >= 1, 30_000);
      await app.bus.publish(app.topics.events, [search('other-2', 'o2', T0)]);
      await until('two question records waiting', () => app.bus.backlog(questions) >= 2, 30_000);

      await app.bus.publish(app.topics.events, [search('run-1', 's1', T0 + 1_000), search('run-1', 's2', T0 + 2_000), end('run-1', T0 + 3_000)]);
      // The library's questions that apply are not asked either: each is listed too.
      const all = await until('run-1\'s questions not checked on its page', async () => {
        const nc = await notChecked('run-1');
        return nc && nc.filter((n) => n.check_id === 'wrong-search' || n.check_id === 'task-left-undone').length >= 3 ? nc : undefined;
      }, 30_000);
      const listed = all.filter((n) => n.check_id === 'wrong-search' || n.check_id === 'task-left-undone');
      expect(listed.map((n) => [n.check_id, n.anchor, n.span_ids]).sort()).toEqual([
        ['task-left-undone', 'run', ['s1', 's2']],
        ['wrong-search', 's1', ['s1']],
        ['wrong-search', 's2', ['s2']],
      ]);
      for (const n of all) expect(n.reason).toMatch(/^not asked: the question service was \d+ question task records behind \(NEATROOTS_MAX_QUESTION_BACKLOG=1\)$/);

      // Every question task not handed over, library ones too (/metrics is synced once a second).
      await until('the shed questions on /metrics', async () => {
        const metrics = await (await fetch(`http://127.0.0.1:${app.adminPort}/metrics`)).text();
        const shed = /^neatroots_question_tasks_shed_total(?:\{[^}]*\})? (\S+)$/m.exec(metrics);
        return Number(shed?.[1] ?? 0) >= app.ruleEngine.metrics.questionsShed && app.ruleEngine.metrics.questionsShed >= all.length;
      }, 30_000);
    } finally {
      release();
      await stuck.close();
    }
  }, 90_000);
});
