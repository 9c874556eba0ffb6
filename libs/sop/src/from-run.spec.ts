import { parseSession } from './session';
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
});
