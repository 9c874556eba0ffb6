import { InlineJobs, migrate, openPglite } from '@neatroots/platform';
import { lineageSuite } from './lineage-suite.test';

lineageSuite(async () => {
  const db = await openPglite();
  await migrate(db);
  return { db, jobs: new InlineJobs() };
});
