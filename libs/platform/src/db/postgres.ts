import { Pool, types as pgTypes, type PoolClient } from 'pg';
import type { Db, QueryResult, Queryable, Statement } from '@neatroots/ports';
import { runEach, type DbTx } from './tx';

export interface PostgresOptions {
  /** A `postgres://` connection string. */
  url: string;
  /** Pool size. */
  max?: number;
  /** Name shown in pg_stat_activity. */
  applicationName?: string;
}

const INT8_OID = 20;

/**
 * Read int8 as a JS number when it is safe, a BigInt beyond 2^53, as PGlite does: counts and
 * epoch milliseconds then read alike on both adapters. Set per pool, not on the global `pg.types`.
 */
function parseInt8(v: string): number | bigint {
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : BigInt(v);
}

const typeParsers = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID && format !== 'binary') return parseInt8;
    return format ? pgTypes.getTypeParser(oid, format) : pgTypes.getTypeParser(oid);
  },
};

/** A Postgres server through a `pg` Pool (the distributed deployment). */
export async function openPostgres(opts: PostgresOptions): Promise<Db> {
  const pool = new Pool({
    connectionString: opts.url,
    max: opts.max ?? 10,
    application_name: opts.applicationName ?? 'neatroots',
    types: typeParsers as never,
  });
  // An idle client that loses its server emits 'error' on the pool; without a listener
  // that would crash the process. The next query gets a fresh connection.
  pool.on('error', () => {});
  // Fail at start-up, not on the first request, when the server is unreachable.
  const client = await pool.connect();
  client.release();
  return new PostgresDb(pool);
}

class PostgresDb implements Db {
  readonly kind = 'postgres' as const;
  private closed = false;

  constructor(private readonly pool: Pool) {}

  async query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    const res = await this.pool.query(sql, params ? [...params] : undefined);
    return { rows: res.rows as R[], affectedRows: res.rowCount ?? undefined };
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken = false;
    // A checked-out client has no listener of the pool's: a server restart (57P01) would emit
    // an unhandled 'error' and end the process. The query in progress fails on its own.
    const onError = () => {
      broken = true;
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const result = await fn(wrapClient(client));
      await client.query('COMMIT');
      return result;
    } catch (err) {
      try {
        await client.query('ROLLBACK');
      } catch {
        // The connection is gone; do not return it to the pool.
        broken = true;
      }
      throw err;
    } finally {
      client.removeListener('error', onError);
      client.release(broken);
    }
  }

  batch(statements: readonly Statement[]): Promise<QueryResult<Record<string, unknown>>[]> {
    return this.transaction((tx) => runEach(tx, statements));
  }

  async exec(sql: string): Promise<void> {
    // No parameters: pg uses the simple query protocol, which allows several statements.
    await this.pool.query(sql);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }
}

function wrapClient(client: PoolClient): DbTx {
  return {
    async query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      const res = await client.query(sql, params ? [...params] : undefined);
      return { rows: res.rows as R[], affectedRows: res.rowCount ?? undefined };
    },
    async exec(sql: string): Promise<void> {
      await client.query(sql);
    },
  };
}
