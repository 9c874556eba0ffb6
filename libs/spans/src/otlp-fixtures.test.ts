import { otlp } from '@neatroots/proto';
import type { RunEnd, RunStart, Span, StreamItem } from './types';

/** OTLP spans for the mapping's specs: the one builder they share. */

/** An OTLP attribute value: strings, booleans, numbers (whole ones as ints) and arrays of them. */
export function anyValue(v: unknown): otlp.AnyValue {
  if (typeof v === 'string') return { value: { $case: 'string_value', value: v } };
  if (typeof v === 'boolean') return { value: { $case: 'bool_value', value: v } };
  if (typeof v === 'number') {
    return Number.isInteger(v) ? { value: { $case: 'int_value', value: String(v) } } : { value: { $case: 'double_value', value: v } };
  }
  if (Array.isArray(v)) return { value: { $case: 'array_value', value: { values: v.map(anyValue) } } };
  return {};
}

export const keyValues = (attrs: Record<string, unknown>): otlp.KeyValue[] => Object.entries(attrs).map(([key, v]) => ({ key, value: anyValue(v) }));

export interface SpanSpec {
  /** The trace's id, in hex. */
  trace: string;
  /** The span's id, in hex. */
  id: string;
  parent?: string;
  name?: string;
  kind?: otlp.Span_SpanKind;
  flags?: number;
  /** Seconds after 1700000000 s: start 0 and end 1 unless given. */
  start?: number;
  end?: number;
  attrs?: Record<string, unknown>;
  /** Events in order, each a nanosecond after the span's start. */
  events?: [string, Record<string, unknown>][];
  status?: { code: otlp.Status_StatusCode; message?: string };
  /** Shorthand for an error status with this message. */
  failed?: string;
}

export function otlpSpan(s: SpanSpec): otlp.Span {
  const start = BigInt(1700000000 + (s.start ?? 0)) * 1_000_000_000n;
  const status = s.failed ? { code: otlp.Status_StatusCode.STATUS_CODE_ERROR, message: s.failed } : s.status ? { code: s.status.code, message: s.status.message ?? '' } : undefined;
  return otlp.Span.fromPartial({
    trace_id: Buffer.from(s.trace, 'hex'),
    span_id: Buffer.from(s.id, 'hex'),
    parent_span_id: Buffer.from(s.parent ?? '', 'hex'),
    name: s.name ?? 'span',
    kind: s.kind ?? otlp.Span_SpanKind.SPAN_KIND_INTERNAL,
    flags: s.flags ?? 0,
    start_time_unix_nano: String(start),
    end_time_unix_nano: `${1700000000 + (s.end ?? 1)}000000000`,
    attributes: keyValues(s.attrs ?? {}),
    events: (s.events ?? []).map(([name, attrs], i) => ({ name, time_unix_nano: String(start + BigInt(i)), attributes: keyValues(attrs) })),
    status,
  });
}

/** One export of `spans` from one service (no service.name when `service` is null). */
export function exportOf(spans: otlp.Span[], service: string | null = 'svc'): otlp.ExportTraceServiceRequest {
  const resource = service === null ? undefined : { attributes: keyValues({ 'service.name': service }), dropped_attributes_count: 0 };
  return { resource_spans: [{ resource, scope_spans: [{ spans, schema_url: '' }], schema_url: '' }] };
}

export const spansOf = (items: StreamItem[]): Span[] => items.flatMap((i) => (i.kind === 'span' ? [i.span] : []));
export const runStarts = (items: StreamItem[]): RunStart[] => items.flatMap((i) => (i.kind === 'run_start' ? [i.run] : []));
export const runEnds = (items: StreamItem[]): RunEnd[] => items.flatMap((i) => (i.kind === 'run_end' ? [i.run] : []));
