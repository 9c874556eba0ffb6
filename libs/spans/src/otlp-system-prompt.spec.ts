import { mapOtlpExport } from './otlp';
import { exportOf, otlpSpan, runStarts } from './otlp-fixtures.test';

/**
 * A run's system prompt is all of its instructions: system-prompt-violation checks the rules it
 * holds ({rules}), so a rule left out is never checked.
 */

function systemPrompt(instructions: unknown): string | undefined {
  const s = otlpSpan({
    trace: '0af7651916cd43dd8448eb211c80319c',
    id: 'b7ad6b7169203331',
    name: 'invoke_agent support-agent',
    attrs: {
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.system_instructions': typeof instructions === 'string' ? instructions : JSON.stringify(instructions),
    },
  });
  return runStarts(mapOtlpExport(exportOf([s], null)).items)[0]?.system_prompt;
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
