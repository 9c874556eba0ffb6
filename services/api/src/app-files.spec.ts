import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import type { ReviewQueries } from '@neatroots/store';
import { apiUrl, createApi } from './api';

/** The web app at `/`: its files, index.html for its pages, never in the way of the API. */
describe('the api serves the web app', () => {
  let dir: string;
  const apps: INestApplication[] = [];

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nr-app-'));
    fs.mkdirSync(path.join(dir, 'assets'));
    fs.writeFileSync(path.join(dir, 'index.html'), '<!doctype html><title>neatroots app</title>');
    fs.writeFileSync(path.join(dir, 'assets', 'main-abc123.js'), 'console.log(1)');
  });
  afterAll(async () => {
    for (const a of apps) await a.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function start(appDir: string | null): Promise<string> {
    // The app's paths never reach the queries; the guard refuses every /v1 call (no key is known).
    const app = await createApi({ queries: {} as ReviewQueries, resolveKey: async () => null, port: 0, host: '127.0.0.1', appDir, logger: false });
    apps.push(app);
    return apiUrl(app);
  }

  it('answers / and any page of the app with index.html, and its assets as files', async () => {
    const url = await start(dir);
    for (const p of ['/', '/p/shop/runs/r-1?span=s2', '/sign-in']) {
      const res = await fetch(url + p);
      expect({ p, status: res.status, type: res.headers.get('content-type'), body: await res.text() }).toEqual({
        p,
        status: 200,
        type: expect.stringContaining('text/html'),
        body: '<!doctype html><title>neatroots app</title>',
      });
    }
    const asset = await fetch(`${url}/assets/main-abc123.js`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('cache-control')).toContain('immutable');
    expect(await asset.text()).toBe('console.log(1)');
    // A file that is not there is a 404, not the app's page passed off as a script.
    expect((await fetch(`${url}/assets/gone-000.js`)).status).toBe(404);
  });

  it("answers the app's pages whose last part has a dot (run and pattern ids, a project) with index.html; a missing file outside them stays a 404", async () => {
    const url = await start(dir);
    // Run ids are any string the agent gave: a shared or reloaded link to one must load the app.
    for (const p of ['/p/shop/runs/job-3.1', '/p/shop/runs/run.v2?span=s1', '/p/my.app', '/p/my.app/', '/p/shop/patterns/x.y', '/p/shop/sessions/pay.3']) {
      const res = await fetch(url + p);
      expect({ p, status: res.status, type: res.headers.get('content-type'), body: await res.text() }).toEqual({
        p,
        status: 200,
        type: expect.stringContaining('text/html'),
        body: '<!doctype html><title>neatroots app</title>',
      });
    }
    // Outside the app's pages a name with an extension is a file or nothing.
    for (const p of ['/favicon.ico', '/assets/gone-000.css', '/robots.txt']) expect({ p, status: (await fetch(url + p)).status }).toEqual({ p, status: 404 });
  });

  it('sends the security headers on every answer: the app, its files, the API, its refusals and errors; no X-Powered-By', async () => {
    const url = await start(dir);
    const want = {
      'content-security-policy': "default-src 'self'; img-src 'self' data:; style-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
      'x-frame-options': 'DENY',
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'same-origin',
      'x-powered-by': null,
    };
    const seen = (res: Response) => Object.fromEntries(Object.keys(want).map((h) => [h, res.headers.get(h)]));
    for (const [p, status] of [
      ['/', 200],
      ['/p/x/runs', 200],
      ['/assets/main-abc123.js', 200],
      ['/assets/gone-000.js', 404],
      ['/v1/nothing-here', 404],
      ['/v1/projects/x/runs', 401],
      ['/healthz', 200],
      ['/openapi.json', 200],
    ] as const) {
      const res = await fetch(url + p);
      expect({ p, status: res.status, headers: seen(res) }).toEqual({ p, status, headers: want });
    }
    // A body refused before any route, and the page that says the app is not built.
    const refused = await fetch(`${url}/v1/projects/x/checks`, { method: 'POST', headers: { 'x-api-key': 'k', 'content-type': 'text/plain' }, body: 'x' });
    expect(seen(refused)).toEqual(want);
    const unbuilt = await fetch(`${await start(null)}/p/x/runs`);
    expect({ status: unbuilt.status, headers: seen(unbuilt) }).toEqual({ status: 503, headers: want });
  });

  it('never shadows the API: /v1 stays JSON (401 without a key, 404 for no route), /healthz answers', async () => {
    const url = await start(dir);
    const runs = await fetch(`${url}/v1/projects/shop/runs`);
    expect(runs.status).toBe(401);
    expect(await runs.json()).toEqual({ error: expect.objectContaining({ code: 'unauthorized' }) });
    const none = await fetch(`${url}/v1/nothing-here`);
    expect(none.status).toBe(404);
    expect(await none.json()).toEqual({ error: expect.objectContaining({ code: 'not_found' }) });
    expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ status: 'ok' });
    // Nor in another case: express routes /V1/Projects/... and /Healthz to the API as their lower-case paths.
    for (const p of ['/V1/projects/shop/runs', '/v1/Projects/shop/runs', '/V1/nothing-here']) {
      const res = await fetch(url + p);
      expect({ p, status: res.status, type: res.headers.get('content-type') }).toEqual({ p, status: p.includes('nothing') ? 404 : 401, type: expect.stringContaining('application/json') });
    }
    expect(await (await fetch(`${url}/Healthz`)).json()).toEqual({ status: 'ok' });
    // POST to an app page is no page of the app.
    expect((await fetch(`${url}/p/shop`, { method: 'POST' })).status).toBe(404);
  });

  it('without a build, says what to run (503) and the API still works', async () => {
    const url = await start(path.join(dir, 'not-built'));
    const res = await fetch(`${url}/`);
    expect(res.status).toBe(503);
    expect(await res.text()).toMatch(/web app is not built.*npm run build/);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const none = await start(null);
    expect((await fetch(`${none}/p/shop/runs`)).status).toBe(503);
  });
});
