import { v1 } from '@neatroots/proto';
import { SpanValidationError, type Envelope, type Span } from '@neatroots/spans';
import { DELIVERIES_TOPIC, EVENTS_TOPIC, FINDINGS_TOPIC, NOTES_TOPIC, makeTopics, type FindingMessage, type Note } from './index';

const fullSpan: Span = {
  run_id: 'r1',
  span_id: 's1',
  parent_id: 's0',
  type: 'mcp_tool',
  name: 'tools/call search',
  tool: 'search',
  input: { q: 'refund policy', limit: 3, nested: [1, null, { a: true }] },
  output: { content: [{ type: 'text', text: 'found 2' }] },
  error: 'boom',
  status: 'error',
  start_ms: 1700000000123.457,
  end_ms: 1700000000200,
  usage: { input_tokens: 10, output_tokens: 5, total_tokens: 15, cost: 0.001 },
  model: 'gpt-x',
  project: 'p',
  workflow: 'w',
  session_id: 'sess',
  attributes: { 'gen_ai.system': 'openai', n: 1 },
};

describe('bus topics', () => {
  it('are named by prefix', () => {
    expect([EVENTS_TOPIC.name, FINDINGS_TOPIC.name, NOTES_TOPIC.name, DELIVERIES_TOPIC.name]).toEqual([
      'neatroots.events', 'neatroots.findings', 'neatroots.notes', 'neatroots.deliveries',
    ]);
    expect(makeTopics('staging.nr').events.name).toBe('staging.nr.events');
  });

  it('encode and decode an envelope', () => {
    const env: Envelope = { project: 'p', received_ms: 1700000000001.5, item: { kind: 'span', span: fullSpan } };
    expect(EVENTS_TOPIC.decode(EVENTS_TOPIC.encode(env))).toEqual(env);
  });

  it('carry the group of a note beside it, never inside the note an agent is sent', () => {
    const note: Note = { id: 'n1', project: 'p', run_id: 'r1', check_id: 'c', finding_id: 'f', kind: 'note', title: 't', text: 'x', at_ms: 5 };
    const decoded = NOTES_TOPIC.decode(NOTES_TOPIC.encode({ ...note, group: 'tool-result' }));
    expect(decoded).toEqual({ ...note, group: 'tool-result' });
    expect(NOTES_TOPIC.decode(NOTES_TOPIC.encode(note))).toEqual(note);
    expect(v1.NoteEnvelope.decode(NOTES_TOPIC.encode({ ...note, group: 'g' })).note).toEqual(note);
  });

  it('refuse to decode an envelope without its event', () => {
    const bytes = v1.Envelope.encode({ project: 'p', received_ms: 1 }).finish();
    expect(() => EVENTS_TOPIC.decode(bytes)).toThrow(SpanValidationError);
  });

  it('decode events without validating them again (ingest did), but refuse JSON text that does not parse', () => {
    // A span ingest would refuse (status "maybe"): on the topic it can only have been written
    // by something else; the reader decodes it as written instead of normalising it again.
    const written = (span: Partial<v1.Span>) =>
      v1.Envelope.encode({ project: 'p', received_ms: 1, event: { kind: { $case: 'span', value: v1.Span.fromPartial({ run_id: 'r', span_id: 's', type: 'llm', ...span }) } } }).finish();
    expect(EVENTS_TOPIC.decode(written({ status: 'maybe' }))).toEqual({ project: 'p', received_ms: 1, item: { kind: 'span', span: { run_id: 'r', span_id: 's', type: 'llm', status: 'maybe' } } });
    expect(() => EVENTS_TOPIC.decode(written({ input_json: '{' }))).toThrow(expect.objectContaining({ field: 'input_json' }));
  });

  it('write the bytes the earlier codec wrote (a topic written before still reads)', () => {
    // The neatroots.v1 messages built by hand, field by field, as the codec in @neatroots/spans built them.
    const env: Envelope = { project: 'p', received_ms: 2, item: { kind: 'span', span: { run_id: 'r', span_id: 's', type: 'tool', name: 'x', tool: 'x', status: 'ok', input: { a: 1 } } } };
    const byHand = v1.Envelope.encode({
      project: 'p', received_ms: 2,
      event: { kind: { $case: 'span', value: { run_id: 'r', span_id: 's', parent_id: '', type: 'tool', name: 'x', tool: 'x', status: 'ok', model: '', project: '', workflow: '', session_id: '', input_json: '{"a":1}' } } },
    }).finish();
    expect(Buffer.from(EVENTS_TOPIC.encode(env)).toString('hex')).toBe(Buffer.from(byHand).toString('hex'));
    expect(EVENTS_TOPIC.decode(byHand)).toEqual(env);
  });

  it('encode and decode a finding, a note and a delivery', () => {
    const finding: FindingMessage = {
      id: 'f1', check_id: 'repeated-tool-call', run_id: 'r1', project: 'p', workflow: 'w', status: 'raised',
      span_ids: ['s3', 's4', 's5'], count: 3, action: 'halt', halt_suppressed: true, title: 't', guidance: 'g',
      at_ms: 1700000000123, group: 'loop', kind: 'rule', source: 'library', received_ms: 1700000000100,
    };
    expect(FINDINGS_TOPIC.decode(FINDINGS_TOPIC.encode(finding))).toEqual(finding);
    // priority travels too: the most specific check of a group heads its problem.
    const withPriority = { ...finding, priority: 5 };
    expect(FINDINGS_TOPIC.decode(FINDINGS_TOPIC.encode(withPriority))).toEqual(withPriority);

    const note: Note = {
      id: 'n1', project: 'p', run_id: 'r1', check_id: 'c', finding_id: 'f1', kind: 'halt', title: 't', text: 'stop', at_ms: 5,
    };
    expect(NOTES_TOPIC.decode(NOTES_TOPIC.encode(note))).toEqual(note);
    const delivered = { note_id: 'n1', finding_id: 'f1', project: 'p', at_ms: 7 };
    expect(DELIVERIES_TOPIC.decode(DELIVERIES_TOPIC.encode(delivered))).toEqual(delivered);
  });

  it('reads an unknown note kind as a plain note, never as a halt', () => {
    const bytes = v1.NoteEnvelope.encode(v1.NoteEnvelope.fromPartial({ note: { id: 'n', kind: 'shout' } })).finish();
    expect(NOTES_TOPIC.decode(bytes).kind).toBe('note');
  });
});
