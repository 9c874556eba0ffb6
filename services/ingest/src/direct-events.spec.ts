/**
 * Ingest's events topic writes each record with envelopeBytes: the same bytes as the topic's
 * own codec (@neatroots/messages), for what ingest publishes.
 */
import { makeTopics } from '@neatroots/messages';
import { v1 } from '@neatroots/proto';
import { DEFAULT_SPAN_LIMITS, mapEvents, type Envelope } from '@neatroots/spans';
import { directEvents } from './ingest';

const NOW = 1_767_225_600_000;

describe('the events topic as ingest publishes to it', () => {
  const codec = makeTopics('t').events;
  const direct = directEvents(codec);

  it("writes the codec's bytes for every item an export's mapping accepts, and reads back the same", () => {
    const events: v1.Event[] = [];
    for (let r = 0; r < 20; r++) {
      events.push({ kind: { $case: 'run_start', value: { run_id: `run-${r}`, project: '', workflow: 'checkout', session_id: r % 2 ? 's' : '', system_prompt: 'You help ✓', user_message: 'refund order 4', tools: [{ name: 'lookup', description: 'finds an order' }], ts_ms: NOW - 10 } } });
      for (let i = 0; i < 5; i++) {
        events.push({
          kind: {
            $case: 'span',
            value: {
              run_id: `run-${r}`, span_id: `s${i}`, parent_id: i ? 's0' : '', type: i % 2 ? 'tool' : 'llm', name: '', tool: i % 2 ? 'send_email' : '', status: '', model: i % 2 ? '' : 'gpt', project: '',
              workflow: '', session_id: '', input_json: JSON.stringify({ q: `query ${i}`, page: 1 }), output_json: i === 3 ? '{"total": 2.0, "é": "\\ud83d\\ude00"}' : undefined,
              error: i === 4 ? 'timeout' : undefined, start_ms: NOW - 5 + i, end_ms: NOW + i, usage: i % 2 ? undefined : { input_tokens: 10, output_tokens: 3 }, attributes_json: i === 2 ? '{"k":"v","n":[1,null]}' : undefined,
            },
          },
        });
      }
      events.push({ kind: { $case: 'run_end', value: { run_id: `run-${r}`, status: r % 3 ? 'ok' : 'error', final_output_json: r % 2 ? '"refunded"' : undefined, ts_ms: NOW } } });
    }
    const res = mapEvents(events, { project: 'shop', limits: { limits: DEFAULT_SPAN_LIMITS, now: NOW } });
    expect(res.rejected).toEqual([]);
    for (const item of res.items) {
      const env: Envelope = { project: 'shop', received_ms: NOW, item };
      const bytes = direct.encode(env);
      expect(Buffer.from(bytes).equals(Buffer.from(codec.encode(env)))).toBe(true);
      expect(direct.decode(bytes)).toEqual(codec.decode(codec.encode(env)));
    }
  });

  it('hands an envelope it does not write to the codec', () => {
    const odd = { project: 'shop', received_ms: NOW, item: { kind: 'span', span: { run_id: 'r', span_id: 's', type: 'tool', name: 'n', status: 'ok', start_ms: null } } } as unknown as Envelope;
    expect(Buffer.from(direct.encode(odd)).equals(Buffer.from(codec.encode(odd)))).toBe(true);
    expect(direct.name).toBe(codec.name);
  });
});
