import { Client } from 'pg';
import type { Logger, ServiceModule } from '@neatroots/ports';
import { loadConfig, type Config } from '../config';
import { migrate, openPostgres } from '../db';
import { createMetrics } from '../ops';
import { scratchDatabase, type ScratchDatabase } from '../testing/scratch-db';
import { freePort, requireService, uniqueName } from '../testing/services';
import { distributedPlatform } from './platforms';
import { startServices, type Services } from './start';

/**
 * A review starting on a database it must migrate, or while another replica migrates it, has its
 * admin port open meanwhile: /healthz 200 (alive: the chart's startup and liveness probes do not
 * kill it, which rolled a long migration back and started it over at every start), /readyz 503
 * saying what it waits for; then ready, the log saying what was applied. The port stayed closed
 * until the migration was done: no answer at all while another process held the lock.
 */
const SUITE = 'the admin port while the database migrates';
const pg = requireService('postgres', SUITE);

/** A service that serves from the database, as review does. */
const review: ServiceModule<Config> = {
  name: 'review',
  needs: [],
  readyOn: ['db'],
  async start(ctx) {
    await ctx.platform.db();
    return { stop: async () => undefined };
  },
};

(pg ? describe : describe.skip)(SUITE, () => {
  let scratch: ScratchDatabase;
  /** The other process: a connection of its own that holds what the test holds. */
  let other: Client;
  const lines: string[] = [];
  let heard: { line: RegExp; resolve: () => void }[] = [];
  const log: Logger = {
    debug: () => {},
    info: (m: string) => {
      lines.push(m);
      heard = heard.filter((h) => !(h.line.test(m) && (h.resolve(), true)));
    },
    warn: (m: string) => void lines.push(m),
    error: (m: string) => void lines.push(m),
    child: () => log,
  };
  /** Resolves once the log has a line matching `line`. */
  const logged = (line: RegExp) => (lines.some((l) => line.test(l)) ? Promise.resolve() : new Promise<void>((resolve) => heard.push({ line, resolve })));

  beforeEach(async () => {
    lines.length = 0;
    scratch = await scratchDatabase(pg!, uniqueName('migrating').toLowerCase());
    other = new Client({ connectionString: scratch.url });
    await other.connect();
  });
  afterEach(async () => {
    await other?.end().catch(() => undefined);
    await scratch?.drop();
  });

  /** Starts review on the scratch database, not waiting for its start; its admin port. */
  async function startReview(): Promise<{ started: Promise<Services>; admin: (path: string) => Promise<{ status: number; body: { status: string; error?: string } }> }> {
    const port = await freePort();
    const config = loadConfig({ NEATROOTS_PG_URL: scratch.url, NEATROOTS_ADMIN_PORT: String(port) });
    const platform = distributedPlatform({ config, log, metrics: createMetrics('t'), name: 'review' });
    const started = startServices({ platform, modules: [review], config, log, metrics: createMetrics('t'), admin: { host: '127.0.0.1', port } });
    started.catch(() => undefined);
    const admin = async (path: string) => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`);
      return { status: res.status, body: (await res.json()) as { status: string; error?: string } };
    };
    return { started, admin };
  }

  /** Resolves once a backend of review's (application_name neatroots-review) waits for a lock. */
  async function reviewWaitsOnALock(): Promise<void> {
    for (;;) {
      // pg_stat_activity is read once a transaction, and the other process is in one: read anew
      await other.query('SELECT pg_stat_clear_snapshot()');
      const r = await other.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'neatroots-review' AND wait_event_type = 'Lock'");
      if (r.rows[0].n > 0) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  it("while another process holds the migration lock: /healthz 200, /readyz 503 waiting for another replica's migration; ready once it is released", async () => {
    await other.query('BEGIN');
    await other.query("SELECT pg_advisory_xact_lock(hashtext('neatroots:migrate'))");
    const { started, admin } = await startReview();
    let services: Services | undefined;
    try {
      await logged(/^waiting for another process's migration \(the advisory lock neatroots:migrate\)$/);
      expect(await admin('/healthz')).toEqual({ status: 200, body: { status: 'ok' } });
      const waiting = await admin('/readyz');
      expect(waiting.status).toBe(503);
      expect(waiting.body.error).toContain("waiting for another replica's migration (the advisory lock neatroots:migrate)");

      await other.query('COMMIT');
      services = await started;
      expect(await admin('/readyz')).toEqual({ status: 200, body: { status: 'ready' } });
      // The other process applied nothing (it only held the lock): this one migrated the new database.
      expect(lines).toContainEqual(expect.stringMatching(/^applied migrations 0001-\d{4} in \d+ ms \(after waiting \d+ ms for another process's migration\)$/));
    } finally {
      await other.query('ROLLBACK').catch(() => undefined);
      await (services ?? (await started.catch(() => undefined)))?.close();
    }
  }, 60_000);

  it('while a migration runs: /healthz 200, /readyz 503 migrating the database; then ready, the log naming what it applied', async () => {
    // The database of the version before: every migration but the last applied.
    const db = await openPostgres({ url: scratch.url, max: 1 });
    try {
      await migrate(db);
      await db.exec('DELETE FROM schema_migrations WHERE version = 29; ALTER TABLE projects DROP COLUMN steering_source');
    } finally {
      await db.close();
    }
    // 0029 alters projects: it waits for this lock, in the middle of the migration.
    await other.query('BEGIN');
    await other.query('LOCK TABLE projects IN ACCESS EXCLUSIVE MODE');
    const { started, admin } = await startReview();
    let services: Services | undefined;
    try {
      await reviewWaitsOnALock();
      expect(await admin('/healthz')).toEqual({ status: 200, body: { status: 'ok' } });
      const migrating = await admin('/readyz');
      expect(migrating.status).toBe(503);
      expect(migrating.body.error).toContain('migrating the database');

      await other.query('COMMIT');
      services = await started;
      expect(await admin('/readyz')).toEqual({ status: 200, body: { status: 'ready' } });
      expect(lines).toContainEqual(expect.stringMatching(/^applied migration 0029 in \d+ ms$/));
      expect(lines.filter((l) => /waiting for another/.test(l))).toEqual([]);
    } finally {
      await other.query('ROLLBACK').catch(() => undefined);
      await (services ?? (await started.catch(() => undefined)))?.close();
    }

    // Started again: nothing to apply, said so.
    lines.length = 0;
    const again = await startReview();
    await (await again.started).close();
    expect(lines).toContain('database up to date');
  }, 60_000);
});
