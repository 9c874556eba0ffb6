import * as fs from 'node:fs';
import { Metadata, credentials, status, type ServiceError } from '@grpc/grpc-js';
import { createLogger } from '@neatroots/platform';
import { otlp, v1 } from '@neatroots/proto';
import { itemToEvent, type Span } from '@neatroots/spans';
import { DeadLettersRepo, RunsRepo } from '@neatroots/store';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { testConfig, tempHome } from './test-app.test';

/**
 * The fault suite of "no single input can stop the pipeline": each poison input is sent
 * between two other projects' runs over the real gRPC ingest of the embedded app. Both runs
 * are stored, and the poison is either rejected at ingest with the field and the reason, or
 * set aside in dead_letters with its reason. Before the limits and the dead letters, each of
 * these made the store writer retry one batch forever, and nothing after it was stored.
 */
const KEYS = { a: 'key-a', b: 'key-b', x: 'key-x' } as const;
type Who = keyof typeof KEYS;
const PROJECT: Record<Who, string> = { a: 'project-a', b: 'project-b', x: 'project-x' };
const NOW_NS = BigInt(Date.now()) * 1_000_000n;

let app: EmbeddedApp;
let home: string;
let neatroots: v1.IngestClient;
let otlpClient: otlp.TraceServiceClient;

/** Boots the embedded app (each describe its own) and the raw gRPC clients. */
function bootApp(env: Record<string, string>): void {
  beforeAll(async () => {
    home = tempHome('neatroots-poison');
    const config = testConfig(home, {
      NEATROOTS_API_KEYS: (Object.keys(KEYS) as Who[]).map((w) => `${PROJECT[w]}=${KEYS[w]}`).join(','),
      ...env,
    });
    app = await startEmbedded({ config, inMemoryDb: true, watch: false, log: createLogger({ level: process.env.POISON_LOG ? 'debug' : 'silent' }) });
    neatroots = new v1.IngestClient(`127.0.0.1:${app.ingest.grpcPort}`, credentials.createInsecure());
    otlpClient = new otlp.TraceServiceClient(`127.0.0.1:${app.ingest.otlpPort}`, credentials.createInsecure());
  }, 120_000);

  afterAll(async () => {
    neatroots?.close();
    otlpClient?.close();
    await app?.close();
    fs.rmSync(home, { recursive: true, force: true });
  }, 60_000);
}

function md(who: Who): Metadata {
  const m = new Metadata();
  m.set('x-api-key', KEYS[who]);
  return m;
}

type Outcome<T> = { ok: true; res: T } | { ok: false; err: ServiceError };

function exportV1(who: Who, events: v1.Event[]): Promise<Outcome<v1.ExportResponse>> {
  return new Promise((resolve) =>
    neatroots.export(v1.ExportRequest.fromPartial({ events }), md(who), (err, res) => resolve(err ? { ok: false, err } : { ok: true, res: res as v1.ExportResponse })),
  );
}

function exportOtlp(who: Who, spans: otlp.Span[]): Promise<Outcome<otlp.ExportTraceServiceResponse>> {
  const req: otlp.ExportTraceServiceRequest = {
    resource_spans: [{ resource: { attributes: [], dropped_attributes_count: 0 }, schema_url: '', scope_spans: [{ schema_url: '', spans }] }],
  };
  return new Promise((resolve) =>
    otlpClient.export(req, md(who), (err, res) => resolve(err ? { ok: false, err } : { ok: true, res: res as otlp.ExportTraceServiceResponse })),
  );
}

const span = (run_id: string, span_id: string, extra: Partial<Span> = {}): v1.Event =>
  itemToEvent({ kind: 'span', span: { run_id, span_id, type: 'tool', name: 'search', status: 'ok', start_ms: Date.now() - 1000, end_ms: Date.now(), ...extra } });

let seq = 0;

/** An ordinary run of one project: start, two spans, end. */
async function ordinaryRun(who: Who): Promise<string> {
  const run_id = `${who}-run-${++seq}`;
  const out = await exportV1(who, [
    itemToEvent({ kind: 'run_start', run: { event: 'run_start', run_id, workflow: 'support' } }),
    span(run_id, 's1', { usage: { input_tokens: 1200, output_tokens: 80 } }),
    span(run_id, 's2'),
    itemToEvent({ kind: 'run_end', run: { event: 'run_end', run_id, status: 'ok', final_output: 'done' } }),
  ]);
  expect(out.ok ? out.res.accepted : `${status[out.err.code]}: ${out.err.details}`).toBe(4);
  return run_id;
}

async function until<T>(what: string, get: () => Promise<T | undefined | null | false>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await get();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits until the run is stored whole (its two spans and its end). */
function stored(who: Who, runId: string) {
  return until(`run ${runId} of ${PROJECT[who]} stored`, async () => {
    const run = await new RunsRepo(app.db).get(PROJECT[who], runId);
    return run && run.span_count === 2 && run.end_status === 'ok' ? run : undefined;
  });
}

/** Sends a run of project a, the poison (project x), a run of project b; both runs must be stored. */
async function between<T>(poison: () => Promise<T>): Promise<T> {
  const a = await ordinaryRun('a');
  const out = await poison();
  const b = await ordinaryRun('b');
  await Promise.all([stored('a', a), stored('b', b)]);
  return out;
}

const kv = (key: string, value: otlp.AnyValue['value']): otlp.KeyValue => ({ key, value: { value } });

function otlpTool(attributes: otlp.KeyValue[], end = NOW_NS): otlp.Span {
  const id = (++seq).toString(16).padStart(16, '0');
  return otlp.Span.fromPartial({
    trace_id: Buffer.from(id.padStart(32, 'f'), 'hex'),
    span_id: Buffer.from(id, 'hex'),
    name: 'execute_tool lookup',
    start_time_unix_nano: (NOW_NS - 1_000_000n).toString(),
    end_time_unix_nano: end.toString(),
    attributes: [kv('gen_ai.operation.name', { $case: 'string_value', value: 'execute_tool' }), kv('gen_ai.tool.name', { $case: 'string_value', value: 'lookup' }), ...attributes],
  });
}

/** The poison was refused as a whole (it was all the request held): INVALID_ARGUMENT naming the field. */
function rejected(out: Outcome<unknown>, field: string, reason: RegExp): void {
  expect(out.ok).toBe(false);
  const err = (out as { err: ServiceError }).err;
  expect(err.code).toBe(status.INVALID_ARGUMENT);
  expect(err.details).toContain(`${field}: `);
  expect(err.details).toMatch(reason);
}

describe('no single input stops the pipeline (embedded app, real gRPC ingest)', () => {
  // not the default (64): the configured limit is the one ingest applies
  bootApp({ NEATROOTS_MAX_JSON_DEPTH: '16' });

  it('a tool-arguments string of JSON nested 5,000 deep (OTLP): rejected at ingest', async () => {
    const deep = '{"a":'.repeat(5_000) + '1' + '}'.repeat(5_000);
    const out = await between(() => exportOtlp('x', [otlpTool([kv('gen_ai.tool.call.arguments', { $case: 'string_value', value: deep })])]));
    rejected(out, 'gen_ai.tool.call.arguments', /nested more than 16 levels deep \(NEATROOTS_MAX_JSON_DEPTH\)/);
  }, 60_000);

  it('gen_ai.usage.input_tokens of 1e300 (OTLP): rejected at ingest', async () => {
    const out = await between(() => exportOtlp('x', [otlpTool([kv('gen_ai.usage.input_tokens', { $case: 'double_value', value: 1e300 })])]));
    rejected(out, 'gen_ai.usage.input_tokens', /1e\+300, more than 1000000000 tokens \(NEATROOTS_MAX_TOKENS\)/);
  }, 60_000);

  it('two spans of 5e18 tokens, whose run total overflows a bigint (neatroots.v1): rejected at ingest', async () => {
    const out = await between(() =>
      exportV1('x', [span('x-huge', 'h1', { usage: { total_tokens: 5e18 } }), span('x-huge', 'h2', { usage: { total_tokens: 5e18 } })]),
    );
    rejected(out, 'usage.total_tokens', /NEATROOTS_MAX_TOKENS/);
  }, 60_000);

  it('a start_ms of 1e300 (neatroots.v1): rejected at ingest', async () => {
    const out = await between(() => exportV1('x', [span('x-late', 'l1', { start_ms: 1e300, end_ms: 1e300 })]));
    rejected(out, 'start_ms', /more than 86400000 ms ahead of the receiver's clock \(NEATROOTS_MAX_FUTURE_MS\)/);
  }, 60_000);

  it('an end time of 2^64-1 ns, the year 2554 (OTLP): rejected at ingest', async () => {
    const out = await between(() => exportOtlp('x', [otlpTool([], 2n ** 64n - 1n)]));
    rejected(out, 'end_time_unix_nano', /2554-/);
  }, 60_000);

  it('one bad span among good ones: only it is rejected, the others of the same export are stored', async () => {
    const out = await between(() =>
      exportV1('x', [span('x-mixed', 'm1'), span('x-mixed', 'm2', { input: JSON.parse('['.repeat(100) + ']'.repeat(100)) }), span('x-mixed', 'm3')]),
    );
    expect(out).toMatchObject({ ok: true, res: { accepted: 2, rejected: [{ index: 1, field: 'input_json', span_id: 'm2' }] } });
    const run = await until('x-mixed stored', async () => {
      const r = await new RunsRepo(app.db).get(PROJECT.x, 'x-mixed');
      return r && r.span_count === 2 ? r : undefined;
    });
    expect(run.span_count).toBe(2);
  }, 60_000);

  it('a final output ending in half an emoji (a lone surrogate, which jsonb refuses; neatroots.v1): stored, with U+FFFD in its place', async () => {
    const out = await between(() =>
      exportV1('x', [
        span('x-surrogate', 'u1'),
        span('x-surrogate', 'u2'),
        // valid JSON text, valid protobuf: an agent that cut its answer in the middle of an emoji
        { kind: { $case: 'run_end', value: { run_id: 'x-surrogate', status: 'ok', final_output_json: '"Here you are \\ud83d"' } } },
      ]),
    );
    expect(out).toMatchObject({ ok: true, res: { accepted: 3 } });
    const run = await until('x-surrogate stored', async () => {
      const r = await new RunsRepo(app.db).get(PROJECT.x, 'x-surrogate');
      return r && r.end_status === 'ok' ? r : undefined;
    });
    expect(run).toMatchObject({ span_count: 2, final_output: 'Here you are \ufffd' });
    expect((await new DeadLettersRepo(app.db).list(PROJECT.x)).items).toEqual([]);
  }, 60_000);
});

describe('below ingest: what slips past the limits is set aside, not retried forever (embedded app)', () => {
  // Ingest's depth limit raised past what the store sends to the database (512): the store's
  // own guard must catch it. Without it, PGlite crashes and nothing is stored after.
  bootApp({ NEATROOTS_MAX_JSON_DEPTH: '1000' });

  it('a span with JSON nested 600 deep: accepted, set aside with its reason, listed by the API and counted; everything around it stored', async () => {
    const deep = JSON.parse('['.repeat(600) + ']'.repeat(600)) as unknown;
    const out = await between(() => exportV1('x', [span('x-deep', 'd1'), span('x-deep', 'd2', { input: deep }), span('x-deep', 'd3')]));
    expect(out).toMatchObject({ ok: true, res: { accepted: 3 } });
    const run = await until('x-deep stored', async () => {
      const r = await new RunsRepo(app.db).get(PROJECT.x, 'x-deep');
      return r && r.span_count === 2 ? r : undefined;
    });
    expect(run.span_count).toBe(2);
    const letters = (await new DeadLettersRepo(app.db).list(PROJECT.x)).items;
    expect(letters).toEqual([expect.objectContaining({ source: 'store.events', kind: 'span', run_id: 'x-deep', item_id: 'd2', reason: 'input is JSON nested more than 512 levels deep' })]);
    expect(JSON.parse(letters[0].payload)).toMatchObject({ project: PROJECT.x, item: { kind: 'span', span: { span_id: 'd2' } } });
    // the other projects have none; the REST API lists it for its own project; the metric counts it
    expect((await new DeadLettersRepo(app.db).list(PROJECT.a)).items).toEqual([]);
    const res = await fetch(`http://127.0.0.1:${app.httpPort}/v1/projects/${PROJECT.x}/dead-letters`, { headers: { 'x-api-key': KEYS.x } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { dead_letters: unknown[] }).dead_letters).toEqual([expect.objectContaining({ run_id: 'x-deep', item_id: 'd2', reason: letters[0].reason })]);
    const metrics = await (await fetch(`http://127.0.0.1:${app.adminPort}/metrics`)).text();
    expect(metrics).toMatch(/neatroots_dead_letters_total\{[^}]*source="store.events"[^}]*\} 1/);
  }, 60_000);
});
