import { otlp } from '@neatroots/proto';

/**
 * OTLP/JSON → the generated OTLP message types, so a JSON export takes the same path as a
 * protobuf one from there on (mapOtlpExport, limits, back-pressure).
 *
 * The OTLP JSON encoding is protobuf's JSON mapping with OTLP's own rules, and each of them
 * differs from what a generic JSON decoder does (which is why none is used):
 * - trace_id, span_id, parent_span_id (spans and links) are hex strings, not base64; other
 *   bytes (an AnyValue's bytesValue) stay base64;
 * - field names are lowerCamelCase (the proto names are accepted too, as protobuf's mapping asks);
 * - enums are numbers (their names are accepted too);
 * - 64-bit integers arrive as decimal strings or as numbers.
 * Unknown fields are ignored (a newer exporter's additions must not break an older receiver).
 * A value of the wrong type is an error naming its path, e.g. `resourceSpans[0].scopeSpans[1].spans[3].name`;
 * so is an attribute value nested deeper than MAX_VALUE_DEPTH. A span id, trace id or parent
 * span id that is a string but not hex of the right length refuses its span alone (see spanId).
 */
export class OtlpJsonError extends Error {
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`${path}: ${reason}`);
  }
}

type Obj = Record<string, unknown>;

/**
 * Deepest attribute value decoded, in arrayValues and kvlistValues within each other: one past
 * the highest NEATROOTS_MAX_JSON_DEPTH (1000, libs/platform config), so that a value nested past
 * any configured depth still decodes and that limit rejects its span alone (partial success).
 * A deeper one is past every configuration: the request is malformed, refused whole with the
 * path of the value, before it reaches what reads values recursively (the mapping's
 * attributesToJson), which a few thousand levels run out of stack.
 */
export const MAX_VALUE_DEPTH = 1001;

/** A span id that is not OTLP/JSON's hex: the OTLP field, and the reason its span's rejection gives. */
export interface BadId {
  field: 'trace_id' | 'span_id' | 'parent_span_id';
  reason: string;
}

function snake(camel: string): string {
  return camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** The value of a field under its JSON name or its proto name; null counts as absent. */
function get(o: Obj, camel: string): unknown {
  const v = o[camel] ?? o[snake(camel)];
  return v === null ? undefined : v;
}

function obj(v: unknown, path: string): Obj {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new OtlpJsonError(path, `expected an object, got ${kind(v)}`);
  return v as Obj;
}

function kind(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'an object' : `${typeof v} ${JSON.stringify(v)?.slice(0, 40)}`;
}

/** A repeated field's elements (none when absent). */
function elements(o: Obj, camel: string, path: string): unknown[] {
  const v = get(o, camel);
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw new OtlpJsonError(`${path}.${camel}`, `expected an array, got ${kind(v)}`);
  return v;
}

function list<T>(o: Obj, camel: string, path: string, each: (v: unknown, p: string) => T): T[] {
  return elements(o, camel, path).map((x, i) => each(x, `${path}.${camel}[${i}]`));
}

function str(o: Obj, camel: string, path: string): string {
  const v = get(o, camel);
  if (v === undefined) return '';
  if (typeof v !== 'string') throw new OtlpJsonError(`${path}.${camel}`, `expected a string, got ${kind(v)}`);
  return v;
}

function bool(v: unknown, path: string): boolean {
  if (typeof v !== 'boolean') throw new OtlpJsonError(path, `expected true or false, got ${kind(v)}`);
  return v;
}

/** A 32-bit unsigned integer: a number, or (as protobuf's mapping allows) a decimal string. */
function uint32(o: Obj, camel: string, path: string): number {
  const v = get(o, camel);
  if (v === undefined) return 0;
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 0xffffffff) {
    throw new OtlpJsonError(`${path}.${camel}`, `expected an unsigned 32-bit integer, got ${kind(v)}`);
  }
  return n;
}

/** A 64-bit integer as the generated types hold it (a decimal string); JSON gives a string or a number. */
function int64(v: unknown, path: string, signed: boolean): string {
  // A number or a string, the same bounds: a number past them (1e30) is no more a 64-bit integer than its digits are.
  const n = typeof v === 'number' && Number.isInteger(v) ? BigInt(v) : typeof v === 'string' && (signed ? /^-?\d+$/ : /^\d+$/).test(v) ? BigInt(v) : undefined;
  if (n !== undefined) {
    const [lo, hi] = signed ? [-(2n ** 63n), 2n ** 63n - 1n] : [0n, 2n ** 64n - 1n];
    if (n >= lo && n <= hi) return n.toString();
  }
  throw new OtlpJsonError(path, `expected ${signed ? 'a' : 'an unsigned'} 64-bit integer (a number or a decimal string), got ${kind(v)}`);
}

/** A double written as a string, as protobuf's JSON mapping reads it: a JSON number's text, or NaN and the infinities by name. */
function doubleString(v: string): number | undefined {
  if (v === 'NaN' || v === 'Infinity' || v === '-Infinity') return Number(v);
  if (!/^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(v)) return undefined;
  const d = Number(v);
  return Number.isFinite(d) ? d : undefined; // "1e400": out of a double's range
}

function fixed64(o: Obj, camel: string, path: string): string {
  const v = get(o, camel);
  return v === undefined ? '0' : int64(v, `${path}.${camel}`, false);
}

/** OTLP ids are hex in JSON (not base64): 32 hex digits for a trace, 16 for a span; empty for none. */
function isHexId(v: string, bytes: number): boolean {
  return v.length === bytes * 2 && /^[0-9a-fA-F]+$/.test(v);
}

function hexString(o: Obj, camel: string, path: string): string | undefined {
  const v = get(o, camel);
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string') throw new OtlpJsonError(`${path}.${camel}`, `expected a hex string, got ${kind(v)}`);
  return v;
}

/**
 * A span's trace id, span id or parent span id. One that is not hex of the right length refuses
 * its span alone, as an id of the wrong length does over protobuf (libs/spans mapSpan): the span
 * gets bytes the mapping is sure to refuse (none for a trace or span id, which it requires; one
 * byte for a parent, which must be 8 or none), and `bad` is told the reason, which the
 * rejection gives in place of the mapping's (ingest.ts acceptOtlp).
 */
function spanId(o: Obj, camel: string, path: string, bytes: number, field: BadId['field'], bad: (b: BadId) => void): Buffer {
  const v = hexString(o, camel, path);
  if (v === undefined) return Buffer.alloc(0);
  if (isHexId(v, bytes)) return Buffer.from(v, 'hex');
  bad({ field, reason: `expected ${bytes * 2} hex digits (OTLP/JSON ids are hex, not base64), got ${JSON.stringify(v.slice(0, 48))}` });
  return Buffer.alloc(field === 'parent_span_id' ? 1 : 0);
}

/** A link's id: the mapping reads no link (nor does it over protobuf), so one that is not hex is left empty. */
function linkId(o: Obj, camel: string, path: string, bytes: number): Buffer {
  const v = hexString(o, camel, path);
  return v !== undefined && isHexId(v, bytes) ? Buffer.from(v, 'hex') : Buffer.alloc(0);
}

function enumOf(o: Obj, camel: string, path: string, names: Record<string, string | number>): number {
  const v = get(o, camel);
  if (v === undefined) return 0;
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string' && typeof names[v] === 'number') return names[v] as number;
  throw new OtlpJsonError(`${path}.${camel}`, `expected an enum number, got ${kind(v)}`);
}

/** A value still to decode: an AnyValue (`out`, filled in place) or a kvlistValue's entry. */
type Pending =
  | { kind: 'any'; v: unknown; path: string; depth: number; out: otlp.AnyValue }
  | { kind: 'kv'; v: unknown; path: string; depth: number; out: otlp.KeyValue };

/**
 * An attribute's value. Values within it are walked with a stack of their own, in document
 * order, not by recursion: that ran out of stack about 1,000 kvlistValues down (less under a
 * deeper caller), short of MAX_VALUE_DEPTH. `depth`: the arrayValues and kvlistValues around a
 * value. A value nested too deep is refused with the path of the attribute's value (the path
 * down to where it went past the bound would be thousands of characters long).
 */
function anyValue(v: unknown, path: string): otlp.AnyValue {
  const root: otlp.AnyValue = { value: undefined };
  const todo: Pending[] = [{ kind: 'any', v, path, depth: 0, out: root }];
  for (let t = todo.pop(); t; t = todo.pop()) {
    const o = obj(t.v, t.path);
    if (t.kind === 'kv') {
      t.out.key = str(o, 'key', t.path);
      const value = get(o, 'value');
      if (value !== undefined) todo.push({ kind: 'any', v: value, path: `${t.path}.value`, depth: t.depth, out: (t.out.value = { value: undefined }) });
      continue;
    }
    const set = (['stringValue', 'boolValue', 'intValue', 'doubleValue', 'arrayValue', 'kvlistValue', 'bytesValue'] as const).filter(
      (k) => get(o, k) !== undefined,
    );
    if (set.length > 1) throw new OtlpJsonError(t.path, `holds ${set.join(' and ')}; an AnyValue holds one value`);
    const [which] = set;
    const x = which && get(o, which);
    const p = `${t.path}.${which}`;
    switch (which) {
      case undefined:
        break;
      case 'stringValue':
        if (typeof x !== 'string') throw new OtlpJsonError(p, `expected a string, got ${kind(x)}`);
        t.out.value = { $case: 'string_value', value: x };
        break;
      case 'boolValue':
        t.out.value = { $case: 'bool_value', value: bool(x, p) };
        break;
      case 'intValue':
        t.out.value = { $case: 'int_value', value: int64(x, p, true) };
        break;
      case 'doubleValue': {
        // protobuf's mapping writes NaN and the infinities as strings, and reads any number as one too ("1.5", "1e3")
        const d = typeof x === 'string' ? doubleString(x) : x;
        if (typeof d !== 'number') throw new OtlpJsonError(p, `expected a number (or one as a string, "NaN", "Infinity", "-Infinity"), got ${kind(x)}`);
        t.out.value = { $case: 'double_value', value: d };
        break;
      }
      case 'arrayValue':
      case 'kvlistValue': {
        if (t.depth >= MAX_VALUE_DEPTH) {
          throw new OtlpJsonError(
            path,
            `is nested more than ${MAX_VALUE_DEPTH} levels deep (arrayValue and kvlistValue within each other), past what any NEATROOTS_MAX_JSON_DEPTH accepts (at most 1000)`,
          );
        }
        const items = elements(obj(x, p), 'values', p);
        const depth = t.depth + 1;
        if (which === 'arrayValue') {
          const values = items.map((): otlp.AnyValue => ({ value: undefined }));
          t.out.value = { $case: 'array_value', value: { values } };
          for (let i = items.length - 1; i >= 0; i--) todo.push({ kind: 'any', v: items[i], path: `${p}.values[${i}]`, depth, out: values[i] });
        } else {
          const values = items.map((): otlp.KeyValue => ({ key: '', value: undefined }));
          t.out.value = { $case: 'kvlist_value', value: { values } };
          for (let i = items.length - 1; i >= 0; i--) todo.push({ kind: 'kv', v: items[i], path: `${p}.values[${i}]`, depth, out: values[i] });
        }
        break;
      }
      case 'bytesValue':
        if (typeof x !== 'string' || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(x)) throw new OtlpJsonError(p, `expected base64, got ${kind(x)}`);
        t.out.value = { $case: 'bytes_value', value: Buffer.from(x, 'base64') };
        break;
    }
  }
  return root;
}

function keyValue(v: unknown, path: string): otlp.KeyValue {
  const o = obj(v, path);
  const value = get(o, 'value');
  return { key: str(o, 'key', path), value: value === undefined ? undefined : anyValue(value, `${path}.value`) };
}

function attributes(o: Obj, path: string): otlp.KeyValue[] {
  return list(o, 'attributes', path, keyValue);
}

/** `bad`: told of each id that refuses the span (see spanId), trace id first. */
function span(v: unknown, path: string, bad: (b: BadId) => void): otlp.Span {
  const o = obj(v, path);
  const status = get(o, 'status');
  const so = status === undefined ? undefined : obj(status, `${path}.status`);
  return {
    trace_id: spanId(o, 'traceId', path, 16, 'trace_id', bad),
    span_id: spanId(o, 'spanId', path, 8, 'span_id', bad),
    trace_state: str(o, 'traceState', path),
    parent_span_id: spanId(o, 'parentSpanId', path, 8, 'parent_span_id', bad),
    flags: uint32(o, 'flags', path),
    name: str(o, 'name', path),
    kind: enumOf(o, 'kind', path, otlp.Span_SpanKind),
    start_time_unix_nano: fixed64(o, 'startTimeUnixNano', path),
    end_time_unix_nano: fixed64(o, 'endTimeUnixNano', path),
    attributes: attributes(o, path),
    dropped_attributes_count: uint32(o, 'droppedAttributesCount', path),
    events: list(o, 'events', path, (e, p) => {
      const eo = obj(e, p);
      return {
        time_unix_nano: fixed64(eo, 'timeUnixNano', p),
        name: str(eo, 'name', p),
        attributes: attributes(eo, p),
        dropped_attributes_count: uint32(eo, 'droppedAttributesCount', p),
      };
    }),
    dropped_events_count: uint32(o, 'droppedEventsCount', path),
    links: list(o, 'links', path, (l, p) => {
      const lo = obj(l, p);
      return {
        trace_id: linkId(lo, 'traceId', p, 16),
        span_id: linkId(lo, 'spanId', p, 8),
        trace_state: str(lo, 'traceState', p),
        attributes: attributes(lo, p),
        dropped_attributes_count: uint32(lo, 'droppedAttributesCount', p),
        flags: uint32(lo, 'flags', p),
      };
    }),
    dropped_links_count: uint32(o, 'droppedLinksCount', path),
    status: so && { message: str(so, 'message', `${path}.status`), code: enumOf(so, 'code', `${path}.status`, otlp.Status_StatusCode) },
  };
}

/**
 * Decodes an OTLP/JSON ExportTraceServiceRequest; throws OtlpJsonError (with the path) on a
 * malformed one. `badIds` is given the spans whose ids refuse them, by their index in the
 * request (counting spans across resourceSpans and scopeSpans, as the mapping's rejections do).
 */
export function decodeOtlpJson(text: string, badIds?: Map<number, BadId>): otlp.ExportTraceServiceRequest {
  // An empty body is an empty request, as it is in protobuf (zero bytes: no field set), and the
  // OTLP specification has an empty request succeed.
  if (/^\s*$/.test(text)) return { resource_spans: [] };
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new OtlpJsonError('body', `not JSON (${(e as Error).message})`);
  }
  const root = obj(doc, 'body');
  let index = 0;
  const eachSpan = (v: unknown, p: string): otlp.Span => {
    const i = index++;
    // The mapping refuses a span on its first bad id, in this order: that one's reason is given.
    return span(v, p, (b) => {
      if (badIds && !badIds.has(i)) badIds.set(i, b);
    });
  };
  return {
    resource_spans: list(root, 'resourceSpans', 'body', (rs, p) => {
      const o = obj(rs, p);
      const resource = get(o, 'resource');
      const ro = resource === undefined ? undefined : obj(resource, `${p}.resource`);
      return {
        resource: ro && { attributes: attributes(ro, `${p}.resource`), dropped_attributes_count: uint32(ro, 'droppedAttributesCount', `${p}.resource`) },
        schema_url: str(o, 'schemaUrl', p),
        scope_spans: list(o, 'scopeSpans', p, (ss, q) => {
          const so = obj(ss, q);
          const scope = get(so, 'scope');
          const sco = scope === undefined ? undefined : obj(scope, `${q}.scope`);
          return {
            scope: sco && {
              name: str(sco, 'name', `${q}.scope`),
              version: str(sco, 'version', `${q}.scope`),
              attributes: attributes(sco, `${q}.scope`),
              dropped_attributes_count: uint32(sco, 'droppedAttributesCount', `${q}.scope`),
            },
            schema_url: str(so, 'schemaUrl', q),
            spans: list(so, 'spans', q, eachSpan),
          };
        }),
      };
    }),
  };
}

/** ExportTraceServiceResponse in OTLP/JSON (lowerCamelCase, int64 as a string). */
export function encodeOtlpJsonResponse(res: otlp.ExportTraceServiceResponse): string {
  const p = res.partial_success;
  return JSON.stringify(p ? { partialSuccess: { rejectedSpans: p.rejected_spans, errorMessage: p.error_message } } : {});
}
