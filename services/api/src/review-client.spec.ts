/**
 * The distributed path: the api asks the review service over real gRPC (ReviewGrpcClient ->
 * neatroots.v1.Review), so what the REST API answers does not depend on the deployment.
 */
import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { INestApplication } from '@nestjs/common';
import type { Db } from '@neatroots/ports';
import { createReviewQueries, reviewGrpcService } from '@neatroots/review';
import type { Envelope } from '@neatroots/spans';
import { FindingsRepo, ProjectsRepo, RunsRepo } from '@neatroots/store';
import { migrate, openPglite } from '@neatroots/platform';
import { apiUrl, createApi } from './api';
import { ReviewGrpcClient } from './review-client';

const T0 = Date.parse('2025-01-01T00:00:00.000Z');
const KEY = 'key-for-p1';
const AGENT_KEY = 'agent-key-for-p1';

let db: Db;
let server: Server;
let client: ReviewGrpcClient;
let app: INestApplication;
let base: string;

const span = (span_id: string, start_ms: number): Envelope => ({
  project: 'p1', received_ms: T0, item: { kind: 'span', span: { run_id: 'r1', span_id, type: 'tool', name: 'search', status: 'ok', start_ms } },
});

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  const projects = new ProjectsRepo(db);
  await projects.addApiKey('p1', KEY);
  await projects.addApiKey('p1', AGENT_KEY, 'agents', 'ingest');
  await new RunsRepo(db).writeEnvelopes([...Array.from({ length: 600 }, (_, i) => span(`s${i}`, T0 + i / 4))]);
  const findings = new FindingsRepo(db);
  // three dismissals make `noisy` quiet in p1: its next finding is recorded quiet
  for (const id of ['n1', 'n2', 'n3']) {
    await findings.apply([{ id, check_id: 'noisy', run_id: 'r1', project: 'p1', status: 'raised', span_ids: ['s1'], count: 1, action: 'flag', title: 'Noisy', guidance: '', at_ms: T0, kind: 'rule', source: 'library' }]);
    await findings.dismiss('p1', id);
  }
  await findings.apply([{ id: 'n4', check_id: 'noisy', run_id: 'r1', project: 'p1', status: 'raised', span_ids: ['s1'], count: 1, action: 'flag', title: 'Noisy', guidance: '', at_ms: T0 + 5, kind: 'rule', source: 'library' }]);

  server = new Server();
  const svc = reviewGrpcService(createReviewQueries(db), (key) => projects.resolveApiKey(key));
  server.addService(svc.service, svc.implementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  client = new ReviewGrpcClient(`127.0.0.1:${port}`);
  app = await createApi({
    queries: client,
    resolveKey: (key) => client.resolveKey(key),
    port: 0,
    logger: false,
  });
  base = apiUrl(app);
}, 60_000);

afterAll(async () => {
  await app?.close();
  client?.close();
  server?.forceShutdown();
  await db?.close();
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function get(path: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${path}`, { headers: { 'x-api-key': KEY } });
  return { status: res.status, body: await res.json() };
}

describe('api over the review service\'s gRPC', () => {
  it('pages a run\'s spans in order', async () => {
    const page = await get('/v1/projects/p1/runs/r1');
    expect(page.body.spans).toHaveLength(500);
    const rest = await get(`/v1/projects/p1/runs/r1/spans?cursor=${encodeURIComponent(page.body.spans_next_cursor)}&limit=100`);
    expect(rest.status).toBe(200);
    expect(rest.body.spans.map((s: { span_id: string }) => s.span_id)).toEqual(Array.from({ length: 100 }, (_, i) => `s${500 + i}`));
    expect(rest.body.next_cursor).toBeNull();
    expect(await get('/v1/projects/p1/runs/nope/spans')).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    expect(await get('/v1/projects/p1/runs/r1/spans?cursor=bad')).toMatchObject({ status: 400, body: { error: { code: 'invalid_cursor', message: 'cursor is not one this list returned' } } });
  });

  it('carries a key\'s scope: an ingest key (an agent\'s) is refused 403, before a body is read too', async () => {
    const refused = { error: { code: 'forbidden', message: 'this key may only send spans (scope ingest); use a full key for the API' } };
    const read = await fetch(`${base}/v1/projects/p1/findings`, { headers: { 'x-api-key': AGENT_KEY } });
    expect({ status: read.status, body: await read.json() }).toEqual({ status: 403, body: refused });
    const dismiss = await fetch(`${base}/v1/projects/p1/findings/n4/dismiss`, { method: 'POST', headers: { 'x-api-key': AGENT_KEY, 'content-type': 'application/json' }, body: '{}' });
    expect({ status: dismiss.status, body: await dismiss.json() }).toEqual({ status: 403, body: refused });
    expect(await client.resolveKey(AGENT_KEY)).toEqual({ project: 'p1', scope: 'ingest' });
    expect(await client.resolveKey(KEY)).toEqual({ project: 'p1', scope: 'api' });
    expect(await client.resolveKey('nope')).toBeNull();
  });

  it('passes include_quiet on', async () => {
    expect((await get('/v1/projects/p1/findings')).body.findings).toEqual([]);
    expect((await get('/v1/projects/p1/findings?include_quiet=true')).body.findings.map((f: { id: string }) => f.id)).toEqual(['n4']);
  });
});

describe('the review service away (restarting, its database down, overloaded)', () => {
  it('answers 503 unavailable with Retry-After, for reads and for writes, not 500', async () => {
    // A review service that served once and then stopped: the api's gRPC client finds no one there.
    const gone = new Server();
    const svc = reviewGrpcService(createReviewQueries(db), (key) => new ProjectsRepo(db).resolveApiKey(key));
    gone.addService(svc.service, svc.implementation);
    const port = await new Promise<number>((resolve, reject) =>
      gone.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    const away = new ReviewGrpcClient(`127.0.0.1:${port}`, 2_000);
    const awayApp = await createApi({ queries: away, resolveKey: (key) => away.resolveKey(key), port: 0, logger: false });
    try {
      const url = apiUrl(awayApp);
      expect((await fetch(`${url}/v1/projects/p1/runs`, { headers: { 'x-api-key': KEY } })).status).toBe(200);
      gone.forceShutdown();
      for (const init of [{ method: 'GET' }, { method: 'POST', body: JSON.stringify({ reason: 'noise' }), headers: { 'content-type': 'application/json' } }]) {
        const path = init.method === 'GET' ? '/v1/projects/p1/runs' : '/v1/projects/p1/findings/n4/dismiss';
        const res = await fetch(`${url}${path}`, { ...init, headers: { ...(init.headers ?? {}), 'x-api-key': KEY } });
        expect({ method: init.method, status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() }).toEqual({
          method: init.method,
          status: 503,
          retryAfter: '5',
          body: { error: { code: 'unavailable', message: expect.stringMatching(/^the review service cannot answer right now \((UNAVAILABLE|DEADLINE_EXCEEDED): .*\); retry shortly$/) } },
        });
      }
    } finally {
      await awayApp.close();
      away.close();
    }
  }, 30_000);
});
