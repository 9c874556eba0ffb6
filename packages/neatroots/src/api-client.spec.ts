import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RECLUSTER_WAIT_MS } from '../../../services/review/src/review/recluster';
import { apiCall, ApiCallError, CALL_WAIT_MS, LONG_CALL_WAIT_MS } from './api-client';
import { main } from './sopops';

/**
 * The CLI's API client waits as long as it is told, on node:http: a recluster's answer comes only
 * when its models are done (up to 10 minutes), past the 5 minutes Node's fetch would wait for
 * response headers. A raw server here answers late on purpose.
 */
let server: Server;
let url: string;
const seen: { method: string; path: string; key: string; body: string }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', path: req.url ?? '', key: String(req.headers['x-api-key']), body });
      const delay = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('delay') ?? (req.url?.includes('/patterns/recluster') ? 1_200 : 0));
      setTimeout(() => {
        if (req.url?.includes('/patterns/recluster')) {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ assigned: 2, reclustered: 1, themed: 1, reason: null }));
        } else if (req.url?.startsWith('/v1/refused')) {
          res.writeHead(409, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'no_verdict', message: 'the pattern has no verdict' } }));
        } else {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ echo: body ? JSON.parse(body) : null }));
        }
      }, delay);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const t = () => ({ url, key: 'k1' });

describe('apiCall', () => {
  it('waits for an answer whose headers come late, and sends the key and the JSON body', async () => {
    await expect(apiCall(t(), 'POST', '/v1/echo?delay=1000', { json: { a: 1 } }, { waitMs: 5_000 })).resolves.toEqual({ echo: { a: 1 } });
    expect(seen.at(-1)).toMatchObject({ method: 'POST', path: '/v1/echo?delay=1000', key: 'k1', body: '{"a":1}' });
  });

  it('gives up after the wait it was given, saying so (the server may still be working)', async () => {
    const err = await apiCall(t(), 'GET', '/v1/echo?delay=2000', undefined, { waitMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiCallError);
    expect((err as ApiCallError).message).toBe(`GET ${url}/v1/echo?delay=2000: no answer within 300 ms: the server may still be working on it`);
  });

  it("words a refusal as the API does, and an unreachable server by where it looked", async () => {
    const refused = await apiCall(t(), 'GET', '/v1/refused').catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 409, code: 'no_verdict', message: `GET ${url}/v1/refused: 409 no_verdict: the pattern has no verdict` });
    const down = await apiCall({ url: 'http://127.0.0.1:9', key: 'k' }, 'GET', '/v1/x').catch((e: unknown) => e);
    expect((down as Error).message).toContain('cannot reach the neatroots API at http://127.0.0.1:9 (ECONNREFUSED)');
  });

  it('gives recluster and calibrate longer than the server lets a recluster run (10 minutes) and the api waits (11)', () => {
    expect(LONG_CALL_WAIT_MS).toBeGreaterThan(RECLUSTER_WAIT_MS + 60_000);
    // Past undici's headersTimeout of 5 minutes: what fetch would have cut short.
    expect(LONG_CALL_WAIT_MS).toBeGreaterThan(300_000);
    expect(CALL_WAIT_MS).toBeLessThan(LONG_CALL_WAIT_MS);
  });
});

describe('sopops recluster', () => {
  it('waits for the server to finish and prints what it did', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(['recluster', '--workspace', 'luigis', '--url', url, '--rule', 'never-price'], { out: (l) => out.push(l), err: (l) => err.push(l), env: { NEATROOTS_API_KEY: 'k2' }, cwd: process.cwd() });
    expect({ code, out, err }).toEqual({ code: 0, out: ['luigis: assigned 2 findings, split 1 rule into failure modes, grouped the themes of 1 procedure'], err: [] });
    expect(seen.at(-1)).toMatchObject({ method: 'POST', path: '/v1/workspaces/luigis/patterns/recluster', key: 'k2', body: '{"rule":"never-price"}' });
  });
});
