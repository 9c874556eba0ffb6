import type { INestApplication } from '@nestjs/common';
import type { Db } from '@neatroots/ports';
import { createReviewQueries } from '@neatroots/review';
import type { Envelope, FindingMessage } from '@neatroots/spans';
import { FindingsRepo, ProjectsRepo, RunsRepo } from '@neatroots/store';
import { migrate, openPglite } from '@neatroots/platform';
import { apiUrl, createApi } from './api';

const T0 = Date.parse('2025-01-01T00:00:00.000Z');
const KEY = 'key-for-p1';
const OTHER = 'key-for-p2';

let db: Db;
let app: INestApplication;
let base: string;

const start = (run_id: string, workflow: string, ts_ms: number): Envelope => ({
  project: 'p1', received_ms: ts_ms, item: { kind: 'run_start', run: { event: 'run_start', run_id, workflow, ts_ms } },
});
const span = (run_id: string, span_id: string, start_ms: number): Envelope => ({
  project: 'p1', received_ms: start_ms, item: { kind: 'span', span: { run_id, span_id, type: 'tool', name: 'search', status: 'ok', start_ms } },
});
const raised = (id: string, over: Partial<FindingMessage> = {}): FindingMessage => ({
  id, check_id: 'repeated-tool-call', run_id: 'r1', project: 'p1', status: 'raised', span_ids: ['s1'], count: 3, action: 'flag',
  title: 'Same tool called repeatedly', guidance: 'Stop', at_ms: T0 + 10, kind: 'rule', source: 'library', ...over,
});

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  const projects = new ProjectsRepo(db);
  await projects.addApiKey('p1', KEY);
  await projects.addApiKey('p2', OTHER);
  await new RunsRepo(db).writeEnvelopes([
    start('r1', 'refund-agent', T0), span('r1', 's2', T0 + 2), span('r1', 's1', T0 + 1),
    start('r2', 'support-agent', T0 + 1000),
    start('r3', 'refund-agent', T0 + 2000),
  ]);
  await new FindingsRepo(db).apply([
    raised('f-head', { group: 'loop', priority: 5 }),
    raised('f-member', { check_id: 'runaway', group: 'loop', priority: 1 }),
    raised('f-r3', { run_id: 'r3', check_id: 'slow', at_ms: T0 + 2010 }),
  ]);
  app = await createApi({
    queries: createReviewQueries(db),
    resolveKey: (key) => projects.resolveApiKey(key),
    port: 0,
    logger: false,
  });
  base = apiUrl(app);
}, 60_000);

afterAll(async () => {
  await app?.close();
  await db?.close();
});

// JSON of any shape, checked field by field below
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function call(path: string, init: RequestInit & { key?: string | null } = {}): Promise<{ status: number; body: any }> {
  const headers = new Headers(init.headers);
  if (init.key !== null) headers.set('x-api-key', init.key ?? KEY);
  const res = await fetch(`${base}${path}`, { ...init, headers });
  const text = await res.text();
  expect(res.headers.get('content-type') ?? '').toMatch(/application\/json/);
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

describe('api: access', () => {
  it('answers /healthz without a key', async () => {
    expect(await call('/healthz', { key: null })).toEqual({ status: 200, body: { status: 'ok' } });
  });

  it('needs a key: 401 without one or with an unknown one', async () => {
    expect(await call('/v1/projects/p1/runs', { key: null })).toEqual({
      status: 401, body: { error: { code: 'unauthorized', message: expect.stringMatching(/API key is required/) } },
    });
    expect(await call('/v1/projects/p1/runs', { key: 'nope' })).toMatchObject({ status: 401, body: { error: { code: 'unauthorized' } } });
  });

  it('opens only the key\'s own project: 403 for another', async () => {
    expect(await call('/v1/projects/p1/runs', { key: OTHER })).toMatchObject({ status: 403, body: { error: { code: 'forbidden' } } });
    expect(await call('/v1/projects/p2/findings/f-head/dismiss', { method: 'POST', key: OTHER })).toMatchObject({ status: 404 });
  });

  it('takes the key as a bearer token too', async () => {
    const res = await call('/v1/projects/p1/runs', { key: null, headers: { authorization: `Bearer ${KEY}` } });
    expect(res.status).toBe(200);
  });

  it('answers an unknown route with a JSON 404', async () => {
    expect(await call('/v1/nothing-here')).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
  });
});

describe('api: runs', () => {
  it('lists runs newest first, with filters and pages', async () => {
    const all = await call('/v1/projects/p1/runs');
    expect(all.status).toBe(200);
    expect(all.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual(['r3', 'r2', 'r1']);
    expect(all.body.next_cursor).toBeNull();
    expect(all.body.runs[2]).toMatchObject({ project: 'p1', workflow: 'refund-agent', span_count: 2, open_findings: 1, started_at: new Date(T0).toISOString() });

    const refunds = await call('/v1/projects/p1/runs?workflow=refund-agent');
    expect(refunds.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual(['r3', 'r1']);

    const withOpen = await call('/v1/projects/p1/runs?has_open_findings=true');
    expect(withOpen.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual(['r3', 'r1']);

    const first = await call('/v1/projects/p1/runs?limit=2');
    expect(first.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual(['r3', 'r2']);
    const next = await call(`/v1/projects/p1/runs?limit=2&cursor=${encodeURIComponent(first.body.next_cursor)}`);
    expect(next.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual(['r1']);
    expect(next.body.next_cursor).toBeNull();
  });

  it('rejects bad query parameters with a 400 naming them', async () => {
    for (const q of ['limit=0', 'limit=abc', 'limit=501', 'has_open_findings=yes', 'workflow=a&workflow=b', 'cursor=garbage', 'workflow=']) {
      const res = await call(`/v1/projects/p1/runs?${q}`);
      expect(res.status).toBe(400);
      expect(res.body.error).toEqual({ code: expect.any(String), message: expect.any(String) });
    }
    expect((await call('/v1/projects/p1/runs?limit=abc')).body.error.message).toMatch(/limit/);
    expect((await call('/v1/projects/p1/runs?cursor=garbage')).body.error.code).toBe('invalid_cursor');
  });

  it('shows a run with its spans in order, its findings and its problems', async () => {
    const res = await call('/v1/projects/p1/runs/r1');
    expect(res.status).toBe(200);
    expect(res.body.run).toMatchObject({ run_id: 'r1', workflow: 'refund-agent', span_count: 2 });
    expect(res.body.spans.map((s: { span_id: string }) => s.span_id)).toEqual(['s1', 's2']);
    expect(res.body.findings.map((f: { id: string }) => f.id).sort()).toEqual(['f-head', 'f-member']);
    expect(res.body.problems).toHaveLength(1);
    expect(res.body.problems[0]).toMatchObject({ id: 'f-head', group: 'loop', related: [expect.objectContaining({ id: 'f-member' })] });
  });

  it('answers 404 for an unknown run', async () => {
    expect(await call('/v1/projects/p1/runs/nope')).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
  });
});

describe('api: findings', () => {
  it('lists problems by state, a group counted once', async () => {
    const open = await call('/v1/projects/p1/findings');
    expect(open.status).toBe(200);
    expect(open.body.findings.map((p: { id: string; related: { id: string }[] }) => [p.id, p.related.map((r) => r.id)])).toEqual([
      ['f-r3', []], ['f-head', ['f-member']],
    ]);
    expect(open.body.findings[0]).toMatchObject({ check_id: 'slow', state: 'open', status: 'open', quiet: false, span_ids: ['s1'] });
    expect((await call('/v1/projects/p1/findings?state=resolved')).body.findings).toEqual([]);
    expect(await call('/v1/projects/p1/findings?state=closed')).toMatchObject({ status: 400, body: { error: { code: 'invalid_query' } } });
  });

  it('dismisses and reopens a finding', async () => {
    const dismissed = await call('/v1/projects/p1/findings/f-r3/dismiss', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ by: 'ana', note: 'slow is fine here' }),
    });
    expect(dismissed).toMatchObject({ status: 200, body: { finding: { id: 'f-r3', state: 'dismissed', dismissed_by: 'ana', dismiss_note: 'slow is fine here' } } });
    expect((await call('/v1/projects/p1/findings?state=dismissed')).body.findings.map((f: { id: string }) => f.id)).toEqual(['f-r3']);
    const stats = await call('/v1/projects/p1/checks/stats');
    expect(stats.body.checks).toContainEqual({ check_id: 'slow', findings: 1, dismissals: 1, precision: 0, quiet: false, retire_suggested: false });

    const reopened = await call('/v1/projects/p1/findings/f-r3/reopen', { method: 'POST' });
    expect(reopened).toMatchObject({ status: 200, body: { finding: { id: 'f-r3', state: 'open', dismissed_at: null } } });
    expect((await call('/v1/projects/p1/checks/stats')).body.checks).toContainEqual(expect.objectContaining({ check_id: 'slow', dismissals: 0, precision: 1 }));
  });

  it('dismisses with no body at all', async () => {
    const res = await call('/v1/projects/p1/findings/f-member/dismiss', { method: 'POST' });
    expect(res).toMatchObject({ status: 200, body: { finding: { state: 'dismissed', dismissed_by: null } } });
    await call('/v1/projects/p1/findings/f-member/reopen', { method: 'POST' });
  });

  it('answers 404 for an unknown finding and 400 for a bad body', async () => {
    expect(await call('/v1/projects/p1/findings/nope/dismiss', { method: 'POST' })).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    expect(await call('/v1/projects/p1/findings/nope/reopen', { method: 'POST' })).toMatchObject({ status: 404 });
    const typed = await call('/v1/projects/p1/findings/f-head/dismiss', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ note: 5 }),
    });
    expect(typed).toMatchObject({ status: 400, body: { error: { code: 'invalid_body' } } });
    const broken = await call('/v1/projects/p1/findings/f-head/dismiss', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"note":',
    });
    expect(broken).toMatchObject({ status: 400, body: { error: { code: 'bad_request' } } });
    expect((await call('/v1/projects/p1/findings?state=dismissed')).body.findings).toEqual([]);
  });
});
