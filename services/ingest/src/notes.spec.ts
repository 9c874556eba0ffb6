import type { Note } from '@neatroots/messages';
import { NoteHub, type NoteStream } from './notes';

function note(id: string, run_id: string, project = 'shop', at_ms = 1): Note {
  return { id, project, run_id, check_id: 'c', finding_id: `f-${id}`, kind: 'note', title: '', text: '', at_ms };
}

function stream(project: string, runId: string): NoteStream & { got: string[] } {
  const got: string[] = [];
  return { project, runId, got, write: (n) => void got.push(n.id) };
}

describe('NoteHub', () => {
  it('routes to the run stream and project-wide streams of the same project only', () => {
    const hub = new NoteHub();
    const run = stream('shop', 'r1');
    const other = stream('shop', 'r2');
    const all = stream('shop', '');
    const bank = stream('bank', '');
    for (const s of [run, other, all, bank]) hub.addStream(s);
    expect(hub.route(note('a', 'r1'))).toBe(2);
    expect(hub.route(note('b', ''))).toBe(3); // a project-wide note reaches every stream of the project
    expect([run.got, other.got, all.got, bank.got]).toEqual([['a', 'b'], ['b'], ['a', 'b'], []]);
  });

  it('keeps a note with no stream for the next take of its run, once, and hands it to a stream that opens', () => {
    const hub = new NoteHub();
    expect(hub.route(note('a', 'r1', 'shop', 2))).toBe(0);
    hub.route(note('b', 'r1', 'shop', 1));
    hub.route(note('b', 'r1', 'shop', 1)); // duplicate id: kept once
    expect(hub.take('bank', ['r1'])).toEqual([]);
    expect(hub.take('shop', ['r1']).map((n) => n.id)).toEqual(['b', 'a']);
    expect(hub.take('shop', ['r1'])).toEqual([]);
    hub.route(note('c', 'r3'));
    const s = stream('shop', 'r3');
    expect(hub.addStream(s).kept.map((n) => n.id)).toEqual(['c']);
  });

  it('bounds notes per run and runs, and expires kept notes', () => {
    let now = 0;
    let dropped = 0;
    const hub = new NoteHub({ maxPerRun: 2, maxRuns: 2, ttlMs: 100, now: () => now, onDropped: (n) => (dropped += n) });
    hub.route(note('a', 'r1'));
    hub.route(note('b', 'r1'));
    hub.route(note('c', 'r1'));
    expect(dropped).toBe(1);
    hub.route(note('d', 'r2'));
    hub.route(note('e', 'r3')); // r1 is the least recently touched: out
    expect(dropped).toBe(3);
    expect(hub.take('shop', ['r1'])).toEqual([]);
    now = 150;
    expect(hub.take('shop', ['r2'])).toEqual([]);
    expect(dropped).toBe(4);
    hub.sweep();
    expect(dropped).toBe(5);
    expect(hub.take('shop', ['r3'])).toEqual([]);
  });

  describe('one note per group per run', () => {
    const grouped = (id: string, run: string, group: string, kind: Note['kind'] = 'note'): Note => ({ ...note(id, run), kind, group });

    it('hands out the first note of a group in a run and holds back the others, telling onGrouped', () => {
      const held: string[] = [];
      const hub = new NoteHub({ onGrouped: (n) => held.push(n.id) });
      const s = stream('shop', '');
      hub.addStream(s);
      hub.route(grouped('rule', 'r1', 'tool-result'));
      hub.route(grouped('question', 'r1', 'tool-result')); // the same problem, from the question service
      hub.route(grouped('other-run', 'r2', 'tool-result'));
      hub.route(grouped('loop', 'r1', 'loop'));
      hub.route(note('no-group', 'r1'));
      expect(s.got).toEqual(['rule', 'other-run', 'loop', 'no-group']);
      expect(held).toEqual(['question']);
    });

    it('lets the group note itself through again (a redelivery), and halts always, without taking the group', () => {
      const hub = new NoteHub();
      const s = stream('shop', 'r1');
      hub.addStream(s);
      hub.route(grouped('h', 'r1', 'loop', 'halt'));
      hub.route(grouped('a', 'r1', 'loop'));
      hub.route(grouped('a', 'r1', 'loop'));
      hub.route(grouped('h2', 'r1', 'loop', 'halt'));
      hub.route(grouped('b', 'r1', 'loop'));
      expect(s.got).toEqual(['h', 'a', 'a', 'h2']);
    });

    it('holds back a grouped note kept for piggybacking too, and never hands the group to the agent', () => {
      const hub = new NoteHub();
      hub.route(grouped('a', 'r1', 'ending'));
      hub.route(grouped('b', 'r1', 'ending'));
      const taken = hub.take('shop', ['r1']);
      expect(taken.map((n) => n.id)).toEqual(['a']);
      expect(taken[0]).not.toHaveProperty('group');
    });

    it('forgets the groups of a run after groupTtlMs or past maxGroupedRuns', () => {
      let now = 0;
      const hub = new NoteHub({ groupTtlMs: 100, maxGroupedRuns: 2, now: () => now });
      const s = stream('shop', '');
      hub.addStream(s);
      hub.route(grouped('a1', 'r1', 'g'));
      now = 150;
      hub.sweep();
      hub.route(grouped('a2', 'r1', 'g')); // r1's group expired: goes
      hub.route(grouped('b1', 'r2', 'g'));
      hub.route(grouped('c1', 'r3', 'g')); // r1 is the least recently noted: forgotten
      hub.route(grouped('a3', 'r1', 'g'));
      hub.route(grouped('c2', 'r3', 'g')); // r3 still remembered: held
      expect(s.got).toEqual(['a1', 'a2', 'b1', 'c1', 'a3']);
    });
  });

  it('stops routing to a removed stream', () => {
    const hub = new NoteHub();
    const s = stream('shop', 'r1');
    const { remove } = hub.addStream(s);
    remove();
    expect(hub.route(note('a', 'r1'))).toBe(0);
    expect(s.got).toEqual([]);
    expect(hub.streamCount).toBe(0);
  });
});
