import { v1 } from '@neatroots/proto';
import { SpanValidationError } from './errors';
import type { Envelope, Span, StreamItem } from './types';
import {
  DELIVERIES_TOPIC,
  EVENTS_TOPIC,
  FINDINGS_TOPIC,
  NOTES_TOPIC,
  eventToItem,
  itemToEvent,
  makeTopics,
  spanFromProto,
  spanToProto,
  type FindingMessage,
  type Note,
} from './wire';

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

function protoRoundTrip(ev: v1.Event): v1.Event {
  return v1.Event.decode(v1.Event.encode(ev).finish());
}

describe('span <-> neatroots.v1.Span', () => {
  it('round-trips every field through protobuf bytes', () => {
    const back = eventToItem(protoRoundTrip(itemToEvent({ kind: 'span', span: fullSpan })));
    expect(back).toEqual({ kind: 'span', span: fullSpan });
  });

  it('carries input/output/attributes as JSON text', () => {
    const msg = spanToProto(fullSpan);
    expect(JSON.parse(msg.input_json as string)).toEqual(fullSpan.input);
    expect(JSON.parse(msg.attributes_json as string)).toEqual(fullSpan.attributes);
    expect(msg.usage).toEqual(fullSpan.usage);
  });

  it('keeps falsy JSON values (0, false, "", null) distinct from absent', () => {
    for (const v of [0, false, '', null]) {
      const s = spanFromProto(v1.Span.decode(v1.Span.encode(spanToProto({ ...fullSpan, output: v })).finish()));
      expect(s.output).toBe(v);
    }
    const none = spanFromProto(spanToProto({ run_id: 'r', span_id: 's', type: 'llm', name: 'llm', status: 'ok' }));
    expect('output' in none).toBe(false);
    expect('input' in none).toBe(false);
  });

  it('reads empty proto strings as absent and applies the span defaults', () => {
    const msg = v1.Span.fromPartial({ run_id: 'r', span_id: 's', type: 'tool', tool: 'lookup', error: 'failed' });
    expect(spanFromProto(msg)).toEqual({
      run_id: 'r', span_id: 's', type: 'tool', name: 'lookup', tool: 'lookup', error: 'failed', status: 'error',
    });
  });

  it('validates like normalizeSpan, naming the field', () => {
    const missingRun = v1.Span.fromPartial({ span_id: 's', type: 'llm' });
    expect(() => spanFromProto(missingRun)).toThrow(new SpanValidationError('run_id', 'is required'));
    const badType = v1.Span.fromPartial({ run_id: 'r', span_id: 's', type: 'banana' });
    expect(() => spanFromProto(badType)).toThrow(/^type: must be one of/);
    const badJson = v1.Span.fromPartial({ run_id: 'r', span_id: 's', type: 'llm', input_json: '{nope' });
    try {
      spanFromProto(badJson);
      throw new Error('expected a validation error');
    } catch (e) {
      expect(e).toBeInstanceOf(SpanValidationError);
      expect((e as SpanValidationError).field).toBe('input_json');
      expect((e as SpanValidationError).span_id).toBe('s');
    }
    const backwards = v1.Span.fromPartial({ run_id: 'r', span_id: 's', type: 'llm', start_ms: 10, end_ms: 5 });
    expect(() => spanFromProto(backwards)).toThrow(/^end_ms: is before start_ms/);
    const attrsNotObject = v1.Span.fromPartial({ run_id: 'r', span_id: 's', type: 'llm', attributes_json: '[1]' });
    expect(() => spanFromProto(attrsNotObject)).toThrow(/^attributes: must be an object/);
  });
});

describe('run events', () => {
  it('round-trips run_start and run_end', () => {
    const items: StreamItem[] = [
      {
        kind: 'run_start',
        run: {
          event: 'run_start', run_id: 'r', project: 'p', workflow: 'w', session_id: 's', system_prompt: 'be nice',
          user_message: 'hi', tools: [{ name: 'a', description: 'does a' }, { name: 'b' }], ts_ms: 5,
        },
      },
      { kind: 'run_end', run: { event: 'run_end', run_id: 'r', status: 'no_output', ts_ms: 9 } },
      { kind: 'run_end', run: { event: 'run_end', run_id: 'r', status: 'ok', final_output: { answer: 42 } } },
    ];
    for (const item of items) expect(eventToItem(protoRoundTrip(itemToEvent(item)))).toEqual(item);
  });

  it('defaults an empty run_end status to ok and rejects unknown ones', () => {
    expect(eventToItem({ kind: { $case: 'run_end', value: { run_id: 'r', status: '' } } })).toEqual({
      kind: 'run_end', run: { event: 'run_end', run_id: 'r', status: 'ok' },
    });
    expect(() => eventToItem({ kind: { $case: 'run_end', value: { run_id: 'r', status: 'meh' } } })).toThrow(/^status:/);
  });

  it('rejects an empty event', () => {
    expect(() => eventToItem({})).toThrow(SpanValidationError);
  });
});

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

  it('refuse to decode an envelope whose item is invalid', () => {
    const bytes = v1.Envelope.encode({
      project: 'p', received_ms: 1, event: { kind: { $case: 'span', value: v1.Span.fromPartial({ span_id: 's', type: 'llm' }) } },
    }).finish();
    expect(() => EVENTS_TOPIC.decode(bytes)).toThrow(SpanValidationError);
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
    const bytes = v1.NoteEnvelope.encode({ note: v1.Note.fromPartial({ id: 'n', kind: 'shout' }) }).finish();
    expect(NOTES_TOPIC.decode(bytes).kind).toBe('note');
  });
});
