import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { dbContract } from './contract.test';
import { loadMigrations, migrate } from './migrate';
import { openPglite } from './pglite';
import { openPgliteWorker } from './pglite-worker';

dbContract('PGlite in memory', () => openPglite());
// the embedded default: PGlite on its own thread, queries and batches posted to it
dbContract('PGlite on its own thread', () => openPgliteWorker());

describe('openPglite', () => {
  it('keeps data in a folder across openings', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'nr-pglite-'));
    const first = await openPglite({ dataDir });
    await first.exec(`CREATE TABLE kept (v text); INSERT INTO kept VALUES ('x')`);
    await first.close();
    const second = await openPglite({ dataDir });
    expect((await second.query('SELECT v FROM kept')).rows).toEqual([{ v: 'x' }]);
    await second.close();
  }, 60_000);
});

describe('migrate with the store migrations', () => {
  it('applies libs/store/migrations once and then nothing', async () => {
    const db = await openPglite();
    try {
      const files = await loadMigrations();
      expect(files.length).toBeGreaterThan(0);
      const first = await migrate(db);
      expect(first.applied).toEqual(files.map((f) => f.name));
      expect((await migrate(db)).applied).toEqual([]);
      const tables = await db.query<{ table_name: string }>(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`,
      );
      expect(tables.rows.map((r) => r.table_name)).toEqual(expect.arrayContaining([
        'api_keys', 'check_stats', 'db_checks', 'findings', 'note_deliveries', 'projects', 'runs', 'schema_migrations', 'spans',
      ]));
    } finally {
      await db.close();
    }
  }, 60_000);

  it('refuses oddly named files', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'nr-mig-'));
    await writeFile(path.join(dir, 'init.sql'), 'SELECT 1');
    await expect(loadMigrations(dir)).rejects.toThrow(/NNNN_name\.sql/);
  });
});
