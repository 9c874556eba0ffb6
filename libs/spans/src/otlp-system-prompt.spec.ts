import { otlp } from '@neatroots/proto';
import { mapOtlpExport } from './otlp';
import type { RunStart } from './types';

/**
 * A run's system prompt is all of its instructions: system-prompt-violation checks the rules it
 * holds ({rules}), so a rule left out is never checked.
 */

function systemPrompt(instructions: unknown): string | undefined {
  const s = otlp.Span.fromPartial({
    trace_id: Buffer.from('0af7651916cd43dd8448eb211c80319c', 'hex'),
    span_id: Buffer.from('b7ad6b7169203331', 'hex'),
    name: 'invoke_agent support-agent',
    start_time_unix_nano: '1700000000000000000',
    end_time_unix_nano: '1700000001000000000',
    attributes: [
      { key: 'gen_ai.operation.name', value: { value: { $case: 'string_value', value: 'invoke_agent' } } },
      { key: 'gen_ai.system_instructions', value: { value: { $case: 'string_value', value: typeof instructions === 'string' ? instructions : JSON.stringify(instructions) } } },
    ],
  });
  const items = mapOtlpExport({ resource_spans: [{ scope_spans: [{ spans: [s], schema_url: '' }], schema_url: '' }] }).items;
  return items.find((i): i is { kind: 'run_start'; run: RunStart } => i.kind === 'run_start')?.run.system_prompt;
}

describe('mapOtlpExport: the system prompt from gen_ai.system_instructions', () => {
  it('joins every text part, a blank line between them (not the last part only)', () => {
    expect(
      systemPrompt([
        { type: 'text', content: 'You are a support agent.' },
        { type: 'text', content: 'Never refund over $100.' },
      ]),
    ).toBe('You are a support agent.\n\nNever refund over $100.');
  });

  it('joins every system (and developer) message of a list of messages, and nothing else', () => {
    expect(
      systemPrompt([
        { role: 'system', content: 'You are a support agent.' },
        { role: 'user', content: 'Refund order 7' },
        { role: 'developer', parts: [{ type: 'text', content: 'Never refund over $100.' }] },
        { role: 'assistant', content: 'Sure.' },
      ]),
    ).toBe('You are a support agent.\n\nNever refund over $100.');
  });

  it('keeps one text as given, and leaves out parts that are not text', () => {
    expect(systemPrompt('You are a support agent. Never refund over $100.')).toBe('You are a support agent. Never refund over $100.');
    expect(systemPrompt([{ type: 'text', content: 'Be brief.' }, { type: 'image', uri: 'https://example.com/logo.png' }, { type: 'text', text: 'Answer in English.' }])).toBe(
      'Be brief.\n\nAnswer in English.',
    );
  });
});
