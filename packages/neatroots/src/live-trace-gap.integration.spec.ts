import * as fs from 'node:fs';
import { createLogger } from '@neatroots/platform';
import type { Envelope } from '@neatroots/spans';
import { startEmbedded } from './embedded';
import { tempHome, testConfig } from './test-app.test';

/**
 * NEATROOTS_LIVE_TRACE_GAP_MS reaches the question scheduler of the embedded app: a live trace
 * question is asked again only once the gap has passed since its last ask (by ingest's receipt
 * times), and after every batch at 0.
 */
const QUESTION = `id: went-wrong
kind: yes_no
scope: trace
when: live
ask: Did the run go wrong?
`;

const T0 = Date.now();
const span = (id: string, at: number): Envelope => ({
  project: 'shop',
  received_ms: at,
  item: { kind: 'span', span: { run_id: 'run-1', span_id: id, type: 'tool', name: 'search', tool: 'search', status: 'ok', input: { q: id }, output: `result ${id}`, start_ms: at, end_ms: at + 5 } },
});

/** The asks of went-wrong for three exports received 0, 300 and 1,200 ms after the first. */
async function asks(env: Record<string, string>): Promise<string[][]> {
  const home = tempHome('neatroots-live-gap', { 'q.yaml': QUESTION });
  const app = await startEmbedded({ config: testConfig(home, env), inMemoryDb: true, watch: false, log: createLogger({ level: 'error' }) });
  try {
    const seen: string[][] = [];
    await app.bus.subscribe(app.topics.questions, { group: 'test-asks', fromBeginning: true }, async (b) => {
      for (const r of b.records) for (const t of r.value) if (t.type === 'question' && t.check.id === 'went-wrong') seen.push(t.evidence.spans.map((s) => s.id));
    });
    for (const [id, after] of [['s1', 0], ['s2', 300], ['s3', 1_200]] as const) {
      await app.bus.publish(app.topics.events, [{ key: 'run-1', value: span(id, T0 + after) }]);
      await app.bus.idle();
    }
    return seen;
  } finally {
    await app.close();
    fs.rmSync(home, { recursive: true, force: true });
  }
}

describe('NEATROOTS_LIVE_TRACE_GAP_MS in the embedded app', () => {
  it('asks a live trace question again only after the gap (a second by default), with everything so far', async () => {
    expect(await asks({})).toEqual([['s1'], ['s1', 's2', 's3']]);
  }, 60_000);

  it('asks after every batch at 0', async () => {
    expect(await asks({ NEATROOTS_LIVE_TRACE_GAP_MS: '0' })).toEqual([['s1'], ['s1', 's2'], ['s1', 's2', 's3']]);
  }, 60_000);
});
