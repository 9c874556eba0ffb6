/**
 * A new api in front of an older review service (the api upgraded first): the review service
 * has not the methods the api's newer endpoints call, and grpc-js answers them UNIMPLEMENTED
 * ("The server does not implement the method /neatroots.v1.Sop/RecheckSession"). The api
 * answered those 500 `internal error`, the reason only in its log; now 501 `not_implemented`
 * naming the service and the method, REST and MCP alike.
 */
import { Server, ServerCredentials, status, type ServiceDefinition } from '@grpc/grpc-js';
import type { INestApplication } from '@nestjs/common';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createLogger } from '@neatroots/platform';
import { v1 } from '@neatroots/proto';
import { apiUrl, createApi } from './api';
import { ServiceTimeoutError, unavailable } from './errors';
import { ReviewGrpcClient } from './review-client';
import { SopGrpcClient } from './sop-client';

const KEY = 'key-for-up';

/** A service definition without these methods: what an earlier version of it serves. */
function without(service: ServiceDefinition, ...methods: string[]): ServiceDefinition {
  return Object.fromEntries(Object.entries(service).filter(([name]) => !methods.includes(name))) as ServiceDefinition;
}

describe('a call to another service that has not the method (UNIMPLEMENTED)', () => {
  let server: Server;
  let queries: ReviewGrpcClient;
  let sop: SopGrpcClient;
  let app: INestApplication;
  let base: string;
  const lines: { level: string; msg: string }[] = [];

  beforeAll(async () => {
    // The older review: no RecheckSession nor CompareReleases in its Sop service, no ListFindings
    // in its Review service; what it has is not asked here.
    server = new Server();
    server.addService(without(v1.SopService, 'recheckSession', 'compareReleases'), {});
    server.addService(without(v1.ReviewService, 'listFindings'), {});
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
    queries = new ReviewGrpcClient(`127.0.0.1:${port}`);
    sop = new SopGrpcClient(`127.0.0.1:${port}`);
    const log = createLogger({ level: 'debug', format: 'json', write: (line) => void lines.push(JSON.parse(line) as { level: string; msg: string }) });
    app = await createApi({
      queries,
      resolveKey: async (key) => (key === KEY ? { project: 'up', scope: 'api' } : null),
      sop,
      review: sop,
      port: 0,
      host: '127.0.0.1',
      log,
    });
    base = apiUrl(app);
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    queries?.close();
    sop?.close();
    server?.forceShutdown();
  });

  async function send(method: string, path: string) {
    const res = await fetch(`${base}${path}`, { method, headers: { 'x-api-key': KEY } });
    return { status: res.status, body: (await res.json()) as { error: { code: string; message: string } }, retryAfter: res.headers.get('retry-after') };
  }

  it('answers POST .../sessions/{id}/recheck 501 naming the review service and RecheckSession', async () => {
    const res = await send('POST', '/v1/workspaces/up/sessions/ses_x/recheck');
    expect(res.status).toBe(501);
    expect(res.body).toEqual({
      error: { code: 'not_implemented', message: 'the review service is of an earlier version and has no RecheckSession: upgrade review' },
    });
    // asking again gets the same until review is upgraded: nothing to come back for shortly
    expect(res.retryAfter).toBeNull();
  });

  it('answers GET .../insights/compare 501 naming CompareReleases', async () => {
    const res = await send('GET', '/v1/workspaces/up/insights/compare?from=1&to=2');
    expect(res.status).toBe(501);
    expect(res.body.error).toEqual({ code: 'not_implemented', message: 'the review service is of an earlier version and has no CompareReleases: upgrade review' });
  });

  it('answers a REST call of the Review service the same (GET .../findings)', async () => {
    const res = await send('GET', '/v1/projects/up/findings');
    expect(res.status).toBe(501);
    expect(res.body.error.message).toBe('the review service is of an earlier version and has no ListFindings: upgrade review');
  });

  it('logs it as a warning, not as an unexpected error', () => {
    expect(lines.filter((l) => l.level === 'error')).toEqual([]);
    expect(lines.filter((l) => l.level === 'warn').map((l) => l.msg)).toContain('the review service is of an earlier version and has no RecheckSession: upgrade review');
  });

  it('says the same as an MCP tool error (list_findings)', async () => {
    const mcp = new Client({ name: 'errors-spec', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { 'x-api-key': KEY } } }));
    try {
      const res = (await mcp.callTool({ name: 'list_findings', arguments: {} })) as { isError?: boolean; content: { type: string; text: string }[] };
      expect(res.isError).toBe(true);
      expect(res.content[0].text).toBe('the review service is of an earlier version and has no ListFindings: upgrade review');
    } finally {
      await mcp.close();
    }
  });

  it('names the service it was asked of, and a method grpc-js names by its implementation key', () => {
    expect(unavailable({ code: status.UNIMPLEMENTED, details: 'The server does not implement the method agreement', message: '' }, 'question')?.message).toBe(
      'the question service is of an earlier version and has no Agreement: upgrade question',
    );
    expect(unavailable({ code: status.UNIMPLEMENTED, details: 'Method not found', message: '' }, 'question')?.message).toBe(
      'the question service is of an earlier version and does not implement this call (UNIMPLEMENTED: Method not found): upgrade question',
    );
  });
});

describe('a call past its deadline (DEADLINE_EXCEEDED): slow or away by what grpc-js says', () => {
  const of = (details: string) => {
    const e = unavailable({ code: status.DEADLINE_EXCEEDED, details, message: '' }, 'review', 3_000);
    return { name: e?.name, code: e instanceof ServiceTimeoutError ? e.code : undefined };
  };
  it('is review_timeout (504) when the call reached the service: our timer naming its address, or the service\'s own plain "Deadline exceeded"', () => {
    expect(of('Deadline exceeded after 3.002s,LB pick: 0.001s,remote_addr=127.0.0.1:5000')).toEqual({ name: 'ServiceTimeoutError', code: 'review_timeout' });
    // The review server received the call with its grpc-timeout; its timer fired before the api's.
    expect(of('Deadline exceeded')).toEqual({ name: 'ServiceTimeoutError', code: 'review_timeout' });
  });
  it('is unavailable (503) when still waiting for a connection (no address named)', () => {
    expect(of('Deadline exceeded after 3.001s,name resolution: 0.001s,waiting for LB pick')).toEqual({ name: 'UnavailableError', code: undefined });
  });
});
