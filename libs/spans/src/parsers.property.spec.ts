/**
 * Property tests of every parser on the input path (OTLP and neatroots.v1 messages: decode
 * and map; span JSON Lines): no input makes them throw anything but their typed rejection
 * with a message, what they accept stays within the limits, and valid items round-trip.
 */
import fc from 'fast-check';
import { otlp, v1 } from '@neatroots/proto';
import { SpanValidationError } from './errors';
import { JsonlError, parseJsonlLine } from './jsonl';
import { DEFAULT_SPAN_LIMITS, checkItemLimits, type LimitCheck } from './limits';
import { itemToJson, normalizeItem } from './normalize';
import { mapOtlpExport } from './otlp';
import { canonicalJson } from './text';
import { RUN_END_STATUSES, SPAN_TYPES, type StreamItem } from './types';
import { eventToItem, itemToEvent } from './wire';

const NOW = Date.UTC(2026, 0, 1);
// Small limits, so generated values reach them often.
const check: LimitCheck = { limits: { ...DEFAULT_SPAN_LIMITS, maxJsonDepth: 6, maxAttributes: 8, maxAttributeChars: 400, maxItemChars: 3_000, maxTokens: 1e6 }, now: NOW };
const RUNS = { numRuns: 300 };
/** The round trips: valid items, within the default limits. */
const roomy: LimitCheck = { limits: DEFAULT_SPAN_LIMITS, now: NOW };

/** Runs `fn`; anything it throws must be an instance of `type` with a message. */
function onlyRejects<T>(type: abstract new (...args: never[]) => Error, fn: () => T): T | undefined {
  try {
    return fn();
  } catch (e) {
    if (!(e instanceof type) || !(e as Error).message) throw new Error(`threw ${String((e as Error)?.name)}: ${String((e as Error)?.message ?? e)}`, { cause: e });
    return undefined;
  }
}

/** What a receiver accepted must be within the limits, and serializable. */
function withinLimits(item: StreamItem): void {
  checkItemLimits(item, check);
  expect(typeof JSON.stringify(itemToJson(item))).toBe('string');
}

/**
 * Compared as canonical JSON: key order, -0 and 0, absent and undefined are the same on every
 * wire; protobuf strings are UTF-8, so half a surrogate pair arrives as U+FFFD.
 */
const canon = (v: unknown) => canonicalJson(v).replace(/\\ud[89a-f][0-9a-f]{2}/g, '\ufffd');
const same = (a: unknown, b: unknown) => expect(canon(a)).toBe(canon(b));

// ---- generators ------------------------------------------------------------------------

const anyText = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.constantFrom('', ' ', '{', '[', '{"a":', '\u0000', '\ud800'));
const nested = (depth: number, open = '[', close = ']') => open.repeat(depth) + close.repeat(depth);
const jsonText = fc.oneof(
  fc.jsonValue({ maxDepth: 8 }).map((v) => JSON.stringify(v)),
  fc.integer({ min: 1, max: 3_000 }).map((d) => nested(d)),
  fc.integer({ min: 1, max: 3_000 }).map((d) => '{"a":'.repeat(d) + '1' + '}'.repeat(d)),
  anyText,
);
const anyNumber = fc.oneof(fc.double(), fc.constantFrom(0, -1, 1e300, -1e300, 5e18, 2 ** 53, Number.NaN, Infinity, -Infinity), fc.nat());
const id = fc.oneof(fc.string({ minLength: 1, maxLength: 12 }), fc.string({ minLength: 250, maxLength: 300 }), fc.constant(''));

/** Any neatroots.v1 event, most fields arbitrary. */
const v1Event: fc.Arbitrary<v1.Event> = fc.oneof(
  fc.record({
    run_id: id, span_id: id, parent_id: id, type: fc.oneof(fc.constantFrom(...SPAN_TYPES), anyText), name: anyText, tool: anyText,
    status: fc.oneof(fc.constantFrom('ok', 'error', ''), anyText), model: anyText, project: fc.constant(''), workflow: id, session_id: id,
    input_json: fc.option(jsonText, { nil: undefined }), output_json: fc.option(jsonText, { nil: undefined }),
    attributes_json: fc.option(fc.oneof(jsonText, fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 4 }), { maxKeys: 12 }).map((o) => JSON.stringify(o))), { nil: undefined }),
    error: fc.option(anyText, { nil: undefined }),
    start_ms: fc.option(anyNumber, { nil: undefined }), end_ms: fc.option(anyNumber, { nil: undefined }),
    usage: fc.option(fc.record({ input_tokens: fc.option(anyNumber, { nil: undefined }), output_tokens: fc.option(anyNumber, { nil: undefined }), total_tokens: fc.option(anyNumber, { nil: undefined }), cost: fc.option(anyNumber, { nil: undefined }) }), { nil: undefined }),
  }).map((value): v1.Event => ({ kind: { $case: 'span', value } })),
  fc.record({
    run_id: id, project: fc.constant(''), workflow: id, session_id: id, system_prompt: anyText, user_message: anyText,
    tools: fc.array(fc.record({ name: anyText, description: anyText }), { maxLength: 4 }), ts_ms: fc.option(anyNumber, { nil: undefined }),
  }).map((value): v1.Event => ({ kind: { $case: 'run_start', value } })),
  fc.record({
    run_id: id, status: fc.oneof(fc.constantFrom(...RUN_END_STATUSES), anyText), final_output_json: fc.option(jsonText, { nil: undefined }), ts_ms: fc.option(anyNumber, { nil: undefined }),
  }).map((value): v1.Event => ({ kind: { $case: 'run_end', value } })),
  fc.constant({} as v1.Event),
);

const anyValue: fc.Arbitrary<otlp.AnyValue> = fc.letrec<{ v: otlp.AnyValue }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    jsonText.map((value): otlp.AnyValue => ({ value: { $case: 'string_value', value } })),
    fc.boolean().map((value): otlp.AnyValue => ({ value: { $case: 'bool_value', value } })),
    fc.oneof(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String), anyText).map((value): otlp.AnyValue => ({ value: { $case: 'int_value', value } })),
    anyNumber.map((value): otlp.AnyValue => ({ value: { $case: 'double_value', value } })),
    fc.uint8Array({ maxLength: 8 }).map((b): otlp.AnyValue => ({ value: { $case: 'bytes_value', value: Buffer.from(b) } })),
    fc.array(tie('v'), { maxLength: 3 }).map((values): otlp.AnyValue => ({ value: { $case: 'array_value', value: { values } } })),
    fc.array(fc.record({ key: fc.string(), value: tie('v') }), { maxLength: 3 }).map((values): otlp.AnyValue => ({ value: { $case: 'kvlist_value', value: { values } } })),
    fc.constant({}),
  ),
})).v;

const KNOWN_KEYS = [
  'gen_ai.operation.name', 'gen_ai.tool.name', 'gen_ai.tool.call.arguments', 'gen_ai.tool.call.result', 'gen_ai.input.messages',
  'gen_ai.output.messages', 'gen_ai.usage.input_tokens', 'gen_ai.usage.output_tokens', 'llm.token_count.total', 'gen_ai.agent.name',
  'gen_ai.system_instructions', 'gen_ai.tool.definitions', 'openinference.span.kind', 'input.value', 'output.value', 'mcp.method.name',
  'neatroots.run_id', 'neatroots.project', 'neatroots.workflow', 'error.type', 'gen_ai.conversation.id',
];
const OPERATIONS = fc.constantFrom('execute_tool', 'chat', 'invoke_agent', 'embeddings', 'x');
const keyValue: fc.Arbitrary<otlp.KeyValue> = fc.oneof(
  fc.record({ key: fc.oneof(fc.constantFrom(...KNOWN_KEYS), fc.string()), value: anyValue }),
  OPERATIONS.map((op) => ({ key: 'gen_ai.operation.name', value: { value: { $case: 'string_value' as const, value: op } } })),
);
const nanos = fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map(String), fc.constantFrom('0', '1700000000000000000', '18446744073709551615', '99999999999999999999'), anyText);
const bytes = (n: number) => fc.oneof(fc.uint8Array({ minLength: n, maxLength: n }), fc.uint8Array({ maxLength: 20 }));

const otlpSpan: fc.Arbitrary<otlp.Span> = fc.record({
  trace_id: bytes(16), span_id: bytes(8), parent_span_id: fc.oneof(fc.constant(new Uint8Array()), bytes(8)),
  name: anyText, start_time_unix_nano: nanos, end_time_unix_nano: nanos,
  attributes: fc.array(keyValue, { maxLength: 10 }),
  code: fc.integer({ min: -1, max: 3 }), message: anyText,
}).map((s) => otlp.Span.fromPartial({
  trace_id: Buffer.from(s.trace_id), span_id: Buffer.from(s.span_id), parent_span_id: Buffer.from(s.parent_span_id), name: s.name,
  start_time_unix_nano: s.start_time_unix_nano, end_time_unix_nano: s.end_time_unix_nano, attributes: s.attributes,
  status: { code: s.code, message: s.message },
}));

const otlpRequest = fc.array(fc.record({ resource: fc.array(keyValue, { maxLength: 3 }), spans: fc.array(otlpSpan, { maxLength: 5 }) }), { maxLength: 3 })
  .map((rs): otlp.ExportTraceServiceRequest => ({
    resource_spans: rs.map((r) => ({ resource: { attributes: r.resource, dropped_attributes_count: 0 }, schema_url: '', scope_spans: [{ schema_url: '', spans: r.spans }] })),
  }));

/** Valid items in the contract's JSON shape (then normalised, to get their normal form). */
const ms = fc.integer({ min: 0, max: NOW });
/** A run or span id: any text but "." and "..", which are refused (they are path steps in a link). */
const validId = fc.string({ minLength: 1, maxLength: 20 }).filter((v) => v !== '.' && v !== '..');
const validSpanJson = fc.record({
  run_id: validId, span_id: validId, type: fc.constantFrom(...SPAN_TYPES),
  name: fc.string({ minLength: 1 }), status: fc.constantFrom('ok', 'error'),
  input: fc.option(fc.jsonValue({ maxDepth: 4 }), { nil: undefined }), output: fc.option(fc.jsonValue({ maxDepth: 4 }), { nil: undefined }),
  error: fc.option(fc.string({ minLength: 1 }), { nil: undefined }), start_ms: fc.option(ms, { nil: undefined }),
  usage: fc.option(fc.record({ input_tokens: fc.nat(100_000), output_tokens: fc.nat(100_000), cost: fc.double({ min: 0, max: 10, noNaN: true }) }), { nil: undefined }),
  model: fc.option(fc.string({ minLength: 1 }), { nil: undefined }), workflow: fc.option(fc.string({ minLength: 1, maxLength: 30 }), { nil: undefined }),
  attributes: fc.option(fc.dictionary(fc.string({ minLength: 1 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 }), { nil: undefined }),
}, { requiredKeys: ['run_id', 'span_id', 'type', 'name', 'status'] });
const validItemJson = fc.oneof(
  validSpanJson,
  // non-empty: in proto3 an empty string or list is "not set" (wire.ts), so "" and [] are not sent
  fc.record({ event: fc.constant('run_start'), run_id: validId, workflow: fc.string({ minLength: 1, maxLength: 20 }), system_prompt: fc.string({ minLength: 1 }), user_message: fc.string({ minLength: 1 }), tools: fc.array(fc.record({ name: fc.string({ minLength: 1 }), description: fc.string({ minLength: 1 }) }), { minLength: 1, maxLength: 3 }), ts_ms: ms }, { requiredKeys: ['event', 'run_id'] }),
  fc.record({ event: fc.constant('run_end'), run_id: validId, status: fc.constantFrom(...RUN_END_STATUSES), final_output: fc.jsonValue({ maxDepth: 4 }), ts_ms: ms }),
);

// ---- properties ------------------------------------------------------------------------

describe('neatroots.v1 (decode + map)', () => {
  it('any bytes: decoding fails with an Error or gives events that are accepted within the limits or rejected with SpanValidationError', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (b) => {
        const req = onlyRejects(Error, () => v1.ExportRequest.decode(b));
        for (const ev of req?.events ?? []) {
          const item = onlyRejects(SpanValidationError, () => eventToItem(ev, check));
          if (item) withinLimits(item);
        }
      }),
      RUNS,
    );
  });

  it('any event (arbitrary fields, deep JSON, huge and non-finite numbers): accepted within the limits, or rejected with SpanValidationError naming a field', () => {
    fc.assert(
      fc.property(v1Event, (ev) => {
        try {
          withinLimits(eventToItem(ev, check));
        } catch (e) {
          if (!(e instanceof SpanValidationError)) throw e;
          expect(e.field).toMatch(/\S/);
          expect(e.reason).toMatch(/\S/);
        }
      }),
      RUNS,
    );
  });

  it('valid items round-trip through the protobuf encoding', () => {
    fc.assert(
      fc.property(validItemJson, (raw) => {
        const item = normalizeItem(raw, roomy);
        const bytes = v1.Event.encode(itemToEvent(item)).finish();
        same(eventToItem(v1.Event.decode(bytes), roomy), item);
      }),
      RUNS,
    );
  });
});

describe('OTLP (decode + map)', () => {
  it('any bytes: decoding fails with an Error, or every span is accepted within the limits or rejected with a field and a reason', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), (b) => {
        const req = onlyRejects(Error, () => otlp.ExportTraceServiceRequest.decode(b));
        if (!req) return;
        const res = mapOtlpExport(req, { project: 'p', limits: check });
        expect(res.accepted + res.rejected.length).toBe(res.spans);
        res.items.forEach(withinLimits);
      }),
      RUNS,
    );
  });

  it('any export (arbitrary ids, times, attributes and JSON in them): never throws; accepted spans are within the limits, rejections name a field', () => {
    fc.assert(
      fc.property(otlpRequest, fc.boolean(), (req, limited) => {
        const res = mapOtlpExport(req, limited ? { project: 'p', limits: check } : {});
        expect(res.accepted + res.rejected.length).toBe(res.spans);
        for (const r of res.rejected) {
          expect(r.field).toMatch(/\S/);
          expect(r.reason).toMatch(/\S/);
        }
        if (limited) res.items.forEach(withinLimits);
        // what OTLP gives is put on the bus: it must survive the bus's own encoding
        for (const item of res.items) same(eventToItem(v1.Event.decode(v1.Event.encode(itemToEvent(item)).finish())), item);
      }),
      { numRuns: 200 },
    );
  });
});

describe('JSON Lines', () => {
  it('any line: an item, nothing (blank), or a JsonlError with the file and line', () => {
    fc.assert(
      fc.property(fc.oneof(anyText, jsonText, fc.jsonValue({ maxDepth: 5 }).map((v) => JSON.stringify(v)), v1Event.map((ev) => JSON.stringify(ev.kind?.value ?? {}))), (line) => {
        try {
          const item = parseJsonlLine(line, 'runs.jsonl', 3, check);
          if (item) withinLimits(item);
        } catch (e) {
          if (!(e instanceof JsonlError)) throw e;
          expect(e.message).toMatch(/^runs\.jsonl:3: \S/);
        }
      }),
      RUNS,
    );
  });

  it('valid items round-trip through a line of JSON', () => {
    fc.assert(
      fc.property(validItemJson, (raw) => {
        const item = normalizeItem(raw, roomy);
        same(parseJsonlLine(JSON.stringify(itemToJson(item)), 'runs.jsonl', 1, roomy), item);
      }),
      RUNS,
    );
  });
});
