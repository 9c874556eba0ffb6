import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Db, Logger } from '@neatroots/ports';
import { loadConfig } from '../config';
import { embeddedPlatform } from '../runtime/platforms';
import { DEFAULT_MIGRATIONS_DIR, migrate, newerDatabaseWarning } from './migrate';
import { openPglite } from './pglite';

/**
 * A build older than its database (a rollback, an old replica started after a newer one
 * migrated) runs on it, but says so: it used to start without a word and then set aside what
 * the newer version wrote.
 */
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});
function tmp(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'nr-newer-'));
  dirs.push(d);
  return d;
}

/** The store's migrations and one more, as a newer version has them. */
function newerMigrations(): string {
  const dir = tmp();
  for (const f of fs.readdirSync(DEFAULT_MIGRATIONS_DIR)) fs.copyFileSync(path.join(DEFAULT_MIGRATIONS_DIR, f), path.join(dir, f));
  fs.writeFileSync(path.join(dir, '0099_x.sql'), 'CREATE TABLE newer_x (id int);');
  return dir;
}

function capture() {
  const warnings: string[] = [];
  const log: Logger = { debug: () => {}, info: () => {}, warn: (m: string) => void warnings.push(m), error: () => {}, child: () => log };
  return { log, warnings };
}

describe('migrate on a database a newer version migrated', () => {
  let db: Db | undefined;
  afterEach(async () => {
    await db?.close();
    db = undefined;
  });

  it('warns naming the migrations this build does not have, and runs on it', async () => {
    db = await openPglite();
    await migrate(db, { dir: newerMigrations() });
    const { log, warnings } = capture();
    const out = await migrate(db, { log });
    expect(out).toEqual({ applied: [], newer: ['0099_x.sql'] });
    expect(warnings).toEqual([newerDatabaseWarning(['0099_x.sql'])]);
    expect(warnings[0]).toContain('this build is older than its database: a newer version of neatroots applied migration 0099_x.sql, which this build does not have');
    expect(warnings[0]).toContain('set aside as dead letters');
    expect(warnings[0]).toContain('Upgrading in docs/deployment.md');
  });

  it('says nothing on a database of its own version', async () => {
    db = await openPglite();
    const { log, warnings } = capture();
    expect((await migrate(db, { log })).newer).toEqual([]);
    expect((await migrate(db, { log })).newer).toEqual([]);
    expect(warnings).toEqual([]);
  });

  it('the embedded platform (neatroots start) says it in its log when it opens the database', async () => {
    const config = loadConfig({ NEATROOTS_HOME: tmp() });
    // A newer version's start left its migration recorded.
    const first = embeddedPlatform({ config, log: capture().log, drainTopic: 'x' });
    await (await first.db()).query("INSERT INTO schema_migrations (version, name, checksum) VALUES (99, '0099_x.sql', 'newer')");
    await first.close();
    const { log, warnings } = capture();
    const older = embeddedPlatform({ config, log, drainTopic: 'x' });
    try {
      await older.db();
      expect(warnings).toEqual([newerDatabaseWarning(['0099_x.sql'])]);
    } finally {
      await older.close();
    }
  });
});
