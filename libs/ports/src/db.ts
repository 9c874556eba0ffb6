/**
 * The database port: PGlite (Postgres in WASM) embedded, a Postgres server through `pg`
 * distributed. Both run the same SQL and the same migrations. Repositories are the only
 * code that talks to it.
 */
export interface QueryResult<R> {
  rows: R[];
  affectedRows?: number;
}

export interface Queryable {
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>>;
}

export interface Db extends Queryable {
  /** Runs `fn` in one transaction; it commits when `fn` resolves, rolls back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Runs several statements separated by semicolons, with no parameters (migrations). */
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
  readonly kind: 'pglite' | 'postgres';
}
