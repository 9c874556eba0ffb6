import { otlp } from '@neatroots/proto';
import { DEFAULT_SPAN_LIMITS, mapOtlpExport } from '@neatroots/spans';
import { decodeOtlpJson, encodeOtlpJsonResponse, MAX_VALUE_DEPTH, OtlpJsonError, type BadId } from './otlp-json';

/** The OTLP/JSON rules beyond what the OTel JS exporter writes (otlp-http.integration.spec.ts has its real output). */
const T = '5b8efff798038103d269b633813fc60c';
const S = 'eee19b7ec3c1b174';
const req = (span: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: T, spanId: S, ...span }] }], ...extra }] });
const spanOf = (text: string) => decodeOtlpJson(text).resource_spans[0].scope_spans[0].spans[0];
const wrong = (text: string) => {
  try {
    decodeOtlpJson(text);
  } catch (e) {
    expect(e).toBeInstanceOf(OtlpJsonError);
    return (e as Error).message;
  }
  throw new Error('accepted');
};
/**
 * A request whose `"DEEP"` strings are attribute values of `levels` arrayValues or kvlistValues
 * within each other, a string at the bottom (written as text: JSON.stringify itself recurses).
 */
function deep(text: string, levels: number, container: 'arrayValue' | 'kvlistValue'): string {
  const [open, close] = container === 'arrayValue' ? ['{"arrayValue":{"values":[', ']}}'] : ['{"kvlistValue":{"values":[{"key":"k","value":', '}]}}'];
  return text.replaceAll('"DEEP"', open.repeat(levels) + '{"stringValue":"bottom"}' + close.repeat(levels));
}
/** How many arrayValues and kvlistValues are within each other in a decoded value. */
function levelsOf(v: otlp.AnyValue | undefined): number {
  let n = 0;
  for (let x = v?.value; x && (x.$case === 'array_value' || x.$case === 'kvlist_value'); n++) {
    x = x.$case === 'array_value' ? x.value.values[0]?.value : x.value.values[0]?.value?.value;
  }
  return n;
}

describe('OTLP/JSON decoding', () => {
  it('reads hex ids, 64-bit integers as strings or numbers, enums as numbers or names, and proto field names', () => {
    const s = spanOf(req({
      parentSpanId: '',
      kind: 'SPAN_KIND_CLIENT',
      start_time_unix_nano: 1700000000000000000,
      endTimeUnixNano: '18446744073709551615',
      status: { code: 2, message: 'boom' },
      attributes: [
        { key: 'i', value: { intValue: '-9223372036854775808' } },
        { key: 'n', value: { intValue: 42 } },
        { key: 'd', value: { doubleValue: 'NaN' } },
        { key: 'b', value: { bytesValue: 'AAEC' } },
        { key: 'a', value: { arrayValue: { values: [{ boolValue: true }, { kvlistValue: { values: [{ key: 'k', value: { stringValue: 'v' } }] } }] } } },
        { key: 'empty', value: {} },
        { key: 'nothing' },
      ],
      droppedAttributesCount: '3',
      unknownField: { ignored: true },
    }));
    expect(s.trace_id.toString('hex')).toBe(T);
    expect(s.span_id.toString('hex')).toBe(S);
    expect(s.parent_span_id.length).toBe(0);
    expect(s.kind).toBe(otlp.Span_SpanKind.SPAN_KIND_CLIENT);
    expect([s.start_time_unix_nano, s.end_time_unix_nano]).toEqual(['1700000000000000000', '18446744073709551615']);
    expect(s.status).toEqual({ code: otlp.Status_StatusCode.STATUS_CODE_ERROR, message: 'boom' });
    expect(s.dropped_attributes_count).toBe(3);
    expect(s.attributes.map((a) => a.value?.value)).toEqual([
      { $case: 'int_value', value: '-9223372036854775808' },
      { $case: 'int_value', value: '42' },
      { $case: 'double_value', value: NaN },
      { $case: 'bytes_value', value: Buffer.from([0, 1, 2]) },
      { $case: 'array_value', value: { values: [{ value: { $case: 'bool_value', value: true } }, { value: { $case: 'kvlist_value', value: { values: [{ key: 'k', value: { value: { $case: 'string_value', value: 'v' } } }] } } }] } },
      undefined,
      undefined,
    ]);
  });

  it('names the path and the rule of what is wrong', () => {
    expect(wrong(req({ spanId: 12 }))).toBe('body.resourceSpans[0].scopeSpans[0].spans[0].spanId: expected a hex string, got number 12');
    expect(wrong(req({ startTimeUnixNano: '-1' }))).toMatch(/spans\[0\]\.startTimeUnixNano: expected an unsigned 64-bit integer/);
    expect(wrong(req({ endTimeUnixNano: '18446744073709551616' }))).toMatch(/endTimeUnixNano: expected an unsigned 64-bit integer/);
    expect(wrong(req({ kind: 'SIDEWAYS' }))).toMatch(/spans\[0\]\.kind: expected an enum number, got string "SIDEWAYS"/);
    expect(wrong(req({ attributes: [{ key: 'x', value: { stringValue: 'a', intValue: 1 } }] }))).toMatch(/attributes\[0\]\.value: holds stringValue and intValue/);
    expect(wrong(req({ attributes: {} }))).toMatch(/spans\[0\]\.attributes: expected an array, got an object/);
    expect(wrong('[]')).toBe('body: expected an object, got an array');
    expect(wrong('{')).toMatch(/^body: not JSON/);
  });

  it('decodes values nested up to MAX_VALUE_DEPTH levels, one past any NEATROOTS_MAX_JSON_DEPTH, and refuses a deeper one with its path, without running out of stack', () => {
    expect(MAX_VALUE_DEPTH).toBe(1001);
    for (const container of ['arrayValue', 'kvlistValue'] as const) {
      const s = spanOf(deep(req({ attributes: [{ key: 'deep', value: 'DEEP' }] }), MAX_VALUE_DEPTH, container));
      expect(levelsOf(s.attributes[0].value)).toBe(MAX_VALUE_DEPTH);
      expect(wrong(deep(req({ attributes: [{ key: 'ok', value: {} }, { key: 'deep', value: 'DEEP' }] }), MAX_VALUE_DEPTH + 1, container))).toBe(
        'body.resourceSpans[0].scopeSpans[0].spans[0].attributes[1].value: is nested more than 1001 levels deep (arrayValue and kvlistValue within each other), past what any NEATROOTS_MAX_JSON_DEPTH accepts (at most 1000)',
      );
      // what the audit sent: 2,000 levels, which ran the recursive decoder out of stack (a 500)
      expect(wrong(deep(req({}, { resource: { attributes: [{ key: 'deep', value: 'DEEP' }] } }), 2000, container))).toMatch(
        /^body\.resourceSpans\[0\]\.resource\.attributes\[0\]\.value: is nested more than 1001 levels deep/,
      );
    }
    // the mapping then refuses the span alone, at the highest setting
    const decoded = decodeOtlpJson(deep(JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [
      { traceId: T, spanId: S, attributes: [{ key: 'deep', value: 'DEEP' }] },
      { traceId: T, spanId: 'eee19b7ec3c1b175', attributes: [{ key: 'deep', value: { arrayValue: { values: ['DEEP'] } } }] },
    ] }] }] }), 1000, 'kvlistValue'));
    const res = mapOtlpExport(decoded, { limits: { limits: { ...DEFAULT_SPAN_LIMITS, maxJsonDepth: 1000 }, now: Date.now() } });
    expect([res.accepted, res.rejected.map((r) => [r.index, r.field, r.reason])]).toEqual([
      1, [[1, 'attributes.deep', 'is JSON nested more than 1000 levels deep (NEATROOTS_MAX_JSON_DEPTH)']],
    ]);
  });

  it('passes an id that is not hex on as bytes the mapping refuses, with the reason, so only its span is refused (as over protobuf)', () => {
    const badIds = new Map<number, BadId>();
    const decoded = decodeOtlpJson(
      JSON.stringify({ resourceSpans: [
        { scopeSpans: [{ spans: [
          { traceId: T, spanId: S },
          { traceId: 'W47/95gDgQPSabYzgT/GDA==', spanId: 'W47/95gDgQM=' },
        ] }] },
        { scopeSpans: [{ spans: [] }, { spans: [
          { traceId: T, spanId: 'span-001' },
          { traceId: T, spanId: S, parentSpanId: 'abcd' },
          // links are not mapped, over protobuf either: a link's id that is not hex is left out
          { traceId: T, spanId: 'eee19b7ec3c1b175', links: [{ traceId: 'nope', spanId: 'W47/95gDgQM=' }] },
        ] }] },
      ] }),
      badIds,
    );
    const spans = decoded.resource_spans.flatMap((rs) => rs.scope_spans.flatMap((ss) => ss.spans));
    expect(spans.map((s) => [s.trace_id.length, s.span_id.length, s.parent_span_id.length])).toEqual([[16, 8, 0], [0, 0, 0], [16, 0, 0], [16, 8, 1], [16, 8, 0]]);
    expect(spans[4].links[0]).toMatchObject({ trace_id: Buffer.alloc(0), span_id: Buffer.alloc(0) });
    expect([...badIds]).toEqual([
      [1, { field: 'trace_id', reason: 'expected 32 hex digits (OTLP/JSON ids are hex, not base64), got "W47/95gDgQPSabYzgT/GDA=="' }],
      [2, { field: 'span_id', reason: 'expected 16 hex digits (OTLP/JSON ids are hex, not base64), got "span-001"' }],
      [3, { field: 'parent_span_id', reason: 'expected 16 hex digits (OTLP/JSON ids are hex, not base64), got "abcd"' }],
    ]);
    // the mapping refuses those three spans on the same field, and takes the others
    const res = mapOtlpExport(decoded, {});
    expect([res.accepted, res.rejected.map((r) => [r.index, r.field])]).toEqual([2, [[1, 'trace_id'], [2, 'span_id'], [3, 'parent_span_id']]]);
    expect(wrong(req({ parentSpanId: { hex: 'abcd' } }))).toMatch(/spans\[0\]\.parentSpanId: expected a hex string, got an object/);
  });

  it('writes the answer in OTLP/JSON: partialSuccess in lowerCamelCase, or {}', () => {
    expect(encodeOtlpJsonResponse({})).toBe('{}');
    expect(JSON.parse(encodeOtlpJsonResponse({ partial_success: { rejected_spans: '2', error_message: 'two' } }))).toEqual({
      partialSuccess: { rejectedSpans: '2', errorMessage: 'two' },
    });
  });
});
