import { openPostgres } from '../db/postgres';
import { scratchDatabase } from './scratch-db';
import { requireService, uniqueName } from './services';
import { until } from './until';

const SUITE = 'scratchDatabase (a test cluster\'s own database)';
const url = requireService('postgres', SUITE);

(url ? describe : describe.skip)(SUITE, () => {
  it('creates a database of its own and drops it while a connection to it is still in a transaction', async () => {
    const name = uniqueName('scratch').toLowerCase();
    const scratch = await scratchDatabase(url!, name);
    expect(new URL(scratch.url).pathname).toBe(`/${name}`);
    const inside = await openPostgres({ url: scratch.url, max: 1 });
    await inside.exec('CREATE TABLE t (x int); INSERT INTO t VALUES (1)');
    const admin = await openPostgres({ url: url!, max: 1 });
    try {
      const exists = async () => (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rows.length === 1;
      expect(await exists()).toBe(true);
      // A connection still in use (a service a failed test left running, mid-transaction) does
      // not keep it: the drop ends that connection.
      let dropped!: () => void;
      const held = inside
        .transaction(async (tx) => {
          await tx.query('SELECT x FROM t');
          await new Promise<void>((r) => (dropped = r));
          await tx.query('SELECT x FROM t');
        })
        .then(
          () => 'committed',
          () => 'ended',
        );
      await until('the transaction open', () => dropped !== undefined, 10_000, 20);
      const t0 = Date.now();
      await scratch.drop();
      expect(Date.now() - t0).toBeLessThan(5_000);
      expect(await exists()).toBe(false);
      dropped();
      expect(await held).toBe('ended');
    } finally {
      await inside.close().catch(() => undefined);
      await admin.close();
    }
  });

  it('refuses a name that is not a plain lower-case identifier, creating nothing', async () => {
    await expect(scratchDatabase(url!, 'x; DROP DATABASE postgres')).rejects.toThrow(/not a plain lower-case identifier/);
  });
});
