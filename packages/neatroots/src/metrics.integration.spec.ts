import * as fs from 'node:fs';
import { credentials, Metadata, status } from '@grpc/grpc-js';
import { createLogger, LogBus, MemoryBus } from '@neatroots/platform';
import { deadLetterTopic } from '@neatroots/ports';
import { v1 } from '@neatroots/proto';
import { deadLetterMetricSource } from '@neatroots/review';
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
    // The groups of this app (an ingest's notes group, named anew at each start, counted under
    // one name for all of them); the dead letters' own consumer sets nothing aside.
    const groups = spies
      .flatMap((spy) => spy.mock.calls)
      .filter(([topic]) => topic.name !== deadLetterTopic(app.config.NEATROOTS_TOPIC_PREFIX).name)
      .map(([topic, opts]) => deadLetterMetricSource(`bus:${topic.name}/${opts.group}`));
    expect(groups.length).toBeGreaterThanOrEqual(6);
    expect(sources).toEqual([...new Set(['store.deliveries', 'store.events', 'store.findings', ...groups])].sort());
  });

  it("counts a dead letter of ingest's notes group (named anew at each start) from 0, under one source for every replica", async () => {
    const [topic, opts] = spies.flatMap((spy) => spy.mock.calls).find(([, o]) => o.transient && /ingest-notes/.test(o.group))!;
    const source = `bus:${topic.name}/${opts.group}`;
    const counted = `bus:${topic.name}/ingest-notes`;
    const count = async () => samples(await metrics(), 'neatroots_dead_letters_total').find((s) => s.labels.source === counted)?.value;
    expect(await count()).toBe(0);
    // what the bus of this replica's notes subscription sends when a note kept failing
    await app.bus.publish(deadLetterTopic(app.config.NEATROOTS_TOPIC_PREFIX), [{ key: 'p-alerts', value: { project: 'p-alerts', source, kind: 'message', reason: 'the note could not be sent', payload: { note_id: 'n1' } } }]);
    for (const end = Date.now() + 15_000; Date.now() < end && (await count()) !== 1; ) await new Promise((r) => setTimeout(r, 100));
    expect(await count()).toBe(1);
    // no series of the replica's own group name, which would appear at 1 and be gone at the next start
    expect(samples(await metrics(), 'neatroots_dead_letters_total').map((s) => s.labels.source)).not.toContain(source);
  });
});

describe("ingest's refusals", () => {
  /** Waits (bounded: ingest hands its counters over every second) until /metrics holds these counts by code. */
  async function untilFailed(want: Record<string, number>): Promise<void> {
    let got: Record<string, number> = {};
    for (const end = Date.now() + 15_000; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
      got = Object.fromEntries(samples(await metrics(), 'neatroots_ingest_calls_failed_total').map((s) => [s.labels.code, s.value]));
      if (Object.entries(want).every(([code, n]) => got[code] === n)) return;
    }
    expect(got).toMatchObject(want);
  }
  const post = (headers: Record<string, string>, body: string) =>
    fetch(`http://127.0.0.1:${app.ingest.otlpHttpPort}/v1/traces`, { method: 'POST', headers, body });

  it('counts each call refused as a whole by its gRPC code, over OTLP/HTTP and gRPC alike', async () => {
    // Before any call: the codes an operator looks for, at 0.
    await untilFailed({ UNAUTHENTICATED: 0, INVALID_ARGUMENT: 0, RESOURCE_EXHAUSTED: 0, UNAVAILABLE: 0 });
    expect((await post({ 'content-type': 'application/json', 'x-api-key': 'not-a-key' }, '{"resourceSpans":[]}')).status).toBe(401);
    expect((await post({ 'content-type': 'application/json', 'x-api-key': KEY }, '{"resourceSpans": [')).status).toBe(400);
    await untilFailed({ UNAUTHENTICATED: 1, INVALID_ARGUMENT: 1 });
    // What the HTTP receiver refuses itself (a content type it does not read: 415), and a
    // neatroots.v1 export over gRPC with a key no project has.
    expect((await post({ 'content-type': 'text/plain', 'x-api-key': KEY }, 'spans')).status).toBe(415);
    const client = new v1.IngestClient(`127.0.0.1:${app.ingest.grpcPort}`, credentials.createInsecure());
    try {
      const md = new Metadata();
      md.set('x-api-key', 'not-a-key');
      const code = await new Promise<number | undefined>((resolve) => client.export(v1.ExportRequest.fromPartial({ events: [] }), md, (err) => resolve(err?.code)));
      expect(code).toBe(status.UNAUTHENTICATED);
    } finally {
      client.close();
    }
    await untilFailed({ UNAUTHENTICATED: 2, INVALID_ARGUMENT: 2 });
  });
});

describe('what ingest published', () => {
  it('counts in neatroots_bus_published_total the records of the events topic, an OTLP root span giving its run_start and run_end beside it', async () => {
    const events = `${app.config.NEATROOTS_TOPIC_PREFIX}.events`;
    const count = (text: string, name: string, labels: Record<string, string>) =>
      samples(text, name).find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value ?? 0;
    const before = await metrics();
    const was = { published: count(before, 'neatroots_bus_published_total', { topic: events }), accepted: count(before, 'neatroots_spans_accepted_total', {}) };
    const now = BigInt(Date.now()) * 1_000_000n;
    const root = {
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId: 'b7ad6b7169203331',
      name: 'invoke_agent support',
      kind: 1,
      startTimeUnixNano: String(now - 1_000_000_000n),
      endTimeUnixNano: String(now),
      attributes: [
        { key: 'gen_ai.operation.name', value: { stringValue: 'invoke_agent' } },
        { key: 'input.value', value: { stringValue: 'where is my order?' } },
        { key: 'output.value', value: { stringValue: 'on its way' } },
      ],
    };
    const res = await fetch(`http://127.0.0.1:${app.ingest.otlpHttpPort}/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: JSON.stringify({ resourceSpans: [{ resource: { attributes: [] }, scopeSpans: [{ spans: [root] }] }] }),
    });
    expect(res.status).toBe(200);
    // One span accepted, three records on the bus (run_start, the span, run_end): what the
    // consumers count in neatroots_bus_consumed_total, and what the bus log holds.
    let after = { published: 0, accepted: 0 };
    for (const end = Date.now() + 15_000; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
      const text = await metrics();
      after = { published: count(text, 'neatroots_bus_published_total', { topic: events }) - was.published, accepted: count(text, 'neatroots_spans_accepted_total', {}) - was.accepted };
      if (after.published >= 3 && after.accepted >= 1) break;
    }
    expect(after).toEqual({ published: 3, accepted: 1 });
  });
});
