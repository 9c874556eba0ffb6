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

/** A statement a recording Db ran (with its parameters), and the rows the database answered. */
export interface Answered {
  sql: string;
  params: readonly unknown[] | undefined;
  rows: Record<string, unknown>[];
}

/**
 * `db` with every query's statement and answered rows pushed onto `answered` (clear it with
 * `answered.length = 0`): for specs that check what a read asks the database for and what comes
 * back (no transcript body, a bounded number of records), not only what it returns.
 */
export function recordingDb(db: Db): { db: Db; answered: Answered[] } {
  const answered: Answered[] = [];
  const recording = new Proxy(db, {
    get(target, prop, receiver) {
      if (prop === 'query') {
        return async (sql: string, params?: readonly unknown[]) => {
          const res = await target.query<Record<string, unknown>>(sql, params);
          answered.push({ sql, params, rows: res.rows });
          return res;
        };
      }
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { db: recording, answered };
}
