import { InlineJobs, migrate, openPostgres, requireService } from '@neatroots/platform';
import { lineageSuite } from './lineage-suite.test';

/** Rule lineage in the review service on a Postgres server (NEATROOTS_PG_URL); skips without one unless NEATROOTS_REQUIRE_SERVICES=1. */
const url = requireService('postgres', 'rule lineage on Postgres');
if (url) {
  lineageSuite(async () => {
    const db = await openPostgres({ url, max: 4 });
    await migrate(db);
    return { db, jobs: new InlineJobs() };
  }, `-${Date.now().toString(36)}`);
} else {
  it.skip('rule lineage on Postgres (no NEATROOTS_PG_URL)', () => undefined);
}
