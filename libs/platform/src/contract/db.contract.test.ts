/**
 * The database port's contract, passed by PGlite and a Postgres server alike. Two parts:
 * - dbContract (db/contract.test.ts): parameterised queries and type mapping, transactions
 *   that commit and roll back, exec, migrations applied in order, once, atomically;
 * - dbUpsertContract (here): the ON CONFLICT semantics the repositories build on, so a
 *   redelivered batch writes nothing new (issue 3, item 5).
 * contract/db.integration.spec.ts runs the second on both drivers, with the store's real
 * repositories; db/pglite.spec.ts and db/postgres.integration.spec.ts run the first.
 * A helper (*.test.ts), not a suite, not built.
 */
import type { Db } from '@neatroots/ports';
import { uniqueName } from '../testing/services';

export { dbContract } from '../db/contract.test';

export function dbUpsertContract(name: string, open: () => Promise<Db>): void {
  describe(`Db contract, upserts: ${name}`, () => {
    let db: Db;
    const t = uniqueName('contract_upsert');
    const stats = `${t}_stats`;

    beforeAll(async () => {
      db = await open();
      await db.exec(`
        CREATE TABLE ${t} (id text PRIMARY KEY, project text NOT NULL, count int NOT NULL, span_ids jsonb NOT NULL,
                           status text NOT NULL, updated_at timestamptz NOT NULL);
        CREATE TABLE ${stats} (project text PRIMARY KEY, findings int NOT NULL)`);
    }, 60_000);
    afterAll(async () => {
      await db.exec(`DROP TABLE IF EXISTS ${t}; DROP TABLE IF EXISTS ${stats}`);
      await db.close();
    });

    /** Like FindingsRepo.upsert: keep the larger count, count each id once in the stats. */
    const upsert = (rows: { id: string; count: number; status?: string; at: string }[]) => {
      const params: unknown[] = [];
      const values = rows.map((r, i) => {
        params.push(r.id, 'p', r.count, JSON.stringify(Array.from({ length: r.count }, (_, j) => `s${j}`)), r.status ?? 'open', r.at);
        const o = i * 6;
        return `($${o + 1}, $${o + 2}, $${o + 3}::int, $${o + 4}::jsonb, $${o + 5}, $${o + 6}::timestamptz)`;
      });
      return db.query<{ id: string; inserted: boolean }>(
        `WITH ins AS (
           INSERT INTO ${t} AS f (id, project, count, span_ids, status, updated_at) VALUES ${values.join(', ')}
           ON CONFLICT (id) DO UPDATE SET
             count = GREATEST(f.count, EXCLUDED.count),
             span_ids = CASE WHEN EXCLUDED.count > f.count THEN EXCLUDED.span_ids ELSE f.span_ids END,
             status = CASE WHEN EXCLUDED.status = 'resolved' THEN 'resolved' ELSE f.status END,
             updated_at = GREATEST(f.updated_at, EXCLUDED.updated_at)
           RETURNING f.id, f.project, (f.xmax = 0) AS inserted
         ), counted AS (
           INSERT INTO ${stats} AS s (project, findings)
           SELECT project, count(*) FROM ins WHERE inserted GROUP BY project
           ON CONFLICT (project) DO UPDATE SET findings = s.findings + EXCLUDED.findings
         )
         SELECT id, inserted FROM ins ORDER BY id`,
        params,
      );
    };
    const row = async (id: string) =>
      (await db.query<{ count: number; span_ids: string[]; status: string; updated_at: Date }>(
        `SELECT count, span_ids, status, updated_at FROM ${t} WHERE id = $1`, [id])).rows[0];
    const counted = async () =>
      (await db.query<{ findings: number }>(`SELECT findings FROM ${stats} WHERE project = 'p'`)).rows[0]?.findings ?? 0;

    it('inserts once and tells a fresh row from a redelivered one (xmax = 0)', async () => {
      const first = await upsert([{ id: 'a', count: 3, at: '2025-01-01T00:00:01Z' }, { id: 'b', count: 1, at: '2025-01-01T00:00:01Z' }]);
      expect(first.rows).toEqual([{ id: 'a', inserted: true }, { id: 'b', inserted: true }]);
      const again = await upsert([{ id: 'a', count: 3, at: '2025-01-01T00:00:01Z' }]);
      expect(again.rows).toEqual([{ id: 'a', inserted: false }]);
      expect(await counted()).toBe(2);
      expect(await row('a')).toMatchObject({ count: 3, span_ids: ['s0', 's1', 's2'], status: 'open' });
    });

    it('takes a larger count, ignores a smaller one delivered late, and never reopens', async () => {
      await upsert([{ id: 'c', count: 2, at: '2025-01-01T00:00:01Z' }]);
      await upsert([{ id: 'c', count: 5, status: 'resolved', at: '2025-01-01T00:00:03Z' }]);
      await upsert([{ id: 'c', count: 4, at: '2025-01-01T00:00:02Z' }]);
      const r = await row('c');
      expect(r).toMatchObject({ count: 5, status: 'resolved' });
      expect(r.span_ids).toHaveLength(5);
      expect(r.updated_at.toISOString()).toBe('2025-01-01T00:00:03.000Z');
    });

    it('does nothing on conflict with DO NOTHING, and says so in affectedRows', async () => {
      const ins = `INSERT INTO ${stats} (project, findings) VALUES ($1, $2) ON CONFLICT (project) DO NOTHING`;
      expect((await db.query(ins, ['q', 1])).affectedRows).toBe(1);
      expect((await db.query(ins, ['q', 99])).affectedRows).toBe(0);
      expect((await db.query<{ findings: number }>(`SELECT findings FROM ${stats} WHERE project = 'q'`)).rows).toEqual([{ findings: 1 }]);
    });

    it('refuses one statement that touches a row twice (why the repos fold a batch first), changing nothing', async () => {
      await expect(upsert([{ id: 'd', count: 1, at: '2025-01-01T00:00:01Z' }, { id: 'd', count: 2, at: '2025-01-01T00:00:01Z' }]))
        .rejects.toThrow(/cannot affect row a second time/);
      expect(await row('d')).toBeUndefined();
    });

    it('counts a row inserted by concurrent upserts once', async () => {
      const before = await counted();
      const results = await Promise.all(Array.from({ length: 8 }, () => upsert([{ id: 'e', count: 1, at: '2025-01-01T00:00:01Z' }])));
      expect(results.flatMap((r) => r.rows).filter((r) => r.inserted)).toHaveLength(1);
      expect(await counted()).toBe(before + 1);
    });

    it('rolls back an upsert with the rest of its transaction', async () => {
      const before = await counted();
      await expect(
        db.transaction(async (tx) => {
          await tx.query(`INSERT INTO ${t} (id, project, count, span_ids, status, updated_at) VALUES ('f', 'p', 1, '[]', 'open', now())
                          ON CONFLICT (id) DO NOTHING`);
          await tx.query(`INSERT INTO ${stats} (project, findings) VALUES ('p', 1) ON CONFLICT (project) DO UPDATE SET findings = ${stats}.findings + 1`);
          throw new Error('the bus went away (test)');
        }),
      ).rejects.toThrow('the bus went away');
      expect(await row('f')).toBeUndefined();
      expect(await counted()).toBe(before);
    });
  });
}
