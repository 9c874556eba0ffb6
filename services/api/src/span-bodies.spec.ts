/**
 * A run's spans without their bodies (`?bodies=preview`) and one span whole
 * (GET .../runs/{run_id}/spans/{span_id}): what the run page reads, so a run of large outputs
 * is not downloaded whole before any span is looked at. The same answers in-process (the
 * embedded deployment) and over the review service's gRPC (the distributed one).
 */
import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { INestApplication } from '@nestjs/common';
import type { Db } from '@neatroots/ports';
import { createReviewQueries, reviewGrpcService } from '@neatroots/review';
import type { Envelope } from '@neatroots/spans';
import { ProjectsRepo, RunsRepo, SPAN_PREVIEW_CHARS, type ReviewQueries } from '@neatroots/store';
import { migrate, openPglite } from '@neatroots/platform';
import { apiUrl, createApi } from './api';
import { ReviewGrpcClient } from './review-client';

const T0 = Date.parse('2025-01-01T00:00:00.000Z');
const KEY = 'key-for-p1';
/** A large output (3 MB), its end told apart from its start. */
const OUTPUT = 'o'.repeat(3_000_000) + ' THE END';
const INPUT = { query: 'refund policy', page: 2 };
const SPANS = 8;

let db: Db;
let server: Server;
let client: ReviewGrpcClient;
const apps: INestApplication[] = [];
const bases: Record<'embedded' | 'distributed', string> = { embedded: '', distributed: '' };

const span = (i: number): Envelope => ({
  project: 'p1',
  received_ms: T0,
  item: {
    kind: 'span',
    span: { run_id: 'big', span_id: `s${i}`, type: 'tool', name: `search ${i}`, tool: 'search_kb', status: 'ok', start_ms: T0 + i, input: INPUT, output: `${i}:${OUTPUT}` },
  },
});

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  const projects = new ProjectsRepo(db);
  await projects.addApiKey('p1', KEY);
  await new RunsRepo(db).writeEnvelopes(Array.from({ length: SPANS }, (_, i) => span(i)));
  await new RunsRepo(db).writeEnvelopes([{ project: 'p1', received_ms: T0, item: { kind: 'span', span: { run_id: 'small', span_id: 'a', type: 'llm', name: 'plan', status: 'ok', input: 'hi', output: 'short' } } }]);
  const queries = createReviewQueries(db);
  server = new Server();
  const svc = reviewGrpcService(queries, (key) => projects.resolveApiKey(key));
  server.addService(svc.service, svc.implementation);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  client = new ReviewGrpcClient(`127.0.0.1:${port}`);
  const start = async (q: ReviewQueries, resolveKey: (key: string) => ReturnType<ReviewGrpcClient['resolveKey']>) => {
    const app = await createApi({ queries: q, resolveKey, port: 0, logger: false });
    apps.push(app);
    return apiUrl(app);
  };
  bases.embedded = await start(queries, (key) => projects.resolveApiKey(key));
  bases.distributed = await start(client, (key) => client.resolveKey(key));
}, 120_000);

afterAll(async () => {
  for (const app of apps) await app.close();
  client?.close();
  server?.forceShutdown();
  await db?.close();
});

/** The answer's status, its parsed body and its size in bytes. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function get(base: string, path: string): Promise<{ status: number; body: any; bytes: number }> {
  const res = await fetch(`${base}${path}`, { headers: { 'x-api-key': KEY } });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text), bytes: Buffer.byteLength(text) };
}

describe.each(['embedded', 'distributed'] as const)('a run\'s spans without their bodies, and one span whole (%s)', (where) => {
  const base = () => bases[where];

  it('?bodies=preview cuts each input and output past the preview, naming its full length; the page is kilobytes, not megabytes', async () => {
    const full = await get(base(), '/v1/projects/p1/runs/big/spans?limit=2');
    expect(full.status).toBe(200);
    expect(full.body.spans[0].output).toBe(`0:${OUTPUT}`);
    expect(full.body.spans[0].truncated).toBeUndefined();

    const page = await get(base(), '/v1/projects/p1/runs/big/spans?bodies=preview');
    expect(page.status).toBe(200);
    expect(page.body.spans.map((s: { span_id: string }) => s.span_id)).toEqual(Array.from({ length: SPANS }, (_, i) => `s${i}`));
    expect(page.body.next_cursor).toBeNull();
    expect(page.body.cut_at_bytes).toBeUndefined();
    expect(page.body.spans[3]).toEqual({
      run_id: 'big', span_id: 's3', type: 'tool', name: 'search 3', tool: 'search_kb', status: 'ok', start_ms: T0 + 3,
      input: INPUT,
      output: `3:${OUTPUT}`.slice(0, SPAN_PREVIEW_CHARS),
      truncated: { output: `3:${OUTPUT}`.length },
    });
    // 8 spans of 3 MB: 24 MB whole; previewed, under 10 KB.
    expect(page.bytes).toBeLessThan(10_000);

    // The run page too, and a span with short bodies is as stored.
    const run = await get(base(), '/v1/projects/p1/runs/big?bodies=preview');
    expect(run.status).toBe(200);
    expect(run.body.spans).toEqual(page.body.spans);
    expect(run.bytes).toBeLessThan(10_000);
    const small = await get(base(), '/v1/projects/p1/runs/small?bodies=preview');
    expect(small.body.spans).toEqual([{ run_id: 'small', span_id: 'a', type: 'llm', name: 'plan', status: 'ok', input: 'hi', output: 'short' }]);

    expect(await get(base(), '/v1/projects/p1/runs/big/spans?bodies=none')).toMatchObject({ status: 400, body: { error: { code: 'invalid_query', message: 'bodies must be one of full, preview' } } });
    expect(await get(base(), '/v1/projects/p1/runs/big?bodies=all')).toMatchObject({ status: 400, body: { error: { code: 'invalid_query' } } });
    expect((await get(base(), '/v1/projects/p1/runs/big?spans=1')).status).toBe(400);
  });

  it('GET .../spans/{span_id} gives the span whole; an unknown span or run is 404', async () => {
    const one = await get(base(), '/v1/projects/p1/runs/big/spans/s5');
    expect(one.status).toBe(200);
    expect(one.body.span).toEqual({ run_id: 'big', span_id: 's5', type: 'tool', name: 'search 5', tool: 'search_kb', status: 'ok', start_ms: T0 + 5, input: INPUT, output: `5:${OUTPUT}` });
    expect(await get(base(), '/v1/projects/p1/runs/big/spans/gone')).toMatchObject({ status: 404, body: { error: { code: 'not_found', message: 'no span gone in run big of project p1' } } });
    expect((await get(base(), '/v1/projects/p1/runs/nope/spans/s5')).status).toBe(404);
    expect((await get(base(), '/v1/projects/p1/runs/big/spans/s5?bodies=preview')).status).toBe(400);
  });
});
