import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import type { Db } from '@neatroots/ports';
import type { FindingMessage } from '@neatroots/messages';
import { InlineJobs, migrate, openPglite } from '@neatroots/platform';
import { createReviewQueries, startSop, type Sop } from '@neatroots/review';
import { checkSession, noModelDecider, readFolder } from '@neatroots/sop';
import { FindingsRepo, ProjectsRepo, RunsRepo } from '@neatroots/store';
import { apiUrl, createApi } from '../api';
import { conforms } from './conforms.test';

/**
 * /openapi.json against the api itself: every route the api serves is in the document, and
 * the real answers of the documented routes (a project with a run and findings, a workspace
 * with a release and checked sessions, a pattern given a verdict) conform to its schemas.
 */
const FIXTURES = path.resolve(__dirname, '../../../../libs/sop/fixtures');
const KEY = 'key-for-luigis';
const T0 = Date.parse('2025-01-01T00:00:00.000Z');

let db: Db;
let jobs: InlineJobs;
let sop: Sop;
let app: INestApplication;
let base: string;
type Doc = { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: Record<string, unknown> }> }> }>>; components: { schemas: Record<string, Record<string, unknown>> } };
let doc: Doc;

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  const projects = new ProjectsRepo(db);
  await projects.addApiKey('luigis', KEY);
  jobs = new InlineJobs();
  sop = await startSop({ db, jobs, checkSession: ({ lock, releaseId, session: s }) => checkSession(lock, s, { decider: noModelDecider('no model is configured'), releaseId }) });
  app = await createApi({
    queries: createReviewQueries(db),
    resolveKey: (k) => projects.resolveApiKey(k),
    modelStats: async () => [{ check_id: 'tone', question_key: 'tone@0123456789', ask: 'Was the agent rude?', answers: 3 }] as never,
    sop: sop.queries,
    review: sop.review,
    port: 0,
    host: '127.0.0.1',
    logger: false,
    appDir: null,
  });
  base = apiUrl(app);
  // The project's side: a run with two spans and a finding.
  await new RunsRepo(db).writeEnvelopes([
    { project: 'luigis', received_ms: T0, item: { kind: 'run_start', run: { event: 'run_start', run_id: 'r1', workflow: 'orders', ts_ms: T0 } } },
    { project: 'luigis', received_ms: T0, item: { kind: 'span', span: { run_id: 'r1', span_id: 's1', type: 'tool', name: 'search', status: 'ok', start_ms: T0 + 1 } } },
  ]);
  const finding: FindingMessage = {
    id: 'f1', check_id: 'repeated-tool-call', run_id: 'r1', project: 'luigis', status: 'raised', span_ids: ['s1'], count: 3, action: 'flag',
    title: 'Same tool called repeatedly', guidance: 'Stop', at_ms: T0 + 10, kind: 'rule', source: 'library', group: 'loop',
  };
  await new FindingsRepo(db).apply([finding]);
  doc = (await (await fetch(`${base}/openapi.json`)).json()) as Doc;
}, 60_000);

afterAll(async () => {
  await app?.close();
  await jobs?.close();
  await db?.close();
});

async function call(method: string, p: string, body?: unknown, type = 'application/json') {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: { 'x-api-key': KEY, ...(body !== undefined ? { 'content-type': type } : {}) },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, type: res.headers.get('content-type') ?? '', text, body: text && res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : null };
}

/** The document's path for a real one: /v1/workspaces/luigis/patterns/pat_1 → /v1/workspaces/{ws}/patterns/{id}. */
function templateOf(real: string): string {
  const parts = real.split('?')[0].split('/');
  const match = Object.keys(doc.paths).find((t) => {
    const tp = t.split('/');
    // {path} (a head file's) is the rest of the path, slashes included.
    if (tp[tp.length - 1] === '{path}') return parts.length >= tp.length && tp.slice(0, -1).every((seg, i) => seg.startsWith('{') || seg === parts[i]);
    return tp.length === parts.length && tp.every((seg, i) => seg.startsWith('{') || seg === parts[i]);
  });
  if (!match) throw new Error(`${real} is not in the document`);
  return match;
}

/** Calls the route and checks the answer against the document's schema for that status. */
async function documented(method: string, p: string, body?: unknown, type?: string) {
  const res = await call(method, p, body, type);
  const op = doc.paths[templateOf(p)][method.toLowerCase()];
  expect(op).toBeDefined();
  const response = op.responses[String(res.status)];
  if (!response) throw new Error(`${method} ${p} answered ${res.status}, which the document does not list: ${res.text.slice(0, 300)}`);
  const [media, { schema }] = Object.entries(response.content ?? {})[0] ?? [undefined, { schema: undefined }];
  if (schema && media === 'application/x-ndjson') {
    for (const line of res.text.trim().split('\n')) expect(conforms(JSON.parse(line), schema, doc.components.schemas)).toEqual([]);
  } else if (schema) {
    expect(res.type).toContain('application/json');
    expect(conforms(res.body, schema, doc.components.schemas)).toEqual([]);
  }
  return res;
}

describe('GET /openapi.json', () => {
  it('is served without a key, as OpenAPI 3.1, and never by the web app', async () => {
    const res = await fetch(`${base}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/json');
    expect(doc).toMatchObject({ openapi: '3.1.0', components: { securitySchemes: { apiKey: { in: 'header', name: 'x-api-key' } } } });
  });

  it('lists every route the api serves, and only those', () => {
    const router = (app.getHttpAdapter().getInstance() as { router: { stack: { route?: { path: string; methods: Record<string, boolean> } }[] } }).router;
    // A route taking every method (@All: a protocol endpoint such as MCP's) counts as listed when its path is.
    const served = router.stack
      .filter((l) => l.route)
      .flatMap((l) => {
        const p = l.route!.path.replace(/[:*](\w+)/g, '{$1}');
        const methods = Object.keys(l.route!.methods).filter((m) => m !== '_all');
        return l.route!.methods._all || methods.length > 10 ? [`ANY ${p}`] : methods.map((m) => `${m.toUpperCase()} ${p}`);
      });
    const listed = Object.entries(doc.paths).flatMap(([p, ops]) => [`ANY ${p}`, ...Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`)]);
    expect(served.length).toBeGreaterThan(20);
    // A route missing here: add it to services/api/src/openapi/document.ts.
    expect(served.filter((r) => !listed.includes(r)).sort()).toEqual([]);
    // And nothing it does not serve (the document itself is served beside the routes).
    expect(listed.filter((r) => !r.startsWith('ANY ') && !served.includes(r) && !served.includes(`ANY ${r.split(' ')[1]}`) && r !== 'GET /openapi.json').sort()).toEqual([]);
  });

  it('lists the answers a keyed route gives besides its own, none of them for /healthz and itself, and each list\'s limit', async () => {
    const codes = (path: string, method: string) => Object.keys(doc.paths[path][method].responses).sort();
    for (const [path, method] of [['/v1/projects/{project}/runs', 'get'], ['/v1/projects/{project}/findings/{id}/reopen', 'post'], ['/v1/workspaces/{ws}/sessions', 'post'], ['/v1/mcp', 'post']]) {
      expect([path, codes(path, method)]).toEqual([path, expect.arrayContaining(['400', '401', '403', '404', '413', '415', '500'])]);
    }
    expect(codes('/healthz', 'get')).toEqual(['200']);
    expect(codes('/openapi.json', 'get')).toEqual(['200']);
    expect(codes('/v1/mcp', 'get')).toContain('405');
    expect(codes('/v1/mcp', 'delete')).toContain('405');
    // the real refusals are the documented ones
    expect((await documented('GET', '/v1/projects/someone-else/runs')).status).toBe(403);
    expect((await documented('POST', '/v1/projects/luigis/findings/f1/dismiss', { note: 'x'.repeat(200_000) })).status).toBe(413);
    expect((await documented('POST', '/v1/projects/luigis/findings/f1/dismiss', 'note=hi', 'application/x-www-form-urlencoded')).status).toBe(415);
    expect((await documented('GET', '/v1/mcp')).status).toBe(405);
    expect((await documented('DELETE', '/v1/mcp')).status).toBe(405);
    // every list's limit has its maximum
    const limits = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.values(ops).flatMap((o) => ((o as { parameters?: { name: string; schema: { maximum?: number } }[] }).parameters ?? []).filter((q) => q.name === 'limit').map((q) => [path, q.schema.maximum])),
    );
    expect(limits.length).toBeGreaterThan(5);
    expect(limits.filter(([, max]) => max === undefined)).toEqual([]);
    expect(limits).toContainEqual(['/v1/projects/{project}/runs', 500]);
    expect(limits).toContainEqual(['/v1/projects/{project}/runs/{run_id}/spans', 2000]);
  });

  it('describes the real answers of the project routes', async () => {
    await documented('GET', '/v1/projects/luigis/runs');
    await documented('GET', '/v1/projects/luigis/runs/r1');
    await documented('GET', '/v1/projects/luigis/runs/r1/spans');
    await documented('GET', '/v1/projects/luigis/findings');
    await documented('POST', '/v1/projects/luigis/findings/f1/dismiss', { note: 'known' });
    await documented('POST', '/v1/projects/luigis/findings/f1/reopen');
    await documented('GET', '/v1/projects/luigis/checks/stats');
    await documented('GET', '/v1/projects/luigis/models/agreement');
    await documented('GET', '/v1/projects/luigis/runs/nope');
    await documented('GET', '/v1/projects/luigis/runs?limit=0');
    expect((await documented('GET', '/healthz')).body).toEqual({ status: 'ok' });
  });

  it('describes the real answers of the workspace and review routes', async () => {
    const files = [...readFolder(path.join(FIXTURES, 'luigis')).entries()].map(([p, text]) => ({ path: p, text }));
    await documented('PUT', '/v1/workspaces/luigis/head', { files });
    await documented('GET', '/v1/workspaces/luigis/head');
    await documented('POST', '/v1/workspaces/luigis/releases');
    await documented('GET', '/v1/workspaces/luigis/releases');
    await documented('GET', '/v1/workspaces/luigis/releases/live');
    expect((await documented('PUT', '/v1/workspaces/luigis/head/procedures/spare.md', '# Spare\n\n## Steps\n1. Say hello.\n', 'text/markdown')).status).toBe(200);
    expect((await documented('GET', '/v1/workspaces/luigis/head/procedures/spare.md')).status).toBe(200);
    expect((await documented('DELETE', '/v1/workspaces/luigis/head/procedures/spare.md')).body).toEqual({ path: 'procedures/spare.md', deleted: true });
    const session = JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', 'payment-skipped', 'session.json'), 'utf8'));
    const sent = await documented('POST', '/v1/workspaces/luigis/sessions', { ...session, started_at: new Date(Date.now() - 3_600_000).toISOString() });
    let queue: { items: { pattern_id: string; examples: { finding_id: string }[] }[] } = { items: [] };
    for (let i = 0; i < 400 && queue.items.length === 0; i++) {
      queue = (await documented('GET', '/v1/workspaces/luigis/review')).body;
      if (!queue.items.length) await new Promise((r) => setTimeout(r, 10));
    }
    expect(queue.items.length).toBe(1);
    const pattern = queue.items[0].pattern_id;
    await documented('GET', '/v1/workspaces/luigis/sessions');
    await documented('GET', `/v1/workspaces/luigis/sessions/${sent.body.id}`);
    await documented('GET', `/v1/workspaces/luigis/sessions/${sent.body.id}/transcript`);
    await documented('GET', '/v1/workspaces/luigis/patterns');
    await documented('GET', `/v1/workspaces/luigis/patterns/${pattern}`);
    expect((await documented('GET', `/v1/workspaces/luigis/patterns/${pattern}/regression`)).status).toBe(409);
    await documented('POST', `/v1/workspaces/luigis/patterns/${pattern}/verdict`, { verdict: 'real', note: 'yes', reviewer: 'ana', suggest: true });
    await documented('POST', `/v1/workspaces/luigis/findings/${queue.items[0].examples[0].finding_id}/override`, { correct: false });
    await documented('GET', `/v1/workspaces/luigis/patterns/${pattern}`);
    await documented('GET', '/v1/workspaces/luigis/review?state=open&state=closed');
    await documented('GET', `/v1/workspaces/luigis/patterns/${pattern}/regression`);
    await documented('POST', '/v1/workspaces/luigis/patterns/rename', {});
    expect((await documented('GET', '/v1/workspaces/luigis/insights/compare')).status).toBe(409);
    expect((await documented('GET', '/v1/workspaces/luigis/insights/compare?from=1&to=live')).status).toBe(400);
    expect((await documented('POST', '/v1/workspaces/luigis/releases')).status).toBe(201);
    const cmp = await documented('GET', '/v1/workspaces/luigis/insights/compare');
    expect(cmp.status).toBe(200);
    expect(cmp.body.procedures.find((p: { from: { sessions: number } }) => p.from.sessions === 1)).toBeDefined();
    const ins = await documented('GET', '/v1/workspaces/luigis/insights?days=30');
    expect(ins.body.tiles.sessions).toBe(1);
    await documented('GET', '/v1/workspaces/luigis/review?state=later');
  });
});
