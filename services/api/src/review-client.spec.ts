/**
 * The distributed path: the api asks the review service over real gRPC (ReviewGrpcClient ->
 * neatroots.v1.Review), so what the REST API answers does not depend on the deployment.
 */
import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { INestApplication } from '@nestjs/common';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Db } from '@neatroots/ports';
import { createReviewQueries, reviewGrpcService } from '@neatroots/review';
import type { Envelope } from '@neatroots/spans';
import { FindingsRepo, ProjectsRepo, RunsRepo, SPAN_PAGE_BYTES } from '@neatroots/store';
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
let port: number;

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
  port = await new Promise<number>((resolve, reject) =>
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
async function get(path: string, at = base): Promise<{ status: number; body: any; retryAfter: string | null }> {
  const res = await fetch(`${at}${path}`, { headers: { 'x-api-key': KEY } });
  return { status: res.status, body: await res.json(), retryAfter: res.headers.get('retry-after') };
}

/** An MCP tool's answer through the MCP SDK's client: its text, parsed unless an error. */
async function tool(at: string, name: string, args: Record<string, unknown>): Promise<{ error?: string; value?: Record<string, unknown> }> {
  const mcp = new Client({ name: 'review-client-spec', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${at}/v1/mcp`), { requestInit: { headers: { 'x-api-key': KEY } } }));
  try {
    const r = (await mcp.callTool({ name, arguments: args })) as { isError?: boolean; content: { text: string }[] };
    const text = r.content.map((c) => c.text).join('\n');
    return r.isError ? { error: text } : { value: JSON.parse(text) as Record<string, unknown> };
  } finally {
    await mcp.close();
  }
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

describe('runs of large spans over the review service\'s gRPC (each reply over grpc-js\'s default 4 MiB)', () => {
  const OUTPUT = 300_000;
  const bigSpan = (run_id: string, i: number): Envelope => ({
    project: 'p1', received_ms: T0, item: { kind: 'span', span: { run_id, span_id: `b${String(i).padStart(3, '0')}`, type: 'tool', name: 'search', tool: 'search_kb', status: 'ok', start_ms: T0 + i, output: 'x'.repeat(OUTPUT) } },
  });
  const ids = (spans: { span_id: string }[]) => spans.map((s) => s.span_id);

  beforeAll(async () => {
    // 20 spans of 300 KB: 6 MB. 60 of them: 18 MB, past a page's bytes (SPAN_PAGE_BYTES, 16 MiB).
    await new RunsRepo(db).writeEnvelopes(Array.from({ length: 20 }, (_, i) => bigSpan('big', i)));
    await new RunsRepo(db).writeEnvelopes(Array.from({ length: 60 }, (_, i) => bigSpan('bigger', i)));
  }, 60_000);

  it('the run page, its spans and MCP get_run and list_spans answer a run of 20 spans of 300 KB', async () => {
    const page = await get('/v1/projects/p1/runs/big');
    expect(page.status).toBe(200);
    expect(page.body.spans).toHaveLength(20);
    expect(page.body.spans.every((s: { output: string }) => s.output.length === OUTPUT)).toBe(true);
    expect(page.body.spans_next_cursor).toBeNull();
    const spans = await get('/v1/projects/p1/runs/big/spans?limit=20');
    expect([spans.status, spans.body.spans.length, spans.body.next_cursor]).toEqual([200, 20, null]);

    const run = await tool(base, 'get_run', { run_id: 'big' });
    expect(run.error).toBeUndefined();
    expect(run.value!.spans).toEqual(Array.from({ length: 20 }, () => expect.objectContaining({ output: 'x'.repeat(500), truncated: { output: OUTPUT } })));
    expect(run.value!.spans_next_cursor).toBeNull();
    const few = await tool(base, 'get_run', { run_id: 'big', spans_limit: 3 });
    expect(ids(few.value!.spans as { span_id: string }[])).toEqual(['b000', 'b001', 'b002']);
    const listed = await tool(base, 'list_spans', { run_id: 'big', limit: 20, cursor: few.value!.spans_next_cursor });
    expect(listed.error).toBeUndefined();
    expect(ids(listed.value!.spans as { span_id: string }[])).toEqual(ids(page.body.spans).slice(3));
  }, 60_000);

  it('a page whose spans pass 16 MiB stops there, saying so, and its cursor has the rest', async () => {
    const page = await get('/v1/projects/p1/runs/bigger');
    expect(page.status).toBe(200);
    expect(page.body.spans_cut_at_bytes).toBe(SPAN_PAGE_BYTES);
    const first = page.body.spans.length;
    expect(first).toBeGreaterThan(40);
    expect(first).toBeLessThan(60);
    const seen = ids(page.body.spans);
    let cursor: string | null = page.body.spans_next_cursor;
    while (cursor) {
      const next = await get(`/v1/projects/p1/runs/bigger/spans?limit=2000&cursor=${encodeURIComponent(cursor)}`);
      expect(next.status).toBe(200);
      seen.push(...ids(next.body.spans));
      cursor = next.body.next_cursor;
    }
    expect(seen).toEqual(Array.from({ length: 60 }, (_, i) => `b${String(i).padStart(3, '0')}`));
    // From the start, limit 2000: cut the same way.
    const all = await get('/v1/projects/p1/runs/bigger/spans?limit=2000');
    expect([all.body.spans.length, all.body.cut_at_bytes]).toEqual([first, SPAN_PAGE_BYTES]);
    const listed = await tool(base, 'list_spans', { run_id: 'bigger', limit: 500 });
    expect([(listed.value!.spans as unknown[]).length, listed.value!.cut_at_bytes]).toEqual([first, SPAN_PAGE_BYTES]);
    expect(listed.value!.next_cursor).toBe(all.body.next_cursor);
  }, 60_000);

  it('an answer larger than the api takes is 502 answer_too_large, not "retry shortly", over REST and MCP', async () => {
    // This api takes replies of 1 MB: the run page of 20 spans of 300 KB is more.
    const small = new ReviewGrpcClient(`127.0.0.1:${port}`, undefined, { 'grpc.max_receive_message_length': 1_000_000 });
    const smallApp = await createApi({ queries: small, resolveKey: (key) => small.resolveKey(key), port: 0, logger: false });
    try {
      const at = apiUrl(smallApp);
      const message = expect.stringMatching(
        /^the review service's answer is too large to pass to this process \(RESOURCE_EXHAUSTED: Received message larger than max \(\d+ vs\.? 1000000\)\); asking again gets the same: ask for less where the call takes a limit$/,
      );
      expect(await get('/v1/projects/p1/runs/big', at)).toEqual({ status: 502, retryAfter: null, body: { error: { code: 'answer_too_large', message } } });
      expect(await tool(at, 'list_spans', { run_id: 'big', limit: 20 })).toEqual({ error: message });
      // Fewer spans pass: get_run asks review for the spans it shows, not the run page's 500.
      expect((await tool(at, 'list_spans', { run_id: 'big', limit: 2 })).value!.spans).toHaveLength(2);
      const two = await tool(at, 'get_run', { run_id: 'big', spans_limit: 2 });
      expect(two.error).toBeUndefined();
      expect([ids(two.value!.spans as { span_id: string }[]), two.value!.spans_next_cursor]).toEqual([['b000', 'b001'], expect.any(String)]);
    } finally {
      await smallApp.close();
      small.close();
    }
  }, 60_000);
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
