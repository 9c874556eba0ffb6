import { randomBytes } from 'node:crypto';
import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { Db } from '@neatroots/ports';
import { GitHubCodeHost, migrate, openPglite } from '@neatroots/platform';
import { GitHubConnections } from '@neatroots/review';
import { ApiKeyGuard } from './auth.guard';
import { bodyParserErrors, parseBody, requireJsonBody } from './body';
import { ErrorsFilter } from './errors';
import { GITHUB_CONNECTIONS, GitHubController } from './github.controller';
import { RESOLVE_KEY } from './tokens';

// The controller is not in ApiModule yet (the lead registers it): the same pipeline createApi builds, around it alone.
const TOKEN = 'ghp_NeverShowThis_7777';
let db: Db;
let app: INestApplication;
let url: string;

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  const connections = new GitHubConnections(db, randomBytes(32), (c) => new GitHubCodeHost({ token: c.token, baseUrl: c.api_url }));
  @Module({
    controllers: [GitHubController],
    providers: [
      { provide: GITHUB_CONNECTIONS, useValue: connections },
      { provide: RESOLVE_KEY, useValue: (k: string) => (k === 'key-acme' ? { project: 'acme', scope: 'api' } : null) },
      ApiKeyGuard,
    ],
  })
  class M {}
  app = await NestFactory.create(M, { logger: ['error'], bodyParser: false, abortOnError: false });
  app.use(requireJsonBody);
  app.use(parseBody);
  app.use(bodyParserErrors);
  app.useGlobalFilters(new ErrorsFilter());
  await app.listen(0, '127.0.0.1');
  url = `http://127.0.0.1:${app.getHttpServer().address().port}/v1/workspaces`;
}, 60_000);
afterAll(async () => {
  await app.close();
  await db.close();
});

const call = async (method: string, path: string, body?: unknown, key = 'key-acme') => {
  const res = await fetch(`${url}${path}`, { method, headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, text, json: text ? JSON.parse(text) : null };
};

it('PUT, GET, DELETE /v1/workspaces/{ws}/github; the token is in no answer', async () => {
  expect((await call('GET', '/acme/github')).status).toBe(404);
  const put = await call('PUT', '/acme/github', { repository: 'acme/ops', branch: 'main', path: 'procedures', token: TOKEN, api_url: 'https://github.example.com/api/v3' });
  expect(put.status).toBe(200);
  expect(put.json).toMatchObject({ repository: 'acme/ops', branch: 'main', path: 'procedures', api_url: 'https://github.example.com/api/v3', has_token: true, token_hint: '…7777' });
  const got = await call('GET', '/acme/github');
  expect(got.json).toEqual(put.json);
  for (const r of [put, got]) expect(r.text).not.toContain(TOKEN);

  const refused = await call('PUT', '/acme/github', { repository: 'nope' });
  expect(refused.status).toBe(400);
  expect(refused.json.error.message).toMatch(/repository must be "owner\/repo"/);
  expect(refused.text).not.toContain(TOKEN);

  expect((await call('GET', '/other/github', undefined)).status).toBe(403);
  expect((await call('DELETE', '/acme/github')).json).toEqual({ deleted: true });
  expect((await call('GET', '/acme/github')).status).toBe(404);
});
