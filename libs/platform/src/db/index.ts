export { openPglite, type PgliteOptions } from './pglite';
export { openPostgres, checkPostgresVersion, postgresVersionName, PostgresVersionError, MIN_POSTGRES_VERSION, POSTGRES_TIMEOUTS, type PostgresOptions } from './postgres';
export { migrate, loadMigrations, newerDatabaseWarning, DEFAULT_MIGRATIONS_DIR, MIGRATE_LOCK, type Migration, type MigrateOptions, type MigrateResult } from './migrate';
export { isDbTx, type DbTx } from './tx';
export {
  openPgliteWorker, DbError, DEFAULT_CHECKPOINT_WAL_BYTES, DEFAULT_ANALYZE, type PgliteWorkerOptions, type PgliteWorkerDb, type WalCheckpoint, type AnalyzeOptions, type Analysis,
} from './pglite-worker';
