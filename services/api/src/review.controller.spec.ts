import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { Db } from '@neatroots/ports';
import { InlineJobs } from '@neatroots/platform';
import { ReviewSop, type Sop } from '@neatroots/review';
import { ProjectsRepo, type ReviewSopQueries } from '@neatroots/store';
import { apiUrl } from './api';
import { ApiKeyGuard } from './auth.guard';
import { ErrorsFilter } from './errors';
import { ReviewController } from './review.controller';
import { deployments, fixtureFolder, fixtureSession, send, servedOverGrpc, startSopHarness, type SopHarness } from './sop-harness.test';
import type { SopGrpcClient } from './sop-client';
import { RESOLVE_KEY, REVIEW_SOP_QUERIES } from './tokens';

/**
 * The review endpoints over real HTTP: ReviewController with the api's guard and error filter,
 * on the review service's ReviewSop, as startSop runs it (PGlite, inline jobs) with fixture
 * sessions checked by tool calls alone; in both deployments: in-process (embedded), and over
 * gRPC (neatroots.v1.Sop, the api on its client: distributed), each on its own workspace.
 */
const session = fixtureSession;
const DAY = 86_400_000;

let h: SopHarness;
let db: Db;
let sop: Sop;

/** ReviewController alone, with the api's guard and error filter, on these queries, on a free loopback port. */
async function reviewApp(review: ReviewSopQueries): Promise<INestApplication> {
  @Module({
    controllers: [ReviewController],
    providers: [{ provide: REVIEW_SOP_QUERIES, useValue: review }, { provide: RESOLVE_KEY, useValue: (k: string) => new ProjectsRepo(db).resolveApiKey(k) }, ApiKeyGuard],
  })
  class TestModule {}
  const app = await NestFactory.create(TestModule, { logger: false });
  app.useGlobalFilters(new ErrorsFilter());
  await app.listen(0, '127.0.0.1');
  return app;
}

beforeAll(async () => {
  h = await startSopHarness({ luigis: 'key-for-luigis', marios: 'key-for-marios', other: 'key-for-other' });
  ({ db, sop } = h);
  for (const ws of ['luigis', 'marios']) {
    await sop.queries.pushHead(ws, fixtureFolder());
    await sop.queries.publish(ws);
  }
}, 60_000);
afterAll(() => h.close());

// Each deployment on its own workspace: in-process on luigis, over gRPC on marios.
describe.each(deployments(() => h).map(([name, , reviewOf], i) => [name, ['luigis', 'marios'][i], reviewOf] as const))('the review endpoints (%s)', (_name, ws, reviewOf) => {
  const KEY = `key-for-${ws}`;
  let app: INestApplication;
  let base: string;

  beforeAll(async () => {
    app = await reviewApp(reviewOf());
    base = `${apiUrl(app)}/v1/workspaces/${ws}`;
  });
  afterAll(() => app.close());

  const call = (method: string, p: string, body?: unknown, key = KEY) => send(`${base}${p}`, method, key, body);

  async function checkedWithPattern(name: string, externalId: string, startedAt = new Date(Date.now() - DAY).toISOString()): Promise<string> {
    const sent = await sop.queries.receiveSession(ws, { ...session(name), external_id: externalId, started_at: startedAt });
    for (let i = 0; i < 400; i++) {
      const s = await sop.queries.getSession(ws, sent.id);
      const rule = s.checks.flatMap((c) => c.rules).find((r) => r.finding);
      if (rule?.pattern_id) return sent.id;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`${externalId} never got a pattern`);
  }

  it('serve the queue, patterns, a verdict, an override, the regression set and insights', async () => {
    const a = await checkedWithPattern('payment-skipped', 'pay-a');
    await checkedWithPattern('payment-skipped', 'pay-b');
    await checkedWithPattern('payment-out-of-order', 'pay-c');
    // Outside the default window (365 days): in no list nor count unless asked.
    await checkedWithPattern('payment-skipped', 'pay-old', new Date(Date.now() - 400 * DAY).toISOString());

    const queue = await call('GET', '/review');
    expect(queue.status).toBe(200);
    expect(queue.body).toMatchObject({ total: 2, counts: { needs_review: 2, open: 0, fixing: 0, fixed: 0, regressed: 0, closed: 0 }, clustered_at: null });
    const item = queue.body.items[0];
    // Every field of an item, and of an example finding.
    expect(Object.keys(item).sort()).toEqual(
      ['pattern_id', 'kind', 'name', 'label', 'theme', 'procedure_id', 'procedure_name', 'rule_id', 'rule_text', 'sessions', 'examples', 'verdict', 'review_state', 'review_reason', 'review_note', 'fix_release', 'fix_sessions', 'fix_sessions_needed', 'new_findings', 'suppressed_count', 'suggestion'].sort(),
    );
    // the queue counts all time: the old session is one of the three
    expect(item).toMatchObject({ kind: 'rule', label: 'Step 1', procedure_id: 'card-payment', procedure_name: expect.any(String), rule_text: expect.any(String), sessions: 3, theme: null, verdict: null, review_state: 'needs_review', review_reason: 'no_verdict', review_note: expect.any(String), new_findings: 3, suppressed_count: 0, suggestion: null, fix_release: null });
    expect(item.examples).toHaveLength(3);
    expect(Object.keys(item.examples[0]).sort()).toEqual(['finding_id', 'session_id', 'external_id', 'started_at', 'status', 'excerpt', 'evidence', 'suppressed'].sort());
    expect((await call('GET', '/review?state=open&state=closed')).body).toMatchObject({ total: 0, items: [] });
    expect((await call('GET', '/review?limit=1')).body).toMatchObject({ total: 2, items: [{ pattern_id: item.pattern_id }] });

    const list = await call('GET', '/patterns?procedure=card-payment');
    expect(Object.keys(list.body).sort()).toEqual(['clustered_at', 'items', 'next_cursor', 'window']);
    expect(list.body.next_cursor).toBeNull();
    expect(Date.parse(list.body.window.to) - Date.parse(list.body.window.from)).toBe(365 * DAY);
    expect(list.body.items.map((p: { id: string; findings: number }) => [p.id, p.findings])).toEqual([[item.pattern_id, 2], [queue.body.items[1].pattern_id, 1]]);
    expect((await call('GET', `/patterns?rule=${item.rule_id}&days=3650`)).body.items.map((p: { findings: number }) => p.findings)).toEqual([3]);
    // a page at a time: limit, then next_cursor (with the same filters) to the end
    const firstPage = await call('GET', '/patterns?procedure=card-payment&limit=1');
    expect(firstPage.body.items.map((p: { id: string }) => p.id)).toEqual([item.pattern_id]);
    expect(firstPage.body.next_cursor).toEqual(expect.any(String));
    const secondPage = await call('GET', `/patterns?procedure=card-payment&limit=1&cursor=${encodeURIComponent(firstPage.body.next_cursor)}`);
    expect(secondPage.body).toMatchObject({ items: [{ id: queue.body.items[1].pattern_id }], next_cursor: null });
    const one = await call('GET', `/patterns/${item.pattern_id}`);
    expect(one.body).toMatchObject({ id: item.pattern_id, session_count: 2, suggestions: [], verdict: null, verdict_history: [], suppressed_count: 0, review_state: 'needs_review' });

    const noVerdict = await call('GET', `/patterns/${item.pattern_id}/regression`);
    expect(noVerdict.status).toBe(409);
    expect(noVerdict.body.error.code).toBe('no_verdict');

    const verdict = await call('POST', `/patterns/${item.pattern_id}/verdict`, { verdict: 'real', reviewer: 'ana' });
    expect(verdict.status).toBe(201);
    expect(verdict.body).toMatchObject({ verdict: 'real', reviewer: 'ana', suppressed_count: 0, review_state: 'open' });
    // state is repeatable: each state asked for, and only those
    expect((await call('GET', '/review')).body.items.map((i: { pattern_id: string }) => i.pattern_id)).toEqual([queue.body.items[1].pattern_id]);
    expect((await call('GET', '/review?state=open')).body.items.map((i: { pattern_id: string }) => i.pattern_id)).toEqual([item.pattern_id]);
    expect((await call('GET', '/review?state=open&state=needs_review')).body).toMatchObject({ total: 2, counts: { open: 1, needs_review: 1 } });

    const findingId = item.examples.find((e: { session_id: string }) => e.session_id === a).finding_id;
    const override = await call('POST', `/findings/${findingId}/override`, { correct: false, note: 'it was found' });
    expect(override.body).toMatchObject({ finding_id: findingId, correct: false, suppressed: true });

    const lines = await call('GET', `/patterns/${item.pattern_id}/regression`);
    expect(lines.status).toBe(200);
    expect(lines.type).toContain('application/x-ndjson');
    const parsed = lines.text.trim().split('\n').map((l) => JSON.parse(l));
    // one line per finding, all time, suppressed ones included
    expect(parsed).toHaveLength(3);
    for (const l of parsed) {
      expect(Object.keys(l).sort()).toEqual(['session_id', 'external_id', 'transcript_ref', 'procedure_id', 'rule_id', 'rule_kind', 'rule_text', 'verdict', 'observed_status', 'expected_status', 'expect'].sort());
      expect(l).toMatchObject({ procedure_id: 'card-payment', rule_kind: 'step', verdict: 'real', observed_status: 'skipped', expected_status: 'done' });
    }
    expect(parsed.map((l) => [l.session_id === a, l.expect]).sort()).toEqual([[false, 'agent'], [false, 'agent'], [true, 'checker']]);

    // Insights: 365 days by default; the overridden finding is apart, and its session followed.
    const ins = await call('GET', '/insights?procedure=card-payment');
    expect(Date.parse(ins.body.window.to) - Date.parse(ins.body.window.from)).toBe(365 * DAY);
    expect(ins.body.tiles).toMatchObject({ sessions: 3, findings: 2, suppressed: 1 });
    expect(ins.body.scoreboard).toEqual([expect.objectContaining({ procedure_id: 'card-payment', sessions: 3, findings: 2, suppressed: 1 })]);
    expect((await call('GET', '/insights?procedure=card-payment&days=3650')).body.tiles).toMatchObject({ sessions: 4, findings: 3, suppressed: 1 });

    // Release compare: the sessions above ran on release 1; one more on a release 2.
    expect((await call('GET', '/insights/compare')).body.error).toMatchObject({ code: 'no_earlier_release' });
    const second = await sop.queries.publish(ws);
    await checkedWithPattern('payment-skipped', 'pay-after');
    const cmp = await call('GET', `/insights/compare?to=${second.id}&procedure=card-payment`);
    expect(cmp.status).toBe(200);
    expect(cmp.body).toMatchObject({ from: { number: 1 }, to: { number: 2, id: second.id }, filters: { procedure: 'card-payment' } });
    expect(cmp.body.procedures).toEqual([expect.objectContaining({ procedure_id: 'card-payment', from: expect.objectContaining({ sessions: 4, findings: 3, suppressed: 1 }), to: expect.objectContaining({ sessions: 1, findings: 1 }) })]);
    expect((await call('GET', '/insights/compare?from=7')).status).toBe(404);
    expect((await call('GET', '/insights/compare?since=1')).body.error.code).toBe('unknown_parameter');
  });

  it('refuses what it does not take, naming it, and keys of other workspaces', async () => {
    expect((await call('GET', '/review?status=open')).body.error).toMatchObject({ code: 'unknown_parameter', message: expect.stringContaining('state, limit') });
    expect((await call('GET', '/review?state=later')).body.error.message).toContain('state must be one of needs_review');
    expect((await call('GET', '/review?limit=0')).status).toBe(400);
    expect((await call('GET', '/insights?days=0')).body.error.message).toContain('days must be an integer from 1 to 3650');
    expect((await call('GET', '/insights?from=soon')).body.error).toMatchObject({ code: 'invalid_query', message: expect.stringContaining('from must be an ISO-8601') });
    expect((await call('GET', '/patterns/pat_nope')).status).toBe(404);
    expect((await call('GET', '/patterns?limit=501')).body.error).toMatchObject({ code: 'invalid_query', message: expect.stringContaining('limit must be an integer from 1 to 500') });
    expect((await call('GET', '/patterns?cursor=nope')).body.error.code).toBe('invalid_cursor');
    expect((await call('POST', '/patterns/pat_nope/verdict', { verdict: 'real' })).status).toBe(404);
    expect((await call('POST', '/patterns/pat_nope/verdict', ['real'])).body.error.code).toBe('invalid_body');
    expect((await call('POST', '/findings/sf_nope/override', { correct: 'no' })).body.error.message).toContain('correct must be');
    expect((await call('GET', '/review', undefined, 'key-for-other')).status).toBe(403);
  });
});

describe('a recluster that outlives its wait', () => {
  let slowJobs: InlineJobs;
  let slow: ReviewSop;
  let release: () => void;
  let slowServed: { client: SopGrpcClient; close(): void };
  let slowClient: SopGrpcClient;
  beforeAll(async () => {
    const gate = new Promise<void>((r) => (release = r));
    slowJobs = new InlineJobs();
    // A question service that answers only once released: the recluster job outlives its 200 ms.
    slow = new ReviewSop({ db, jobs: slowJobs, gateway: async () => (await gate, null), reclusterWaitMs: 200 });
    await slow.start();
    slowServed = await servedOverGrpc(sop.queries, slow.queries);
    slowClient = slowServed.client;
  });
  afterAll(async () => {
    release();
    slowServed.close();
    await slowJobs.close();
  });

  it.each([
    ['in-process', () => slow.queries],
    ['over gRPC', () => slowClient as ReviewSopQueries],
  ])('answers 504 still_running, saying the run goes on (%s)', async (_name, reviewOf) => {
    const app = await reviewApp(reviewOf());
    try {
      const res = await fetch(`${apiUrl(app)}/v1/workspaces/luigis/patterns/recluster`, { method: 'POST', headers: { 'x-api-key': 'key-for-luigis', 'content-type': 'application/json' }, body: '{}' });
      expect(res.status).toBe(504);
      expect(((await res.json()) as { error: unknown }).error).toEqual({ code: 'still_running', message: expect.stringMatching(/^the recluster of luigis is still running after 200 ms: it goes on; clustered_at/) });
    } finally {
      await app.close();
    }
  });
});
