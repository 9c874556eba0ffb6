import { otlp } from '@neatroots/proto';
import { mapOtlpExport } from './otlp';
import { exportOf, otlpSpan, spansOf, type SpanSpec } from './otlp-fixtures.test';
import type { RunEnd, RunStart, StreamItem } from './types';

/**
 * OpenLLMetry (Traceloop) spans, and the Vercel AI SDK's older ai.toolCall spans: what its
 * decorators (@workflow, @agent, @tool, @task) and instrumentations (openai.chat with the
 * flattened gen_ai.prompt.N.* / gen_ai.completion.N.* attributes) record.
 */

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const WF = '00f067aa0ba902b7';
const AGENT = '00f067aa0ba902b8';

const span = (s: Omit<SpanSpec, 'trace'>): otlp.Span => otlpSpan({ trace: TRACE, ...s });

function map(spans: otlp.Span[]): StreamItem[] {
  const r = mapOtlpExport(exportOf(spans, 'tl-svc'));
  expect(r.rejected).toEqual([]);
  return r.items;
}

const J = JSON.stringify;

describe('mapOtlpExport: OpenLLMetry (Traceloop)', () => {
  it('maps a @tool span to a tool call named by traceloop.entity.name, its input and output as JSON', () => {
    const [s] = spansOf(
      map([
        span({
          id: '00f067aa0ba902c1',
          parent: AGENT,
          name: 'lookup_order.tool',
          attrs: {
            'traceloop.span.kind': 'tool',
            'traceloop.entity.name': 'lookup_order',
            'traceloop.workflow.name': 'refund_workflow',
            'traceloop.entity.input': J({ args: [], kwargs: { id: 7 } }),
            'traceloop.entity.output': J({ status: 'shipped' }),
          },
        }),
      ]),
    );
    expect(s).toMatchObject({ type: 'tool', tool: 'lookup_order', input: { args: [], kwargs: { id: 7 } }, output: { status: 'shipped' } });
    // What became a field is not kept twice; the rest stays as sent.
    expect(s.attributes).toEqual({ 'traceloop.span.kind': 'tool', 'traceloop.workflow.name': 'refund_workflow' });
  });

  it('rebuilds a chat span\'s messages from gen_ai.prompt.N.* and gen_ai.completion.N.*, tool calls included', () => {
    const [s] = spansOf(
      map([
        span({
          id: '00f067aa0ba902c2',
          parent: AGENT,
          name: 'openai.chat',
          attrs: {
            'llm.request.type': 'chat',
            'gen_ai.system': 'openai',
            'gen_ai.request.model': 'gpt-4o',
            // Index 10 after index 2: read in number order, not text order.
            'gen_ai.prompt.10.role': 'user',
            'gen_ai.prompt.10.content': 'And order 8?',
            'gen_ai.prompt.0.role': 'system',
            'gen_ai.prompt.0.content': 'You are a refund agent. Never refund over $100.',
            'gen_ai.prompt.1.role': 'user',
            'gen_ai.prompt.1.content': 'Refund order 7 please',
            'gen_ai.prompt.2.role': 'tool',
            'gen_ai.prompt.2.content': '{"status":"shipped"}',
            'gen_ai.prompt.2.tool_call_id': 'call_1',
            'gen_ai.completion.0.role': 'assistant',
            'gen_ai.completion.0.finish_reason': 'tool_calls',
            'gen_ai.completion.0.tool_calls.0.id': 'call_2',
            'gen_ai.completion.0.tool_calls.0.name': 'lookup_order',
            'gen_ai.completion.0.tool_calls.0.arguments': J({ id: 8 }),
            'gen_ai.usage.prompt_tokens': 100,
            'gen_ai.usage.completion_tokens': 20,
            'llm.usage.total_tokens': 120,
          },
        }),
      ]),
    );
    expect(s.type).toBe('llm');
    expect(s.input).toEqual([
      { role: 'system', content: 'You are a refund agent. Never refund over $100.' },
      { role: 'user', content: 'Refund order 7 please' },
      // A message's content stays text even when it looks like JSON.
      { role: 'tool', content: '{"status":"shipped"}', tool_call_id: 'call_1' },
      { role: 'user', content: 'And order 8?' },
    ]);
    expect(s.output).toEqual([{ role: 'assistant', finish_reason: 'tool_calls', tool_calls: [{ id: 'call_2', name: 'lookup_order', arguments: { id: 8 } }] }]);
    expect(s.usage).toEqual({ input_tokens: 100, output_tokens: 20, total_tokens: 120 });
    expect(s.model).toBe('gpt-4o');
    expect(Object.keys(s.attributes ?? {}).filter((k) => k.startsWith('gen_ai.prompt') || k.startsWith('gen_ai.completion'))).toEqual([]);
  });

  it('reads a completion\'s text, and a content given as a JSON list of parts', () => {
    const [s] = spansOf(
      map([
        span({
          id: '00f067aa0ba902c3',
          parent: AGENT,
          name: 'anthropic.chat',
          attrs: {
            'llm.request.type': 'completion',
            'gen_ai.prompt.0.role': 'user',
            'gen_ai.prompt.0.content': J([{ type: 'text', text: 'Hi' }]),
            'gen_ai.completion.0.role': 'assistant',
            'gen_ai.completion.0.content': 'Hello!',
          },
        }),
      ]),
    );
    expect(s).toMatchObject({ type: 'llm', input: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }], output: [{ role: 'assistant', content: 'Hello!' }] });
  });

  it('makes a parentless workflow span the run\'s root: its session, its run start and its end', () => {
    const items = map([
      span({
        id: AGENT,
        parent: WF,
        name: 'refund_agent.agent',
        attrs: { 'traceloop.span.kind': 'agent', 'traceloop.entity.name': 'refund_agent', 'traceloop.entity.output': J('Your refund of $50 is done.') },
      }),
      span({ id: '00f067aa0ba902c4', parent: AGENT, name: 'check_policy.task', attrs: { 'traceloop.span.kind': 'task', 'traceloop.entity.name': 'check_policy' } }),
      span({
        id: '00f067aa0ba902c5',
        parent: AGENT,
        name: 'refund.tool',
        attrs: { 'traceloop.span.kind': 'tool', 'traceloop.entity.name': 'refund', 'traceloop.entity.input': J({ args: [], kwargs: { id: 7, amount: 50 } }) },
        status: { code: otlp.Status_StatusCode.STATUS_CODE_ERROR, message: 'Payment gateway timed out' },
      }),
      span({
        id: WF,
        name: 'refund_workflow.workflow',
        attrs: {
          'traceloop.span.kind': 'workflow',
          'traceloop.entity.name': 'refund_workflow',
          'traceloop.entity.input': J({ args: ['Refund order 7 please'], kwargs: {} }),
          // The return value as JSON: a string is that string, not its quotes.
          'traceloop.entity.output': J('Your refund of $50 is done.'),
          'traceloop.association.properties.session_id': 'tl-sess-1',
        },
      }),
    ]);
    const spans = spansOf(items);
    expect(spans.map((s) => [s.name, s.type, s.tool])).toEqual([
      ['refund_agent.agent', 'agent', undefined],
      ['check_policy.task', 'other', undefined],
      ['refund.tool', 'tool', 'refund'],
      ['refund_workflow.workflow', 'agent', undefined],
    ]);
    expect(spans[2]).toMatchObject({ status: 'error', error: 'Payment gateway timed out', input: { args: [], kwargs: { id: 7, amount: 50 } } });
    const root = spans[3];
    expect(root).toMatchObject({ session_id: 'tl-sess-1', input: { args: ['Refund order 7 please'], kwargs: {} }, output: 'Your refund of $50 is done.' });
    expect(root.attributes?.['traceloop.association.properties.session_id']).toBeUndefined();
    const start = items.find((i) => i.kind === 'run_start') as { run: RunStart } | undefined;
    // What the user asked: the workflow's one text argument.
    expect(start?.run).toMatchObject({ run_id: TRACE, session_id: 'tl-sess-1', user_message: 'Refund order 7 please' });
    const ends = items.filter((i) => i.kind === 'run_end') as { run: RunEnd }[];
    expect(ends.map((e) => e.run)).toEqual([expect.objectContaining({ run_id: TRACE, status: 'ok', final_output: 'Your refund of $50 is done.' })]);
    // The run_end comes right after its root span.
    expect(items[items.length - 1].kind).toBe('run_end');
  });
});

describe('mapOtlpExport: what the user asked, of a Traceloop workflow\'s {args, kwargs} input', () => {
  const userOf = (input: unknown): string | undefined => {
    const items = map([span({ id: WF, name: 'support.workflow', attrs: { 'traceloop.span.kind': 'workflow', 'traceloop.entity.name': 'support', 'traceloop.entity.input': J(input) } })]);
    const start = items.find((i) => i.kind === 'run_start') as { run: RunStart } | undefined;
    return start?.run.user_message;
  };

  it('takes a keyword argument that names it, a message list\'s last user message, or the one text argument', () => {
    expect(userOf({ args: [], kwargs: { question: 'Where is my order?', order_id: '7' } })).toBe('Where is my order?');
    // a keyword argument that names the question wins over other texts
    expect(userOf({ args: ['tenant-a'], kwargs: { query: 'Cancel my plan' } })).toBe('Cancel my plan');
    expect(userOf({ args: [[{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi there' }, { role: 'assistant', content: 'Hello' }]], kwargs: {} })).toBe('Hi there');
    expect(userOf({ args: [{ messages: [{ role: 'user', content: 'From the state' }] }], kwargs: { thread: 3 } })).toBe('From the state');
    expect(userOf({ args: [42, 'Only text here', null], kwargs: { retries: 2 } })).toBe('Only text here');
    expect(userOf({ kwargs: { message: 'kwargs alone' } })).toBe('kwargs alone');
  });

  it('says nothing when the call does not say which text the user wrote', () => {
    expect(userOf({ args: ['tenant-a', 'Where is my order?'], kwargs: {} })).toBeUndefined();
    expect(userOf({ args: [], kwargs: { order_id: 7 } })).toBeUndefined();
    expect(userOf({ args: ['   '], kwargs: {} })).toBeUndefined();
    // not a recorded call: another key beside args and kwargs
    expect(userOf({ args: ['x'], kwargs: {}, extra: 1 })).toBeUndefined();
  });
});

describe('mapOtlpExport: the Vercel AI SDK\'s ai.toolCall spans', () => {
  it('maps ai.toolCall.name, .args and .result to a tool call', () => {
    const [s] = spansOf(
      map([
        span({
          id: '00f067aa0ba902d1',
          parent: AGENT,
          name: 'ai.toolCall',
          attrs: {
            'operation.name': 'ai.toolCall',
            'ai.operationId': 'ai.toolCall',
            'ai.toolCall.name': 'get_weather',
            'ai.toolCall.id': 'call-123',
            'ai.toolCall.args': J({ city: 'Montreal' }),
            'ai.toolCall.result': J('Sunny, 25°C'),
          },
        }),
      ]),
    );
    expect(s).toMatchObject({ type: 'tool', tool: 'get_weather', input: { city: 'Montreal' }, output: 'Sunny, 25°C' });
    expect(s.attributes).toEqual({ 'operation.name': 'ai.toolCall', 'ai.operationId': 'ai.toolCall', 'ai.toolCall.id': 'call-123' });
  });
});
