import * as net from 'node:net';
import { Server, ServerCredentials, type ServiceDefinition, type UntypedServiceImplementation } from '@grpc/grpc-js';
import type { INestApplication } from '@nestjs/common';
import { apiUrl, createApi } from '@neatroots/api';
import { internalClientOptions, requireInternalToken } from '@neatroots/platform';
import { v1 } from '@neatroots/proto';
import { ReviewDataClient } from '@neatroots/review';
import type { ReviewQueries } from '@neatroots/store';
import { createAuthoring } from './authoring';
import { questionRemote } from './compose';

/**
 * The api of the distributed deployment asks review's data port (ReviewDataClient: the checks
 * endpoints) and the question service (model agreement, drafts) besides review's queries. A call
 * one of them refuses for NEATROOTS_INTERNAL_TOKEN is answered as review's queries answer it
 * (de4664d): 503 unavailable with Retry-After, naming the service and the mismatch, never 500
 * internal error; so is one that finds the service away.
 */
const TOKEN = 'the-deployment-internal-token';
const KEY = 'key-of-shop';
const PROJECT = 'shop';

const closers: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of closers.reverse()) await c();
});

/** A port serving `service` behind the internal token, as startServices serves the services' own ports. Its methods are never reached here. */
async function refusingPort(service: ServiceDefinition): Promise<string> {
  const never: UntypedServiceImplementation = Object.fromEntries(
    Object.keys(service).map((m) => [m, () => { throw new Error(`${m} reached past the token`); }]),
  );
  const server = new Server();
  server.addService(service, requireInternalToken(never, TOKEN));
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  closers.push(() => new Promise<void>((r) => server.tryShutdown(() => r())));
  return `127.0.0.1:${port}`;
}

/** A port nobody listens on (bound, then let go). */
async function closedPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise((r) => srv.close(r));
  return port;
}

/** The api's HTTP server, its checks endpoints on review's data at `review`, its model agreement and drafts on the question service at `question`. */
async function apiOver(review: string, question: string, token: string | undefined): Promise<string> {
  const options = internalClientOptions(token);
  const data = new ReviewDataClient(review, undefined, options);
  const remote = questionRemote(question, (step) => closers.push(step), options);
  closers.push(() => data.close());
  const queries = {
    listRuns: async () => ({ items: [], next_cursor: null }),
  } as unknown as ReviewQueries;
  const authoring = createAuthoring({
    data,
    queries,
    checks: { loaded: () => ({ checks: [], loaded: [], entries: [], warnings: [], errors: [] }), reload: async () => undefined },
    draft: remote.draft,
  });
  const api: INestApplication = await createApi({
    queries,
    resolveKey: (k) => (k === KEY ? { project: PROJECT, scope: 'api' } : null),
    modelStats: remote.modelStats,
    authoring,
    port: 0,
    host: '127.0.0.1',
    logger: false,
    appDir: null,
  });
  closers.push(() => api.close());
  return apiUrl(api);
}

async function call(base: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}/v1/projects/${PROJECT}/${path}`, {
    method,
    headers: { 'x-api-key': KEY, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), error: ((await res.json()) as { error: { code: string; message: string } }).error };
}

const ENDPOINTS: { service: 'review' | 'question'; method: string; path: string; body?: unknown }[] = [
  { service: 'review', method: 'GET', path: 'checks' },
  { service: 'review', method: 'GET', path: 'checks/some-check' },
  { service: 'review', method: 'POST', path: 'checks', body: { yaml: 'id: slow-search\nkind: rule\ntitle: Slow search\nrule: { type: slow, span: { tool: [search] }, at_least_ms: 5000 }\n' } },
  { service: 'question', method: 'GET', path: 'models/agreement' },
  { service: 'question', method: 'POST', path: 'checks/draft', body: { concern: 'search taking longer than five seconds' } },
];

describe('the api when review\'s data port or the question service refuses its calls for NEATROOTS_INTERNAL_TOKEN', () => {
  let review: string;
  let question: string;
  beforeAll(async () => {
    review = await refusingPort(v1.ReviewDataService);
    question = await refusingPort(v1.QuestionService);
  });

  it.each(ENDPOINTS)('$method $path: 503 unavailable naming the $service service and the token that does not match', async ({ service, method, path, body }) => {
    const base = await apiOver(review, question, 'another-token-of-this-api');
    const r = await call(base, method, path, body);
    expect([r.status, r.error.code, r.retryAfter]).toEqual([503, 'unavailable', '5']);
    expect(r.error.message).toBe(
      `the ${service} service refuses this process's calls, a misconfiguration: this port answers neatroots's own services only: the call carried an internal token (x-neatroots-internal-token) that does not match this service's NEATROOTS_INTERNAL_TOKEN; give every service the same one`,
    );
  });

  it('says when the api carried no token at all', async () => {
    const base = await apiOver(review, question, undefined);
    for (const { service, method, path, body } of [ENDPOINTS[0], ENDPOINTS[3], ENDPOINTS[4]]) {
      const r = await call(base, method, path, body);
      expect([path, r.status, r.error.code]).toEqual([path, 503, 'unavailable']);
      expect(r.error.message).toBe(
        `the ${service} service refuses this process's calls, a misconfiguration: this port answers neatroots's own services only: the call carried no internal token (x-neatroots-internal-token); set NEATROOTS_INTERNAL_TOKEN on the calling service to this one's`,
      );
    }
  });

  it('review\'s data port or the question service away: 503 unavailable naming it, not 500', async () => {
    const nobody = `127.0.0.1:${await closedPort()}`;
    const base = await apiOver(nobody, nobody, TOKEN);
    for (const { service, method, path } of [ENDPOINTS[0], ENDPOINTS[3]]) {
      const r = await call(base, method, path);
      expect([path, r.status, r.error.code, r.retryAfter]).toEqual([path, 503, 'unavailable', '5']);
      expect(r.error.message).toMatch(new RegExp(`^the ${service} service cannot answer right now \\(UNAVAILABLE: .*\\); retry shortly$`));
    }
  });
});
