/**
 * A run with more findings than the run page carries (its newest 500), over the distributed api
 * (the review service's gRPC): GET runs/{run_id} answers the newest 500 with findings_total, the
 * findings list of the run pages the rest, and MCP get_run counts them all (it counted the
 * findings the run page carried, 500 at most).
 */
import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { INestApplication } from '@nestjs/common';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Db } from '@neatroots/ports';
import { createReviewQueries, reviewGrpcService } from '@neatroots/review';
import { FindingsRepo, ProjectsRepo, RunsRepo } from '@neatroots/store';
import { migrate, openPglite } from '@neatroots/platform';
import { apiUrl, createApi } from './api';
import { ReviewGrpcClient } from './review-client';

const T0 = Date.parse('2025-01-01T00:00:00.000Z');
const KEY = 'bound-key';
const FINDINGS = 520;

let db: Db;
let server: Server;
let client: ReviewGrpcClient;
let app: INestApplication;
let base: string;

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  const projects = new ProjectsRepo(db);
  await projects.addApiKey('p1', KEY);
  await new RunsRepo(db).writeEnvelopes([{ project: 'p1', received_ms: T0, item: { kind: 'span', span: { run_id: 'r1', span_id: 's0', type: 'tool', name: 'fetch', status: 'ok', start_ms: T0 } } }]);
  await new FindingsRepo(db).apply(
    Array.from({ length: FINDINGS }, (_, i) => ({
      id: `f${String(i).padStart(4, '0')}`, check_id: 'slow-tool-call', run_id: 'r1', project: 'p1', status: 'raised' as const, span_ids: ['s0'], count: 1,
      action: 'flag' as const, title: `Slow call ${i}`, guidance: '', at_ms: T0 + i, kind: 'rule' as const, source: 'library' as const,
    })),
  );
  server = new Server();
  const svc = reviewGrpcService(createReviewQueries(db), (key) => projects.resolveApiKey(key));
  server.addService(svc.service, svc.implementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  client = new ReviewGrpcClient(`127.0.0.1:${port}`);
  app = await createApi({ queries: client, resolveKey: (key) => client.resolveKey(key), port: 0, logger: false });
  base = apiUrl(app);
}, 60_000);

afterAll(async () => {
  await app?.close();
  client?.close();
  server?.forceShutdown();
  await db?.close();
});

async function get<T>(path: string): Promise<T> {
  const res = await fetch(`${base}/v1/projects/p1/${path}`, { headers: { 'x-api-key': KEY } });
  expect(res.status).toBe(200);
  return (await res.json()) as T;
}

describe('a run with more findings than the run page carries, over the review service', () => {
  it('the run page holds the newest 500 and findings_total; the findings list of the run pages the rest', async () => {
    const d = await get<{ findings: { id: string }[]; findings_total: number; findings_scope: string; problems: unknown[] }>('runs/r1');
    expect([d.findings.length, d.findings_total, d.findings_scope, d.problems.length]).toEqual([500, FINDINGS, 'newest', 500]);
    expect([d.findings[0]!.id, d.findings.at(-1)!.id]).toEqual(['f0020', 'f0519']);
    const page = await get<{ findings: { id: string }[]; next_cursor: string }>('findings?run_id=r1&state=all&include_quiet=true&limit=500');
    const rest = await get<{ findings: { id: string }[]; next_cursor: string | null }>(`findings?run_id=r1&state=all&include_quiet=true&limit=500&cursor=${page.next_cursor}`);
    expect([rest.findings.length, rest.findings[0]!.id, rest.findings.at(-1)!.id, rest.next_cursor]).toEqual([20, 'f0019', 'f0000', null]);
  });

  it('MCP get_run counts every finding of the run', async () => {
    const mcp = new Client({ name: 'run-findings-bound-spec', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { 'x-api-key': KEY } } }));
    try {
      const r = (await mcp.callTool({ name: 'get_run', arguments: { run_id: 'r1' } })) as { isError?: boolean; content: { text: string }[] };
      const v = JSON.parse(r.content.map((c) => c.text).join('\n')) as { findings: unknown[]; findings_total: number; findings_more?: string; findings_scope?: string };
      expect([r.isError ?? false, v.findings.length, v.findings_total, typeof v.findings_more, v.findings_scope]).toEqual([false, 10, FINDINGS, 'string', undefined]);
    } finally {
      await mcp.close();
    }
  });
});
