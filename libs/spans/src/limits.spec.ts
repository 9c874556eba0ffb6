import fc from 'fast-check';
import { otlp, v1 } from '@neatroots/proto';
import { SpanValidationError } from './errors';
import { JsonlError, parseJsonlLine } from './jsonl';
import { DEFAULT_SPAN_LIMITS, measureDeep, measureJson, type LimitCheck } from './limits';
import { normalizeItem } from './normalize';
import { mapOtlpExport } from './otlp';
import { eventToItem, spanToProto } from './wire';

const NOW = Date.UTC(2026, 0, 1);
const check: LimitCheck = { limits: DEFAULT_SPAN_LIMITS, now: NOW };
const nested = (depth: number): unknown => JSON.parse('['.repeat(depth) + ']'.repeat(depth));
const span = (extra: Record<string, unknown>) => ({ run_id: 'r1', span_id: 's1', type: 'tool', name: 'search', ...extra });

function rejection(fn: () => unknown): SpanValidationError {
  try {
    fn();
  } catch (e) {
    if (e instanceof SpanValidationError) return e;
    throw e;
  }
  throw new Error('not rejected');
}

describe('measureJson', () => {
  it('measures a value nested far deeper than the stack allows, without recursing', () => {
    expect(measureJson(nested(200_000), 64, Infinity).tooDeep).toBe(true);
    expect(measureJson(nested(64), 64, Infinity).tooDeep).toBe(false);
    expect(measureJson(nested(65), 64, Infinity).tooDeep).toBe(true);
  });

  it('counts roughly the characters of the JSON', () => {
    const v = { a: 'x'.repeat(1000), b: [1, 2, 3] };
    const m = measureJson(v, 64, Infinity);
    expect(m.chars).toBeGreaterThanOrEqual(JSON.stringify(v).length);
    expect(m.chars).toBeLessThan(JSON.stringify(v).length + 64);
  });
  it('answers as the explicit-stack walk does, for any value, depth limit and budget (recursing while shallow)', () => {
    // Values wrapped up to 80 levels deep, so the walk hands subtrees past its recursion depth to the stack.
    const deepened = fc.tuple(fc.jsonValue({ maxDepth: 4 }), fc.integer({ min: 0, max: 80 })).map(([v, n]) => {
      let out: unknown = v;
      for (let i = 0; i < n; i++) out = i % 2 ? [out, 1] : { k: out, s: 'x' };
      return out;
    });
    fc.assert(
      fc.property(deepened, fc.integer({ min: 1, max: 100 }), fc.integer({ min: 0, max: 2_000 }), (v, maxDepth, maxChars) => {
        const fast = measureJson(v, maxDepth, maxChars);
        const deep = measureDeep(v, maxDepth, maxChars);
        expect(fast.tooDeep).toBe(deep.tooDeep);
        if (!deep.tooDeep) expect(fast.chars > maxChars ? 'over' : fast.chars).toBe(deep.chars > maxChars ? 'over' : deep.chars);
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('item limits', () => {
  it('refuses JSON nested past the limit, naming the field and the variable', () => {
    const e = rejection(() => normalizeItem(span({ input: { args: nested(5_000) } }), check));
    expect(e.field).toBe('input');
    expect(e.message).toMatch(/nested more than 64 levels deep \(NEATROOTS_MAX_JSON_DEPTH\)/);
    expect(e.span_id).toBe('s1');
  });

  it('refuses token counts the store cannot sum, and accepts ordinary ones', () => {
    expect(rejection(() => normalizeItem(span({ usage: { input_tokens: 1e300 } }), check)).field).toBe('usage.input_tokens');
    expect(rejection(() => normalizeItem(span({ usage: { total_tokens: 5e18 } }), check)).message).toMatch(/NEATROOTS_MAX_TOKENS/);
    expect(normalizeItem(span({ usage: { input_tokens: 120_000, output_tokens: 4_000 } }), check)).toMatchObject({ span: { usage: { total_tokens: 124_000 } } });
  });

  it('refuses timestamps past the window ahead of the clock, and keeps old ones', () => {
    expect(rejection(() => normalizeItem(span({ start_ms: 1e300 }), check)).field).toBe('start_ms');
    // 2^64-1 ns, what a broken exporter sends: the year 2554
    const e = rejection(() => normalizeItem(span({ end_ms: 18446744073709.55 }), check));
    expect(e.message).toMatch(/2554-.*more than 86400000 ms ahead/);
    expect(rejection(() => normalizeItem({ event: 'run_end', run_id: 'r1', ts_ms: NOW + 2 * 86_400_000 }, check)).field).toBe('ts_ms');
    expect(normalizeItem(span({ start_ms: 1_000, end_ms: NOW + 60_000 }), check).kind).toBe('span');
  });

  it('refuses too many attributes, an oversized attribute and an oversized item', () => {
    const limits = { ...DEFAULT_SPAN_LIMITS, maxAttributes: 3, maxAttributeChars: 100, maxItemChars: 2_000 };
    const c = { limits, now: NOW };
    expect(rejection(() => normalizeItem(span({ attributes: { a: 1, b: 2, c: 3, d: 4 } }), c)).field).toBe('attributes');
    expect(rejection(() => normalizeItem(span({ attributes: { big: 'x'.repeat(200) } }), c)).field).toBe('attributes.big');
    expect(rejection(() => normalizeItem(span({ output: 'y'.repeat(3_000) }), c)).message).toMatch(/larger than 2000 characters \(NEATROOTS_MAX_ITEM_CHARS\)/);
    expect(rejection(() => normalizeItem({ event: 'run_end', run_id: 'r', final_output: 'z'.repeat(3_000) }, c)).field).toBe('final_output');
  });

  it('is not applied without a check (the bus reads back what ingest accepted)', () => {
    expect(normalizeItem(span({ usage: { input_tokens: 1e300 } })).kind).toBe('span');
  });
});

describe('limits on the wire formats', () => {
  it('neatroots.v1: names the message field (input_json)', () => {
    const msg = spanToProto({ run_id: 'r1', span_id: 's1', type: 'tool', name: 't', status: 'ok' });
    msg.input_json = '['.repeat(5_000) + ']'.repeat(5_000);
    const ev: v1.Event = { kind: { $case: 'span', value: msg } };
    expect(rejection(() => eventToItem(ev, check)).field).toBe('input_json');
    msg.input_json = undefined;
    msg.start_ms = 1e300;
    expect(rejection(() => eventToItem(ev, check)).field).toBe('start_ms');
  });

  it('OTLP: names the attribute or span field the exporter sent', () => {
    const kv = (key: string, value: otlp.AnyValue['value']): otlp.KeyValue => ({ key, value: { value } });
    const s = (id: string, attributes: otlp.KeyValue[], end = '1700000001000000000') =>
      otlp.Span.fromPartial({
        trace_id: Buffer.from('0af7651916cd43dd8448eb211c80319c', 'hex'),
        span_id: Buffer.from(id, 'hex'),
        name: 'tool',
        start_time_unix_nano: '1700000000000000000',
        end_time_unix_nano: end,
        attributes: [kv('gen_ai.operation.name', { $case: 'string_value', value: 'execute_tool' }), ...attributes],
      });
    const req: otlp.ExportTraceServiceRequest = {
      resource_spans: [{
        resource: { attributes: [], dropped_attributes_count: 0 },
        schema_url: '',
        scope_spans: [{
          schema_url: '',
          spans: [
            s('0000000000000001', [kv('gen_ai.tool.call.arguments', { $case: 'string_value', value: '{"a":'.repeat(5_000) + '1' + '}'.repeat(5_000) })]),
            s('0000000000000002', [kv('gen_ai.usage.input_tokens', { $case: 'double_value', value: 1e300 })]),
            s('0000000000000003', [], '18446744073709551615'),
            s('0000000000000004', [kv('gen_ai.tool.name', { $case: 'string_value', value: 'fine' })]),
          ],
        }],
      }],
    };
    const res = mapOtlpExport(req, { limits: check });
    expect(res.accepted).toBe(1);
    expect(res.rejected.map((r) => r.field)).toEqual(['gen_ai.tool.call.arguments', 'gen_ai.usage.input_tokens', 'end_time_unix_nano']);
    expect(res.rejected[0].reason).toMatch(/NEATROOTS_MAX_JSON_DEPTH/);
  });

  it('jsonl: a JsonlError with the file, line and field', () => {
    const line = JSON.stringify(span({ usage: { input_tokens: 1e300 } }));
    expect(() => parseJsonlLine(line, 'runs.jsonl', 7, check)).toThrow(JsonlError);
    expect(() => parseJsonlLine(line, 'runs.jsonl', 7, check)).toThrow(/^runs\.jsonl:7: usage\.input_tokens: /);
  });
});
