import { openPostgres } from '../db/postgres';

export interface ScratchDatabase {
  /** The URL of the new database: the server's URL with its name. */
  url: string;
  /** Drops it, closing the connections still open to it. */
  drop(): Promise<void>;
}

/**
 * A database of its own on the Postgres server of `url`, for a test cluster or a bench: what
 * it writes never meets another run's tables, and a service that acts on every row at start
 * (review re-queues the suggestions left generating) sees only its own. `name` is a plain
 * lower-case identifier (letters, digits, underscores).
 */
export async function scratchDatabase(url: string, name: string): Promise<ScratchDatabase> {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`scratch database name ${JSON.stringify(name)} is not a plain lower-case identifier`);
  const admin = await openPostgres({ url, max: 1 });
  try {
    await admin.exec(`CREATE DATABASE ${name}`);
  } catch (e) {
    await admin.close();
    throw e;
  }
  const own = new URL(url);
  own.pathname = `/${name}`;
  return {
    url: own.toString(),
    drop: async () => {
      try {
        // FORCE ends the connections left to it, but not, for a role without pg_signal_backend,
        // an autovacuum worker busy on it after a run's writes (42501): that one ends soon, so
        // the drop is tried again for a while.
        for (let attempt = 1; ; attempt++) {
          try {
            await admin.exec(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
            return;
          } catch (err) {
            const code = (err as { code?: string }).code;
            if (attempt >= 40 || (code !== '42501' && code !== '55006')) throw err;
            await new Promise((r) => setTimeout(r, 250));
          }
        }
      } finally {
        await admin.close();
      }
    },
  };
}
