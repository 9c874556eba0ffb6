import { skipsAfter, type QueryResult, type Queryable, type Statement } from '@neatroots/ports';

/**
 * What both adapters hand to a `transaction()` callback. The port promises only `Queryable`;
 * the adapters also give `exec` (several statements, no parameters) on the transaction's own
 * connection, which `migrate` needs to run a migration file and record it atomically.
 */
export interface DbTx extends Queryable {
  exec(sql: string): Promise<void>;
}

export function isDbTx(q: Queryable): q is DbTx {
  return typeof (q as Partial<DbTx>).exec === 'function';
}

/**
 * The statements one after the other on `q` (a transaction's connection), each one's result; one
 * whose `when` the statement before did not meet is skipped (no rows).
 */
export async function runEach(q: Queryable, statements: readonly Statement[]): Promise<QueryResult<Record<string, unknown>>[]> {
  const out: QueryResult<Record<string, unknown>>[] = [];
  for (const s of statements) out.push(skipsAfter(s, out[out.length - 1]) ? { rows: [], affectedRows: 0 } : await q.query(s.sql, s.params));
  return out;
}
