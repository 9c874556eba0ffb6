/**
 * envelopeBytes writes what the generated encoder writes for the same envelope, byte for
 * byte: the events topic's records do not change with it.
 */
import fc from 'fast-check';
import { v1 } from '@neatroots/proto';
import { envelopeBytes } from './envelope-bytes';
import { DEFAULT_SPAN_LIMITS } from './limits';
import { RUN_END_STATUSES, SPAN_TYPES, type Envelope, type StreamItem } from './types';
import { eventToItem, itemToEvent } from './wire';

/** The events topic's encoding before envelopeBytes (@neatroots/messages: envelopeToProto, then the generated encoder). */
function reference(env: Envelope): Buffer {
  return Buffer.from(v1.Envelope.encode({ project: env.project, received_ms: env.received_ms, event: itemToEvent(env.item) }).finish());
}

// Any UTF-16: lone surrogates, control characters, quotes, characters of 2, 3 and 4 bytes in UTF-8.
// and the edges of UTF-8's lengths (0x7f/0x80, 0xff/0x100, 0x7ff/0x800, a pair, a surrogate alone).
const edges = fc.string({ unit: fc.constantFrom('a', '\u007f', '\u0080', 'é', '\u00ff', '\u0100', '\u07ff', '\u0800', '\uffff', '😀', '\ud800', '\udfff'), maxLength: 60 });
const text = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme' }), edges, fc.constantFrom('', '\ud800', 'a\udc00b', '"\\\n', '\u0000'));
const long = fc.string({ unit: 'grapheme', minLength: 100, maxLength: 3000 });
const num = fc.oneof(fc.double(), fc.constantFrom(0, -0, NaN, Infinity, -1, 1e300, Number.MAX_SAFE_INTEGER, 1.5), fc.integer({ min: 0, max: 2 ** 53 }));
const json = fc.oneof(fc.jsonValue({ maxDepth: 4 }), long, fc.constant(undefined));

/** Items as the mapping makes them: every field of its type. */
const span = fc.record(
  {
    run_id: text, span_id: text, parent_id: text, type: fc.constantFrom(...SPAN_TYPES), name: text, tool: text, input: json, output: json,
    error: fc.oneof(text, fc.constant(null)), status: fc.constantFrom('ok', 'error'), start_ms: num, end_ms: num,
    usage: fc.record({ input_tokens: num, output_tokens: num, total_tokens: num, cost: num }, { requiredKeys: [] }),
    model: text, project: text, workflow: text, session_id: text, attributes: fc.dictionary(text, fc.jsonValue({ maxDepth: 3 }), { maxKeys: 6 }),
  },
  { requiredKeys: ['run_id', 'span_id', 'type', 'name', 'status'] },
).map((span): StreamItem => ({ kind: 'span', span }));
const runStart = fc.record(
  {
    run_id: text, project: text, workflow: text, session_id: text, system_prompt: fc.oneof(text, long), user_message: text,
    tools: fc.array(fc.record({ name: text, description: text }, { requiredKeys: ['name'] }), { maxLength: 4 }), ts_ms: num,
  },
  { requiredKeys: ['run_id'] },
).map((run): StreamItem => ({ kind: 'run_start', run: { event: 'run_start', ...run } }));
const runEnd = fc.record({ run_id: text, status: fc.constantFrom(...RUN_END_STATUSES), final_output: json, ts_ms: num }, { requiredKeys: ['run_id', 'status'] })
  .map((run): StreamItem => ({ kind: 'run_end', run: { event: 'run_end', ...run } }));
const item = fc.oneof(span, runStart, runEnd);
const envelope = fc.record({ project: text, received_ms: fc.oneof(num, fc.constant(Date.UTC(2026, 0, 1))), item });

describe('envelopeBytes', () => {
  it("writes the generated encoder's bytes for any item of the mapping's types", () => {
    fc.assert(
      fc.property(envelope, (env) => {
        const bytes = envelopeBytes(env);
        expect(bytes).toBeDefined();
        expect(bytes!.equals(reference(env))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('writes the same bytes for what the mapping accepts of a neatroots.v1 export', () => {
    const events: v1.Event[] = [
      { kind: { $case: 'span', value: { run_id: 'r', span_id: 's', parent_id: '', type: 'tool', name: '', tool: 'search', status: '', model: '', project: '', workflow: 'w', session_id: 'é', input_json: '{"q": "x\\u00e9"}', output_json: '[1, 2.50]', attributes_json: '{"b":1,"a":{"c":[null]}}' } } },
      { kind: { $case: 'span', value: { run_id: 'r', span_id: 's2', parent_id: 's', type: 'llm', name: 'chat', tool: '', status: 'error', model: 'm', project: '', workflow: '', session_id: '', error: 'boom', start_ms: 1.5, end_ms: 2, usage: { input_tokens: 3 } } } },
      { kind: { $case: 'run_start', value: { run_id: 'r', project: '', workflow: '', session_id: '', system_prompt: 'be 😀', user_message: '', tools: [{ name: 't', description: '' }, { name: 'u', description: 'd' }], ts_ms: 5 } } },
      { kind: { $case: 'run_end', value: { run_id: 'r', status: 'ok', final_output_json: '"done"' } } },
      { kind: { $case: 'run_end', value: { run_id: 'r', status: '' } } },
    ];
    for (const ev of events) {
      const env: Envelope = { project: 'shop', received_ms: 1_767_225_600_000, item: eventToItem(ev, { limits: DEFAULT_SPAN_LIMITS, now: 1_767_225_600_000 }) };
      expect(envelopeBytes(env)!.equals(reference(env))).toBe(true);
    }
  });

  it('leaves what is not of its declared type to the generated encoder, and is never different from it', () => {
    const odd = fc.oneof(fc.constant(undefined), fc.constant(null), fc.integer(), fc.boolean(), text, fc.constant({}), fc.constant([]));
    const anyItem = fc.oneof(
      fc.dictionary(fc.constantFrom('run_id', 'span_id', 'parent_id', 'type', 'name', 'tool', 'error', 'status', 'start_ms', 'end_ms', 'usage', 'model', 'project', 'workflow', 'session_id', 'attributes', 'input'), odd)
        .map((span) => ({ kind: 'span', span })),
      fc.dictionary(fc.constantFrom('run_id', 'project', 'system_prompt', 'tools', 'ts_ms'), fc.oneof(odd, fc.constant([{ name: 1 }]), fc.constant([null]), fc.constant([{ name: 'a' }])))
        .map((run) => ({ kind: 'run_start', run })),
      fc.dictionary(fc.constantFrom('run_id', 'status', 'final_output', 'ts_ms'), odd).map((run) => ({ kind: 'run_end', run })),
      fc.constant({ kind: 'other' }),
      fc.constant(undefined),
    );
    fc.assert(
      fc.property(fc.record({ project: odd, received_ms: fc.oneof(num, odd), item: anyItem }), (raw) => {
        const env = raw as unknown as Envelope;
        const bytes = envelopeBytes(env);
        if (bytes === undefined) return;
        // Written here: the generated encoder writes it too, the same.
        expect(bytes.equals(reference(env))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('fails the test when a byte differs (the reference is not itself)', () => {
    const env: Envelope = { project: 'p', received_ms: 1, item: { kind: 'run_end', run: { event: 'run_end', run_id: 'r', status: 'ok' } } };
    const other: Envelope = { ...env, item: { kind: 'run_end', run: { event: 'run_end', run_id: 'r', status: 'error' } } };
    expect(envelopeBytes(env)!.equals(reference(other))).toBe(false);
  });
});
