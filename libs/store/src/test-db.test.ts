/**
 * A migrated in-memory PGlite for the store's specs (and the review and api specs).
 * Named *.test.ts: a helper, neither run by jest (it runs *.spec.ts) nor built.
 *
 * NEATROOTS_STORE_SPECS_PG_URL runs the same specs on a Postgres server instead: a
 * disposable database, since every test empties the tables; use --runInBand.
 */
import type { Db } from '@neatroots/ports';
// The store's specs run on the real adapters; outside its tests a store may not import one.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { migrate, openPglite, openPostgres } from '@neatroots/platform';

export async function openTestDb(): Promise<Db> {
  const url = process.env.NEATROOTS_STORE_SPECS_PG_URL;
  const db = url ? await openPostgres({ url, max: 4 }) : await openPglite();
  await migrate(db);
  return db;
}

/** Empties every table (faster than a new PGlite, which takes seconds to start). */
export async function resetDb(db: Db): Promise<void> {
  // CASCADE: later tables (the SOP ones) reference projects.
  await db.exec('TRUNCATE runs, spans, findings, note_deliveries, check_stats, db_checks, dead_letters, api_keys, question_results, projects CASCADE');
}
