import * as http from 'node:http';
import type { INestApplication } from '@nestjs/common';
import type { Db } from '@neatroots/ports';
import { createReviewQueries } from '@neatroots/review';
import type { FindingMessage } from '@neatroots/messages';
import type { Envelope } from '@neatroots/spans';
import { FindingsRepo, ProjectsRepo, RunsRepo } from '@neatroots/store';
import { migrate, openPglite } from '@neatroots/platform';
import { apiUrl, createApi } from './api';

const T0 = Date.parse('2025-01-01T00:00:00.000Z');
const KEY = 'key-for-p1';
const OTHER = 'key-for-p2';
const P3 = 'key-for-p3';
/** Spans of the run `long` in project p3: more than two default pages. */
const LONG_RUN_SPANS = 1205;

let db: Db;
let app: INestApplication;
let base: string;

const start = (run_id: string, workflow: string, ts_ms: number): Envelope => ({
  project: 'p1', received_ms: ts_ms, item: { kind: 'run_start', run: { event: 'run_start', run_id, workflow, ts_ms } },
});
const span = (run_id: string, span_id: string, start_ms: number): Envelope => ({
  project: 'p1', received_ms: start_ms, item: { kind: 'span', span: { run_id, span_id, type: 'tool', name: 'search', status: 'ok', start_ms } },
});
const at = (project: string, env: Envelope): Envelope => ({ ...env, project });
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
  await projects.addApiKey('p3', P3);
  // p3: a run whose spans start within the same milliseconds, arriving out of id order, and
  // a long run; a repeated call in the fast run that stopped (raised, then resolved).
  await new RunsRepo(db).writeEnvelopes([
    at('p3', start('fast', 'refund-agent', T0)),
    at('p3', span('fast', 'c', T0 + 0.25)), at('p3', span('fast', 'a', T0 + 0.5)), at('p3', span('fast', 'b', T0 + 0.75)),
    at('p3', span('fast', 'z', T0 + 1)), at('p3', span('fast', 'y', T0 + 1)),
    at('p3', start('long', 'refund-agent', T0 - 1000)),
    ...Array.from({ length: LONG_RUN_SPANS }, (_, i) => at('p3', span('long', `s${i}`, T0 - 1000 + i))),
  ]);
  await new FindingsRepo(db).apply([
    raised('f-fast', { project: 'p3', run_id: 'fast', span_ids: ['c', 'a', 'b'] }),
    raised('f-fast', { project: 'p3', run_id: 'fast', span_ids: ['c', 'a', 'b'], status: 'resolved', at_ms: T0 + 20 }),
  ]);
  // The question service's answer per project (it keeps the questions of the checks that
  // apply there); the api must ask for the key's project.
  const agreement: Record<string, { check_id: string; answers: number }[]> = {
    p1: [{ check_id: 'tone', answers: 40 }, { check_id: 'refund-policy', answers: 3 }],
    p2: [{ check_id: 'secret-plan', answers: 3 }],
  };
  app = await createApi({
    queries: createReviewQueries(db),
    resolveKey: (key) => projects.resolveApiKey(key),
    modelStats: async (project, checkId) => (agreement[project] ?? []).filter((q) => !checkId || q.check_id === checkId),
    // A check disabled for a slow pattern, scoped by its applies_to (which names other projects).
    disabledChecks: () => [{ check_id: 'slow', pattern: '(a+)+$', source: 'database', projects: ['p1'], not_projects: ['secret-merger'], reason: 'pattern took over 50 ms', ms: 61.2, limit_ms: 50, since: '2026-11-30T10:00:00.000Z' }],
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

describe('api: disabled checks', () => {
  it('answers the documented fields of a disabled check, never the projects its applies_to names', async () => {
    const res = await call('/v1/projects/p1/checks/disabled');
    expect(res).toEqual({ status: 200, body: { checks: [{ check_id: 'slow', pattern: '(a+)+$', source: 'database', reason: 'pattern took over 50 ms', ms: 61.2, limit_ms: 50, since: '2026-11-30T10:00:00.000Z' }] } });
  });
});

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

  it('refuses a body sent without a key, or with an unknown one, before reading it: 401, not its parse error', async () => {
    const post = (path: string, key: string | null, body: string, type = 'application/json') => call(path, { method: 'POST', key, headers: { 'content-type': type }, body });
    expect(await post('/v1/projects/p1/checks', null, '{not json')).toMatchObject({ status: 401, body: { error: { code: 'unauthorized', message: expect.stringMatching(/API key is required/) } } });
    expect(await post('/v1/projects/p1/checks', 'nope', '{not json')).toMatchObject({ status: 401, body: { error: { message: 'unknown API key' } } });
    expect(await post('/v1/projects/p1/checks', null, 'hello', 'text/plain')).toMatchObject({ status: 401 });
    expect(await call('/v1/workspaces/p1/head', { method: 'PUT', key: null, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ files: { ['x'.repeat(10)]: 'y'.repeat(4_000_000) } }) })).toMatchObject({ status: 401 });
    // With the key, the body is read as before: its parse error.
    expect(await post('/v1/projects/p1/checks', KEY, '{not json')).toMatchObject({ status: 400, body: { error: { code: 'invalid_body' } } });
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
    expect(broken).toMatchObject({ status: 400, body: { error: { code: 'invalid_body' } } });
    expect((await call('/v1/projects/p1/findings?state=dismissed')).body.findings).toEqual([]);
  });
});

describe('api: malformed input is a 400, 413 or 415 in the one error shape', () => {
  const shape = { error: { code: expect.any(String), message: expect.any(String) } };

  it('rejects a NUL byte in an id or a filter, naming the parameter', async () => {
    for (const [path, name] of [
      ['/v1/projects/p1/runs/r%001', 'run_id'],
      ['/v1/projects/p1/runs/r%001/spans', 'run_id'],
      ['/v1/projects/p1/runs?workflow=refund%00agent', 'workflow'],
      ['/v1/projects/p1/findings?run_id=r%001', 'run_id'],
      ['/v1/projects/p1/runs?cursor=a%00b', 'cursor'],
    ]) {
      const res = await call(path);
      expect(res).toEqual({ status: 400, body: shape });
      expect(res.body.error.message).toContain(name);
      expect(res.body.error.message).toMatch(/NUL/);
    }
    const dismiss = await call('/v1/projects/p1/findings/f%00head/dismiss', { method: 'POST' });
    expect(dismiss).toMatchObject({ status: 400, body: { error: { code: 'invalid_path', message: expect.stringMatching(/^id /) } } });
  });

  it('refuses an id of "." or ".." in the path as it comes (a browser or fetch would have collapsed it): 400 naming it, not another route', async () => {
    // Sent byte for byte: fetch and browsers read runs/.. and runs/%2E%2E as a step up (to the project).
    const raw = (path: string) =>
      new Promise<{ status: number; body: { error: { code: string; message: string } } }>((resolve, reject) => {
        const u = new URL(base);
        const req = http.request({ host: u.hostname, port: u.port, path, method: path.endsWith('/dismiss') ? 'POST' : 'GET', headers: { 'x-api-key': KEY } }, (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
        });
        req.on('error', reject).end();
      });
    for (const [path, name, v] of [
      ['/v1/projects/p1/runs/..', 'run_id', '..'],
      ['/v1/projects/p1/runs/%2E%2E', 'run_id', '..'],
      ['/v1/projects/p1/runs/%2e', 'run_id', '.'],
      ['/v1/projects/p1/runs/%2E%2E/spans', 'run_id', '..'],
      ['/v1/projects/p1/findings/%2E%2E/dismiss', 'id', '..'],
    ]) {
      expect(await raw(path)).toEqual({ status: 400, body: { error: { code: 'invalid_path', message: `${name} must not be "${v}": in a path it is a step up, not a name` } } });
    }
    // A dot is part of an id otherwise.
    expect(await call('/v1/projects/p1/runs/...')).toMatchObject({ status: 404, body: { error: { message: 'no run ... in project p1' } } });
  });

  it('rejects a query parameter the endpoint does not take, naming it', async () => {
    for (const path of [
      '/v1/projects/p1/runs?status=error',
      '/v1/projects/p1/findings?status=error',
      '/v1/projects/p1/runs/r1?verbose=true',
      '/v1/projects/p1/checks/stats?status=error',
    ]) {
      const res = await call(path);
      expect(res).toEqual({ status: 400, body: { error: { code: 'unknown_parameter', message: expect.stringMatching(/^unknown query parameter (status|verbose);/) } } });
    }
    // the message says what the endpoint takes instead
    expect((await call('/v1/projects/p1/findings?status=error')).body.error.message).toMatch(/takes state, run_id, include_quiet, limit, cursor/);
  });

  it('answers a body over the limit with a 413', async () => {
    const res = await call('/v1/projects/p1/findings/f-head/dismiss', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ note: 'x'.repeat(200_000) }),
    });
    expect(res).toEqual({ status: 413, body: { error: { code: 'payload_too_large', message: expect.stringMatching(/102400 bytes/) } } });
    expect((await call('/v1/projects/p1/findings?state=dismissed')).body.findings).toEqual([]);
  });

  it('answers unparsable JSON with a 400 that says the body is at fault, a body not JSON with a 415', async () => {
    const broken = await call('/v1/projects/p1/findings/f-head/dismiss', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"note":' });
    expect(broken).toEqual({ status: 400, body: { error: { code: 'invalid_body', message: expect.stringMatching(/^the body is not valid JSON/) } } });
    const form = await call('/v1/projects/p1/findings/f-head/dismiss', {
      method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'note=mine',
    });
    expect(form).toEqual({ status: 415, body: { error: { code: 'unsupported_media_type', message: expect.stringMatching(/application\/json/) } } });
    const unknownField = await call('/v1/projects/p1/findings/f-head/dismiss', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ notes: 'typo' }),
    });
    expect(unknownField).toMatchObject({ status: 400, body: { error: { code: 'invalid_body', message: expect.stringMatching(/notes/) } } });
    // nothing was dismissed by any of them
    expect((await call('/v1/projects/p1/findings?state=dismissed')).body.findings).toEqual([]);
  });

  it('answers an unknown method on a known path, and a path that does not decode, in the same shape', async () => {
    expect(await call('/v1/projects/p1/runs', { method: 'DELETE' })).toEqual({ status: 404, body: shape });
    expect(await call('/v1/projects/p1/runs/%E0%A4%A')).toEqual({ status: 400, body: shape });
    expect(await call('/v1/projects/p1/runs', { key: 'nope' })).toEqual({ status: 401, body: shape });
    expect(await call('/v1/projects/p1/runs', { key: OTHER })).toEqual({ status: 403, body: shape });
  });
});

describe('api: a run\'s spans, in order and in pages', () => {
  const ids = (spans: { span_id: string }[]) => spans.map((s) => s.span_id);

  it('lists spans by their exact start, then as they arrived', async () => {
    const res = await call('/v1/projects/p3/runs/fast', { key: P3 });
    expect(res.status).toBe(200);
    expect(ids(res.body.spans)).toEqual(['c', 'a', 'b', 'z', 'y']);
    expect(res.body.spans_next_cursor).toBeNull();
  });

  it('pages a long run: the run page has the first 500, the spans endpoint the rest', async () => {
    const page = await call('/v1/projects/p3/runs/long', { key: P3 });
    expect(page.status).toBe(200);
    expect(page.body.run.span_count).toBe(LONG_RUN_SPANS);
    expect(ids(page.body.spans)).toEqual(Array.from({ length: 500 }, (_, i) => `s${i}`));
    expect(page.body.spans_next_cursor).toEqual(expect.any(String));

    const seen = ids(page.body.spans);
    let cursor: string | null = page.body.spans_next_cursor;
    while (cursor) {
      const next = await call(`/v1/projects/p3/runs/long/spans?limit=300&cursor=${encodeURIComponent(cursor)}`, { key: P3 });
      expect(next.status).toBe(200);
      expect(next.body.spans.length).toBeLessThanOrEqual(300);
      seen.push(...ids(next.body.spans));
      cursor = next.body.next_cursor;
    }
    expect(seen).toEqual(Array.from({ length: LONG_RUN_SPANS }, (_, i) => `s${i}`));

    const first = await call('/v1/projects/p3/runs/long/spans', { key: P3 });
    expect(first.body.spans).toHaveLength(500);
  });

  it('keeps span pages within their limits and their run', async () => {
    expect((await call('/v1/projects/p3/runs/long/spans?limit=2000', { key: P3 })).body.spans).toHaveLength(LONG_RUN_SPANS);
    expect(await call('/v1/projects/p3/runs/long/spans?limit=2001', { key: P3 })).toMatchObject({ status: 400, body: { error: { code: 'invalid_query', message: expect.stringMatching(/limit .* 1 to 2000/) } } });
    expect(await call('/v1/projects/p3/runs/nope/spans', { key: P3 })).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    // a runs-list cursor is not a spans cursor
    const runsCursor = (await call('/v1/projects/p1/runs?limit=1')).body.next_cursor;
    expect(await call(`/v1/projects/p3/runs/long/spans?cursor=${encodeURIComponent(runsCursor)}`, { key: P3 })).toMatchObject({ status: 400, body: { error: { code: 'invalid_cursor' } } });
    // another project's key sees none of it
    expect(await call('/v1/projects/p3/runs/long/spans')).toMatchObject({ status: 403 });
  });
});

describe('api: what happened in a run stays visible once it resolved', () => {
  it('a resolved repeated call: off the open list, on the run\'s list with its state, counted on the run', async () => {
    expect((await call('/v1/projects/p3/findings', { key: P3 })).body.findings).toEqual([]);
    const forRun = await call('/v1/projects/p3/findings?run_id=fast', { key: P3 });
    expect(forRun.body.findings).toEqual([expect.objectContaining({ id: 'f-fast', check_id: 'repeated-tool-call', state: 'resolved' })]);
    expect((await call('/v1/projects/p3/findings?run_id=fast&state=open', { key: P3 })).body.findings).toEqual([]);

    const runs = await call('/v1/projects/p3/runs', { key: P3 });
    expect(runs.body.runs.find((r: { run_id: string }) => r.run_id === 'fast')).toMatchObject({ open_findings: 0, finding_count: 1 });
    const page = await call('/v1/projects/p3/runs/fast', { key: P3 });
    expect(page.body.run).toMatchObject({ open_findings: 0, finding_count: 1 });
    expect(page.body.problems).toEqual([expect.objectContaining({ id: 'f-fast', state: 'resolved' })]);
  });
});

describe('api: every endpoint keeps to its project', () => {
  it('asks for the agreement of the key\'s project\'s questions only', async () => {
    const p1 = await call('/v1/projects/p1/models/agreement');
    expect(p1).toEqual({ status: 200, body: { questions: [{ check_id: 'tone', answers: 40 }, { check_id: 'refund-policy', answers: 3 }] } });
    expect((await call('/v1/projects/p2/models/agreement', { key: OTHER })).body.questions).toEqual([{ check_id: 'secret-plan', answers: 3 }]);
    expect((await call('/v1/projects/p1/models/agreement?check_id=tone')).body.questions).toEqual([{ check_id: 'tone', answers: 40 }]);
    expect(await call('/v1/projects/p1/models/agreement?check=tone')).toMatchObject({ status: 400, body: { error: { code: 'unknown_parameter' } } });
  });
});
