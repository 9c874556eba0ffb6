import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { dbContract } from './contract.test';
import { loadMigrations, migrate } from './migrate';
import { openPglite } from './pglite';
import type { Db } from '@neatroots/ports';
import { openPgliteWorker, type DbSyncs, type WalCheckpoint } from './pglite-worker';
import { isInfrastructureError } from '../bus/set-aside';

/** Tests that open PGlite in a data folder or run every migration took up to 52 s on a loaded 2-core machine. */
const SLOW = 180_000;

dbContract('PGlite in memory', () => openPglite());
// the embedded default: PGlite on its own thread, queries and batches posted to it
dbContract('PGlite on its own thread', () => openPgliteWorker());

describe('openPglite', () => {
  it('keeps data in a folder across openings', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'nr-pglite-'));
    const first = await openPglite({ dataDir });
    await first.exec(`CREATE TABLE kept (v text); INSERT INTO kept VALUES ('x')`);
    await first.close();
    const second = await openPglite({ dataDir });
    expect((await second.query('SELECT v FROM kept')).rows).toEqual([{ v: 'x' }]);
    await second.close();
  }, SLOW);
});

describe('migrate with the store migrations', () => {
  it('applies libs/store/migrations once and then nothing', async () => {
    const db = await openPglite();
    try {
      const files = await loadMigrations();
      expect(files.length).toBeGreaterThan(0);
      const first = await migrate(db);
      expect(first.applied).toEqual(files.map((f) => f.name));
      expect((await migrate(db)).applied).toEqual([]);
      const tables = await db.query<{ table_name: string }>(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`,
      );
      expect(tables.rows.map((r) => r.table_name)).toEqual(expect.arrayContaining([
        'api_keys', 'check_stats', 'db_checks', 'findings', 'note_deliveries', 'projects', 'runs', 'schema_migrations', 'spans',
      ]));
    } finally {
      await db.close();
    }
  }, SLOW);

  it('refuses oddly named files', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'nr-mig-'));
    await writeFile(path.join(dir, 'init.sql'), 'SELECT 1');
    await expect(loadMigrations(dir)).rejects.toThrow(/NNNN_name\.sql/);
  });
});

describe('openPgliteWorker in a data folder: checkpoints by WAL written', () => {
  const walSince = async (db: Db) =>
    Number(
      (await db.query<{ wal: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), redo_lsn)::bigint AS wal FROM pg_control_checkpoint()'))
        .rows[0].wal,
    );
  const write = async (db: Db, mb: number) => {
    // rows of about 1 KB, 1,000 a statement
    await db.exec('CREATE TABLE IF NOT EXISTS w (i int PRIMARY KEY, p text)');
    const start = Number((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM w')).rows[0].n);
    for (let i = start; i < start + mb * 1000; i += 1000) {
      await db.query(`INSERT INTO w SELECT g, repeat(md5(g::text), 32) FROM generate_series($1::int, $2::int) g`, [i, i + 999]);
    }
  };

  it('keeps the WAL since the last checkpoint near the bound, and the data through a crash', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'nr-pglite-wal-'));
    const taken: WalCheckpoint[] = [];
    const db = await openPgliteWorker({ dataDir, checkpointWalBytes: 4 * 2 ** 20, checkpointPollMs: 20, onCheckpoint: (c) => taken.push(c) });
    try {
      for (let round = 0; round < 6; round++) {
        await write(db, 4);
        // the poll runs between the writes: every statement of this test waits its turn behind it
        await new Promise((r) => setTimeout(r, 60));
      }
      expect(taken.length).toBeGreaterThanOrEqual(3);
      for (const c of taken) expect(c.walBytes).toBeGreaterThanOrEqual(4 * 2 ** 20);
      expect(await walSince(db)).toBeLessThan(12 * 2 ** 20);
    } finally {
      await (db as unknown as { worker: { terminate(): Promise<number> } }).worker.terminate(); // a crash: no close
    }
    const again = await openPgliteWorker({ dataDir });
    expect((await again.query('SELECT count(*)::int AS n FROM w')).rows).toEqual([{ n: 24_000 }]);
    await again.close();
  }, SLOW);

  it('with the bound at 0, takes none (PGlite on its own checkpoints at 1 GB)', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'nr-pglite-wal-'));
    const taken: WalCheckpoint[] = [];
    const db = await openPgliteWorker({ dataDir, checkpointWalBytes: 0, checkpointPollMs: 20, onCheckpoint: (c) => taken.push(c) });
    try {
      await write(db, 8);
      await new Promise((r) => setTimeout(r, 100));
      expect(taken).toEqual([]);
      expect(await walSince(db)).toBeGreaterThan(8 * 2 ** 20);
    } finally {
      await db.close();
    }
  }, SLOW);
});

describe('openPgliteWorker in a data folder: what it writes reaches the disk', () => {
  // PGlite's own file system makes fsync and fdatasync no-ops; the worker syncs for it.
  const syncs = (db: Db) => (db as unknown as { syncs(): Promise<DbSyncs> }).syncs();

  it('answers a call that wrote only once the WAL it wrote is synced; a read syncs nothing', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'nr-pglite-sync-'));
    const db = await openPgliteWorker({ dataDir, checkpointWalBytes: 0 });
    try {
      await db.exec('CREATE TABLE s (i int)');
      const before = await syncs(db);
      await db.query('INSERT INTO s SELECT generate_series(1, 100)');
      const inserted = await syncs(db);
      expect(inserted.wal).toBeGreaterThan(before.wal);
      expect(inserted.synced.some((f) => f.startsWith(`pg_wal${path.sep}`))).toBe(true);
      await db.transaction(async (tx) => {
        await tx.query('INSERT INTO s VALUES (101)');
        await tx.query('INSERT INTO s VALUES (102)');
      });
      expect((await syncs(db)).wal).toBeGreaterThan(inserted.wal);
      const read = await syncs(db);
      expect((await db.query('SELECT count(*)::int AS n FROM s')).rows).toEqual([{ n: 102 }]);
      expect(await syncs(db)).toEqual({ ...read, synced: [] });
    } finally {
      await db.close();
    }
  }, SLOW);

  it("makes Postgres's own fsync calls real: a checkpoint syncs the data files it wrote and pg_control", async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'nr-pglite-sync-'));
    const db = await openPgliteWorker({ dataDir, checkpointWalBytes: 0 });
    try {
      await db.exec('CREATE TABLE c (i int); INSERT INTO c SELECT generate_series(1, 1000)');
      const table = (await db.query<{ f: string }>(`SELECT pg_relation_filepath('c') AS f`)).rows[0].f;
      await syncs(db); // forget what was synced so far
      await db.exec('CHECKPOINT');
      const after = await syncs(db);
      expect(after.files).toBeGreaterThan(0);
      expect(after.synced).toEqual(expect.arrayContaining([table.split('/').join(path.sep), path.join('global', 'pg_control')]));
    } finally {
      await db.close();
    }
  }, SLOW);

  it('a write-ahead log that cannot be synced fails its call and every later one, with the reason, as a dependency that is down', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'nr-pglite-sync-'));
    const db = await openPgliteWorker({ dataDir, checkpointWalBytes: 0, faults: { walSync: 'EIO' } });
    try {
      await db.query('SELECT 1'); // wrote nothing: answered
      expect(db.failure?.()).toBeUndefined();
      const err = await db.exec('CREATE TABLE f (i int)').catch((e: unknown) => e);
      expect(err).toMatchObject({ code: '58030', message: expect.stringMatching(/^the embedded database could not sync its write-ahead log \(EIO: injected\); it takes no more calls until the process starts again$/) });
      expect(isInfrastructureError(err)).toBe(true);
      // The kernel may have dropped what it could not write: a later call is not answered as if it were on disk.
      await expect(db.query('SELECT 1')).rejects.toMatchObject({ code: '58030' });
      expect(db.failure?.()).toMatch(/could not sync its write-ahead log \(EIO/);
    } finally {
      await db.close();
    }
  }, SLOW);

  it('PGlite aborting (its WebAssembly trapped) stops the database for good, with the reason, as a dependency that is down', async () => {
    const db = await openPgliteWorker({ faults: { abortOn: 'SELECT 2' } });
    try {
      const err = await db.query('SELECT 2').catch((e: unknown) => e);
      expect(err).toMatchObject({ code: '58000', message: expect.stringMatching(/^the embedded database stopped \(PGlite: Aborted\(\)\. .*\); it takes no more calls until the process starts again$/) });
      expect(isInfrastructureError(err)).toBe(true);
      await expect(db.query('SELECT 1')).rejects.toMatchObject({ code: '58000' });
      expect(db.failure?.()).toMatch(/^the embedded database stopped \(PGlite: Aborted/);
    } finally {
      await db.close();
    }
  }, SLOW);

  it('in memory, syncs nothing', async () => {
    const db = await openPgliteWorker();
    try {
      await db.exec('CREATE TABLE m (i int); INSERT INTO m VALUES (1); CHECKPOINT');
      expect(await syncs(db)).toEqual({ wal: 0, files: 0, synced: [] });
    } finally {
      await db.close();
    }
  }, 60_000);
});

describe('openPgliteWorker on a data folder it cannot open', () => {
  it('rejects naming the folder, and its thread does not keep the process running (the CLI exits 1 instead of hanging)', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'neatroots-pgbad-'));
    await writeFile(path.join(dir, 'PG_VERSION'), 'not a version\n'); // a folder PGlite takes for a damaged database
    const ports = () => process.getActiveResourcesInfo().filter((r) => r === 'MessagePort').length;
    const before = ports();
    await expect(openPgliteWorker({ dataDir: dir })).rejects.toThrow(`the embedded database in ${dir} cannot be opened: `);
    expect(ports()).toBe(before);
  }, 60_000);
});

describe('openPgliteWorker: a first start killed during initdb', () => {
  it('leaves a folder the next start opens and migrates (the unfinished database is made afresh)', async () => {
    const home = await mkdtemp(path.join(tmpdir(), 'nr-initdb-kill-'));
    const dataDir = path.join(home, 'pg');
    // a real process opening the embedded database for the first time, killed with SIGKILL as soon
    // as initdb has begun writing the folder (PG_VERSION is among its first files)
    const script = `require(${JSON.stringify(path.resolve(__dirname, '../../dist/db/pglite-worker'))}).openPgliteWorker({ dataDir: ${JSON.stringify(dataDir)} }).then(() => console.log('opened'))`;
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += String(b)));
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    const deadline = Date.now() + 60_000;
    while (!existsSync(path.join(dataDir, 'PG_VERSION')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    expect(out).toBe(''); // killed before its initdb ended
    expect(existsSync(path.join(dataDir, 'PG_VERSION'))).toBe(true);

    const db = await openPgliteWorker({ dataDir });
    try {
      const files = await loadMigrations();
      expect((await migrate(db)).applied).toEqual(files.map((f) => f.name));
      expect((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_language WHERE lanname = 'plpgsql'`)).rows[0].n).toBe(1);
    } finally {
      await db.close();
    }
    expect(existsSync(`${dataDir}.initdb`)).toBe(false);
    // and the database made so opens again, keeping what it holds
    const again = await openPgliteWorker({ dataDir });
    try {
      expect((await migrate(again)).applied).toEqual([]);
    } finally {
      await again.close();
    }
  }, SLOW);

  it('never removes a database without the marker beside it (a folder written before this start)', async () => {
    const home = await mkdtemp(path.join(tmpdir(), 'nr-initdb-keep-'));
    const dataDir = path.join(home, 'pg');
    const db = await openPgliteWorker({ dataDir });
    await db.exec('CREATE TABLE kept (v text); INSERT INTO kept VALUES (\'here\')');
    await db.close();
    const again = await openPgliteWorker({ dataDir });
    try {
      expect((await again.query<{ v: string }>('SELECT v FROM kept')).rows).toEqual([{ v: 'here' }]);
    } finally {
      await again.close();
    }
  }, SLOW);
});
