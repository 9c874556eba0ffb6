import { otlp } from '@neatroots/proto';
import { decodeOtlpJson, encodeOtlpJsonResponse, OtlpJsonError } from './otlp-json';

/** The OTLP/JSON rules beyond what the OTel JS exporter writes (otlp-http.integration.spec.ts has its real output). */
const T = '5b8efff798038103d269b633813fc60c';
const S = 'eee19b7ec3c1b174';
const req = (span: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: T, spanId: S, ...span }] }], ...extra }] });
const spanOf = (text: string) => decodeOtlpJson(text).resource_spans[0].scope_spans[0].spans[0];

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
    const wrong = (text: string) => {
      try {
        decodeOtlpJson(text);
      } catch (e) {
        expect(e).toBeInstanceOf(OtlpJsonError);
        return (e as Error).message;
      }
      throw new Error('accepted');
    };
    expect(wrong(req({ spanId: 'W47/95gDgQM=' }))).toBe('body.resourceSpans[0].scopeSpans[0].spans[0].spanId: expected 16 hex digits (OTLP/JSON ids are hex, not base64), got "W47/95gDgQM="');
    expect(wrong(req({ startTimeUnixNano: '-1' }))).toMatch(/spans\[0\]\.startTimeUnixNano: expected an unsigned 64-bit integer/);
    expect(wrong(req({ endTimeUnixNano: '18446744073709551616' }))).toMatch(/endTimeUnixNano: expected an unsigned 64-bit integer/);
    expect(wrong(req({ kind: 'SIDEWAYS' }))).toMatch(/spans\[0\]\.kind: expected an enum number, got string "SIDEWAYS"/);
    expect(wrong(req({ attributes: [{ key: 'x', value: { stringValue: 'a', intValue: 1 } }] }))).toMatch(/attributes\[0\]\.value: holds stringValue and intValue/);
    expect(wrong(req({ attributes: {} }))).toMatch(/spans\[0\]\.attributes: expected an array, got an object/);
    expect(wrong('[]')).toBe('body: expected an object, got an array');
    expect(wrong('{')).toMatch(/^body: not JSON/);
  });

  it('writes the answer in OTLP/JSON: partialSuccess in lowerCamelCase, or {}', () => {
    expect(encodeOtlpJsonResponse({})).toBe('{}');
    expect(JSON.parse(encodeOtlpJsonResponse({ partial_success: { rejected_spans: '2', error_message: 'two' } }))).toEqual({
      partialSuccess: { rejectedSpans: '2', errorMessage: 'two' },
    });
  });
});
