import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { Db } from '@neatroots/ports';
import { InlineJobs, migrate, openPglite } from '@neatroots/platform';
import { startSop, type Sop } from '@neatroots/review';
import { checkSession, noModelDecider, readFolder } from '@neatroots/sop';
import { ProjectsRepo } from '@neatroots/store';
import { apiUrl } from './api';
import { ApiKeyGuard } from './auth.guard';
import { ErrorsFilter } from './errors';
import { ReviewController } from './review.controller';
import { RESOLVE_KEY, REVIEW_SOP_QUERIES } from './tokens';

/**
 * The review endpoints over real HTTP: ReviewController with the api's guard and error filter,
 * on the review service's ReviewSop, as startSop runs it (PGlite, inline jobs) with fixture sessions checked by
 * tool calls alone.
 */
const FIXTURES = path.resolve(__dirname, '../../../libs/sop/fixtures');
const KEY = 'key-for-luigis';
const session = (name: string) => JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', name, 'session.json'), 'utf8'));

let db: Db;
let jobs: InlineJobs;
let sop: Sop;
let app: INestApplication;
let base: string;

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  await new ProjectsRepo(db).addApiKey('luigis', KEY);
  await new ProjectsRepo(db).addApiKey('other', 'key-for-other');
  jobs = new InlineJobs();
  sop = await startSop({ db, jobs, checkSession: ({ lock, releaseId, session: s }) => checkSession(lock, s, { decider: noModelDecider('no model is configured'), releaseId }) });
  await sop.queries.pushHead('luigis', [...readFolder(path.join(FIXTURES, 'luigis')).entries()].map(([p, text]) => ({ path: p, text })));
  await sop.queries.publish('luigis');

  @Module({
    controllers: [ReviewController],
    providers: [{ provide: REVIEW_SOP_QUERIES, useValue: sop.review }, { provide: RESOLVE_KEY, useValue: (k: string) => new ProjectsRepo(db).resolveApiKey(k) }, ApiKeyGuard],
  })
  class TestModule {}
  app = await NestFactory.create(TestModule, { logger: false });
  app.useGlobalFilters(new ErrorsFilter());
  await app.listen(0, '127.0.0.1');
  base = `${apiUrl(app)}/v1/workspaces/luigis`;
}, 60_000);
afterAll(async () => {
  await app.close();
  await jobs.close();
  await db.close();
});

async function call(method: string, p: string, body?: unknown, key = KEY) {
  const res = await fetch(`${base}${p}`, { method, headers: { 'x-api-key': key, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, type: res.headers.get('content-type') ?? '', text, body: res.headers.get('content-type')?.includes('application/json') && text ? JSON.parse(text) : null };
}

async function checkedWithPattern(name: string, externalId: string): Promise<string> {
  const sent = await sop.queries.receiveSession('luigis', { ...session(name), external_id: externalId, started_at: new Date(Date.now() - 86_400_000).toISOString() });
  for (let i = 0; i < 400; i++) {
    const s = await sop.queries.getSession('luigis', sent.id);
    const rule = s.checks.flatMap((c) => c.rules).find((r) => r.finding);
    if (rule?.pattern_id) return sent.id;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`${externalId} never got a pattern`);
}

describe('the review endpoints', () => {
  it('serve the queue, patterns, a verdict, an override, the regression set and insights', async () => {
    const a = await checkedWithPattern('payment-skipped', 'pay-a');
    await checkedWithPattern('payment-skipped', 'pay-b');

    const queue = await call('GET', '/review');
    expect(queue.status).toBe(200);
    expect(queue.body).toMatchObject({ total: 1, counts: { needs_review: 1 }, clustered_at: null });
    const item = queue.body.items[0];
    expect(item).toMatchObject({ label: 'Step 1', procedure_id: 'card-payment', sessions: 2, review_state: 'needs_review', review_reason: 'no_verdict' });
    expect(item.examples).toHaveLength(2);
    expect((await call('GET', '/review?state=open&state=closed')).body.total).toBe(0);

    const list = await call('GET', '/patterns?days=30&procedure=card-payment');
    expect(list.body.items.map((p: { id: string }) => p.id)).toEqual([item.pattern_id]);
    const one = await call('GET', `/patterns/${item.pattern_id}`);
    expect(one.body).toMatchObject({ id: item.pattern_id, session_count: 2, suggestions: [] });

    const noVerdict = await call('GET', `/patterns/${item.pattern_id}/regression`);
    expect(noVerdict.status).toBe(409);
    expect(noVerdict.body.error.code).toBe('no_verdict');

    const verdict = await call('POST', `/patterns/${item.pattern_id}/verdict`, { verdict: 'real', reviewer: 'ana' });
    expect(verdict.status).toBe(201);
    expect(verdict.body).toMatchObject({ verdict: 'real', reviewer: 'ana', suppressed_count: 0, review_state: 'open' });

    const findingId = item.examples.find((e: { session_id: string }) => e.session_id === a).finding_id;
    const override = await call('POST', `/findings/${findingId}/override`, { correct: false, note: 'it was found' });
    expect(override.body).toMatchObject({ finding_id: findingId, correct: false, suppressed: true });

    const lines = await call('GET', `/patterns/${item.pattern_id}/regression`);
    expect(lines.status).toBe(200);
    expect(lines.type).toContain('application/x-ndjson');
    const parsed = lines.text.trim().split('\n').map((l) => JSON.parse(l));
    expect(parsed.map((l) => [l.session_id === a, l.expect]).sort()).toEqual([[false, 'agent'], [true, 'checker']]);

    const ins = await call('GET', '/insights?procedure=card-payment');
    expect(ins.body.tiles).toMatchObject({ sessions: 2, findings: 1, suppressed: 1 });
  });

  it('refuses what it does not take, naming it, and keys of other workspaces', async () => {
    expect((await call('GET', '/review?status=open')).body.error).toMatchObject({ code: 'unknown_parameter', message: expect.stringContaining('state, limit') });
    expect((await call('GET', '/review?state=later')).body.error.message).toContain('state must be one of needs_review');
    expect((await call('GET', '/review?limit=0')).status).toBe(400);
    expect((await call('GET', '/insights?days=0')).body.error.message).toContain('days must be an integer from 1 to 3650');
    expect((await call('GET', '/insights?from=soon')).body.error).toMatchObject({ code: 'invalid_query', message: expect.stringContaining('from must be an ISO-8601') });
    expect((await call('GET', '/patterns/pat_nope')).status).toBe(404);
    expect((await call('POST', '/patterns/pat_nope/verdict', { verdict: 'real' })).status).toBe(404);
    expect((await call('POST', '/patterns/pat_nope/verdict', ['real'])).body.error.code).toBe('invalid_body');
    expect((await call('POST', '/findings/sf_nope/override', { correct: 'no' })).body.error.message).toContain('correct must be');
    expect((await call('GET', '/review', undefined, 'key-for-other')).status).toBe(403);
  });
});
