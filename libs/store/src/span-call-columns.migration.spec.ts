/**
 * Migration 0039 on a database that already holds spans: its tool spans get their call columns
 * from the stored JSON, their runs the links between the layers of a call counted once, and a
 * layer stored afterwards links to them as to any span written since.
 */
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Db } from '@neatroots/ports';
import { migrate, openPglite } from '@neatroots/platform';
import { MIGRATIONS_DIR } from './index';
import { spanEnv, T0 } from './fixtures.test';
import { RunsRepo } from './runs.repo';

let db: Db;
let before: string;

beforeAll(async () => {
  before = await mkdtemp(path.join(tmpdir(), 'neatroots-migrations-'));
  for (const f of await readdir(MIGRATIONS_DIR)) if (f < '0039') await copyFile(path.join(MIGRATIONS_DIR, f), path.join(before, f));
  db = await openPglite();
}, 60_000);
afterAll(async () => {
  await db?.close();
  await rm(before, { recursive: true, force: true });
});

it('counts the layers of the tool calls stored before 0039 once, and links a layer stored after it to them', async () => {
  await migrate(db, { dir: before });
  // As the writer before 0039 stored them: the framework's tool span, the MCP client's under it
  // (both failed), an llm span, and a second call of another tool under the framework's span.
  const old = [
    { id: 'fw', type: 'tool', tool: 'lookup', error: true },
    { id: 'client', type: 'mcp_tool', tool: 'lookup', parent: 'fw', error: true },
    { id: 'llm', type: 'llm', parent: 'fw', error: false },
    { id: 'other', type: 'tool', tool: 'search', parent: 'fw', error: false },
  ];
  for (const [i, s] of old.entries()) {
    const payload = { run_id: 'r1', span_id: s.id, ...(s.parent ? { parent_id: s.parent } : {}), type: s.type, name: s.tool ?? 'chat', ...(s.tool ? { tool: s.tool } : {}), status: s.error ? 'error' : 'ok', start_ms: T0 + i };
    await db.query(
      `INSERT INTO spans (project, run_id, span_id, payload, start_ms, start_exact, is_error, received_at) VALUES ('p1', 'r1', $1, $2::json, $3::bigint, $3::float8, $4, $5::timestamptz)`,
      [s.id, JSON.stringify(payload), T0 + i, s.error, new Date(T0).toISOString()],
    );
  }
  await db.query(`INSERT INTO runs (project, run_id, started_at, last_seen_at, span_count, error_count) VALUES ('p1', 'r1', $1::timestamptz, $1::timestamptz, 4, 2)`, [new Date(T0).toISOString()]);
  const runs = new RunsRepo(db);
  expect(await runs.get('p1', 'r1')).toMatchObject({ span_count: 4, error_count: 2 });

  expect((await migrate(db)).applied).toContain('0039_span_call_columns.sql');
  // fw and client are one failed call: 3 calls or spans, 1 error
  expect(await runs.get('p1', 'r1')).toMatchObject({ span_count: 3, error_count: 1, stored_span_count: 4 });
  const cols = await db.query<{ span_id: string; call_tool: string | null; call_parent: string | null }>(`SELECT span_id, call_tool, call_parent FROM spans ORDER BY span_id`);
  expect(cols.rows).toEqual([
    { span_id: 'client', call_tool: 'lookup', call_parent: 'fw' },
    { span_id: 'fw', call_tool: 'lookup', call_parent: null },
    { span_id: 'llm', call_tool: null, call_parent: null },
    { span_id: 'other', call_tool: 'search', call_parent: 'fw' },
  ]);

  // The MCP server's span of that call, stored now under the client's: still one call.
  await runs.writeEnvelopes([spanEnv('p1', { run_id: 'r1', span_id: 'server', parent_id: 'client', type: 'mcp_tool', name: 'lookup', tool: 'lookup', status: 'error', start_ms: T0 + 9 }, T0 + 10)]);
  expect(await runs.get('p1', 'r1')).toMatchObject({ span_count: 3, error_count: 1, stored_span_count: 5 });
});
