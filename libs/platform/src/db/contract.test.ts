/**
 * The Db contract both adapters pass (PGlite in pglite.spec.ts, a Postgres server in
 * postgres.integration.spec.ts). Named *.test.ts: a helper the specs import, not a suite
 * jest runs on its own (jest picks up *.spec.ts) and not part of the build.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Db } from '@neatroots/ports';
import { migrate } from './migrate';

export function dbContract(name: string, open: () => Promise<Db>): void {
  describe(`Db contract: ${name}`, () => {
    let db: Db;
    // unique names, so the suite can run against a shared server
    const t = `contract_${process.pid}_${Date.now().toString(36)}`;

    beforeAll(async () => {
      db = await open();
      await db.exec(`CREATE TABLE ${t} (id text PRIMARY KEY, n bigint, doc jsonb, at timestamptz); CREATE INDEX ${t}_n ON ${t} (n)`);
    }, 60_000);
    afterAll(async () => {
      await db.exec(`DROP TABLE IF EXISTS ${t}`);
      await db.close();
    });

    it('runs parameterised queries and reads int8 as a number, jsonb as JSON, timestamptz as a Date', async () => {
      await db.query(`INSERT INTO ${t} (id, n, doc, at) VALUES ($1, $2, $3::jsonb, $4::timestamptz)`, [
        'a', 1_700_000_000_123, JSON.stringify({ list: [1, 'two'], nested: { ok: true } }), '2023-11-14T22:13:20.123Z',
      ]);
      const res = await db.query<{ id: string; n: number; doc: unknown; at: Date; c: number }>(
        `SELECT id, n, doc, at, count(*) OVER () AS c FROM ${t} WHERE id = $1`,
        ['a'],
      );
      expect(res.rows).toHaveLength(1);
      const row = res.rows[0];
      expect(row.n).toBe(1_700_000_000_123);
      expect(row.c).toBe(1);
      expect(row.doc).toEqual({ list: [1, 'two'], nested: { ok: true } });
      // a Date of any realm: PGlite's thread hands its Dates over by structured clone, as
      // Node.js's own, which are not jest's sandboxed Date
      expect(Object.prototype.toString.call(row.at)).toBe('[object Date]');
      expect(row.at.toISOString()).toBe('2023-11-14T22:13:20.123Z');
    });

    it('passes arrays as Postgres arrays', async () => {
      const res = await db.query<{ id: string }>(`SELECT id FROM ${t} WHERE id = ANY($1::text[])`, [['a', 'zz']]);
      expect(res.rows.map((r) => r.id)).toEqual(['a']);
    });

    it('reports affected rows', async () => {
      const res = await db.query(`UPDATE ${t} SET n = n + 1 WHERE id = $1`, ['a']);
      expect(res.affectedRows).toBe(1);
    });

    it('commits a transaction when its function resolves', async () => {
      const out = await db.transaction(async (tx) => {
        await tx.query(`INSERT INTO ${t} (id, n) VALUES ($1, $2)`, ['b', 2]);
        const inside = await tx.query<{ n: number }>(`SELECT n FROM ${t} WHERE id = $1`, ['b']);
        return inside.rows[0]?.n;
      });
      expect(out).toBe(2);
      expect((await db.query(`SELECT 1 FROM ${t} WHERE id = 'b'`)).rows).toHaveLength(1);
    });

    it('rolls a transaction back when its function throws', async () => {
      await expect(
        db.transaction(async (tx) => {
          await tx.query(`INSERT INTO ${t} (id, n) VALUES ($1, $2)`, ['c', 3]);
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect((await db.query(`SELECT 1 FROM ${t} WHERE id = 'c'`)).rows).toHaveLength(0);
      // the Db is still usable afterwards
      expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows[0].one).toBe(1);
    });

    it('rolls back on an SQL error inside the transaction', async () => {
      await expect(
        db.transaction(async (tx) => {
          await tx.query(`INSERT INTO ${t} (id, n) VALUES ($1, $2)`, ['d', 4]);
          await tx.query(`INSERT INTO ${t} (id, n) VALUES ($1, $2)`, ['d', 5]);
        }),
      ).rejects.toThrow();
      expect((await db.query(`SELECT 1 FROM ${t} WHERE id = 'd'`)).rows).toHaveLength(0);
    });

    it('runs a batch in order in one transaction and answers each statement', async () => {
      const out = await db.batch?.([
        { sql: `INSERT INTO ${t} (id, n) VALUES ($1, $2)`, params: ['g1', 10] },
        { sql: `UPDATE ${t} SET n = n + $2 WHERE id = $1`, params: ['g1', 5] },
        { sql: `SELECT n FROM ${t} WHERE id = $1`, params: ['g1'] },
        { sql: 'SELECT 2 AS two' },
      ]);
      expect(out?.map((r) => r.rows)).toEqual([[], [], [{ n: 15 }], [{ two: 2 }]]);
      expect(out?.[1].affectedRows).toBe(1);
    });

    it("skips a statement of a batch whose `when: 'rows'` the statement before did not meet", async () => {
      const out = await db.batch?.([
        { sql: `INSERT INTO ${t} (id, n) VALUES ($1, $2)`, params: ['w1', 1] },
        { sql: `SELECT n FROM ${t} WHERE id = $1`, params: ['none'] },
        { sql: `UPDATE ${t} SET n = n + 10 WHERE id = $1 RETURNING n`, params: ['w1'], when: 'rows' },
        { sql: `SELECT n FROM ${t} WHERE id = $1`, params: ['w1'] },
        { sql: `UPDATE ${t} SET n = n + 100 WHERE id = $1 RETURNING n`, params: ['w1'], when: 'rows' },
      ]);
      expect(out?.map((r) => r.rows)).toEqual([[], [], [], [{ n: 1 }], [{ n: 101 }]]);
      expect((await db.query(`SELECT n FROM ${t} WHERE id = 'w1'`)).rows).toEqual([{ n: 101 }]);
    });

    it('rolls a whole batch back when one statement fails, and keeps the SQLSTATE', async () => {
      const failed = db.batch?.([
        { sql: `INSERT INTO ${t} (id, n) VALUES ($1, $2)`, params: ['h1', 1] },
        { sql: `INSERT INTO ${t} (id, n) VALUES ($1, $2)`, params: ['h1', 2] },
      ]);
      await expect(failed).rejects.toMatchObject({ code: '23505' });
      expect((await db.query(`SELECT 1 FROM ${t} WHERE id = 'h1'`)).rows).toHaveLength(0);
      expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows[0].one).toBe(1);
    });

    it('execs several statements at once', async () => {
      await db.exec(`INSERT INTO ${t} (id) VALUES ('e1'); INSERT INTO ${t} (id) VALUES ('e2');`);
      expect((await db.query(`SELECT 1 FROM ${t} WHERE id LIKE 'e%'`)).rows).toHaveLength(2);
    });

    // Versions 9xxx: schema_migrations is keyed by version, and on a shared server the store's
    // own migrations may already be recorded there.
    it('migrates in order, records each migration once, and is idempotent', async () => {
      const dir = await mkdtemp(path.join(tmpdir(), 'nr-mig-'));
      const m = `${t}_m`;
      await writeFile(path.join(dir, '9001_first.sql'), `CREATE TABLE ${m} (id int PRIMARY KEY); INSERT INTO ${m} VALUES (1);`);
      await writeFile(path.join(dir, '9002_second.sql'), `INSERT INTO ${m} VALUES (2);`);
      try {
        const first = await migrate(db, { dir });
        expect(first.applied).toEqual(['9001_first.sql', '9002_second.sql']);
        const again = await migrate(db, { dir });
        expect(again.applied).toEqual([]);
        expect((await db.query(`SELECT id FROM ${m} ORDER BY id`)).rows).toEqual([{ id: 1 }, { id: 2 }]);
      } finally {
        await db.exec(`DROP TABLE IF EXISTS ${m}; DELETE FROM schema_migrations WHERE name IN ('9001_first.sql', '9002_second.sql')`);
      }
    });

    it('leaves nothing behind when a migration fails', async () => {
      const dir = await mkdtemp(path.join(tmpdir(), 'nr-mig-'));
      const m = `${t}_f`;
      await writeFile(path.join(dir, '9003_ok.sql'), `CREATE TABLE ${m} (id int);`);
      await writeFile(path.join(dir, '9004_bad.sql'), `INSERT INTO ${m} VALUES ('not a number');`);
      await expect(migrate(db, { dir })).rejects.toThrow(/migration 9004_bad\.sql failed/);
      const exists = await db.query(`SELECT 1 FROM information_schema.tables WHERE table_name = $1`, [m]);
      expect(exists.rows).toHaveLength(0);
      const recorded = await db.query(`SELECT 1 FROM schema_migrations WHERE name = '9003_ok.sql'`);
      expect(recorded.rows).toHaveLength(0);
    });
  });
}
