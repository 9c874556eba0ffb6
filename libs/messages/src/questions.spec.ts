import { v1 } from '@neatroots/proto';
import { FINDINGS_TOPIC, QUESTIONS_TOPIC, makeTopics, type FindingMessage, type QuestionTask, type QuestionTaskMessage } from './index';

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
    expect(QUESTIONS_TOPIC.decode(QUESTIONS_TOPIC.encode(t))).toEqual(t);
    expect(makeTopics('x').questions.name).toBe('x.questions');
  });

  it('carries a plan task', () => {
    const t: QuestionTaskMessage = { id: 'p1', type: 'plan', project: 'p', run_id: 'r1', workflow: 'w', plan: { project: 'p', workflow: 'w', tools: [{ name: 'a' }] }, span_ids: [], final: false, at_ms: 1 };
    expect(QUESTIONS_TOPIC.decode(QUESTIONS_TOPIC.encode(t))).toEqual(t);
  });

  it('refuses a task whose JSON parts are not the shape they must be, naming the field', () => {
    const base = { id: 't2', project: 'p', run_id: 'r', workflow: '', session_id: '', scope: '', anchor: '', context_json: '', span_ids: [], final: false, at_ms: 1, received_ms: 0, plan_json: '' };
    const check = JSON.stringify({ id: 'q', kind: 'yes_no', ask: 'a', scope: 'trace' });
    const decode = (t: Partial<v1.QuestionTask>) => QUESTIONS_TOPIC.decode(v1.QuestionTask.encode({ ...base, type: 'question', check_json: check, evidence_json: '{"spans":[]}', ...t }).finish());
    expect(decode({}).type).toBe('question');
    expect(() => decode({ check_json: '{"id":"q","kind":"rule","ask":"a"}' })).toThrow('question task t2: check_json must be a question check');
    expect(() => decode({ evidence_json: '{}' })).toThrow('question task t2: evidence_json must be evidence with its spans');
    expect(() => decode({ evidence_json: '{' })).toThrow('question task t2: evidence_json is not valid JSON');
    expect(() => decode({ type: 'plan', plan_json: '{"workflow":"w"}' })).toThrow('question task t2: plan_json must be a plan request');
    expect(() => decode({ type: 'other' })).toThrow('question task t2: type must be question or plan, got "other"');
  });

  it('carries a question finding\'s quote, probability and how it is shown', () => {
    const f: FindingMessage = {
      id: 'f1', check_id: 'q', run_id: 'r1', project: 'p', status: 'raised', span_ids: ['s1'], count: 1, action: 'flag', title: 't', guidance: 'g',
      at_ms: 5, kind: 'yes_no', source: 'library', priority: 65, quote: 'the words', probability: 0.9, confidence: 'Very likely (LLM judgment)', answered_by: 'local',
    };
    expect(FINDINGS_TOPIC.decode(FINDINGS_TOPIC.encode(f))).toEqual(f);
  });
});
