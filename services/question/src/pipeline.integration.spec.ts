/**
 * The rule-engine service hands the question checks that are due to the question service over
 * the bus; the question service answers them through the model and publishes findings and
 * notes beside the rule engine's. In-process bus and windows, a real HTTP model server.
 */
import { compileRuleSet, parseCheck, type QuestionCheck, type RunWindow } from '@neatroots/checks';
import { MemoryBus, MemoryWindowStore, openAiChatModel } from '@neatroots/platform';
import { LOCAL_LLM_POLICY, QuestionScheduler, questionSet, type QuestionFindingsWindow, type SchedulerWindow } from '@neatroots/questions';
import { startRuleEngine } from '@neatroots/rule-engine';
import { makeTopics, type FindingMessage, type Note } from '@neatroots/messages';
import { type Envelope } from '@neatroots/spans';
import { judgeReply, startFakeOpenAI, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { startQuestionService } from './service';

let fake: FakeOpenAI;
beforeAll(async () => {
  fake = await startFakeOpenAI((call) =>
    call.kind === 'judge'
      ? judgeReply(call, (q) => (q.evidence.includes('-40') ? { p: 0.95, quote: '"amount":-40' } : { p: 0.05 }))
      : call.kind === 'second_look'
        ? { json: { holds: true, quote: '"amount":-40' } }
        : { content: 'You sent a negative amount; refunds take positive amounts.' },
  );
});
afterAll(() => fake.close());

it('runs question checks beside the rules, through the question service, with the local LLM cost policy', async () => {
  const topics = makeTopics('pipe');
  const bus = new MemoryBus({ onError: () => undefined });
  const q = parseCheck(
    { id: 'negative-amount', kind: 'yes_no', scope: 'span', ask: 'Did this call pass a negative amount?', evidence: { spans: { tool: ['refund'] } } },
    'test.yaml',
    'user',
  ) as QuestionCheck;
  const rule = parseCheck({ id: 'errs', kind: 'rule', rule: { type: 'errors', span: { type: ['tool'] }, at_least: 2 } }, 'test.yaml', 'user');
  const set = questionSet([q, rule]);
  const rules = compileRuleSet([q, rule], () => ({ test: () => false }));
  const model = openAiChatModel({ role: 'local', baseURL: fake.url, model: 'llama-test' });
  // What the question service reports as published (the module times it: neatroots_finding_delay_seconds).
  const reported: FindingMessage[] = [];
  const service = await startQuestionService({
    bus, windows: new MemoryWindowStore<QuestionFindingsWindow>(), models: { local: model }, topics,
    onFindingsPublished: (f) => void reported.push(...f),
  });
  const engine = await startRuleEngine({
    bus,
    windows: new MemoryWindowStore<RunWindow>(),
    rules: () => rules,
    topics,
    questions: { scheduler: new QuestionScheduler({ windows: new MemoryWindowStore<SchedulerWindow>(), questions: () => set, policy: service.answerer.localStandsIn() ? LOCAL_LLM_POLICY : undefined }), topic: topics.questions },
  });
  const findings: FindingMessage[] = [];
  const notes: Note[] = [];
  await bus.subscribe(topics.findings, { group: 't' }, async (b) => void findings.push(...b.records.map((r) => r.value)));
  await bus.subscribe(topics.notes, { group: 't' }, async (b) => void notes.push(...b.records.map((r) => r.value)));

  const t = Date.now();
  const env = (item: Envelope['item'], at: number): Envelope => ({ project: 'p', received_ms: at, item });
  const span = (id: string, amount: number, status: 'ok' | 'error' = 'ok') =>
    env({ kind: 'span', span: { run_id: 'r1', span_id: id, type: 'tool', name: 'refund', tool: 'refund', input: { amount }, output: status === 'ok' ? 'ok' : undefined, error: status === 'error' ? 'declined' : undefined, status } }, t);
  await bus.publish(topics.events, [span('s1', 10)].map((e) => ({ key: 'r1', value: e })));
  await bus.idle();
  // Within the local LLM's gap: s2 and s3 wait, and at run end only the newest (s3) is asked.
  const end = env({ kind: 'run_end', run: { event: 'run_end', run_id: 'r1', status: 'ok', final_output: 'Refunded.' } }, t + 10);
  await bus.publish(topics.events, [span('s2', -40, 'error'), span('s3', -40, 'error'), end].map((e) => ({ key: 'r1', value: e })));
  await bus.idle();
  await service.idle();
  await bus.idle();

  expect(findings.map((f) => [f.check_id, f.status]).sort()).toEqual([
    ['errs', 'raised'],
    ['negative-amount', 'raised'],
  ]);
  const qf = findings.find((f) => f.check_id === 'negative-amount')!;
  expect(qf).toMatchObject({ quote: '"amount":-40', confidence: 'Very likely (LLM judgment)', answered_by: 'local', span_ids: ['s3'] });
  // The question finding, with the receipt time of what it was asked at (the run's end).
  expect(reported.map((f) => [f.check_id, f.status, f.kind, f.received_ms])).toEqual([['negative-amount', 'raised', 'yes_no', t + 10]]);
  // No guidance on the check: the LLM wrote the note.
  expect(notes.find((n) => n.check_id === 'negative-amount')?.text).toBe('You sent a negative amount; refunds take positive amounts.');
  expect(engine.metrics.questions).toBe(2);
  await engine.close();
  await service.close();
  await bus.close();
});
