import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import type { Db } from '@neatroots/ports';
import { createReviewQueries } from '@neatroots/review';
import type { FindingMessage } from '@neatroots/messages';
import type { Envelope } from '@neatroots/spans';
import { FindingsRepo, MIGRATIONS_DIR, ProjectsRepo, RunsRepo } from '@neatroots/store';
import { migrate, openPglite } from '@neatroots/platform';
import { apiUrl, createApi } from './api';

/**
 * Runs stored with the id `.` or `..` before ingest refused them (b7c8593) could not be opened:
 * in a path those are a step up, and the api refuses them (400 invalid_path). Migration 0036
 * renames them `%2E` and `%2E%2E`, with their spans and findings: opened as any other id,
 * percent-encoded in the path (runs/%252E%252E). A project that already has a run of the new
 * name keeps the old run as it was.
 */
const T0 = Date.parse('2025-01-01T00:00:00.000Z');
const KEY = 'key-p1';
const KEY2 = 'key-p2';

let db: Db;
let app: INestApplication;
let base: string;

const span = (project: string, run_id: string, span_id: string): Envelope => ({
  project, received_ms: T0, item: { kind: 'span', span: { run_id, span_id, type: 'tool', name: 'search', tool: 'search', status: 'error', start_ms: T0 } },
});
const raised = (project: string, run_id: string, id: string): FindingMessage => ({
  id, check_id: 'tool-error-streak', run_id, project, status: 'raised', span_ids: ['s1'], count: 3, action: 'flag',
  title: 'Tool calls keep failing', guidance: 'Stop', at_ms: T0 + 10, kind: 'rule', source: 'library',
});

beforeAll(async () => {
  // Today's schema, written with today's repos (ingest refuses these ids now), then the migration's
  // statements run over it as the upgrade runs them: a database of the version before holds such runs.
  db = await openPglite();
  await migrate(db);
  const projects = new ProjectsRepo(db);
  await projects.addApiKey('p1', KEY);
  await projects.addApiKey('p2', KEY2);
  await new RunsRepo(db).writeEnvelopes([
    span('p1', '..', 's1'), span('p1', '..', 's2'), span('p1', '.', 's1'), span('p1', 'r1', 's1'),
    // p2 already holds a run of the new name: its `..` stays as it was.
    span('p2', '..', 's1'), span('p2', '%2E%2E', 's1'),
  ]);
  await new FindingsRepo(db).apply([raised('p1', '..', 'f-dots'), raised('p2', '..', 'f-p2-dots')]);
  await db.exec(await readFile(path.join(MIGRATIONS_DIR, '0036_dot_run_ids.sql'), 'utf8'));
  app = await createApi({ queries: createReviewQueries(db), resolveKey: (key) => projects.resolveApiKey(key), port: 0, logger: false });
  base = apiUrl(app);
}, 60_000);

afterAll(async () => {
  await app?.close();
  await db?.close();
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the answers' shapes are the API's, read as JSON
async function get(project: string, key: string, rest: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}/v1/projects/${project}/${rest}`, { headers: { 'x-api-key': key } });
  return { status: res.status, body: await res.json() };
}

it('opens a run stored as .. or . under its new id %2E%2E or %2E, its spans and findings with it', async () => {
  const dots = await get('p1', KEY, `runs/${encodeURIComponent('%2E%2E')}`);
  expect(dots.status).toBe(200);
  expect(dots.body.run).toMatchObject({ run_id: '%2E%2E', span_count: 2 });
  expect(dots.body.spans.map((s: { span_id: string; run_id: string }) => [s.run_id, s.span_id]).sort()).toEqual([['%2E%2E', 's1'], ['%2E%2E', 's2']]);
  expect(dots.body.findings.map((f: { id: string; run_id: string }) => [f.id, f.run_id])).toEqual([['f-dots', '%2E%2E']]);
  const dot = await get('p1', KEY, `runs/${encodeURIComponent('%2E')}/spans`);
  expect(dot).toMatchObject({ status: 200, body: { spans: [{ run_id: '%2E', span_id: 's1' }] } });
  const list = await get('p1', KEY, 'runs');
  expect(list.body.runs.map((r: { run_id: string }) => r.run_id).sort()).toEqual(['%2E', '%2E%2E', 'r1']);
  // The finding's run link goes to the run.
  const found = await get('p1', KEY, 'findings');
  expect(found.body.findings).toEqual(expect.arrayContaining([expect.objectContaining({ id: 'f-dots', run_id: '%2E%2E' })]));
});

it('leaves a project\'s .. as it was when it already has a run %2E%2E', async () => {
  const list = await get('p2', KEY2, 'runs');
  expect(list.body.runs.map((r: { run_id: string }) => r.run_id).sort()).toEqual(['%2E%2E', '..']);
  const other = await get('p2', KEY2, `runs/${encodeURIComponent('%2E%2E')}`);
  expect(other.body.findings).toEqual([]);
});
