import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import * as path from 'node:path';
import type { Db } from '@neatroots/ports';
import { unboundedTransaction } from './postgres';
import { isDbTx } from './tx';

/** libs/store/migrations, from libs/platform/src/db (tests) and libs/platform/dist/db (build) alike. */
export const DEFAULT_MIGRATIONS_DIR = path.resolve(__dirname, '..', '..', '..', 'store', 'migrations');

const FILE_NAME = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/** The Postgres advisory lock (its hashtext) that one process at a time migrates under. */
export const MIGRATE_LOCK = 'neatroots:migrate';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

export interface MigrateOptions {
  /** Folder of `NNNN_name.sql` files; libs/store/migrations by default. */
  dir?: string;
  /** Where the warning about migrations this build does not have goes (a rollback). */
  log?: { warn(message: string): void };
  /**
   * Postgres: another process holds the migration lock (its migrations running), and this call
   * now waits for it; `onLocked` once it holds the lock itself. Neither when the lock was free.
   */
  onWait?: () => void;
  onLocked?: () => void;
}

export interface MigrateResult {
  /** File names applied by this call, in order (empty when the schema was up to date). */
  applied: string[];
  /**
   * Migrations recorded in the database that this build does not have, by file name: a newer
   * version migrated it (this build is older than the database: a rollback). Said at warn.
   */
  newer: string[];
}

/** The migration files of `dir`, in version order. Duplicate versions or odd names are errors. */
export async function loadMigrations(dir: string = DEFAULT_MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const out: Migration[] = [];
  for (const file of files) {
    const m = FILE_NAME.exec(file);
    if (!m) throw new Error(`${path.join(dir, file)}: a migration file is named NNNN_name.sql`);
    const version = Number(m[1]);
    if (out.some((x) => x.version === version)) throw new Error(`${path.join(dir, file)}: migration ${m[1]} appears twice`);
    const sql = await readFile(path.join(dir, file), 'utf8');
    out.push({ version, name: file, sql, checksum: createHash('sha256').update(sql).digest('hex') });
  }
  return out;
}

/**
 * Brings the schema up to date: applies the migrations not yet recorded in
 * `schema_migrations`, in order, in one transaction, so a failing file leaves nothing behind
 * and calling it again is a no-op. On a Postgres server several replicas may start at once:
 * a transaction-scoped advisory lock (pg_advisory_xact_lock, released by the commit or
 * rollback itself, so a crash mid-way cannot leave it held) makes the others wait and then
 * find nothing to do. PGlite is a single connection, so it needs no lock.
 *
 * A database a newer version migrated (schema_migrations records versions this build has no
 * file for) is used as it is, since a rollback is allowed, but said at warn: what the newer
 * version wrote that this build cannot read is set aside or ignored (docs/deployment.md,
 * Upgrading).
 */
export async function migrate(db: Db, opts: MigrateOptions = {}): Promise<MigrateResult> {
  const migrations = await loadMigrations(opts.dir);
  // Without a statement timeout on a Postgres server: an index built on a large table, or the
  // wait for another replica's migrations, may take longer than any other statement.
  return unboundedTransaction(db, async (tx) => {
    if (!isDbTx(tx)) throw new Error('migrate needs a Db whose transactions can exec (the platform adapters)');
    if (db.kind === 'postgres') {
      const free = await tx.query<{ locked: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtext('${MIGRATE_LOCK}')) AS locked`);
      if (!free.rows[0]?.locked) {
        opts.onWait?.();
        await tx.query(`SELECT pg_advisory_xact_lock(hashtext('${MIGRATE_LOCK}'))`);
        opts.onLocked?.();
      }
    }
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const done = await tx.query<{ version: number; name: string }>('SELECT version, name FROM schema_migrations ORDER BY version');
    const have = new Set(done.rows.map((r) => Number(r.version)));
    const known = new Set(migrations.map((m) => m.version));
    const newer = done.rows.filter((r) => !known.has(Number(r.version))).map((r) => r.name);
    if (newer.length) opts.log?.warn(newerDatabaseWarning(newer));
    const applied: string[] = [];
    for (const m of migrations) {
      if (have.has(m.version)) continue;
      try {
        await tx.exec(m.sql);
      } catch (err) {
        throw new Error(`migration ${m.name} failed: ${(err as Error).message}`, { cause: err });
      }
      await tx.query('INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [m.version, m.name, m.checksum]);
      applied.push(m.name);
    }
    return { applied, newer };
  });
}

/** The warning of a start on a database a newer version migrated. */
export function newerDatabaseWarning(newer: readonly string[]): string {
  return (
    `this build is older than its database: a newer version of neatroots applied migration${newer.length === 1 ? '' : 's'} ${newer.join(', ')}, which this build does not have. ` +
    `It runs on the database as it is (a rollback), and gives up what the newer version added: its columns and tables stay unused, and records it wrote that this build cannot read are set aside as dead letters ` +
    `(what else a rollback gives up: Upgrading in docs/deployment.md)`
  );
}
