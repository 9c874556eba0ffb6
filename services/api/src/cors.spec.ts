import type { INestApplication } from '@nestjs/common';
import type { Db } from '@neatroots/ports';
import { migrate, openPglite } from '@neatroots/platform';
import { createReviewQueries } from '@neatroots/review';
import { ProjectsRepo } from '@neatroots/store';
import { apiUrl, createApi } from './api';

/** CORS: off by default; a configured origin may call the API with its key, and no other. */
const KEY = 'key-for-p1';
const ALLOWED = 'https://app.example.com';
let db: Db;
const apps: INestApplication[] = [];

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  await new ProjectsRepo(db).addApiKey('p1', KEY);
});
afterAll(async () => {
  for (const a of apps) await a.close();
  await db.close();
});

async function api(corsOrigins?: string[]): Promise<string> {
  const projects = new ProjectsRepo(db);
  const app = await createApi({ queries: createReviewQueries(db), resolveKey: (k) => projects.resolveApiKey(k), port: 0, host: '127.0.0.1', logger: false, appDir: null, corsOrigins });
  apps.push(app);
  return apiUrl(app);
}

const preflight = (base: string, origin: string) =>
  fetch(`${base}/v1/projects/p1/runs`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'x-api-key' } });

it('sends no CORS headers by default, so a browser on another origin cannot read the API', async () => {
  const base = await api();
  const res = await fetch(`${base}/v1/projects/p1/runs`, { headers: { 'x-api-key': KEY, origin: ALLOWED } });
  expect(res.status).toBe(200);
  expect(res.headers.get('access-control-allow-origin')).toBeNull();
  expect((await preflight(base, ALLOWED)).headers.get('access-control-allow-origin')).toBeNull();
});

it('lets a configured origin send its key (preflight answered without one), and no other origin', async () => {
  const base = await api([ALLOWED]);
  const pre = await preflight(base, ALLOWED);
  expect(pre.status).toBe(204);
  expect(pre.headers.get('access-control-allow-origin')).toBe(ALLOWED);
  expect(pre.headers.get('access-control-allow-headers')).toContain('x-api-key');
  expect(pre.headers.get('access-control-allow-methods')).toContain('POST');
  const res = await fetch(`${base}/v1/projects/p1/runs`, { headers: { 'x-api-key': KEY, origin: ALLOWED } });
  expect(res.status).toBe(200);
  expect(res.headers.get('access-control-allow-origin')).toBe(ALLOWED);
  expect(res.headers.get('vary')).toContain('Origin');
  // The key is still required.
  expect((await fetch(`${base}/v1/projects/p1/runs`, { headers: { origin: ALLOWED } })).status).toBe(401);
  const other = await fetch(`${base}/v1/projects/p1/runs`, { headers: { 'x-api-key': KEY, origin: 'https://evil.example' } });
  expect(other.headers.get('access-control-allow-origin')).toBeNull();
  expect((await preflight(base, 'https://evil.example')).headers.get('access-control-allow-origin')).toBeNull();
});

it('`*` allows any origin', async () => {
  const base = await api(['*']);
  const res = await fetch(`${base}/healthz`, { headers: { origin: 'https://anywhere.example' } });
  expect(res.headers.get('access-control-allow-origin')).toBe('*');
});

it('lets a configured origin call the MCP endpoint as a browser MCP client does (its mcp-protocol-version header allowed)', async () => {
  const base = await api([ALLOWED]);
  const asked = 'content-type, mcp-protocol-version, authorization, accept';
  const pre = await fetch(`${base}/v1/mcp`, { method: 'OPTIONS', headers: { origin: ALLOWED, 'access-control-request-method': 'POST', 'access-control-request-headers': asked } });
  expect(pre.status).toBe(204);
  expect(pre.headers.get('access-control-allow-origin')).toBe(ALLOWED);
  const allowed = (pre.headers.get('access-control-allow-headers') ?? '').split(',').map((h) => h.trim());
  expect(allowed).toEqual(expect.arrayContaining(asked.split(', ')));
  const res = await fetch(`${base}/v1/mcp`, {
    method: 'POST',
    headers: { origin: ALLOWED, authorization: `Bearer ${KEY}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('access-control-allow-origin')).toBe(ALLOWED);
  expect(((await res.json()) as { result: { tools: unknown[] } }).result.tools.length).toBeGreaterThan(0);
  // The session id initialize answers is readable by the page, so its client can send it back.
  const init = await fetch(`${base}/v1/mcp`, {
    method: 'POST',
    headers: { origin: ALLOWED, authorization: `Bearer ${KEY}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'page', version: '1' } } }),
  });
  expect(init.status).toBe(200);
  expect(init.headers.get('mcp-session-id')).toMatch(/^[0-9a-f-]{36}$/);
  expect(init.headers.get('access-control-expose-headers')).toBe('mcp-session-id');
});
