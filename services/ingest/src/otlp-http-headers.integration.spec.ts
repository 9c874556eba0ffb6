import { MemoryBus } from '@neatroots/platform';
import { startIngest, type IngestHandle } from './ingest';

/**
 * The OTLP/HTTP port (ingest's, in both deployments) sends the security headers of a port that
 * serves no page, on every answer: an export taken, refused (no key, a bad body, a wrong path or
 * method) and a CORS preflight. Nothing may frame it or be loaded by it, no answer is sniffed
 * into a script or a page. No X-Powered-By.
 */
const KEY = 'key-shop';
const WANT = {
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-powered-by': null,
};
const seen = (res: Response) => Object.fromEntries(Object.keys(WANT).map((h) => [h, res.headers.get(h)]));

let bus: MemoryBus;
let ingest: IngestHandle;

beforeAll(async () => {
  bus = new MemoryBus();
  ingest = await startIngest({
    bus,
    resolveKey: async (k) => (k === KEY ? 'shop' : undefined),
    otlpPort: 0,
    grpcPort: 0,
    otlpHttpPort: 0,
    otlpHttpCorsOrigins: ['https://agent.example'],
    pressure: { backlog: () => 0, maxBacklog: 1000, retryAfterMs: 1000 },
    logger: { warn: () => undefined, error: () => undefined },
  });
});

afterAll(async () => {
  await ingest.close();
  await bus.close();
});

it('OTLP/HTTP sends the security headers on every answer: taken, refused, not found, a preflight', async () => {
  const base = `http://127.0.0.1:${ingest.otlpHttpPort}`;
  const json = { 'content-type': 'application/json' };
  const cases: [string, string, RequestInit, number][] = [
    ['an export taken', '/v1/traces', { method: 'POST', headers: { ...json, 'x-api-key': KEY }, body: '{"resourceSpans":[]}' }, 200],
    ['no key', '/v1/traces', { method: 'POST', headers: json, body: '{"resourceSpans":[]}' }, 401],
    ['a body that is no JSON', '/v1/traces', { method: 'POST', headers: { ...json, 'x-api-key': KEY }, body: '{' }, 400],
    ['another path', '/v1/metrics', { method: 'POST', headers: { ...json, 'x-api-key': KEY }, body: '{}' }, 404],
    ['another method', '/v1/traces', { method: 'GET' }, 405],
    ['a preflight', '/v1/traces', { method: 'OPTIONS', headers: { origin: 'https://agent.example', 'access-control-request-method': 'POST' } }, 204],
  ];
  for (const [what, p, init, status] of cases) {
    const res = await fetch(base + p, init);
    await res.arrayBuffer();
    expect({ what, status: res.status, headers: seen(res) }).toEqual({ what, status, headers: WANT });
  }
});
