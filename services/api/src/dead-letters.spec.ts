/**
 * GET /v1/projects/{project}/dead-letters: what was set aside in a project, paged, with the
 * same key rules and error shape as the other lists; the same answer in-process (embedded) and
 * through the review service over gRPC (distributed).
 */
import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { INestApplication } from '@nestjs/common';
import type { Db } from '@neatroots/ports';
import { migrate, openPglite } from '@neatroots/platform';
import { createReviewQueries, reviewGrpcService } from '@neatroots/review';
import { DeadLettersRepo, ProjectsRepo } from '@neatroots/store';
import { apiUrl, createApi } from './api';
import { ReviewGrpcClient } from './review-client';

const KEY = 'key-p1';
const OTHER = 'key-p2';

let db: Db;
let server: Server;
let client: ReviewGrpcClient;
const apps: INestApplication[] = [];
const bases: Record<'in-process' | 'over gRPC', string> = { 'in-process': '', 'over gRPC': '' };

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  const projects = new ProjectsRepo(db);
  await projects.addApiKey('p1', KEY);
  await projects.addApiKey('p2', OTHER);
  const repo = new DeadLettersRepo(db);
  await repo.setAside([
    { project: 'p1', source: 'store.events', kind: 'span', run_id: 'r1', item_id: 's1', reason: 'bigint out of range (SQLSTATE 22003)', payload: { project: 'p1', item: { kind: 'span' } } },
    { project: 'p1', source: 'bus:neatroots.events/rule-engine', kind: 'span', run_id: 'r2', item_id: 's9', reason: 'cannot read the span', payload: { n: 1 } },
    { project: 'p2', source: 'store.findings', kind: 'finding', run_id: 'r7', item_id: 'f1', reason: 'integer out of range', payload: {} },
  ]);
  // Later by the clock as well as in order: set aside in the same millisecond, the two would tie on created_at (a fresh-clone CI run listed s9 first).
  await new Promise((r) => setTimeout(r, 5));
  await repo.setAside([{ project: 'p1', source: 'store.findings', kind: 'finding', run_id: 'r3', item_id: 'f3', reason: 'later', payload: 'x'.repeat(70_000) }]);
  const queries = createReviewQueries(db);
  const resolveKey = (key: string) => projects.resolveApiKey(key);
  server = new Server();
  const svc = reviewGrpcService(queries, resolveKey);
  server.addService(svc.service, svc.implementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  client = new ReviewGrpcClient(`127.0.0.1:${port}`);
  for (const [name, q] of [['in-process', queries], ['over gRPC', client]] as const) {
    const app = await createApi({ queries: q, resolveKey, port: 0, logger: false });
    apps.push(app);
    bases[name] = apiUrl(app);
  }
}, 60_000);

afterAll(async () => {
  for (const app of apps) await app.close();
  client?.close?.();
  server?.forceShutdown();
  await db?.close();
});

// JSON of any shape, checked field by field
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function call(base: string, path: string, key: string | null = KEY): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${path}`, { headers: key ? { 'x-api-key': key } : {} });
  return { status: res.status, body: await res.json() };
}

describe.each(['in-process', 'over gRPC'] as const)('GET /v1/projects/{project}/dead-letters (%s)', (name) => {
  const base = () => bases[name];

  it("lists the project's dead letters, newest first, with the reason and the item", async () => {
    const { status, body } = await call(base(), '/v1/projects/p1/dead-letters');
    expect(status).toBe(200);
    expect(body.next_cursor).toBeNull();
    expect(body.dead_letters.map((d: { item_id: string }) => d.item_id)).toEqual(['f3', expect.any(String), expect.any(String)]);
    expect(body.dead_letters.map((d: { item_id: string }) => d.item_id).sort()).toEqual(['f3', 's1', 's9']);
    const s1 = body.dead_letters.find((d: { item_id: string }) => d.item_id === 's1');
    expect(s1).toMatchObject({ project: 'p1', source: 'store.events', kind: 'span', run_id: 'r1', reason: 'bigint out of range (SQLSTATE 22003)', truncated: false, times: 1 });
    expect(JSON.parse(s1.payload)).toEqual({ project: 'p1', item: { kind: 'span' } });
    expect(s1.created_at).toMatch(/^\d{4}-\d\d-\d\dT/);
    const big = body.dead_letters[0];
    expect(big.truncated).toBe(true);
    expect(big.payload.length).toBe(64 * 1024);
  });

  it('pages with limit and cursor, each letter once', async () => {
    const first = await call(base(), '/v1/projects/p1/dead-letters?limit=2');
    expect(first.body.dead_letters).toHaveLength(2);
    expect(first.body.next_cursor).toEqual(expect.any(String));
    const second = await call(base(), `/v1/projects/p1/dead-letters?limit=2&cursor=${encodeURIComponent(first.body.next_cursor)}`);
    expect(second.body.next_cursor).toBeNull();
    const ids = [...first.body.dead_letters, ...second.body.dead_letters].map((d: { id: string }) => d.id);
    expect(new Set(ids).size).toBe(3);
  });

  it("shows only the key's own project, and answers bad input with the usual error JSON", async () => {
    expect((await call(base(), '/v1/projects/p2/dead-letters', OTHER)).body.dead_letters.map((d: { item_id: string }) => d.item_id)).toEqual(['f1']);
    expect(await call(base(), '/v1/projects/p2/dead-letters')).toMatchObject({ status: 403, body: { error: { code: 'forbidden' } } });
    expect(await call(base(), '/v1/projects/p1/dead-letters', null)).toMatchObject({ status: 401, body: { error: { code: 'unauthorized' } } });
    expect(await call(base(), '/v1/projects/p1/dead-letters?limit=0')).toMatchObject({ status: 400, body: { error: { code: 'invalid_query', message: expect.stringMatching(/limit/) } } });
    expect(await call(base(), '/v1/projects/p1/dead-letters?cursor=nonsense')).toMatchObject({ status: 400, body: { error: { message: expect.stringMatching(/cursor/) } } });
    expect(await call(base(), '/v1/projects/p1/dead-letters?color=red')).toMatchObject({ status: 400, body: { error: { code: 'unknown_parameter', message: expect.stringMatching(/color/) } } });
  });
});
