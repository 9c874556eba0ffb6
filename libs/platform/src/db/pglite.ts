import { PGlite, type Transaction } from '@electric-sql/pglite';
import { runStatements, type Db, type QueryResult, type Queryable, type Statement } from '@neatroots/ports';
import type { DbTx } from './tx';

export interface PgliteOptions {
  /** A folder to keep the database in; in memory when absent. */
  dataDir?: string;
}

/**
 * Real Postgres in WASM for the embedded deployment. PGlite is one connection: its calls
 * are serialised, and a call made outside a transaction waits for the transaction in hand,
 * so code inside `transaction()` must use the `tx` it is given (using the Db there deadlocks).
 */
export async function openPglite(opts: PgliteOptions = {}): Promise<Db> {
  // PGlite reads int8 as a JS number when it is safe (a BigInt beyond 2^53); the `pg`
  // adapter is set up to do the same, so counts and epoch milliseconds read alike.
  let pg: PGlite;
  try {
    pg = opts.dataDir ? await PGlite.create(opts.dataDir) : await PGlite.create();
  } catch (err) {
    // PGlite's CommonJS build loads its WASM and file bundle with import(); jest only allows
    // that with Node's VM modules on.
    if (/experimental-vm-modules/.test(String((err as Error)?.message))) {
      throw new Error('PGlite under jest needs NODE_OPTIONS=--experimental-vm-modules (it loads its WASM with import())', { cause: err });
    }
    throw err;
  }
  return new PgliteDb(pg);
}

class PgliteDb implements Db {
  readonly kind = 'pglite' as const;
  private closed = false;

  constructor(private readonly pg: PGlite) {}

  async query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    const res = await this.pg.query<R>(sql, params ? [...params] : undefined);
    return { rows: res.rows, affectedRows: res.affectedRows };
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.pg.transaction((t) => fn(wrapTx(t)));
  }

  batch(statements: readonly Statement[]): Promise<QueryResult<Record<string, unknown>>[]> {
    return this.transaction((tx) => runStatements(tx, statements));
  }

  async exec(sql: string): Promise<void> {
    await this.pg.exec(sql);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pg.close();
  }
}

function wrapTx(t: Transaction): DbTx {
  return {
    async query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      const res = await t.query<R>(sql, params ? [...params] : undefined);
      return { rows: res.rows, affectedRows: res.affectedRows };
    },
    async exec(sql: string): Promise<void> {
      await t.exec(sql);
    },
  };
}
