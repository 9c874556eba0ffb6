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

/** One parameterised statement of a batch. */
export interface Statement {
  sql: string;
  params?: readonly unknown[];
  /**
   * 'rows': run only when the statement before it (in the same batch or transaction) answered
   * at least one row; otherwise skipped, its result no rows. For a statement needed only when the
   * one before found something, and harmless when run anyway (a runner that ignores this stores
   * the same): the store's span write counts a run's layers again only when it replaced a tool
   * span, where sending that statement with every chunk cost about 5% of the write on PGlite.
   */
  when?: 'rows';
}

/** Is `st` skipped after `before`, the result of the statement before it (undefined: none)? */
export function skipsAfter(st: Statement, before: QueryResult<unknown> | undefined): boolean {
  return st.when === 'rows' && !(before && before.rows.length > 0);
}

/**
 * The statements one after the other on `q` (a transaction's connection), each one's result; one
 * whose `when` the statement before did not meet is skipped (no rows). Every runner of a batch
 * runs it so (the adapters' batch, the store's in a transaction); the PGlite thread, a string of
 * code of its own, writes the same rule again (pglite-worker.ts). The Db contract test runs them all.
 */
export async function runStatements(q: Queryable, statements: readonly Statement[]): Promise<QueryResult<Record<string, unknown>>[]> {
  const out: QueryResult<Record<string, unknown>>[] = [];
  for (const st of statements) out.push(skipsAfter(st, out[out.length - 1]) ? { rows: [], affectedRows: 0 } : await q.query(st.sql, st.params));
  return out;
}

export interface Db extends Queryable {
  /** Runs `fn` in one transaction; it commits when `fn` resolves, rolls back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * Runs the statements in order in one transaction (all or none) and answers each one's
   * result. The adapters give it: PGlite on its thread takes the whole batch in one message,
   * where `transaction()` costs a turn of the caller's event loop per statement (BEGIN and
   * COMMIT included). A Db without it (a test's wrapper) is used through `transaction()`.
   */
  batch?(statements: readonly Statement[]): Promise<QueryResult<Record<string, unknown>>[]>;
  /** Runs several statements separated by semicolons, with no parameters (migrations). */
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
  readonly kind: 'pglite' | 'postgres';
  /**
   * Why this database cannot be used again until the process starts again (the embedded one's
   * thread died, or its write-ahead log could not be synced), or undefined. A server that is down
   * for a while is not this: its calls fail and are retried.
   */
  failure?(): string | undefined;
}
