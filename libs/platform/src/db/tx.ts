import type { Queryable } from '@neatroots/ports';

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
