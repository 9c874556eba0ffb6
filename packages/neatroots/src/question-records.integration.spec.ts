import * as fs from 'node:fs';
import type { QuestionTask } from '@neatroots/messages';
import { v1 } from '@neatroots/proto';
import { createLogger, until } from '@neatroots/platform';
import type { Envelope } from '@neatroots/spans';
import { startEmbedded } from './embedded';
import { tempHome, testConfig } from './test-app.test';

/**
 * The questions topic carries one record per run per step: a span question asked about each of
 * a run's tool calls in one export travels as one record, the earlier calls its tasks all show
 * written once in it, and the question service answers every task (neatroots_question_tasks_total
 * counts tasks, not records).
 */
const QUESTION = `id: wrong-call
kind: yes_no
scope: span
when: live
ask: Was this call the wrong one?
`;

const T0 = Date.now();
const CALLS = 8;
const span = (i: number): Envelope => ({
  project: 'shop',
  received_ms: T0 + i,
  item: {
    kind: 'span',
    span: { run_id: 'run-1', span_id: `s${i}`, type: 'tool', name: 'search', tool: 'search', status: 'ok', input: { q: `query ${i}` }, output: `result ${i} `.repeat(30), start_ms: T0 + i, end_ms: T0 + i + 5 },
  },
});

describe('the questions topic in the embedded app', () => {
  it('sends a run\'s question tasks of one step as one record, each earlier call written once, and answers them all', async () => {
    const home = tempHome('neatroots-question-records', { 'q.yaml': QUESTION });
    const app = await startEmbedded({ config: testConfig(home, {}), inMemoryDb: true, watch: false, log: createLogger({ level: 'error' }) });
    try {
      const records: QuestionTask[][] = [];
      let all = 0;
      let allRecords = 0;
      const sizes: { apart: number; together: number; spans: number }[] = [];
      await app.bus.subscribe(app.topics.questions, { group: 'test-records', fromBeginning: true }, async (b) => {
        for (const r of b.records) {
          all += r.value.length;
          allRecords++;
          const tasks = r.value.filter((t): t is QuestionTask => t.type === 'question' && t.check.id === 'wrong-call');
          if (!tasks.length) continue;
          records.push(tasks);
          const bytes = app.topics.questions.encode(tasks);
          sizes.push({
            together: bytes.length,
            apart: tasks.reduce((n, t) => n + app.topics.questions.encode([t]).length, 0),
            spans: JSON.parse(v1.QuestionTasks.decode(bytes).spans_json).length,
          });
        }
      });
      // One export: the run's eight calls in one bus record, so one step of the rule engine.
      await app.bus.publish(app.topics.events, Array.from({ length: CALLS }, (_, i) => ({ key: 'run-1', value: span(i + 1) })));
      await app.bus.idle();
      await until('every task answered', () => app.questions.metrics.tasks >= CALLS && app.questions.metrics.tasks === all, 20_000);

      expect(records).toHaveLength(1);
      const [tasks] = records;
      expect(tasks.map((t) => t.anchor)).toEqual(Array.from({ length: CALLS }, (_, i) => `s${i + 1}`));
      // The last call is judged with the seven before it; they are the same objects the first tasks showed.
      expect(tasks[CALLS - 1].evidence.spans.map((s) => s.id)).toEqual(Array.from({ length: CALLS }, (_, i) => `s${i + 1}`));
      expect(tasks[CALLS - 1].evidence.spans[0]).toBe(tasks[1].evidence.spans[0]);
      expect(tasks[CALLS - 1].check).toBe(tasks[0].check);
      // Written once a record: eight summaries, where the tasks apart repeat them 36 times.
      expect(sizes[0].spans).toBe(CALLS);
      expect(sizes[0].together).toBeLessThan(sizes[0].apart / 2.5);

      // The library's always-on questions ask about the same calls: one record still, every task answered.
      expect(allRecords).toBe(1);
      const metrics = async () => (await fetch(`http://127.0.0.1:${app.adminPort}/metrics`)).text();
      await until('the task count on /metrics', async () => new RegExp(`neatroots_question_tasks_total\\{[^}]*\\} ${all}\n`).test(await metrics()), 5_000);
    } finally {
      await app.close();
      fs.rmSync(home, { recursive: true, force: true });
    }
  }, 60_000);
});
