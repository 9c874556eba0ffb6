import { mapOtlpExport } from './otlp';
import { exportOf, otlpSpan, runEnds, runStarts } from './otlp-fixtures.test';
import type { RunEnd, RunStart } from './types';

/**
 * The user's message and the final answer of a run whose outermost span is an OpenInference
 * AGENT or CHAIN (LangChain, LangGraph): their input.value and output.value are often the
 * graph's state, `{"messages": [...]}`, with the user's words first and the answer last.
 */

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const J = JSON.stringify;

function run(kind: string, input: unknown, output: unknown): { start?: RunStart; end?: RunEnd } {
  const s = otlpSpan({
    trace: TRACE,
    id: 'b7ad6b7169203331',
    name: 'LangGraph',
    attrs: {
      'openinference.span.kind': kind,
      'input.value': J(input),
      'input.mime_type': 'application/json',
      'output.value': J(output),
      'output.mime_type': 'application/json',
    },
  });
  const items = mapOtlpExport(exportOf([s], null)).items;
  return { start: runStarts(items)[0], end: runEnds(items)[0] };
}

describe('mapOtlpExport: messages inside an OpenInference input and output', () => {
  it("reads the user's message and the answer out of {\"messages\": [...]} (the audit's t2 AGENT and CHAIN roots)", () => {
    for (const kind of ['AGENT', 'CHAIN']) {
      const { start, end } = run(
        kind,
        { messages: [{ role: 'user', content: 'Refund order 7 please' }] },
        { messages: [{ role: 'user', content: 'Refund order 7 please' }, { role: 'assistant', content: 'Your refund of $50 is done.' }] },
      );
      expect(start?.user_message).toBe('Refund order 7 please');
      // The answer, not the whole state with the user's own words in it.
      expect(end).toMatchObject({ status: 'ok', final_output: 'Your refund of $50 is done.' });
    }
  });

  it("reads LangChain's [role, text] pairs and its human and ai messages, serialized or not", () => {
    const pairs = run('CHAIN', { messages: [['user', 'Where is order 7?']] }, { messages: [['human', 'Where is order 7?'], ['ai', 'It shipped on Monday.']] });
    expect(pairs.start?.user_message).toBe('Where is order 7?');
    expect(pairs.end?.final_output).toBe('It shipped on Monday.');
    const typed = run(
      'CHAIN',
      { messages: [{ type: 'system', content: 'You are a support agent.' }, { type: 'human', content: 'Where is order 7?' }] },
      {
        messages: [
          { type: 'human', content: 'Where is order 7?' },
          { lc: 1, type: 'constructor', id: ['langchain', 'schema', 'messages', 'AIMessage'], kwargs: { content: 'It shipped on Monday.', type: 'ai' } },
          { type: 'tool', content: '{"status":"shipped"}' },
        ],
      },
    );
    expect(typed.start?.user_message).toBe('Where is order 7?');
    expect(typed.end?.final_output).toBe('It shipped on Monday.');
  });

  it('keeps an output with no assistant message as given, and a chat request\'s last user message as the user\'s', () => {
    const { start, end } = run('AGENT', { model: 'gpt-4o', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }] }, { messages: [], state: 'done' });
    expect(start?.user_message).toBe('Hi');
    expect(end?.final_output).toEqual({ messages: [], state: 'done' });
  });
});
