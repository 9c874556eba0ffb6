import type { Logger } from '@neatroots/ports';
import { loadConfig } from '../config';
import { createMetrics } from '../ops';
import { distributedPlatform } from '../runtime/platforms';
import { scratchDatabase, type ScratchDatabase } from '../testing/scratch-db';
import { requireService, uniqueName } from '../testing/services';
import { newerDatabaseWarning } from './migrate';

/**
 * A service of an older build (`neatroots serve --target review` after a rollback, or an old
 * replica started after a newer one migrated) says in its log that its Postgres database was
 * migrated by a newer version.
 */
const pg = requireService('postgres', 'migrate on a newer Postgres database');
(pg ? describe : describe.skip)('the distributed platform on a database a newer version migrated', () => {
  let scratch: ScratchDatabase;
  beforeAll(async () => {
    scratch = await scratchDatabase(pg!, uniqueName('newer').toLowerCase());
  });
  afterAll(() => scratch?.drop());

  it('warns naming the migration this build does not have', async () => {
    const config = loadConfig({ NEATROOTS_PG_URL: scratch.url });
    const capture = () => {
      const warnings: string[] = [];
      const log: Logger = { debug: () => {}, info: () => {}, warn: (m: string) => void warnings.push(m), error: () => {}, child: () => log };
      return { log, warnings };
    };
    const newer = distributedPlatform({ config, log: capture().log, metrics: createMetrics('t'), name: 'review' });
    try {
      const db = await newer.db();
      await db.query("INSERT INTO schema_migrations (version, name, checksum) VALUES (99, '0099_x.sql', 'newer')");
    } finally {
      await newer.close();
    }
    const { log, warnings } = capture();
    const older = distributedPlatform({ config, log, metrics: createMetrics('t'), name: 'review' });
    try {
      await older.db();
      expect(warnings).toEqual([newerDatabaseWarning(['0099_x.sql'])]);
    } finally {
      await older.close();
    }
  });
});
