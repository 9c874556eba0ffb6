import { encodeMessage, v1 } from '@neatroots/proto';
import { FINDINGS_TOPIC, MAX_TASKS_A_RECORD, QUESTIONS_TOPIC, makeTopics, questionTaskRecords, questionTasksToProto, questionTaskToProto, type FindingMessage, type QuestionTask, type QuestionTaskMessage } from './index';

describe('the questions topic', () => {
  it('carries a question task, its JSON parts intact', () => {
    const t: QuestionTaskMessage = {
      id: 't1',
      type: 'question',
      project: 'p',
      run_id: 'r1',
      workflow: 'w',
      check: { id: 'q', kind: 'yes_no', ask: 'Did it fail?', evidence: { final_output: true } } as QuestionTask['check'],
      scope: 'trace',
      anchor: 'run',
      evidence: { spans: [{ id: 's1', type: 'tool', name: 'x', status: 'ok', output: 'ünïcode ✓' }], final_output: 'done' },
      context: { spans: [] },
      span_ids: ['s1'],
      final: true,
      at_ms: 1_700_000_000_000,
      received_ms: 1_700_000_000_001,
    };
    expect(QUESTIONS_TOPIC.decode(QUESTIONS_TOPIC.encode([t]))).toEqual([t]);
    expect(makeTopics('x').questions.name).toBe('x.questions');
  });

  it('carries a plan task', () => {
    const t: QuestionTaskMessage = { id: 'p1', type: 'plan', project: 'p', run_id: 'r1', workflow: 'w', plan: { project: 'p', workflow: 'w', tools: [{ name: 'a' }] }, span_ids: [], final: false, at_ms: 1 };
    expect(QUESTIONS_TOPIC.decode(QUESTIONS_TOPIC.encode([t]))).toEqual([t]);
  });

  it('refuses a task whose JSON parts are not the shape they must be, naming the field', () => {
    const base = { id: 't2', project: 'p', run_id: 'r', workflow: '', session_id: '', scope: '', anchor: '', context_json: '', span_ids: [], final: false, at_ms: 1, received_ms: 0, plan_json: '', check_ref: 0 };
    const check = JSON.stringify({ id: 'q', kind: 'yes_no', ask: 'a', scope: 'trace' });
    const decode = (t: Partial<v1.QuestionTask>) => QUESTIONS_TOPIC.decode(v1.QuestionTask.encode({ ...base, type: 'question', check_json: check, evidence_json: '{"spans":[]}', ...t }).finish());
    expect(decode({})[0].type).toBe('question');
    expect(() => decode({ check_json: '{"id":"q","kind":"rule","ask":"a"}' })).toThrow('question task t2: check_json must be a question check');
    expect(() => decode({ evidence_json: '{}' })).toThrow('question task t2: evidence_json must be evidence with its spans');
    expect(() => decode({ evidence_json: '{' })).toThrow('question task t2: evidence_json is not valid JSON');
    expect(() => decode({ type: 'plan', plan_json: '{"workflow":"w"}' })).toThrow('question task t2: plan_json must be a plan request');
    expect(() => decode({ type: 'other' })).toThrow('question task t2: type must be question or plan, got "other"');
  });

  // A run's tasks of one step show mostly the same earlier calls: each travels once a record.
  describe('a record of one run\'s tasks', () => {
    const check = { id: 'wrong-tool', kind: 'yes_no', ask: 'Wrong tool?', scope: 'span' } as QuestionTask['check'];
    const ring = Array.from({ length: 12 }, (_, i) => ({ id: `s${i}`, type: 'tool', name: 'search', tool: 'search', status: 'ok' as const, input: `{"q":"query ${i}"}`, output: `result ${i} `.repeat(20) }));
    /** A span question about ring[i]: the earlier calls as evidence, the same objects in every task. */
    const ask = (i: number, run = 'r1'): QuestionTask => ({
      id: `t${i}`, type: 'question', project: 'p', run_id: run, check, scope: 'span', anchor: `s${i}`,
      evidence: { spans: ring.slice(Math.max(0, i - 5), i + 1), focus: `s${i}` },
      context: { spans: ring.slice(0, Math.max(0, i - 5)) },
      span_ids: [`s${i}`], final: false, at_ms: 1_000 + i,
    });

    it('writes a span summary and a check shared by its tasks once, and reads every task back whole', () => {
      const tasks = [6, 7, 8, 9, 10, 11].map((i) => ask(i));
      const bytes = QUESTIONS_TOPIC.encode(tasks);
      const rec = v1.QuestionTasks.decode(bytes);
      expect(JSON.parse(rec.spans_json)).toHaveLength(12);
      expect(JSON.parse(rec.checks_json)).toEqual([check]);
      expect(rec.tasks.map((t) => t.check_ref)).toEqual([1, 1, 1, 1, 1, 1]);
      expect(QUESTIONS_TOPIC.decode(bytes)).toEqual(tasks);
      // Each task on its own repeats the earlier calls: the record is a fraction of that.
      const apart = tasks.reduce((n, t) => n + QUESTIONS_TOPIC.encode([t]).length, 0);
      expect(bytes.length).toBeLessThan(apart / 2.5);
    });

    it('writes each record whole when the records before it showed the same summaries, at other places', () => {
      // The second record shows spans the first held, first in another order: its own indices.
      const first = [ask(8)];
      const second = [ask(4), ask(9), ask(11)];
      const a = QUESTIONS_TOPIC.encode(first);
      const b = QUESTIONS_TOPIC.encode(second);
      expect(QUESTIONS_TOPIC.decode(a)).toEqual(first);
      expect(QUESTIONS_TOPIC.decode(b)).toEqual(second);
      expect(JSON.parse(v1.QuestionTasks.decode(b).spans_json).map((s: { id: string }) => s.id)).toEqual(['s0', 's1', 's2', 's3', 's4', 's5', 's6', 's7', 's8', 's9', 's10', 's11']);
      expect(JSON.parse(v1.QuestionTasks.decode(b).tasks[1].evidence_json).spans).toEqual([4, 5, 6, 7, 8, 9]);
      // Written again after the other, a record is the same bytes.
      expect(QUESTIONS_TOPIC.encode(first)).toEqual(a);
      expect(QUESTIONS_TOPIC.encode(second)).toEqual(b);
    });

    it('reads the checks of records that carry the same ones as the same objects, whatever the record', () => {
      const [a] = QUESTIONS_TOPIC.decode(QUESTIONS_TOPIC.encode([ask(4)])) as QuestionTask[];
      const [b] = QUESTIONS_TOPIC.decode(QUESTIONS_TOPIC.encode([ask(5, 'r2')])) as QuestionTask[];
      expect(a.check).toEqual(check);
      expect(b.check).toBe(a.check);
      const other = { ...check, ask: 'Wrong tool again?' };
      const [c] = QUESTIONS_TOPIC.decode(QUESTIONS_TOPIC.encode([{ ...ask(6), check: other }])) as QuestionTask[];
      expect(c.check).toEqual(other);
      expect(c.check).not.toBe(a.check);
    });

    it('reads a record written as a lone QuestionTask, as the log may still hold from before', () => {
      const t = ask(3);
      expect(QUESTIONS_TOPIC.decode(v1.QuestionTask.encode(questionTaskToProto(t)).finish())).toEqual([t]);
    });

    it('refuses a task that refers to a span or a check its record does not hold, naming both', () => {
      const rec = v1.QuestionTasks.decode(QUESTIONS_TOPIC.encode([ask(2)]));
      const bad = (t: Partial<v1.QuestionTask>) => () => QUESTIONS_TOPIC.decode(v1.QuestionTasks.encode({ ...rec, tasks: [{ ...rec.tasks[0], ...t }] }).finish());
      expect(bad({ evidence_json: '{"spans":[0,99]}' })).toThrow('question task t2: evidence_json refers to span 99, which its record does not hold');
      expect(bad({ context_json: '{"spans":[-1]}' })).toThrow('question task t2: context_json refers to span -1');
      expect(bad({ check_ref: 2 })).toThrow('question task t2: check_ref refers to check 2, which its record does not hold');
      expect(() => QUESTIONS_TOPIC.decode(v1.QuestionTasks.encode({ ...rec, spans_json: '[1,2]' }).finish())).toThrow('question tasks of run r1: spans_json must be an array of objects');
    });

    it('writes a record\'s bytes as the generated encoder writes its message, whatever its texts and sizes', () => {
      // The topic writes the shared spans and checks from their texts straight into the record
      // (questionTasksBytes): byte for byte what encoding questionTasksToProto's message gives.
      const generated = (tasks: QuestionTaskMessage[]) => Buffer.from(encodeMessage(v1.QuestionTasks, questionTasksToProto(tasks))).toString('hex');
      const written = (tasks: QuestionTaskMessage[]) => Buffer.from(QUESTIONS_TOPIC.encode(tasks)).toString('hex');
      const texts = ['plain', 'ünïcode ✓', 'emoji 😀 pairs', 'a lone \ud800 half', '\u0000 nul and "quotes" \\ and \n', 'ÿ'.repeat(70)];
      const summary = (i: number, len: number) => ({ id: `u${i}`, type: 'tool', name: 'search', tool: 'search', status: 'ok' as const, input: texts[i % texts.length], output: `${texts[(i + 1) % texts.length]} `.repeat(len) });
      const shown = (n: number, len: number): QuestionTask => {
        const spans = Array.from({ length: n }, (_, i) => summary(i, len));
        return { ...ask(11), evidence: { spans: spans.slice(-3), focus: `u${n - 1}` }, context: { spans: spans.slice(0, -3) } };
      };
      const plan: QuestionTaskMessage = { id: 'p1', type: 'plan', project: 'p', run_id: 'r1', workflow: 'w', plan: { project: 'p', workflow: 'w', tools: [{ name: 'a' }] }, span_ids: [], final: false, at_ms: 1 };
      const unicodeCheck = { ...check, ask: 'Was the tool wrong? ✓ 😀' } as QuestionTask['check'];
      const records: QuestionTaskMessage[][] = [
        [ask(8)],
        [ask(4), ask(9), ask(11)],
        // the spans' field under 128 bytes, and a task of no spans (checks_json alone)
        [{ ...ask(0), evidence: { spans: [] }, context: undefined }],
        [{ ...ask(1), evidence: { spans: [summary(0, 0)] }, context: undefined, check: unicodeCheck }],
        // lengths of 2, 3 and 4 bytes (over 16 KiB and over 2 MiB)
        [shown(20, 10)],
        [shown(30, 80)],
        [shown(40, 3000)],
        // no shared spans nor checks: a plan alone, and a plan beside a question
        [plan],
        [plan, ask(5)],
        Array.from({ length: MAX_TASKS_A_RECORD }, (_, i) => ({ ...ask(i % 12), id: `m${i}`, check: i % 2 ? unicodeCheck : check })),
      ];
      for (const tasks of records) {
        expect(written(tasks)).toBe(generated(tasks));
        expect(QUESTIONS_TOPIC.decode(QUESTIONS_TOPIC.encode(tasks))).toEqual(tasks);
      }
      // the 4-byte length above is one
      expect(QUESTIONS_TOPIC.encode(records[6]).length).toBeGreaterThan(2 * 1024 * 1024);
    });

    it('puts each run\'s tasks in records of their own, in order, at most MAX_TASKS_A_RECORD a record', () => {
      const tasks: QuestionTask[] = [];
      for (let i = 0; i < MAX_TASKS_A_RECORD + 3; i++) tasks.push({ ...ask(i % 12), id: `a${i}` }, { ...ask(i % 12, 'r2'), id: `b${i}` });
      const records = questionTaskRecords(tasks);
      expect(records.map((r) => [r.key, r.value.length])).toEqual([['r1', MAX_TASKS_A_RECORD], ['r2', MAX_TASKS_A_RECORD], ['r1', 3], ['r2', 3]]);
      expect(records.filter((r) => r.key === 'r1').flatMap((r) => r.value.map((t) => t.id))).toEqual(tasks.filter((t) => t.run_id === 'r1').map((t) => t.id));
      const back = records.flatMap((r) => QUESTIONS_TOPIC.decode(QUESTIONS_TOPIC.encode(r.value)));
      expect(back.filter((t) => t.run_id === 'r2')).toEqual(tasks.filter((t) => t.run_id === 'r2'));
    });
  });

  it('carries a question finding\'s quote, probability and how it is shown', () => {
    const f: FindingMessage = {
      id: 'f1', check_id: 'q', run_id: 'r1', project: 'p', status: 'raised', span_ids: ['s1'], count: 1, action: 'flag', title: 't', guidance: 'g',
      at_ms: 5, kind: 'yes_no', source: 'library', priority: 65, quote: 'the words', probability: 0.9, confidence: 'Very likely (LLM judgment)', answered_by: 'local',
    };
    expect(FINDINGS_TOPIC.decode(FINDINGS_TOPIC.encode(f))).toEqual(f);
  });
});
