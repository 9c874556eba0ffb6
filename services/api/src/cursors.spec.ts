/**
 * The lists' cursors through the api (PGlite, the review service in-process): a cursor belongs
 * to its list (and a span cursor to its run), so another list's cursor is 400 invalid_cursor
 * rather than a silently wrong page; a cursor that was tampered with is 400 rather than a 500
 * from Postgres; and paging a list with its own cursors skips and repeats nothing.
 */
import type { INestApplication } from '@nestjs/common';
import type { FindingMessage } from '@neatroots/messages';
import type { Envelope } from '@neatroots/spans';
import { DeadLettersRepo, FindingsRepo, RunsRepo } from '@neatroots/store';
import { fixtureFolder, fixtureSession, send, startApiOn, startSopHarness, type SopHarness } from './sop-harness.test';

const KEY = 'key-for-w1';
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const RUNS = ['ra', 'rb', 'rc'];
const SPANS = 5;

let h: SopHarness;
let app: INestApplication;
let url: string;

const start = (run_id: string, ts_ms: number): Envelope => ({
  project: 'w1', received_ms: ts_ms, item: { kind: 'run_start', run: { event: 'run_start', run_id, workflow: 'wf', ts_ms } },
});
const span = (run_id: string, span_id: string, start_ms: number): Envelope => ({
  project: 'w1', received_ms: start_ms, item: { kind: 'span', span: { run_id, span_id, type: 'tool', name: 'search', status: 'ok', start_ms } },
});
const raised = (id: string, run_id: string, at_ms: number): FindingMessage => ({
  id, check_id: 'repeated-tool-call', run_id, project: 'w1', status: 'raised', span_ids: [`${run_id}-0`], count: 3, action: 'flag',
  title: 'Same tool called repeatedly', guidance: 'Stop', at_ms, kind: 'rule', source: 'library',
});

/** Each list: its path and the field its items are in. */
const LISTS = {
  runs: { path: '/v1/projects/w1/runs', field: 'runs', id: 'run_id' },
  findings: { path: '/v1/projects/w1/findings', field: 'findings', id: 'id' },
  dead_letters: { path: '/v1/projects/w1/dead-letters', field: 'dead_letters', id: 'id' },
  sessions: { path: '/v1/workspaces/w1/sessions', field: 'items', id: 'id' },
  'spans of ra': { path: '/v1/projects/w1/runs/ra/spans', field: 'spans', id: 'span_id' },
  'spans of rb': { path: '/v1/projects/w1/runs/rb/spans', field: 'spans', id: 'span_id' },
} as const;
type List = keyof typeof LISTS;

const call = (path: string, method = 'GET', body?: unknown) => send(`${url}${path}`, method, KEY, body);
const withCursor = (list: List, cursor: string, limit = 1) => call(`${LISTS[list].path}?limit=${limit}&cursor=${encodeURIComponent(cursor)}`);
const cursorOf = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');

/** Every item of the list, one a page, following next_cursor. */
async function pageThrough(list: List): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 20; i++) {
    const res: Awaited<ReturnType<typeof call>> = cursor === null ? await call(`${LISTS[list].path}?limit=1`) : await withCursor(list, cursor);
    expect(res.status).toBe(200);
    ids.push(...res.body[LISTS[list].field].map((x: Record<string, string>) => x[LISTS[list].id]));
    cursor = res.body.next_cursor;
    if (cursor === null) return ids;
  }
  throw new Error(`${list}: more pages than items`);
}

beforeAll(async () => {
  h = await startSopHarness({ w1: KEY });
  await new RunsRepo(h.db).writeEnvelopes(
    RUNS.flatMap((r, i) => [start(r, T0 + i * 1000), ...Array.from({ length: SPANS }, (_, s) => span(r, `${r}-${s}`, T0 + i * 1000 + s))]),
  );
  await new FindingsRepo(h.db).apply([raised('f1', 'ra', T0 + 10), raised('f2', 'rb', T0 + 1010), raised('f3', 'rc', T0 + 2010)]);
  const dead = new DeadLettersRepo(h.db);
  for (const item_id of ['d1', 'd2', 'd3']) {
    await dead.setAside([{ project: 'w1', source: 'store.events', kind: 'span', run_id: 'ra', item_id, reason: 'test', payload: { item_id } }]);
  }
  ({ app, url } = await startApiOn(h.db, 'w1', h.sop.queries, h.sop.review));
  expect((await call('/v1/workspaces/w1/head', 'PUT', { files: fixtureFolder() })).status).toBe(200);
  expect((await call('/v1/workspaces/w1/releases', 'POST')).status).toBe(201);
  for (const external_id of ['s1', 's2', 's3']) {
    expect((await call('/v1/workspaces/w1/sessions', 'POST', { ...fixtureSession('payment-skipped'), external_id })).status).toBe(202);
  }
}, 60_000);

afterAll(async () => {
  await app?.close();
  await h?.close();
});

describe('list cursors', () => {
  it('page through each list without skipping or repeating an item', async () => {
    for (const list of Object.keys(LISTS) as List[]) {
      const ids = await pageThrough(list);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids).toHaveLength(list.startsWith('spans') ? SPANS : 3);
    }
  });

  it("refuse another list's cursor (or another run's span cursor) with 400 invalid_cursor", async () => {
    const cursors = {} as Record<List, string>;
    for (const list of Object.keys(LISTS) as List[]) {
      cursors[list] = (await call(`${LISTS[list].path}?limit=1`)).body.next_cursor;
      expect(typeof cursors[list]).toBe('string');
    }
    for (const from of Object.keys(LISTS) as List[]) {
      for (const to of Object.keys(LISTS) as List[]) {
        const res = await withCursor(to, cursors[from]);
        if (from === to) expect([from, to, res.status]).toEqual([from, to, 200]);
        else expect([from, to, res.status, res.body.error?.code]).toEqual([from, to, 400, 'invalid_cursor']);
      }
    }
  });

  it('refuse a tampered cursor with 400 invalid_cursor, never a 500', async () => {
    const times = ['1', 'March 7', '-000001-01-01T00:00:00Z', '+275760-09-13T00:00:00.000Z', '2026-02-31T00:00:00.000Z', '0000-01-01T00:00:00.000Z', '2026-01-01T00:00:00Z'];
    for (const list of ['runs', 'findings', 'dead_letters', 'sessions'] as const) {
      const tampered = [
        ...times.map((t) => cursorOf([t, 'x'])),
        ...times.map((t) => cursorOf([list, t, 'x'])),
        cursorOf([list, '2026-01-01T00:00:00.000Z', 'x\u0000']),
        cursorOf([list, '2026-01-01T00:00:00.000Z']),
        cursorOf({ list }),
        'garbage',
      ];
      for (const cursor of tampered) {
        const res = await withCursor(list, cursor);
        expect([list, Buffer.from(cursor, 'base64url').toString(), res.status, res.body.error?.code]).toEqual([list, Buffer.from(cursor, 'base64url').toString(), 400, 'invalid_cursor']);
      }
    }
  });

  it('refuse a cursor handed out before cursors named their list: a client starts again from the first page', async () => {
    const first = (await call('/v1/projects/w1/runs?limit=1')).body.runs[0];
    const old = cursorOf([`${first.started_at.slice(0, -1)}000Z`, first.run_id]);
    expect(await withCursor('runs', old)).toMatchObject({ status: 400, body: { error: { code: 'invalid_cursor' } } });
    expect(await withCursor('spans of ra', cursorOf({ s: T0, a: '1' }))).toMatchObject({ status: 400, body: { error: { code: 'invalid_cursor' } } });
  });
});
