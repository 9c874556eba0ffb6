import { agentSpoke, parseSession } from './session';
import { runExternalId, sessionFromRun } from './from-run';

describe('sessionFromRun', () => {
  it('makes turns from the user message, the LLM outputs and the final output, and tool calls on the turn before them', () => {
    const s = sessionFromRun({
      run_id: 'r1',
      workflow: 'refund-agent',
      started_at: '2026-11-30T10:00:00.000Z',
      user_message: 'I want a refund for order 42',
      final_output: 'Your refund is on its way.',
      spans: [
        { type: 'tool', name: 'lookup_order', tool: 'lookup_order', input: { id: 42 }, output: { owner: 'me' }, status: 'ok' },
        { type: 'llm', output: { choices: [{ message: { role: 'assistant', content: 'Let me check your order.' } }] } },
        { type: 'mcp_tool', name: 'issue_refund', tool: 'issue_refund', input: { id: 42 }, output: { content: [{ type: 'text', text: 'ok' }] }, status: 'ok' },
        { type: 'tool', name: 'notify', status: 'error', error: 'smtp down' },
        { type: 'llm', output: 'Your refund is on its way.' },
        { type: 'retrieval', name: 'kb' },
      ],
    });
    expect(s).toEqual({
      external_id: runExternalId('r1'),
      agent: 'refund-agent',
      release_id: null,
      started_at: '2026-11-30T10:00:00.000Z',
      transcript_ref: null,
      turns: [
        { role: 'user', text: 'I want a refund for order 42' },
        { role: 'agent', text: 'Let me check your order.' },
        { role: 'agent', text: 'Your refund is on its way.' },
      ],
      tool_calls: [
        { turn: 0, tool: 'lookup_order', input: { id: 42 }, output: { owner: 'me' }, error: null },
        { turn: 1, tool: 'issue_refund', input: { id: 42 }, output: { content: [{ type: 'text', text: 'ok' }] }, error: null },
        { turn: 1, tool: 'notify', input: null, output: null, error: 'smtp down' },
      ],
    });
    // what it makes is a session the API takes
    expect(parseSession(s)).toEqual(s);
  });

  it('gives a run with tool calls and no words a turn to point at, and a run without words no turns', () => {
    expect(sessionFromRun({ run_id: 'r', workflow: 'w', started_at: null, spans: [{ type: 'tool', tool: 'x' }] }).turns).toEqual([{ role: 'user', text: '' }]);
    expect(sessionFromRun({ run_id: 'r', workflow: 'w', started_at: null, spans: [] })).toMatchObject({ turns: [], tool_calls: [] });
  });

  it('an LLM call that only calls tools says nothing: no agent turn, and its tool arguments are not the agent\'s words', () => {
    const s = sessionFromRun({
      run_id: 'r2',
      workflow: 'pay-agent',
      started_at: null,
      user_message: 'Charge me',
      spans: [
        { type: 'llm', output: { choices: [{ message: { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'charge', arguments: '{"amount":"$14"}' } }] } }] } },
        { type: 'tool', tool: 'charge', input: { amount: '$14' } },
        { type: 'llm', output: { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'send_email', input: { body: 'It is $14' } }] } },
        { type: 'tool', tool: 'send_email', input: { body: 'It is $14' } },
        { type: 'llm', output: { candidates: [{ content: { role: 'model', parts: [{ functionCall: { name: 'log', args: {} } }] } }] } },
      ],
    });
    expect(s.turns).toEqual([{ role: 'user', text: 'Charge me' }]);
    expect(s.tool_calls.map((c) => [c.turn, c.tool])).toEqual([[0, 'charge'], [0, 'send_email']]);
    expect(agentSpoke(s)).toBe(false);
  });

  it('keeps the text of a message that also calls a tool, and a structured output as JSON', () => {
    const s = sessionFromRun({
      run_id: 'r3',
      workflow: 'pay-agent',
      started_at: null,
      final_output: { refund: 42 },
      spans: [
        { type: 'llm', output: { role: 'assistant', content: [{ type: 'text', text: 'Charging now.' }, { type: 'tool_use', id: 't1', name: 'charge', input: { amount: 5 } }] } },
        { type: 'llm', output: { choices: [{ message: { role: 'assistant', content: 'Done.', tool_calls: [{ id: 'c2', type: 'function', function: { name: 'x', arguments: '{}' } }] } }] } },
      ],
    });
    expect(s.turns).toEqual([
      { role: 'agent', text: 'Charging now.' },
      { role: 'agent', text: 'Done.' },
      { role: 'agent', text: '{"refund":42}' },
    ]);
  });
});
