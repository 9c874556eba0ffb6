import * as fs from 'node:fs';
import { createLogger, LogBus, MemoryBus } from '@neatroots/platform';
import { deadLetterTopic } from '@neatroots/ports';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { testConfig, tempHome } from './test-app.test';

/**
 * The counters the alerts watch, as a fresh embedded app serves them on /metrics. An alert on a
 * counter's increase (NeatrootsDeadLetters: `increase(neatroots_dead_letters_total[15m]) > 0`)
 * sees nothing of a series that first appears at 1: the first dead letter of a source, often
 * the only one, never alerted. So every source known at start is there at 0 before anything
 * happened.
 */
const KEY = 'key-alerts';
let app: EmbeddedApp;
let home: string;
/** Watches the app's subscriptions (calling through): the consumer groups it runs. */
const spies = [jest.spyOn(LogBus.prototype, 'subscribe'), jest.spyOn(MemoryBus.prototype, 'subscribe')];

beforeAll(async () => {
  home = tempHome('neatroots-metrics');
  const config = testConfig(home, { NEATROOTS_API_KEYS: `p-alerts=${KEY}` });
  app = await startEmbedded({ config, inMemoryDb: true, watch: false, log: createLogger({ level: 'silent' }) });
}, 120_000);

afterAll(async () => {
  jest.restoreAllMocks();
  await app?.close();
  if (home) fs.rmSync(home, { recursive: true, force: true });
}, 60_000);

const metrics = async () => (await fetch(`http://127.0.0.1:${app.adminPort}/metrics`)).text();
/** The samples of a metric: its labels (without `service`) and value. */
function samples(text: string, name: string): { labels: Record<string, string>; value: number }[] {
  const out: { labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    const m = new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`).exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...m[1].matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    expect(labels.service).toBe('all');
    delete labels.service;
    out.push({ labels, value: Number(m[2]) });
  }
  return out;
}

describe('the counters alerts watch, on a fresh embedded app', () => {
  it('has neatroots_dead_letters_total at 0 for the stores and for every consumer group that can set a record aside', async () => {
    const text = await metrics();
    expect(text).toMatch(/^neatroots_dead_letters_total\{[^}]*source="store\.events"[^}]*\} 0$/m);
    const zero = samples(text, 'neatroots_dead_letters_total');
    expect(zero.every((s) => s.value === 0)).toBe(true);
    const sources = zero.map((s) => s.labels.source).sort();
    // The groups of this app: an ingest's notes group is named anew at each start, and the
    // dead letters' own consumer sets nothing aside.
    const groups = spies
      .flatMap((spy) => spy.mock.calls)
      .filter(([topic, opts]) => !opts.transient && topic.name !== deadLetterTopic(app.config.NEATROOTS_TOPIC_PREFIX).name)
      .map(([topic, opts]) => `bus:${topic.name}/${opts.group}`);
    expect(groups.length).toBeGreaterThanOrEqual(5);
    expect(sources).toEqual([...new Set(['store.deliveries', 'store.events', 'store.findings', ...groups])].sort());
  });
});
