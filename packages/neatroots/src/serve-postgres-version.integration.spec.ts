import { checkPostgresVersion, loadConfig, loadModelConfig, openPostgres, requireService, scratchDatabase, uniqueName, type ScratchDatabase } from '@neatroots/platform';
import type { Logger } from '@neatroots/ports';
import { serve, ServeConfigError } from './serve';

/**
 * `neatroots serve --target review` reads the Postgres server's version before anything else: one
 * older than the store needs (14, for the span write's string_to_table) stops the start with the
 * version found and the one needed, before migrating the database or binding its ports (exit 2,
 * as a driver not configured). Review used to start on 13 and fail every span write after. No
 * PostgreSQL 13 here: the real server (15 or later) is asked for a version above its own.
 */
const SUITE = 'serve: the Postgres version';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redis && pg ? describe : describe.skip;

maybe(SUITE, () => {
  let scratch: ScratchDatabase;
  const lines: string[] = [];
  const log: Logger = {
    debug: () => {},
    info: (m: string) => void lines.push(m),
    warn: (m: string) => void lines.push(m),
    error: (m: string) => void lines.push(m),
    child: () => log,
  };
  const config = () =>
    loadConfig({
      NEATROOTS_KAFKA_BROKERS: kafka!.join(','),
      NEATROOTS_REDIS_URL: redis!,
      NEATROOTS_PG_URL: scratch.url,
      NEATROOTS_TOPIC_PREFIX: `${uniqueName('pgver')}.`,
      NEATROOTS_ADMIN_PORT: '0',
      NEATROOTS_REVIEW_PORT: '0',
      NEATROOTS_SHUTDOWN_DELAY_MS: '0',
    });
  /** How many tables the scratch database has (0: never migrated). */
  const tables = async (): Promise<number> => {
    const db = await openPostgres({ url: scratch.url, max: 1 });
    try {
      const r = await db.query<{ n: string }>(`SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = 'public'`);
      return Number(r.rows[0].n);
    } finally {
      await db.close();
    }
  };

  beforeEach(async () => {
    lines.length = 0;
    scratch = await scratchDatabase(pg!, uniqueName('pgver').toLowerCase());
  });
  afterEach(async () => {
    await scratch?.drop();
  });

  it('a server older than needed: the start stops (exit 2) naming the version found and the one needed, before migrating', async () => {
    const server = await openPostgres({ url: scratch.url, max: 1 });
    const found = await checkPostgresVersion(server).finally(() => server.close());
    // The next major version after the server's: this server is "too old" for it.
    const needed = (Math.floor(found.num / 10_000) + 1) * 10_000;
    const major = Math.floor(found.num / 10_000) + 1;

    const started = serve('review', config(), loadModelConfig({}), log, { minPostgresVersion: needed });
    await expect(started).rejects.toThrow(ServeConfigError);
    await expect(started).rejects.toThrow(
      `PostgreSQL ${found.version} (server_version_num ${found.num}) is too old: neatroots needs PostgreSQL ${major} or later (server_version_num ${needed} or more); upgrade the server NEATROOTS_PG_URL names`,
    );
    expect(await tables()).toBe(0);
    expect(lines.filter((l) => /migrat/.test(l))).toEqual([]);
  }, 90_000);

  it('on this server (14 or later): review starts, says the version, migrates and is ready', async () => {
    const served = await serve('review', config(), loadModelConfig({}), log);
    try {
      expect(lines).toContainEqual(expect.stringMatching(/^PostgreSQL \d+\.\d+$/));
      expect(lines).toContainEqual(expect.stringMatching(/^applied migrations 0001-\d{4} in \d+ ms$/));
      const res = await fetch(`http://127.0.0.1:${served.adminPort}/readyz`);
      expect(res.status).toBe(200);
    } finally {
      await served.close();
    }
    expect(await tables()).toBeGreaterThan(0);
  }, 90_000);
});
