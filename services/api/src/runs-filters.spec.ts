import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { INestApplication } from '@nestjs/common';
import type { Db } from '@neatroots/ports';
import { createReviewQueries, reviewGrpcService } from '@neatroots/review';
import type { Envelope } from '@neatroots/spans';
import { ProjectsRepo, RunsRepo } from '@neatroots/store';
import { migrate, openPglite } from '@neatroots/platform';
import { apiUrl, createApi } from './api';
import { ReviewGrpcClient } from './review-client';

/**
 * GET runs filtered by session, end status (running: not ended yet) and start time, with the
 * same answers in-process (embedded) and over the review service's gRPC (distributed).
 */
const T0 = Date.parse('2025-01-01T00:00:00.000Z');
const KEY = 'key-for-p1';

const start = (run_id: string, session_id: string, ts_ms: number): Envelope => ({
  project: 'p1', received_ms: ts_ms, item: { kind: 'run_start', run: { event: 'run_start', run_id, session_id, workflow: 'w', ts_ms } },
});
const end = (run_id: string, status: 'ok' | 'error', ts_ms: number): Envelope => ({
  project: 'p1', received_ms: ts_ms, item: { kind: 'run_end', run: { event: 'run_end', run_id, status, ts_ms } },
});

let db: Db;
let server: Server;
let client: ReviewGrpcClient;
const apps: INestApplication[] = [];
const bases: Record<string, string> = {};

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  const projects = new ProjectsRepo(db);
  await projects.addApiKey('p1', KEY);
  await new RunsRepo(db).writeEnvelopes([
    start('a', 's1', T0), end('a', 'error', T0 + 10),
    start('b', 's1', T0 + 1000), end('b', 'ok', T0 + 1010),
    start('c', 's2', T0 + 2000),
    start('d', 's1', T0 + 3000),
  ]);
  const queries = createReviewQueries(db);
  server = new Server();
  const svc = reviewGrpcService(queries, (key) => projects.resolveApiKey(key));
  server.addService(svc.service, svc.implementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  client = new ReviewGrpcClient(`127.0.0.1:${port}`);
  for (const [name, q] of [['in-process', queries], ['over gRPC', client]] as const) {
    const app = await createApi({ queries: q, resolveKey: (key) => projects.resolveApiKey(key), port: 0, logger: false, appDir: null });
    apps.push(app);
    bases[name] = apiUrl(app);
  }
}, 60_000);

afterAll(async () => {
  for (const a of apps) await a.close();
  client?.close();
  server?.forceShutdown();
  await db?.close();
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function get(base: string, query: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}/v1/projects/p1/runs?${query}`, { headers: { 'x-api-key': KEY } });
  return { status: res.status, body: await res.json() };
}

describe.each(['in-process', 'over gRPC'])('GET runs filters (%s)', (name) => {
  const ids = async (query: string) => {
    const r = await get(bases[name], query);
    expect(r.status).toBe(200);
    return (r.body.runs as { run_id: string }[]).map((x) => x.run_id);
  };

  it('filters by session_id and end_status, running meaning not ended', async () => {
    expect(await ids('session_id=s1')).toEqual(['d', 'b', 'a']);
    expect(await ids('end_status=error')).toEqual(['a']);
    expect(await ids('end_status=running')).toEqual(['d', 'c']);
    expect(await ids('session_id=s1&end_status=running')).toEqual(['d']);
  });

  it('filters by start time (from inclusive, to exclusive, any offset) and pages within the filter', async () => {
    expect(await ids(`from=${new Date(T0 + 1000).toISOString()}&to=${new Date(T0 + 3000).toISOString()}`)).toEqual(['c', 'b']);
    expect(await ids(`from=${encodeURIComponent('2025-01-01T01:00:02+01:00')}`)).toEqual(['d', 'c']);
    const first = await get(bases[name], 'session_id=s1&limit=2');
    expect(first.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual(['d', 'b']);
    expect(await ids(`session_id=s1&limit=2&cursor=${first.body.next_cursor}`)).toEqual(['a']);
  });

  it('refuses a bad status or time, naming the parameter', async () => {
    const bad = await get(bases[name], 'end_status=finished');
    expect(bad).toEqual({ status: 400, body: { error: { code: 'invalid_query', message: 'end_status must be one of ok, error, no_output, interrupted, running' } } });
    const time = await get(bases[name], 'from=yesterday');
    expect(time.status).toBe(400);
    expect(time.body.error.message).toMatch(/^from must be an ISO-8601 date or time/);
    // A day that does not exist is refused, not rolled over into March.
    expect(await get(bases[name], 'from=2025-02-31')).toMatchObject({ status: 400, body: { error: { code: 'invalid_query' } } });
    expect(await get(bases[name], `to=${encodeURIComponent('2025-01-01T24:00:00Z')}`)).toMatchObject({ status: 400 });
  });

});

describe('from and to without an offset', () => {
  it("are UTC, whatever the server's time zone (the built params, in a process of another zone)", () => {
    const dist = path.join(__dirname, '../dist/params.js');
    const out = spawnSync(process.execPath, ['-e', `console.log(require(${JSON.stringify(dist)}).timeParam('2026-11-30T10:00:00', 'from'))`], { env: { ...process.env, TZ: 'America/New_York' }, encoding: 'utf8' });
    expect(out.stderr).toBe('');
    expect(out.stdout.trim()).toBe('2026-11-30T10:00:00.000Z');
  });
});
