import * as fs from 'node:fs';
import { createLogger, loadModelConfig, until } from '@neatroots/platform';
import type { Envelope } from '@neatroots/spans';
import { startFakeOpenAI, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { tempHome, testConfig } from './test-app.test';

/**
 * A model that refuses every request (a wrong key: HTTP 401) leaves the live question checks
 * not checked. Operators see it: /metrics counts the requests by endpoint and outcome and the
 * questions by result, and the log says it, one line a minute per endpoint, without the key.
 * Before, /metrics showed only the tasks and the cache misses, and the log said nothing.
 */
const QUESTION = `id: wrong-call
kind: yes_no
scope: span
when: live
ask: Was this call the wrong one?
`;
const KEY = 'sk-SECRET-model-key-0123456789';

let fake: FakeOpenAI;
let app: EmbeddedApp;
let home: string;
const lines: { level: string; msg: string; [k: string]: unknown }[] = [];

beforeAll(async () => {
  // A real server echoes the key it refused; the log must not.
  fake = await startFakeOpenAI(() => ({ status: 401, content: `Incorrect API key provided: ${KEY}. You can find your API key in your account.` }));
  home = tempHome('neatroots-model-failures', { 'q.yaml': QUESTION });
  const models = loadModelConfig({ NEATROOTS_DECISION_MODEL_URL: fake.url, NEATROOTS_DECISION_MODEL_NAME: 'judge-test', NEATROOTS_DECISION_MODEL_KEY: KEY });
  const log = createLogger({ level: 'warn', format: 'json', write: (line) => lines.push(JSON.parse(line) as (typeof lines)[number]) });
  app = await startEmbedded({ config: testConfig(home), models, inMemoryDb: true, watch: false, log });
}, 120_000);

afterAll(async () => {
  await app?.close();
  await fake?.close();
  if (home) fs.rmSync(home, { recursive: true, force: true });
}, 60_000);

const metrics = async () => (await fetch(`http://127.0.0.1:${app.adminPort}/metrics`)).text();
/** A counter's value for these labels (service aside), or undefined when the series is not there. */
function value(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    const m = new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`).exec(line);
    if (!m) continue;
    const got = Object.fromEntries([...m[1].matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[2]);
  }
  return undefined;
}

let n = 0;
async function sendCall(run: string): Promise<void> {
  n++;
  const span: Envelope = {
    project: 'shop',
    received_ms: Date.now(),
    item: { kind: 'span', span: { run_id: run, span_id: `s${n}`, type: 'tool', name: 'search', tool: 'search', status: 'ok', input: { q: `query ${n}` }, output: `result ${n}` } },
  };
  await app.bus.publish(app.topics.events, [{ key: run, value: span }]);
}

describe('a model that refuses every request', () => {
  it('is counted on /metrics by endpoint and outcome, its questions as not checked, and said in the log once a minute, without the key', async () => {
    // Every outcome of the configured endpoint is there from the start, at 0.
    const fresh = await metrics();
    expect(value(fresh, 'neatroots_model_requests_total', { endpoint: 'decision', outcome: 'rejected' })).toBe(0);
    expect(value(fresh, 'neatroots_model_requests_total', { endpoint: 'decision', outcome: 'ok' })).toBe(0);
    expect(value(fresh, 'neatroots_questions_total', { result: 'not_checked' })).toBe(0);

    await sendCall('run-1');
    const first = await until('a rejected request on /metrics', async () => {
      const text = await metrics();
      return (value(text, 'neatroots_model_requests_total', { endpoint: 'decision', outcome: 'rejected' }) ?? 0) >= 1 ? text : undefined;
    }, 30_000);
    expect(value(first, 'neatroots_model_requests_total', { endpoint: 'decision', outcome: 'ok' })).toBe(0);
    // A second failure within the minute: counted, not logged again.
    const before = fake.calls.length;
    await sendCall('run-2');
    await until('another request refused', () => fake.calls.length > before, 30_000);
    const text = await until('both runs\' questions not checked on /metrics', async () => {
      const t = await metrics();
      return (value(t, 'neatroots_model_requests_total', { endpoint: 'decision', outcome: 'rejected' }) ?? 0) >= 2 && (value(t, 'neatroots_questions_total', { result: 'not_checked' }) ?? 0) >= 2 ? t : undefined;
    }, 30_000);
    expect(value(text, 'neatroots_questions_total', { result: 'answered' })).toBe(0);

    const warnings = lines.filter((l) => l.msg.startsWith('the decision model '));
    expect(warnings.map((l) => l.msg)).toEqual([
      `the decision model rejected requests (HTTP 401): Incorrect API key provided: [model key]. You can find your API key in your account; what was asked of it is not checked or answered`,
    ]);
    expect(warnings[0]).toMatchObject({ endpoint: 'decision', outcome: 'rejected', status: 401 });
    expect(JSON.stringify(lines)).not.toContain(KEY);
  }, 90_000);
});
