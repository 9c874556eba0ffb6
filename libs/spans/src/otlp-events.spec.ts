import { otlp } from '@neatroots/proto';
import { mapOtlpExport } from './otlp';
import { exportOf, otlpSpan, spansOf, type SpanSpec } from './otlp-fixtures.test';
import type { RunEnd, RunStart, StreamItem } from './types';

/**
 * Message content sent as span events instead of attributes: the older GenAI conventions'
 * gen_ai.content.prompt / gen_ai.content.completion (Semantic Kernel), and the per-message
 * gen_ai.{system,user,assistant,tool}.message and gen_ai.choice events, with their body as
 * gen_ai.event.content (Azure AI Inference) or as attributes of their own.
 */

const TRACE = '5bf92f3577b34da6a3ce929d0e0e4736';
const ROOT = '10f067aa0ba902b7';
const J = JSON.stringify;

const span = (s: Omit<SpanSpec, 'trace'>): otlp.Span => otlpSpan({ trace: TRACE, ...s });

function map(spans: otlp.Span[]): StreamItem[] {
  const r = mapOtlpExport(exportOf(spans, 'bot'));
  expect(r.rejected).toEqual([]);
  return r.items;
}

const CHAT = { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o' };

describe('mapOtlpExport: message content in span events', () => {
  it('reads gen_ai.content.prompt and gen_ai.content.completion (Semantic Kernel, older conventions)', () => {
    const [s] = spansOf(
      map([
        span({
          id: '10f067aa0ba902c1',
          parent: ROOT,
          name: 'chat.completions gpt-4o',
          attrs: CHAT,
          events: [
            ['gen_ai.content.prompt', { 'gen_ai.prompt': J([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Where is order 7?' }]) }],
            ['gen_ai.content.completion', { 'gen_ai.completion': J([{ role: 'assistant', content: 'It shipped.' }]) }],
          ],
        }),
      ]),
    );
    expect(s).toMatchObject({
      type: 'llm',
      input: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Where is order 7?' },
      ],
      output: [{ role: 'assistant', content: 'It shipped.' }],
    });
  });

  it('reads the message events in order as the input and gen_ai.choice as the output', () => {
    const [s] = spansOf(
      map([
        span({
          id: '10f067aa0ba902c2',
          parent: ROOT,
          name: 'chat gpt-4o',
          attrs: CHAT,
          events: [
            ['gen_ai.system.message', { 'gen_ai.system': 'openai', 'gen_ai.event.content': J({ content: 'You are a refund agent.' }) }],
            ['gen_ai.user.message', { 'gen_ai.system': 'openai', 'gen_ai.event.content': J({ role: 'user', content: 'Refund order 7' }) }],
            // The body as attributes of the event, tool calls as JSON.
            ['gen_ai.assistant.message', { tool_calls: J([{ id: 'call_1', type: 'function', function: { name: 'lookup_order', arguments: '{"id":7}' } }]) }],
            ['gen_ai.tool.message', { id: 'call_1', content: '{"status":"shipped"}' }],
            ['gen_ai.choice', { 'gen_ai.event.content': J({ index: 0, finish_reason: 'stop', message: { content: 'Refunded $50.' } }) }],
          ],
        }),
      ]),
    );
    expect(s.input).toEqual([
      { role: 'system', content: 'You are a refund agent.' },
      { role: 'user', content: 'Refund order 7' },
      { role: 'assistant', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup_order', arguments: '{"id":7}' } }] },
      { role: 'tool', id: 'call_1', content: '{"status":"shipped"}' },
    ]);
    expect(s.output).toEqual([{ role: 'assistant', content: 'Refunded $50.', finish_reason: 'stop' }]);
  });

  it('reads the events only for what the attributes lack', () => {
    const [s] = spansOf(
      map([
        span({
          id: '10f067aa0ba902c3',
          parent: ROOT,
          attrs: { ...CHAT, 'gen_ai.input.messages': J([{ role: 'user', parts: [{ type: 'text', content: 'from the attribute' }] }]) },
          events: [
            ['gen_ai.user.message', { content: 'from the event' }],
            ['gen_ai.choice', { message: J({ content: 'answer from the event' }) }],
          ],
        }),
      ]),
    );
    expect(s.input).toEqual([{ role: 'user', parts: [{ type: 'text', content: 'from the attribute' }] }]);
    expect(s.output).toEqual([{ role: 'assistant', content: 'answer from the event' }]);
  });

  it("gives a root agent span's run its user message and final output from the events, and nothing from events without content", () => {
    const items = map([
      span({
        id: ROOT,
        name: 'invoke_agent refund-agent',
        attrs: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'refund-agent' },
        events: [
          ['gen_ai.user.message', { content: 'Refund order 7' }],
          ['gen_ai.choice', { index: 0, finish_reason: 'stop', message: J({ role: 'assistant', content: 'Refunded $50.' }) }],
        ],
      }),
    ]);
    const start = items.find((i) => i.kind === 'run_start') as { run: RunStart };
    expect(start.run.user_message).toBe('Refund order 7');
    const end = items.find((i) => i.kind === 'run_end') as { run: RunEnd };
    expect(end.run).toMatchObject({ status: 'ok', final_output: 'Refunded $50.' });

    // Content capture off: the events carry no content, and the span no input or output.
    const [bare] = spansOf(
      map([
        span({
          id: '10f067aa0ba902c4',
          parent: ROOT,
          attrs: CHAT,
          events: [
            ['gen_ai.user.message', { 'gen_ai.system': 'openai' }],
            ['gen_ai.choice', { index: 0, finish_reason: 'stop', 'gen_ai.event.content': J({ index: 0, finish_reason: 'stop', message: {} }) }],
          ],
        }),
      ]),
    );
    expect(bare.input).toBeUndefined();
    expect(bare.output).toBeUndefined();
  });
});
