import type { Session } from '../session';
import { DEFAULT_SUBJECT_CHARS, renderSubject } from './prompt';

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

describe('renderSubject of a long session', () => {
  const turn = (i: number) => ({ role: i % 2 ? ('agent' as const) : ('user' as const), text: `Turn ${i}: ${'words of the conversation '.repeat(20)}` });
  const long: Session = {
    external_id: null, agent: 'a', release_id: null, started_at: null, transcript_ref: null,
    turns: Array.from({ length: 200 }, (_, i) => turn(i)),
    tool_calls: Array.from({ length: 50 }, (_, k) => ({ turn: 4 * k + 1, tool: 'lookup', input: { k }, output: { ok: true }, error: null })),
  };

  it('stays within the budget, keeping the first and last turns under their own numbers and saying what is left out', () => {
    const out = renderSubject(long);
    expect(out.length).toBeLessThanOrEqual(DEFAULT_SUBJECT_CHARS);
    expect(DEFAULT_SUBJECT_CHARS).toBe(16_000);
    const lines = out.split('\n');
    expect(lines[0]).toMatch(/^\[0\] user: Turn 0: /);
    expect(lines[lines.length - 1]).toMatch(/^\[199\] agent: Turn 199: /);
    const notes = lines.filter((l) => l.startsWith('[…'));
    expect(notes).toHaveLength(1);
    const m = /^\[… (\d+) turns \((\d+) to (\d+)\) and (\d+) tool calls, ([\d,]+) characters, are left out: the session is too long …\]$/.exec(notes[0])!;
    expect(m).not.toBeNull();
    const [left, first, last, calls] = [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4])];
    expect(last - first + 1).toBe(left);
    // Every turn is either shown, under its own number, or counted as left out.
    const shown = lines.map((l) => /^\[(\d+)\] /.exec(l)?.[1]).filter((n): n is string => n !== undefined).map(Number);
    expect(shown).toEqual([...Array.from({ length: first }, (_, i) => i), ...Array.from({ length: 199 - last }, (_, i) => last + 1 + i)]);
    expect(shown.length + left).toBe(200);
    expect(calls).toBe(long.tool_calls.filter((c) => c.turn >= first && c.turn <= last).length);
    expect(Number(m[5].replace(/,/g, ''))).toBeGreaterThan(renderSubject(long, 10_000_000).length - DEFAULT_SUBJECT_CHARS);
    // Both ends get a share: the opening (routing) and the end (the goal).
    expect(first).toBeGreaterThan(5);
    expect(199 - last).toBeGreaterThan(5);
  });

  it('keeps the start of a last turn too long for the budget, with its number', () => {
    const s: Session = { ...long, turns: [...long.turns.slice(0, 10), { role: 'agent', text: 'Goodbye. '.repeat(1000) }], tool_calls: Array.from({ length: 40 }, () => ({ turn: 10, tool: 'note', input: 'x'.repeat(400), output: null, error: null })) };
    const out = renderSubject(s, 3_000);
    expect(out.length).toBeLessThanOrEqual(3_000);
    expect(out).toMatch(/^\[0\] user: /);
    expect(out).toMatch(/\n\[10\] agent: Goodbye\. Goodbye\./);
  });

  it('leaves a session within the budget whole', () => {
    expect(renderSubject(long, 10_000_000)).not.toContain('are left out');
    expect(renderSubject(long, 10_000_000).split('\n').filter((l) => /^\[\d+\] /.test(l))).toHaveLength(200);
  });
});
