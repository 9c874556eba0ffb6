import { otlp, v1 } from '@neatroots/proto';
import { SpanValidationError } from './errors';
import type { Span, StreamItem } from './types';
import { normalizeItem } from './normalize';
import { mapOtlpExport } from './otlp';
import { eventToItem, itemToEvent, readEvent, spanFromProto, spanToProto } from './wire';

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

describe('a raw span (replay lines, the JSON the contract documents)', () => {
  it('keeps an unknown top-level key named __proto__ in attributes, under its name', () => {
    const raw = JSON.parse('{"run_id":"r1","span_id":"s1","type":"tool","name":"t","__proto__":{"secret":"kept"},"other":1}');
    const item = normalizeItem(raw) as { span: Span };
    expect(Object.hasOwn(item.span.attributes!, '__proto__')).toBe(true);
    expect(Object.getOwnPropertyDescriptor(item.span.attributes, '__proto__')?.value).toEqual({ secret: 'kept' });
    expect(item.span.attributes!.other).toBe(1);
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

  it('reads an empty system prompt or user message as none, as the bus carries it (found by the OTLP property test)', () => {
    const item = normalizeItem({ event: 'run_start', run_id: 'r', system_prompt: '', user_message: '' });
    expect(item).toEqual({ kind: 'run_start', run: { event: 'run_start', run_id: 'r' } });
    expect(eventToItem(protoRoundTrip(itemToEvent(item)))).toEqual(item);
    // an OTLP agent span whose input is an empty value
    const mapped = mapOtlpExport(otlp.ExportTraceServiceRequest.fromPartial({
      resource_spans: [{
        scope_spans: [{
          spans: [{
            trace_id: Buffer.from([...Array(15).fill(0), 1]), span_id: Buffer.from([0, 0, 0, 0, 0, 0, 0, 1]),
            attributes: [
              { key: 'gen_ai.input.messages', value: { value: { $case: 'bytes_value', value: Buffer.from([]) } } },
              { key: 'gen_ai.operation.name', value: { value: { $case: 'string_value', value: 'invoke_agent' } } },
            ],
          }],
        }],
      }],
    }));
    const start = mapped.items.find((i) => i.kind === 'run_start');
    expect(start).toBeDefined();
    expect(start).not.toHaveProperty('run.user_message');
    expect(eventToItem(protoRoundTrip(itemToEvent(start!)))).toEqual(start);
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

describe('readEvent (the events topic)', () => {
  it('reads back exactly what a validated item was', () => {
    const items: StreamItem[] = [
      { kind: 'span', span: fullSpan },
      { kind: 'span', span: { run_id: 'r', span_id: 's', type: 'tool', name: 'x', tool: 'x', status: 'ok', error: '' } },
      { kind: 'run_start', run: { event: 'run_start', run_id: 'r', project: 'p', tools: [{ name: 'a' }, { name: 'b', description: 'd' }], ts_ms: 3 } },
      { kind: 'run_end', run: { event: 'run_end', run_id: 'r', status: 'no_output', final_output: 0, ts_ms: 4 } },
    ];
    for (const item of items) expect(readEvent(protoRoundTrip(itemToEvent(item)))).toEqual(item);
  });

  it('does not validate again: a span ingest would refuse is read as written', () => {
    const ev: v1.Event = { kind: { $case: 'span', value: v1.Span.fromPartial({ run_id: 'r', span_id: 's', type: 'llm', status: 'maybe' }) } };
    expect(() => eventToItem(ev)).toThrow(SpanValidationError);
    expect(readEvent(ev)).toEqual({ kind: 'span', span: { run_id: 'r', span_id: 's', type: 'llm', status: 'maybe' } });
  });

  it('still refuses JSON text that does not parse, naming the field', () => {
    const ev: v1.Event = { kind: { $case: 'span', value: v1.Span.fromPartial({ run_id: 'r', span_id: 's', type: 'llm', input_json: '{' }) } };
    expect(() => readEvent(ev)).toThrow(expect.objectContaining({ field: 'input_json' }));
  });
});
