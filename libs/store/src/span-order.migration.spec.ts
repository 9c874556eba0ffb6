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

/** Every page of a run, `limit` spans a page, as the run page reads them: ids and cursors. */
async function allPages(runs: RunsRepo, runId: string, limit: number): Promise<{ ids: string[]; cursors: (string | null)[] }> {
  const ids: string[] = [];
  const cursors: (string | null)[] = [];
  let cursor: string | undefined;
  do {
    const page = await runs.spans('p1', runId, { limit, ...(cursor === undefined ? {} : { cursor }) });
    ids.push(...page!.items.map((s) => s.span_id));
    cursors.push(page!.next_cursor);
    cursor = page!.next_cursor ?? undefined;
  } while (cursor !== undefined);
  return { ids, cursors };
}

it('keeps an upgraded install reading its spans in the same order, cursors included, once 0018 drops spans_order', async () => {
  const upTo17 = await mkdtemp(path.join(tmpdir(), 'neatroots-migrations-'));
  const fresh = await openPglite();
  try {
    for (const f of await readdir(MIGRATIONS_DIR)) if (f < '0018') await copyFile(path.join(MIGRATIONS_DIR, f), path.join(upTo17, f));
    await migrate(fresh, { dir: upTo17 });
    const index = () => fresh.query(`SELECT 1 FROM pg_indexes WHERE tablename = 'spans' AND indexname = 'spans_order'`);
    expect((await index()).rows).toHaveLength(1);
    // Today's writer stands in for the one before 0018; it also keeps retention's mark (0021,
    // whose column it adds if missing) and the run's layer counts and the spans' call columns (0033, 0039) and the run's last arrival (0037), so their columns are added ahead for it.
    await fresh.exec('ALTER TABLE runs ADD COLUMN IF NOT EXISTS spans_expired_at timestamptz');
    await fresh.exec(`ALTER TABLE runs ADD COLUMN IF NOT EXISTS layer_count bigint NOT NULL DEFAULT 0,
      ADD COLUMN IF NOT EXISTS layer_error_count bigint NOT NULL DEFAULT 0, ADD COLUMN IF NOT EXISTS layers_recount boolean NOT NULL DEFAULT false`);
    await fresh.exec('ALTER TABLE spans ADD COLUMN IF NOT EXISTS call_tool text, ADD COLUMN IF NOT EXISTS call_parent text');
    await fresh.exec('ALTER TABLE runs ADD COLUMN IF NOT EXISTS last_arrival bigint');
    const runs = new RunsRepo(fresh);
    // ties on the exact start broken by arrival, starts apart by a fraction of a millisecond,
    // spans without a start, arriving over three batches; then one re-exported (keeps its place)
    const starts = [5, 1, 1, 3.25, 3.5, null, 1, 3.25, 0.5, null, 2, 5];
    for (let b = 0; b < 3; b++) {
      await runs.writeEnvelopes(starts.slice(b * 4, b * 4 + 4).map((start, i) => {
        const id = `s${b * 4 + i}`;
        return spanEnv('p1', { run_id: 'r1', span_id: id, ...(start === null ? {} : { start_ms: T0 + start }) }, T0 + b);
      }));
    }
    await runs.writeEnvelopes([spanEnv('p1', { run_id: 'r1', span_id: 's2', start_ms: T0 + 1, status: 'error' }, T0 + 9)]);
    const before = await allPages(runs, 'r1', 5);
    expect(before.ids).toEqual(['s8', 's1', 's2', 's6', 's10', 's3', 's7', 's4', 's0', 's11', 's5', 's9']);

    expect((await migrate(fresh)).applied).toContain('0018_spans_order_dropped.sql');
    expect((await index()).rows).toHaveLength(0);
    expect(await allPages(runs, 'r1', 5)).toEqual(before);
    // a span stored after the upgrade takes its place by start, after the spans that started with it
    await runs.writeEnvelopes([spanEnv('p1', { run_id: 'r1', span_id: 'new', start_ms: T0 + 1 }, T0 + 10)]);
    expect((await allPages(runs, 'r1', 5)).ids).toEqual(['s8', 's1', 's2', 's6', 'new', 's10', 's3', 's7', 's4', 's0', 's11', 's5', 's9']);
    const run = await runs.get('p1', 'r1');
    expect([run!.span_count, run!.error_count]).toEqual([13, 1]);
  } finally {
    await fresh.close();
    await rm(upTo17, { recursive: true, force: true });
  }
}, 60_000);
