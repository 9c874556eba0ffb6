import * as net from 'node:net';
import { isInfrastructureError, type Db } from '@neatroots/ports';
import { dbContract } from './contract.test';
import { loadMigrations, migrate } from './migrate';
import { checkPostgresVersion, MIN_POSTGRES_VERSION, openPostgres, PostgresVersionError, unboundedTransaction } from './postgres';

/** A TCP proxy to `url`'s server that can go silent (a host that stopped answering, a cut network), and a URL through it. */
async function silenceable(url: string): Promise<{ url: string; silent: (on: boolean) => void; close: () => void }> {
  const target = new URL(url);
  let silent = false;
  const sockets: net.Socket[] = [];
  const proxy = net.createServer((c) => {
    const up = net.connect(Number(target.port || 5432), target.hostname);
    sockets.push(c, up);
    c.on('data', (d) => void (silent || up.write(d)));
    up.on('data', (d) => void (silent || c.write(d)));
    for (const [a, b] of [[c, up], [up, c]]) {
      a.on('error', () => undefined);
      a.on('close', () => b.destroy());
    }
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  const via = new URL(url);
  via.hostname = '127.0.0.1';
  via.port = String((proxy.address() as net.AddressInfo).port);
  return {
    url: via.toString(),
    silent: (on) => void (silent = on),
    close: () => {
      proxy.close();
      for (const s of sockets) s.destroy();
    },
  };
}

/** `p`'s outcome, or 'still waiting' after `ms`. */
const within = <T>(p: Promise<T>, ms: number): Promise<T | Error | 'still waiting'> =>
  Promise.race([p.catch((e: Error) => e), new Promise<'still waiting'>((r) => setTimeout(() => r('still waiting'), ms).unref())]);

/**
 * Against a real Postgres server: NEATROOTS_PG_URL=postgres://user:pass@host:5432/db.
 * Without it the suite skips, saying so on one line; with NEATROOTS_REQUIRE_SERVICES=1 (CI)
 * a missing server fails instead of passing silently.
 */
const url = process.env.NEATROOTS_PG_URL;
const required = process.env.NEATROOTS_REQUIRE_SERVICES === '1';

if (!url) {
  if (required) {
    it('needs Postgres', () => {
      throw new Error('NEATROOTS_REQUIRE_SERVICES=1 but NEATROOTS_PG_URL is not set');
    });
  } else {
    process.stdout.write('postgres.integration: skipped, NEATROOTS_PG_URL is not set\n');
    it.skip('Postgres server (NEATROOTS_PG_URL not set)', () => undefined);
  }
} else {
  dbContract('Postgres server', () => openPostgres({ url, max: 4 }));

  describe('migrate on a Postgres server', () => {
    const dbs: Db[] = [];
    afterAll(() => Promise.all(dbs.map((d) => d.close())));

    it('lets replicas that start together apply each migration exactly once', async () => {
      const a = await openPostgres({ url, max: 2 });
      const b = await openPostgres({ url, max: 2 });
      dbs.push(a, b);
      const [ra, rb] = await Promise.all([migrate(a), migrate(b)]);
      const files = (await loadMigrations()).map((m) => m.name);
      // One of the two applied what the server lacked (everything on a new server, the newer
      // files on one an older version migrated, nothing when up to date); the other waited and
      // found nothing to do.
      expect([ra.applied, rb.applied].filter((x) => x.length).length).toBeLessThanOrEqual(1);
      const applied = [...ra.applied, ...rb.applied];
      expect(files.slice(files.length - applied.length)).toEqual(applied);
      const rows = await a.query<{ name: string }>('SELECT name FROM schema_migrations WHERE name = ANY($1::text[]) ORDER BY version', [files]);
      expect(rows.rows.map((r) => r.name)).toEqual(files);
      expect((await migrate(a)).applied).toEqual([]);
    });

    it('fails fast on an unreachable server', async () => {
      await expect(openPostgres({ url: 'postgres://nobody:x@127.0.0.1:1/none' })).rejects.toThrow();
    });
  });

  describe("the server's version", () => {
    it('this server is 14 or later: the check passes, giving the version; asked for a newer one than it is, it fails naming both', async () => {
      const db = await openPostgres({ url, max: 1 });
      try {
        const found = await checkPostgresVersion(db);
        expect(found.num).toBeGreaterThanOrEqual(MIN_POSTGRES_VERSION);
        expect(found.version).toMatch(/^\d+\.\d+$/);
        expect(found.version.split('.')[0]).toBe(String(Math.floor(found.num / 10_000)));
        // the same server, a version above its own needed (no PostgreSQL 13 to run here)
        const err = await checkPostgresVersion(db, found.num + 1).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(PostgresVersionError);
        const next = found.num + 1;
        expect((err as Error).message).toBe(
          `PostgreSQL ${found.version} (server_version_num ${found.num}) is too old: neatroots needs PostgreSQL ${Math.floor(next / 10_000)}.${next % 10_000} or later (server_version_num ${next} or more); upgrade the server NEATROOTS_PG_URL names`,
        );
        expect(await checkPostgresVersion(db, found.num)).toEqual(found);
      } finally {
        await db.close();
      }
    });
  });

  describe('no wait on Postgres is unbounded', () => {
    it('a server that accepts the connection and never answers: opening fails within the 10 s connect timeout, as the database being away', async () => {
      const sockets: net.Socket[] = [];
      const hung = net.createServer((s) => void sockets.push(s));
      await new Promise<void>((r) => hung.listen(0, '127.0.0.1', r));
      const t0 = Date.now();
      const got = await within(openPostgres({ url: `postgres://x:y@127.0.0.1:${(hung.address() as net.AddressInfo).port}/db` }), 15_000);
      const ms = Date.now() - t0;
      for (const s of sockets) s.destroy();
      hung.close();
      expect(got).toBeInstanceOf(Error);
      expect(ms).toBeGreaterThanOrEqual(9_000);
      expect(isInfrastructureError(got)).toBe(true);
    }, 30_000);

    it('a server that stops answering mid-way: the query fails within its timeout, a new connection within the connect timeout, both as the database being away; it works again once the server answers, and close() does not wait on it', async () => {
      const link = await silenceable(url);
      const db = await openPostgres({ url: link.url, max: 2, statementTimeoutMs: 500, queryTimeoutMs: 1_500, connectTimeoutMs: 1_000 });
      try {
        expect((await db.query<{ x: number }>('SELECT 1 AS x')).rows).toEqual([{ x: 1 }]);
        link.silent(true);
        let t0 = Date.now();
        const inFlight = await within(db.query('SELECT 1'), 10_000);
        expect(inFlight).toEqual(expect.objectContaining({ message: 'Query read timeout' }));
        expect(Date.now() - t0).toBeLessThan(5_000);
        expect(isInfrastructureError(inFlight)).toBe(true);
        // the pool dropped that connection; a new one cannot open while the server is silent
        t0 = Date.now();
        const opening = await within(db.query('SELECT 1'), 10_000);
        expect(opening).toBeInstanceOf(Error);
        expect(Date.now() - t0).toBeLessThan(5_000);
        expect(isInfrastructureError(opening)).toBe(true);
        // a transaction whose statement is not answered fails too, without waiting again on a ROLLBACK
        const inTx = await within(db.transaction((tx) => tx.query('SELECT 1')), 10_000);
        expect(inTx).toBeInstanceOf(Error);
        expect(isInfrastructureError(inTx)).toBe(true);
        link.silent(false);
        expect((await db.query<{ x: number }>('SELECT 2 AS x')).rows).toEqual([{ x: 2 }]);
        link.silent(true);
        await within(db.query('SELECT 1'), 10_000);
      } finally {
        const t0 = Date.now();
        expect(await within(db.close(), 5_000)).toBeUndefined();
        expect(Date.now() - t0).toBeLessThan(5_000);
        link.close();
      }
    }, 60_000);

    it('cancels a statement past the statement timeout (57014, the database\'s, not the data\'s), but not in a migration\'s transaction', async () => {
      const db = await openPostgres({ url, max: 2, statementTimeoutMs: 300 });
      try {
        const err = await db.query('SELECT pg_sleep(2)').catch((e: unknown) => e);
        expect(err).toMatchObject({ code: '57014' });
        expect(isInfrastructureError(err)).toBe(true);
        // what migrate runs in: an index built on a large table may take long
        const slept = await unboundedTransaction(db, async (tx) => {
          await tx.query('SELECT pg_sleep(1)');
          return (await tx.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0].statement_timeout;
        });
        expect(slept).toBe('0');
        expect((await db.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0].statement_timeout).toBe('300ms');
      } finally {
        await db.close();
      }
    });

    it('takes statement_timeout from the URL over its default', async () => {
      const u = new URL(url);
      u.searchParams.set('statement_timeout', '1234');
      const db = await openPostgres({ url: u.toString(), max: 1 });
      try {
        expect((await db.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0].statement_timeout).toBe('1234ms');
        const def = await openPostgres({ url, max: 1 });
        expect((await def.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0].statement_timeout).toBe('5min');
        await def.close();
      } finally {
        await db.close();
      }
    });
  });
}
