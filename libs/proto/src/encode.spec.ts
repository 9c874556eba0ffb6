import { encodeMessage } from './encode';
import * as v1 from './v1';

const finding = (id: string, title: string, count = 1): v1.FindingEvent =>
  v1.FindingEvent.fromPartial({ id, project: 'p', run_id: 'run-1', check_id: 'loop', status: 'raised', span_ids: ['s1', 's2'], count, title, at_ms: 1 });

describe('encodeMessage (one writer kept between calls)', () => {
  it('writes the same bytes as a fresh writer, large and small messages in turn', () => {
    for (const title of ['short', 'x'.repeat(70_000), 'é'.repeat(3), 'y'.repeat(9_000), '']) {
      const m = finding('f1', title);
      expect(Buffer.from(encodeMessage(v1.FindingEvent, m))).toEqual(Buffer.from(v1.FindingEvent.encode(m).finish()));
    }
  });

  it('hands back bytes of their own: a later encode does not change an earlier result', () => {
    const first = encodeMessage(v1.FindingEvent, finding('f1', 'a'.repeat(500)));
    const copy = Buffer.from(first);
    encodeMessage(v1.FindingEvent, finding('f2', 'b'.repeat(500)));
    expect(Buffer.from(first)).toEqual(copy);
    expect(v1.FindingEvent.decode(first).title).toBe('a'.repeat(500));
  });

  it('does not carry a message cut short by a throw into the next one', () => {
    // An int32 that is not a whole number: the writer throws part-way through the message.
    expect(() => encodeMessage(v1.FindingEvent, finding('f1', 'half written', 1.5))).toThrow(/int32/);
    const next = encodeMessage(v1.FindingEvent, finding('f2', 'whole'));
    expect(v1.FindingEvent.decode(next)).toMatchObject({ id: 'f2', title: 'whole', count: 1 });
    expect(Buffer.from(next)).toEqual(Buffer.from(v1.FindingEvent.encode(finding('f2', 'whole')).finish()));
  });
});
