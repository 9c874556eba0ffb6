import type { Db } from '@neatroots/ports';
import { dbContract } from './contract.test';
import { loadMigrations, migrate } from './migrate';
import { openPostgres } from './postgres';

/**
 * Against a real Postgres server: NEATROOTS_PG_URL=postgres://user:pass@host:5432/db.
 * Without it the suite skips, saying so on one line; with NEATROOTS_REQUIRE_SERVICES=1 (CI)
 * a missing server fails instead of passing silently.
 */
const url = process.env.NEATROOTS_PG_URL;
const required = process.env.NEATROOTS_REQUIRE_SERVICES === '1';

if (!url) {
  if (required) {
    it('needs Postgres', () => {
      throw new Error('NEATROOTS_REQUIRE_SERVICES=1 but NEATROOTS_PG_URL is not set');
    });
  } else {
    process.stdout.write('postgres.integration: skipped, NEATROOTS_PG_URL is not set\n');
    it.skip('Postgres server (NEATROOTS_PG_URL not set)', () => undefined);
  }
} else {
  dbContract('Postgres server', () => openPostgres({ url, max: 4 }));

  describe('migrate on a Postgres server', () => {
    const dbs: Db[] = [];
    afterAll(() => Promise.all(dbs.map((d) => d.close())));

    it('lets replicas that start together apply each migration exactly once', async () => {
      const a = await openPostgres({ url, max: 2 });
      const b = await openPostgres({ url, max: 2 });
      dbs.push(a, b);
      const [ra, rb] = await Promise.all([migrate(a), migrate(b)]);
      const files = (await loadMigrations()).map((m) => m.name);
      // One of the two applied what the server lacked (everything on a new server, the newer
      // files on one an older version migrated, nothing when up to date); the other waited and
      // found nothing to do.
      expect([ra.applied, rb.applied].filter((x) => x.length).length).toBeLessThanOrEqual(1);
      const applied = [...ra.applied, ...rb.applied];
      expect(files.slice(files.length - applied.length)).toEqual(applied);
      const rows = await a.query<{ name: string }>('SELECT name FROM schema_migrations WHERE name = ANY($1::text[]) ORDER BY version', [files]);
      expect(rows.rows.map((r) => r.name)).toEqual(files);
      expect((await migrate(a)).applied).toEqual([]);
    });

    it('fails fast on an unreachable server', async () => {
      await expect(openPostgres({ url: 'postgres://nobody:x@127.0.0.1:1/none' })).rejects.toThrow();
    });
  });
}
