import { PGlite } from '@electric-sql/pglite';
import type { Db, Queryable } from '@neatroots/ports';
import { migrate } from '@neatroots/platform';
import { SESSION_INSERT_BATCH_BYTES, SopSessionsRepo, type SessionInput } from './sessions.repo';

/**
 * Sessions received together are inserted together, but not megabytes of them in one statement:
 * on PGlite (the embedded database) a statement's parameters are copied into its WebAssembly
 * memory and parsed there, and that memory grows to the largest statement and is never given
 * back while the process runs. Sixteen long sessions sent at once (16 × 3.2 MB in one insert)
 * grew it by about 350 MB for good, and the embedded process's resident memory with it, past
 * ingest's memory ceiling.
 */

/** The audit's long session: 1,200 turns and 1,000 tool calls with 3 KB outputs (about 3.2 MB). */
function longSession(i: number): SessionInput {
  const pad = (seed: string) => `output line ${seed} lorem ipsum dolor sit amet; `.repeat(80).slice(0, 3000);
  return {
    external_id: `long-${i}`,
    agent: 'bot',
    release_id: null,
    started_at: '2026-11-30T10:00:00.000Z',
    transcript_ref: null,
    turns: Array.from({ length: 1200 }, (_, t) => ({ role: t % 2 ? ('agent' as const) : ('user' as const), text: `Caller ${i} turn ${t}: please help with request ${t}.` })),
    tool_calls: Array.from({ length: 1000 }, (_, c) => ({ turn: 1 + 2 * Math.floor((c * 599) / 1000), tool: 'lookup', input: { c }, output: { text: pad(`${i}-${c}`) }, error: null })),
  };
}

let pg: PGlite;
let db: Db;
/** The characters of each INSERT INTO sop_sessions statement's parameters. */
let inserts: number[] = [];

/** PGlite in this thread (so its WebAssembly memory can be read), each insert's parameters measured. */
function adapter(p: PGlite): Db {
  const q = (run: Queryable['query']): Queryable['query'] =>
    (async (sql: string, params?: readonly unknown[]) => {
      if (/INSERT INTO sop_sessions/.test(sql)) inserts.push((params ?? []).reduce<number>((n, v) => n + (typeof v === 'string' ? v.length : 0), 0));
      return run(sql, params);
    }) as Queryable['query'];
  const direct = (async (sql: string, params?: readonly unknown[]) => {
    const r = await p.query(sql, params ? [...params] : undefined);
    return { rows: r.rows, affectedRows: r.affectedRows };
  }) as Queryable['query'];
  return {
    kind: 'pglite',
    query: q(direct),
    transaction: (fn) =>
      p.transaction((t) =>
        fn({
          query: q((async (sql: string, params?: readonly unknown[]) => {
            const r = await t.query(sql, params ? [...params] : undefined);
            return { rows: r.rows, affectedRows: r.affectedRows };
          }) as Queryable['query']),
          // migrate runs its files with exec in its transaction.
          exec: async (sql: string) => {
            await t.exec(sql);
          },
        } as Queryable),
      ),
    exec: async (sql) => {
      await p.exec(sql);
    },
    close: () => p.close(),
  };
}

/** PGlite's WebAssembly memory, in bytes. */
const wasmBytes = () => (pg as unknown as { Module: { HEAP8: Int8Array } }).Module.HEAP8.buffer.byteLength;

beforeAll(async () => {
  pg = await PGlite.create();
  db = adapter(pg);
  await migrate(db);
}, 60_000);
afterAll(() => pg.close());

describe('SopSessionsRepo.receive, many long sessions at once (PGlite)', () => {
  it('inserts at most SESSION_INSERT_BATCH_BYTES a statement (a longer session alone), so the database memory grows little', async () => {
    const repo = new SopSessionsRepo(db);
    const bodies = Array.from({ length: 16 }, (_, i) => longSession(i));
    const size = JSON.stringify(bodies[0]).length;
    expect(size).toBeGreaterThan(3_000_000);
    const before = wasmBytes();
    inserts = [];

    const got = await Promise.all(bodies.map((b) => repo.receive('w1', b)));

    expect(got.map((r) => r.status)).toEqual(Array(16).fill('queued'));
    expect((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM sop_sessions')).rows[0].n).toBe(16);
    // Every statement within the bound, but for one session alone that is longer.
    for (const chars of inserts) expect(chars <= SESSION_INSERT_BATCH_BYTES || chars < 2 * size).toBe(true);
    expect(inserts.length).toBeGreaterThanOrEqual(16 / Math.max(1, Math.floor(SESSION_INSERT_BATCH_BYTES / size)));
    // All 16 in one statement (51 MB) grew it by about 380 MB; one at a time, by tens.
    expect(wasmBytes() - before).toBeLessThan(150 * 1024 * 1024);
    // The transcripts as sent.
    expect((await repo.forCheck('w1', got[7].id))?.session.body.tool_calls).toHaveLength(1000);
  }, 120_000);
});
