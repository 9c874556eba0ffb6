/**
 * Migration 0004 on a database that already holds spans: they get their exact start back from
 * the span itself and an arrival number in the order they were received, and new spans are
 * numbered after them.
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
  for (const f of await readdir(MIGRATIONS_DIR)) if (/^000[1-3]_/.test(f)) await copyFile(path.join(MIGRATIONS_DIR, f), path.join(before, f));
  db = await openPglite();
}, 60_000);
afterAll(async () => {
  await db?.close();
  await rm(before, { recursive: true, force: true });
});

it('gives spans stored before 0004 their exact start and their arrival order', async () => {
  await migrate(db, { dir: before });
  // as the writer before 0004 stored them: start rounded to the millisecond; received apart
  const old = [
    { id: 'b', start: T0 + 0.75, received: T0 + 5 },
    { id: 'a', start: T0 + 0.5, received: T0 + 5 },
    { id: 'z', start: T0 + 2, received: T0 + 5 },
    { id: 'y', start: T0 + 2, received: T0 + 6 },
    { id: 'n', start: null, received: T0 + 4 },
  ];
  for (const s of old) {
    const payload = { run_id: 'r1', span_id: s.id, type: 'tool', name: 'search', status: 'ok', ...(s.start === null ? {} : { start_ms: s.start }) };
    await db.query(
      `INSERT INTO spans (project, run_id, span_id, payload, start_ms, received_at) VALUES ('p1', 'r1', $1, $2::json, $3, $4::timestamptz)`,
      [s.id, JSON.stringify(payload), s.start === null ? null : Math.round(s.start), new Date(s.received).toISOString()],
    );
  }
  await db.query(`INSERT INTO runs (project, run_id, started_at, last_seen_at) VALUES ('p1', 'r1', $1::timestamptz, $1::timestamptz)`, [new Date(T0).toISOString()]);

  expect((await migrate(db)).applied).toContain('0004_span_order.sql');
  const runs = new RunsRepo(db);
  // a new span at the same start as z and y comes after both
  await runs.writeEnvelopes([spanEnv('p1', { run_id: 'r1', span_id: 'x', start_ms: T0 + 2 }, T0 + 1)]);
  const page = await runs.spans('p1', 'r1');
  expect(page!.items.map((s) => s.span_id)).toEqual(['a', 'b', 'z', 'y', 'x', 'n']);
});
