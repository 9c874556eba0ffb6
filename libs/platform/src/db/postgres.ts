import { Pool, types as pgTypes, type PoolClient, type QueryConfig } from 'pg';
import { runStatements, type Db, type QueryResult, type Queryable, type Statement } from '@neatroots/ports';
import type { DbTx } from './tx';

export interface PostgresOptions {
  /** A `postgres://` connection string. */
  url: string;
  /** Pool size. */
  max?: number;
  /** Name shown in pg_stat_activity. */
  applicationName?: string;
  /** How long opening a connection (TCP and the server's hello) may take, ms. Default 10 s. */
  connectTimeoutMs?: number;
  /**
   * The server's `statement_timeout`, ms: a statement running longer is cancelled (SQLSTATE
   * 57014). Default 5 min. `statement_timeout=<ms>` in the URL sets it instead.
   */
  statementTimeoutMs?: number;
  /**
   * How long a query may wait for the server's answer, ms, before the client gives up on the
   * connection ("Query read timeout"): a server that stopped answering (its host gone, the
   * network cut) fails the query instead of holding it forever. Default the statement timeout
   * plus 30 s, so a server that answers cancels first. `query_timeout=<ms>` in the URL sets it.
   */
  queryTimeoutMs?: number;
}

/** Defaults of openPostgres's timeouts (docs/operations.md). */
export const POSTGRES_TIMEOUTS = { connectMs: 10_000, statementMs: 300_000, answerMarginMs: 30_000, keepAliveMs: 10_000 } as const;
/** No timeout on the client's side (setTimeout's largest delay, about 24 days): migrations. */
const NO_QUERY_TIMEOUT = 2_147_483_647;
/** What pg says when query_timeout passed: the connection is left waiting, not to be used again. */
const READ_TIMEOUT = 'Query read timeout';

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

/**
 * A Postgres server through a `pg` Pool (the distributed deployment). No wait is unbounded: a
 * connection opens within connectTimeoutMs or fails, a statement runs at most
 * statementTimeoutMs (the server cancels it), an answer that does not come within
 * queryTimeoutMs fails the query and drops its connection, and TCP keep-alive probes an idle
 * one; each of these errors says the database is away (isInfrastructureError), so the store
 * writer and the bus retry until it is back. Migrations (`migrate`) run without a timeout:
 * building an index on a large table may take long.
 */
export async function openPostgres(opts: PostgresOptions): Promise<Db> {
  const statementMs = opts.statementTimeoutMs ?? POSTGRES_TIMEOUTS.statementMs;
  const pool = new Pool({
    connectionString: opts.url,
    max: opts.max ?? 10,
    application_name: opts.applicationName ?? 'neatroots',
    types: typeParsers as never,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? POSTGRES_TIMEOUTS.connectMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: POSTGRES_TIMEOUTS.keepAliveMs,
    statement_timeout: statementMs,
    query_timeout: opts.queryTimeoutMs ?? statementMs + POSTGRES_TIMEOUTS.answerMarginMs,
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

  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.inTransaction(fn, false);
  }

  /** A transaction whose statements have no timeout, on either side (migrations). */
  unboundedTransaction<T>(fn: (tx: DbTx) => Promise<T>): Promise<T> {
    return this.inTransaction(fn, true);
  }

  private async inTransaction<T>(fn: (tx: DbTx) => Promise<T>, unbounded: boolean): Promise<T> {
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
      if (unbounded) await client.query(timed('SET LOCAL statement_timeout = 0', undefined, NO_QUERY_TIMEOUT));
      const result = await fn(wrapClient(client, unbounded ? NO_QUERY_TIMEOUT : undefined));
      await client.query('COMMIT');
      return result;
    } catch (err) {
      // A server that did not answer in time would not answer a ROLLBACK either: drop the connection.
      if ((err as Error)?.message === READ_TIMEOUT) broken = true;
      else {
        try {
          await client.query('ROLLBACK');
        } catch {
          // The connection is gone; do not return it to the pool.
          broken = true;
        }
      }
      throw err;
    } finally {
      client.removeListener('error', onError);
      client.release(broken);
    }
  }

  batch(statements: readonly Statement[]): Promise<QueryResult<Record<string, unknown>>[]> {
    return this.transaction((tx) => runStatements(tx, statements));
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

/** A query with its own client-side timeout (pg reads query_timeout from the query first). */
function timed(text: string, values: unknown[] | undefined, queryTimeoutMs: number | undefined): QueryConfig {
  const q: QueryConfig & { query_timeout?: number } = { text, values };
  if (queryTimeoutMs !== undefined) q.query_timeout = queryTimeoutMs;
  return q;
}

/** `queryTimeoutMs` replaces the pool's query_timeout for this transaction's statements. */
function wrapClient(client: PoolClient, queryTimeoutMs?: number): DbTx {
  return {
    async query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      const res = await client.query(timed(sql, params ? [...params] : undefined, queryTimeoutMs));
      return { rows: res.rows as R[], affectedRows: res.rowCount ?? undefined };
    },
    async exec(sql: string): Promise<void> {
      // No parameters: pg uses the simple query protocol, which allows several statements.
      await client.query(timed(sql, undefined, queryTimeoutMs));
    },
  };
}

/**
 * `fn` in a transaction whose statements have no timeout when `db` is a Postgres server of
 * openPostgres (migrations: an index on a large table may take long); else db.transaction.
 */
export function unboundedTransaction<T>(db: Db, fn: (tx: Queryable) => Promise<T>): Promise<T> {
  return db instanceof PostgresDb ? db.unboundedTransaction(fn) : db.transaction(fn);
}

/**
 * The oldest PostgreSQL the store runs on, as `server_version_num` (major * 10000 + minor): 14,
 * for `string_to_table` (the span write). On 13 or earlier every span write would fail.
 */
export const MIN_POSTGRES_VERSION = 140_000;

/** A server older than neatroots needs: the process stops at start-up, saying both versions. */
export class PostgresVersionError extends Error {
  constructor(
    /** The server's `server_version` (e.g. `13.16`) and `server_version_num` (130016). */
    readonly found: { version: string; num: number },
    readonly needed: number,
  ) {
    super(
      `PostgreSQL ${found.version} (server_version_num ${found.num}) is too old: neatroots needs PostgreSQL ${postgresVersionName(needed)} or later ` +
        `(server_version_num ${needed} or more); upgrade the server NEATROOTS_PG_URL names`,
    );
    this.name = 'PostgresVersionError';
  }
}

/** `server_version_num` as people write it: 140000 is `14`, 150010 is `15.10`. */
export function postgresVersionName(num: number): string {
  const major = Math.floor(num / 10_000);
  const minor = num % 10_000;
  return minor ? `${major}.${minor}` : `${major}`;
}

/**
 * The server's version, read before anything else is asked of it (`neatroots serve` opening the
 * database, before migrating it): rejected with a PostgresVersionError when `server_version_num`
 * is below `needed` (MIN_POSTGRES_VERSION unless given).
 */
export async function checkPostgresVersion(db: Queryable, needed: number = MIN_POSTGRES_VERSION): Promise<{ version: string; num: number }> {
  const r = await db.query<{ num: string; version: string }>(
    "SELECT current_setting('server_version_num') AS num, current_setting('server_version') AS version",
  );
  const row = r.rows[0];
  // server_version is `15.18 (Debian 15.18-0+deb12u1)` on some builds: the number is enough.
  const found = { version: String(row.version).split(' ')[0], num: Number(row.num) };
  if (!Number.isFinite(found.num) || found.num < needed) throw new PostgresVersionError(found, needed);
  return found;
}
