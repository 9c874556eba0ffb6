/**
 * Bodies and small filters through the api (PGlite, the review service in-process): an
 * endpoint documented as taking no body refuses one with a field (400 invalid_body) and still
 * takes none, an empty one or {}; a JSON body that is not an object says so; sessions filter by
 * release `live`; suggestions name status among the parameters they take; a body sent
 * without a full key is refused before it is read, whatever the case of its path.
 */
import type { INestApplication } from '@nestjs/common';
import type { FindingMessage } from '@neatroots/messages';
import { FindingsRepo, ProjectsRepo } from '@neatroots/store';
import { connect } from 'node:net';
import { fixtureFolder, fixtureSession, send, startApiOn, startSopHarness, type SopHarness } from './sop-harness.test';

const KEY = 'key-for-w1';
/** An agent's key: it may only send spans (scope ingest). */
const AGENT_KEY = 'agent-key-for-w1';
let h: SopHarness;
let app: INestApplication;
let url: string;

const raised = (id: string): FindingMessage => ({
  id, check_id: 'repeated-tool-call', run_id: 'ra', project: 'w1', status: 'raised', span_ids: ['s1'], count: 3, action: 'flag',
  title: 'Same tool called repeatedly', guidance: 'Stop', at_ms: Date.parse('2026-01-01T00:00:00Z'), kind: 'rule', source: 'library',
});

const call = (method: string, path: string, body?: unknown, type = 'application/json') => send(`${url}${path}`, method, KEY, body, type);
/** The raw request: a body as given, with or without a Content-Type. */
async function raw(method: string, path: string, body: string | undefined, type: string | null) {
  const res = await fetch(`${url}${path}`, { method, headers: { 'x-api-key': KEY, ...(type ? { 'content-type': type } : {}) }, body });
  return { status: res.status, body: (await res.json()) as { error?: { code: string; message: string } } };
}

beforeAll(async () => {
  h = await startSopHarness({ w1: KEY });
  await new ProjectsRepo(h.db).addApiKey('w1', AGENT_KEY, 'agents', 'ingest');
  await new FindingsRepo(h.db).apply([raised('f1')]);
  ({ app, url } = await startApiOn(h.db, 'w1', h.sop.queries, h.sop.review));
}, 60_000);

afterAll(async () => {
  await app?.close();
  await h?.close();
});

describe('endpoints that take no body', () => {
  const ENDPOINTS: [string, string][] = [
    ['POST', '/v1/projects/w1/findings/f1/reopen'],
    ['POST', '/v1/workspaces/w1/releases'],
    ['POST', '/v1/workspaces/w1/rules/lineage/rebuild'],
    ['DELETE', '/v1/workspaces/w1/rules/rule-x/lineage'],
    ['DELETE', '/v1/workspaces/w1/head/procedures/take-order.md'],
    ['DELETE', '/v1/projects/w1/checks/some-check'],
    ['DELETE', '/v1/workspaces/w1/github'],
  ];

  it('refuse a body with a field, or JSON that is not an object, with 400 invalid_body', async () => {
    for (const [method, path] of ENDPOINTS) {
      for (const body of ['{"force":true}', '[]', '[1]']) {
        const res = await raw(method, path, body, 'application/json');
        expect([method, path, body, res.status, res.body.error?.code]).toEqual([method, path, body, 400, 'invalid_body']);
      }
      expect((await raw(method, path, '{"force":true}', 'application/json')).body.error?.message).toBe('unknown field force in the body; this endpoint takes no body');
    }
  });

  it('take no body, an empty one or {}, with or without a Content-Type', async () => {
    // (before any release: sessions?release=live is an empty list)
    expect(await call('GET', '/v1/workspaces/w1/sessions?release=live')).toMatchObject({ status: 200, body: { items: [], next_cursor: null } });
    expect((await call('PUT', '/v1/workspaces/w1/head', { files: fixtureFolder() })).status).toBe(200);
    for (const [body, type] of [[undefined, null], ['', 'application/json'], ['', null], ['{}', 'application/json']] as const) {
      const what = `${JSON.stringify(body)} as ${type}`;
      expect([what, (await raw('POST', '/v1/projects/w1/findings/f1/reopen', body, type)).status]).toEqual([what, 200]);
      expect([what, (await raw('POST', '/v1/workspaces/w1/rules/lineage/rebuild', body, type)).status]).toEqual([what, 200]);
      const published = await raw('POST', '/v1/workspaces/w1/releases', body, type);
      expect([what, published.status]).toEqual([what, 201]);
    }
  });
});

describe('a JSON body that is not an object', () => {
  it('is 400 invalid_body "the body must be a JSON object"; unparsable JSON still says so', async () => {
    for (const body of ['"x"', 'null', '1', 'true']) {
      expect(await raw('POST', '/v1/projects/w1/findings/f1/dismiss', body, 'application/json')).toEqual({ status: 400, body: { error: { code: 'invalid_body', message: 'the body must be a JSON object' } } });
    }
    const bad = await raw('POST', '/v1/projects/w1/findings/f1/dismiss', '{"by":', 'application/json');
    expect(bad).toMatchObject({ status: 400, body: { error: { code: 'invalid_body', message: expect.stringMatching(/^the body is not valid JSON/) } } });
  });
});

describe('a file saved at head (PUT /head/{path})', () => {
  const TYPES = ['text/plain', 'text/markdown', 'text/x-markdown', 'text/yaml', 'text/x-yaml'];
  const SAID = "the body is the file's text (Content-Type: text/plain, text/markdown, text/x-markdown, text/yaml or text/x-yaml)";

  it('is taken as any of the text types, and a refusal names every one of them', async () => {
    expect((await call('PUT', '/v1/workspaces/w1/head', { files: fixtureFolder() })).status).toBe(200);
    const path = '/v1/workspaces/w1/head/agents/phone-agent.yaml';
    const file = (await call('GET', path)).body.text as string;
    for (const type of [...TYPES, 'text/yaml; charset=utf-8']) expect([type, (await raw('PUT', path, file, type)).status]).toEqual([type, 200]);
    // another type: 415, saying what it takes (the YAML types included)
    for (const type of ['application/json', 'application/x-yaml', 'text/html']) {
      expect(await raw('PUT', path, type === 'application/json' ? JSON.stringify(file) : file, type)).toEqual({ status: 415, body: { error: { code: 'unsupported_media_type', message: `${SAID}, got ${type}` } } });
    }
    // no body at all: 400, saying the same
    expect(await raw('PUT', path, undefined, null)).toEqual({ status: 400, body: { error: { code: 'invalid_body', message: SAID } } });
  });
});

describe('sessions by release', () => {
  it('take release=live as the live release, as a number or an id', async () => {
    const sent = await call('POST', '/v1/workspaces/w1/sessions', { ...fixtureSession('payment-skipped'), external_id: 'live-1' });
    expect(sent.status).toBe(202);
    let got = await call('GET', `/v1/workspaces/w1/sessions/${sent.body.id}`);
    for (let i = 0; got.body.status === 'queued' && i < 200; i++) {
      await new Promise((r) => setTimeout(r, 10));
      got = await call('GET', `/v1/workspaces/w1/sessions/${sent.body.id}`);
    }
    const live = (await call('GET', '/v1/workspaces/w1/releases/live')).body;
    expect(got.body.release_id).toBe(live.id);
    for (const release of ['live', String(live.number), live.id]) {
      const list = await call('GET', `/v1/workspaces/w1/sessions?release=${release}`);
      expect([release, list.status, list.body.items.map((s: { id: string }) => s.id)]).toEqual([release, 200, [sent.body.id]]);
    }
    expect((await call('GET', '/v1/workspaces/w1/sessions?release=7')).body.items).toEqual([]);
  });
});

describe('suggestions', () => {
  it('name status among the parameters they take when one is unknown', async () => {
    const res = await call('GET', '/v1/workspaces/w1/suggestions?status[]=proposed');
    expect(res).toMatchObject({ status: 400, body: { error: { code: 'unknown_parameter', message: 'unknown query parameter status[]; this endpoint takes status, pattern, limit, before' } } });
  });
});

/**
 * Sends only the head of a request announcing a 10 MB body, never the body, and gives the
 * status line of the answer, or 'no answer' when none came in 10 s (the api waiting for the body).
 */
function headOnly(path: string, headers: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const { port } = new URL(url);
    let got = '';
    const socket = connect(Number(port), '127.0.0.1', () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 10000000\r\n${headers.map((x) => `${x}\r\n`).join('')}\r\n`);
    });
    const done = (line: string) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(line);
    };
    const timer = setTimeout(() => done('no answer'), 10_000);
    socket.on('data', (d) => {
      got += d.toString('latin1');
      if (got.includes('\r\n')) done(got.split('\r\n')[0]);
    });
    socket.on('error', reject);
  });
}

describe('a body sent without a full key', () => {
  it('is refused before it is read, 401 without a key and 403 with an ingest key, whatever the case of the path', async () => {
    const { port } = new URL(url);
    const paths = [
      '/v1/projects/w1/checks',
      '/v1/Projects/w1/checks',
      '/V1/PROJECTS/w1/checks',
      '/v1/Workspaces/w1/sessions',
      '/v1/Mcp',
      '/v1/mcp#top',
      // the absolute form of the request target, which express routes by its path
      `http://127.0.0.1:${port}/v1/Projects/w1/checks`,
    ];
    const answers = await Promise.all(paths.flatMap((path) => [headOnly(path, []), headOnly(path, [`x-api-key: ${AGENT_KEY}`])]));
    expect(answers).toEqual(paths.flatMap(() => ['HTTP/1.1 401 Unauthorized', 'HTTP/1.1 403 Forbidden']));
  }, 30_000);

  it('is not parsed on a mixed-case path: unparsable JSON without a key is 401, not 400', async () => {
    const res = await fetch(`${url}/v1/Projects/w1/checks`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' });
    expect(res.status).toBe(401);
  });

  it('with a full key, on a mixed-case path, is read with its endpoint\'s limit (a session up to 8 MB)', async () => {
    const session = { ...fixtureSession('payment-skipped'), external_id: 'mixed-case-1', padding: 'x'.repeat(200 * 1024) };
    const lower = await call('POST', '/v1/workspaces/w1/sessions', session);
    const mixed = await call('POST', '/v1/Workspaces/w1/sessions', session);
    // read whole (not 413 at the default 100 KB) and answered as on the lower-case path
    expect(lower.status).not.toBe(413);
    expect({ status: mixed.status, body: mixed.body }).toEqual({ status: lower.status, body: lower.body });
  });
});
