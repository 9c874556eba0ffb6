/**
 * A run page that follows a run still going: GET runs/{run_id}?since= gives the spans stored
 * after an earlier answer (in the order they were stored), the run and its findings as they are
 * now; the spans list pages on from such a cursor. Asked in-process (the embedded app) and over
 * the review service's gRPC (the distributed api): both answer the same.
 */
import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { INestApplication } from '@nestjs/common';
import type { Db } from '@neatroots/ports';
import { createReviewQueries, reviewGrpcService } from '@neatroots/review';
import type { Envelope } from '@neatroots/spans';
import { FindingsRepo, ProjectsRepo, RunsRepo, type ReviewQueries } from '@neatroots/store';
import { migrate, openPglite } from '@neatroots/platform';
import { apiUrl, createApi } from './api';
import { ReviewGrpcClient } from './review-client';

const T0 = Date.parse('2025-01-01T00:00:00.000Z');
const KEY = 'since-key';

const span = (run_id: string, span_id: string, start_ms: number, parent_id?: string): Envelope => ({
  project: 'p1',
  received_ms: T0,
  item: { kind: 'span', span: { run_id, span_id, type: 'tool', name: `call ${span_id}`, status: 'ok', start_ms, end_ms: start_ms + 5, ...(parent_id ? { parent_id } : {}) } },
});

const setups: [string, (db: Db) => Promise<{ queries: ReviewQueries; close(): void }>][] = [
  ['in-process (embedded)', async (db) => ({ queries: createReviewQueries(db), close: () => undefined })],
  [
    'over gRPC (distributed)',
    async (db) => {
      const server = new Server();
      const projects = new ProjectsRepo(db);
      const svc = reviewGrpcService(createReviewQueries(db), (key) => projects.resolveApiKey(key));
      server.addService(svc.service, svc.implementation);
      const port = await new Promise<number>((resolve, reject) =>
        server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
      );
      const client = new ReviewGrpcClient(`127.0.0.1:${port}`);
      return {
        queries: client,
        close: () => {
          client.close();
          server.forceShutdown();
        },
      };
    },
  ],
];

describe.each(setups)('a run followed with since, %s', (_name, setup) => {
  let db: Db;
  let runs: RunsRepo;
  let app: INestApplication;
  let base: string;
  let close: () => void;

  beforeAll(async () => {
    db = await openPglite();
    await migrate(db);
    const projects = new ProjectsRepo(db);
    await projects.addApiKey('p1', KEY);
    runs = new RunsRepo(db);
    const s = await setup(db);
    close = s.close;
    app = await createApi({ queries: s.queries, resolveKey: (key) => projects.resolveApiKey(key), port: 0, logger: false });
    base = apiUrl(app);
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    close?.();
    await db?.close();
  });

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async function get(path: string): Promise<{ status: number; body: any }> {
    const res = await fetch(`${base}/v1/projects/p1/${path}`, { headers: { 'x-api-key': KEY } });
    return { status: res.status, body: await res.json() };
  }
  const ids = (spans: { span_id: string }[]) => spans.map((s) => s.span_id);
  const since = (cursor: string) => `runs/live?bodies=preview&since=${encodeURIComponent(cursor)}`;

  it('gives only the spans stored since, in the order stored, with the run and its findings as they are now, until and after its end', async () => {
    await runs.writeEnvelopes([span('live', 'b', T0 + 20), span('live', 'a', T0 + 10)]);
    const first = await get('runs/live?bodies=preview');
    expect(first.status).toBe(200);
    expect(ids(first.body.spans)).toEqual(['a', 'b']);
    expect(first.body.run).toMatchObject({ end_status: null, span_count: 2 });
    expect(first.body.spans_since).toEqual(expect.any(String));

    // Nothing new: no spans, and a since to ask with next time.
    const none = await get(since(first.body.spans_since));
    expect(none.status).toBe(200);
    expect(none.body).toMatchObject({ spans: [], spans_next_cursor: null, findings: [], run: { span_count: 2 } });

    // Later spans, one of them starting first (a parent exported when it ended), and a finding.
    await runs.writeEnvelopes([span('live', 'c', T0 + 30, 'root'), span('live', 'root', T0)]);
    await new FindingsRepo(db).apply([
      { id: 'f1', check_id: 'loop', run_id: 'live', project: 'p1', status: 'raised', span_ids: ['c'], count: 1, action: 'flag', title: 'Looping', guidance: '', at_ms: T0 + 40, kind: 'rule', source: 'library' },
    ]);
    const later = await get(since(none.body.spans_since));
    expect(ids(later.body.spans)).toEqual(['c', 'root']);
    expect(later.body.spans[0]).toMatchObject({ parent_id: 'root', name: 'call c' });
    expect(later.body.run).toMatchObject({ end_status: null, span_count: 4 });
    expect(later.body.findings.map((f: { id: string }) => f.id)).toEqual(['f1']);
    expect(later.body.spans_next_cursor).toBeNull();
    // The earlier since still gives the same spans: nothing is used up.
    expect(ids((await get(since(none.body.spans_since))).body.spans)).toEqual(['c', 'root']);
    // The later one none.
    expect((await get(since(later.body.spans_since))).body.spans).toEqual([]);

    // More than a page: the spans list pages on from a since in the order stored, each page with its since.
    await runs.writeEnvelopes([span('live', 'd', T0 + 50), span('live', 'e', T0 + 1), span('live', 'f', T0 + 60)]);
    const p1 = await get(`runs/live/spans?limit=2&cursor=${encodeURIComponent(later.body.spans_since)}`);
    expect(p1.status).toBe(200);
    expect(ids(p1.body.spans)).toEqual(['d', 'e']);
    expect(p1.body.next_cursor).toEqual(expect.any(String));
    expect(p1.body.since).toEqual(expect.any(String));
    const p2 = await get(`runs/live/spans?limit=2&cursor=${encodeURIComponent(p1.body.next_cursor)}`);
    expect([ids(p2.body.spans), p2.body.next_cursor]).toEqual([['f'], null]);
    expect((await get(since(p2.body.since))).body.spans).toEqual([]);
    // A page read in start order has no since.
    expect((await get('runs/live/spans')).body).not.toHaveProperty('since');

    // The run's end: the run as it ended, no spans.
    await runs.writeEnvelopes([{ project: 'p1', received_ms: T0 + 100, item: { kind: 'run_end', run: { event: 'run_end', run_id: 'live', status: 'ok', ts_ms: T0 + 90 } } }]);
    const ended = await get(since(p2.body.since));
    expect(ended.body).toMatchObject({ spans: [], run: { end_status: 'ok', ended_at: new Date(T0 + 90).toISOString(), span_count: 7 } });
  });

  it('refuses a since that is not a spans_since of this run, and answers 404 for an unknown run', async () => {
    await runs.writeEnvelopes(Array.from({ length: 3 }, (_, i) => span('other', `o${i}`, T0 + i)));
    const paged = await get('runs/other/spans?limit=1');
    // A start-order cursor is not a since.
    expect(await get(`runs/other?since=${encodeURIComponent(paged.body.next_cursor)}`)).toMatchObject({ status: 400, body: { error: { code: 'invalid_cursor' } } });
    // Another run's since is refused, not misread.
    const mine = (await get('runs/other')).body.spans_since;
    expect(await get(`runs/live?since=${encodeURIComponent(mine)}`)).toMatchObject({ status: 400, body: { error: { code: 'invalid_cursor' } } });
    expect(await get('runs/other?since=junk')).toMatchObject({ status: 400, body: { error: { code: 'invalid_cursor' } } });
    expect(await get(`runs/nope?since=${encodeURIComponent(mine)}`)).toMatchObject({ status: 400 });
    expect((await get('runs/nope')).status).toBe(404);
  });
});
