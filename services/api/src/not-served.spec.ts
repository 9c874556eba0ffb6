import type { INestApplication } from '@nestjs/common';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { apiUrl, createApi } from './api';
import { ReviewGrpcClient } from './review-client';

/**
 * Two 503s a client must tell apart: a part this api is not set up to serve (no procedures,
 * review, GitHub, lineage, suggestions, question service or authoring side in its
 * configuration) answers 503 `not_served` with no Retry-After, as asking again gets the same
 * until the api's settings change; a service away a moment (here the review service, asked over
 * its real gRPC client at an address where nothing listens) answers 503 `unavailable` with
 * Retry-After: 5, as it will pass. The MCP tools say the same: `not_served: ...`, not "retry".
 */
const KEY = 'not-served-key';
const P = 'p1';

let app: INestApplication;
let base: string;
let review: ReviewGrpcClient;

beforeAll(async () => {
  // Port 1: nothing listens there, so each call to review fails UNAVAILABLE, as while it restarts.
  review = new ReviewGrpcClient('127.0.0.1:1', 5_000);
  app = await createApi({
    queries: review,
    resolveKey: (k) => (k === KEY ? { project: P, scope: 'api' } : null),
    port: 0,
    host: '127.0.0.1',
    logger: false,
    appDir: null,
  });
  base = apiUrl(app);
});

afterAll(async () => {
  await app.close();
  review.close();
});

async function ask(method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { 'x-api-key': KEY, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as { error?: { code: string; message: string } } };
}

// Each row of three: a shorter one would hand the test jest's done callback as its body.
const NOT_SERVED: [string, string, unknown][] = [
  ['GET', `/v1/workspaces/${P}/head`, undefined],
  ['GET', `/v1/workspaces/${P}/review`, undefined],
  ['GET', `/v1/workspaces/${P}/insights`, undefined],
  ['GET', `/v1/workspaces/${P}/suggestions`, undefined],
  ['GET', `/v1/workspaces/${P}/github`, undefined],
  ['GET', `/v1/workspaces/${P}/rules/r1/lineage`, undefined],
  ['GET', `/v1/projects/${P}/models/agreement`, undefined],
  ['GET', `/v1/projects/${P}/checks`, undefined],
  ['POST', `/v1/projects/${P}/checks/validate`, { yaml: 'id: x' }],
];

it.each(NOT_SERVED)('%s %s, not set up in this api: 503 not_served, no Retry-After', async (method, path, body) => {
  const r = await ask(method, path, body);
  expect({ status: r.status, code: r.body.error?.code, retryAfter: r.retryAfter }).toEqual({ status: 503, code: 'not_served', retryAfter: null });
  expect(r.body.error?.message).toMatch(/not served by this api|not written through this api/);
});

it('the review service away a moment: 503 unavailable with Retry-After: 5', async () => {
  const r = await ask('GET', `/v1/projects/${P}/runs`);
  expect({ status: r.status, code: r.body.error?.code, retryAfter: r.retryAfter }).toEqual({ status: 503, code: 'unavailable', retryAfter: '5' });
  expect(r.body.error?.message).toMatch(/^the review service cannot answer right now .*retry shortly$/);
});

it('MCP tools say the same: not_served for checks not written here, "retry shortly" for review away', async () => {
  const client = new Client({ name: 'not-served-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { 'x-api-key': KEY } } }));
  try {
    const text = (r: unknown) => (r as { content: { text: string }[] }).content.map((c) => c.text).join('\n');
    const listed = await client.callTool({ name: 'list_checks', arguments: {} });
    expect([listed.isError, text(listed)]).toEqual([true, 'not_served: checks are not written through this server (no authoring side configured)']);
    const findings = await client.callTool({ name: 'list_findings', arguments: {} });
    expect(findings.isError).toBe(true);
    expect(text(findings)).toMatch(/^the review service cannot answer right now .*retry shortly$/);
  } finally {
    await client.close();
  }
});
