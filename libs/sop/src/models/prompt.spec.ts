import type { Session } from '../session';
import { renderSubject } from './prompt';

describe('renderSubject', () => {
  it('numbers the turns as evidence cites them, with each tool call under its turn', () => {
    const s: Session = {
      external_id: null, agent: 'a', release_id: null, started_at: null, transcript_ref: null,
      turns: [
        { role: 'user', text: 'I want   a\npizza.' },
        { role: 'agent', text: 'Let me look you up.' },
      ],
      tool_calls: [
        { turn: 1, tool: 'lookup_account', input: { phone: '555' }, output: { id: 7 }, error: null },
        { turn: 1, tool: 'charge', input: null, output: null, error: 'declined' },
      ],
    };
    expect(renderSubject(s)).toBe(
      '[0] user: I want a pizza.\n[1] agent: Let me look you up.\n    (tool call) lookup_account {"phone":"555"} -> {"id":7}\n    (tool call) charge -> error declined',
    );
  });
});
