import { loadConfig, migrate, openPglite } from '@neatroots/platform';
import type { Db } from '@neatroots/ports';
import { ProjectsRepo } from '@neatroots/store';
import { seedApiKeys, seedSteering } from './module';

/**
 * What the review service makes of its settings at its start. NEATROOTS_STEERING: the projects
 * where halts act, in the database every service reads steering from; a project taken out of the
 * setting stops halting (it used to stay on for good). NEATROOTS_API_KEYS: the keys it opens; an
 * empty setting keeps them (it used to revoke every one, logged at info).
 */
let db: Db;

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
}, 60_000);
afterAll(() => db?.close());
beforeEach(() => db.exec('TRUNCATE api_keys, projects CASCADE'));

function logger() {
  const lines: { level: 'info' | 'warn'; m: string }[] = [];
  return { lines, info: (m: string) => void lines.push({ level: 'info', m }), warn: (m: string) => void lines.push({ level: 'warn', m }) };
}

describe('seedSteering: NEATROOTS_STEERING at review\'s start', () => {
  const steeringOf = (value: string | undefined) => loadConfig(value === undefined ? {} : { NEATROOTS_STEERING: value }).NEATROOTS_STEERING;
  it('switches steering off in a project no longer listed, saying so at warn', async () => {
    const projects = new ProjectsRepo(db);
    const first = logger();
    await seedSteering(db, ['p'], first);
    expect(await projects.steering('p')).toBe(true);
    expect(first.lines).toEqual([{ level: 'info', m: 'steering switched on by NEATROOTS_STEERING: p' }]);

    // Restarted with the project taken out.
    const second = logger();
    await seedSteering(db, steeringOf('q'), second);
    expect(await projects.steering('p')).toBe(false);
    expect(second.lines).toEqual([
      { level: 'info', m: 'steering switched on by NEATROOTS_STEERING: q' },
      { level: 'warn', m: 'steering switched off (halt rules only flag there now): p, no longer in NEATROOTS_STEERING' },
    ]);

    // Started again the same way: nothing to say.
    const third = logger();
    await seedSteering(db, steeringOf('q'), third);
    expect(third.lines).toEqual([]);
  });

  it('changes nothing when the setting is empty (a replica without it must not switch halts off everywhere), with a warning saying how to; none switches them off', async () => {
    const projects = new ProjectsRepo(db);
    await seedSteering(db, steeringOf('p,q'), logger());
    for (const value of [undefined, '', '  ']) {
      const log = logger();
      await seedSteering(db, steeringOf(value), log);
      expect(log.lines).toEqual([
        { level: 'warn', m: 'NEATROOTS_STEERING is empty (unset or blank): steering stays on in p, q, as it listed before; to switch it off in every project it listed, set NEATROOTS_STEERING=none' },
      ]);
      expect([await projects.steering('p'), await projects.steering('q')]).toEqual([true, true]);
    }
    const none = logger();
    await seedSteering(db, steeringOf('none'), none);
    expect([await projects.steering('p'), await projects.steering('q')]).toEqual([false, false]);
    expect(none.lines).toEqual([{ level: 'warn', m: 'steering switched off (halt rules only flag there now): p, q, no longer in NEATROOTS_STEERING (NEATROOTS_STEERING=none)' }]);
    // Empty again: nothing left that the setting switched on, nothing to say.
    const after = logger();
    await seedSteering(db, steeringOf(''), after);
    expect(after.lines).toEqual([]);
  });

  it('keeps steering on in a project switched on another way (the demo)', async () => {
    const projects = new ProjectsRepo(db);
    await projects.setSteering('demo', true);
    await seedSteering(db, steeringOf('demo,p'), logger());
    await seedSteering(db, steeringOf('none'), logger());
    expect(await projects.steering('demo')).toBe(true);
    expect(await projects.steering('p')).toBe(false);
  });

  it('switches off, at the first start with this version, a project the setting switched on before and no longer lists', async () => {
    // Steering as an earlier version left it: on, with nothing to say where from.
    await db.exec("DELETE FROM schema_migrations WHERE name = '0029_steering_source.sql'; ALTER TABLE projects DROP COLUMN steering_source");
    await db.query("INSERT INTO projects (name, steering) VALUES ('p', true), ('q', true)");
    await migrate(db);
    await seedSteering(db, ['q'], logger());
    const projects = new ProjectsRepo(db);
    expect([await projects.steering('p'), await projects.steering('q')]).toEqual([false, true]);
  });

  it('leaves the demo project\'s steering to the demo at the first start with this version: no warning that the setting listed it', async () => {
    // An upgraded embedded home started with --no-demo, NEATROOTS_STEERING never set.
    await db.exec("DELETE FROM schema_migrations WHERE name = '0029_steering_source.sql'; ALTER TABLE projects DROP COLUMN steering_source");
    await db.query("INSERT INTO projects (name, steering) VALUES ('demo', true)");
    await migrate(db);
    const log = logger();
    await seedSteering(db, steeringOf(undefined), log);
    expect(log.lines).toEqual([]);
    expect(await new ProjectsRepo(db).steering('demo')).toBe(true);
  });

  it('takes over steering an earlier version switched on (a rollback, an old replica), so that none switches it off', async () => {
    const projects = new ProjectsRepo(db);
    // As a review before steering_source seeds it: on, the new column left NULL.
    await db.query("INSERT INTO projects (name, steering) VALUES ('shop', true) ON CONFLICT (name) DO UPDATE SET steering = EXCLUDED.steering");
    const first = logger();
    await seedSteering(db, ['shop'], first);
    expect(first.lines).toEqual([{ level: 'info', m: 'steering in shop, switched on by an earlier version, now follows NEATROOTS_STEERING' }]);
    const none = logger();
    await seedSteering(db, steeringOf('none'), none);
    expect(await projects.steering('shop')).toBe(false);
    expect(none.lines).toEqual([{ level: 'warn', m: 'steering switched off (halt rules only flag there now): shop, no longer in NEATROOTS_STEERING (NEATROOTS_STEERING=none)' }]);
  });

  it('says at warn that steering an earlier version switched on stays on where the setting does not list it', async () => {
    const projects = new ProjectsRepo(db);
    await db.query("INSERT INTO projects (name, steering) VALUES ('shop', true)");
    for (const value of ['none', 'q']) {
      const log = logger();
      await seedSteering(db, steeringOf(value), log);
      expect(log.lines.filter((l) => l.level === 'warn')).toEqual([
        {
          level: 'warn',
          m: 'steering stays on in shop: an earlier version switched it on, not NEATROOTS_STEERING, so the setting does not switch it off; no API or CLI command switches it off either: list the project in NEATROOTS_STEERING for one start of review (the setting then takes it over), then take it out',
        },
      ]);
      expect(await projects.steering('shop')).toBe(true);
    }
    // Done as it says: listed once, then taken out.
    await seedSteering(db, steeringOf('shop'), logger());
    await seedSteering(db, steeringOf('q'), logger());
    expect(await projects.steering('shop')).toBe(false);
  });
});

describe('seedApiKeys: NEATROOTS_API_KEYS at review\'s start', () => {
  const keysOf = (value: string | undefined) => loadConfig(value === undefined ? {} : { NEATROOTS_API_KEYS: value }).NEATROOTS_API_KEYS;

  it('keeps the keys when the setting is empty (a replica without it must not lock everyone out), with a warning saying how to revoke them', async () => {
    const projects = new ProjectsRepo(db);
    await seedApiKeys(db, keysOf('shop=k1,blog=k2:ingest'), logger());
    for (const value of [undefined, '', '  ']) {
      const log = logger();
      expect(await seedApiKeys(db, keysOf(value), log)).toEqual({ revoked: 0, kept: 2 });
      expect(log.lines).toEqual([
        { level: 'warn', m: 'NEATROOTS_API_KEYS is empty (unset or blank): the 2 API keys it listed before are kept, not revoked; to revoke them all, set NEATROOTS_API_KEYS=none' },
      ]);
    }
    expect(await projects.resolveApiKey('k1')).toEqual({ project: 'shop', scope: 'api' });
    expect(await projects.resolveApiKey('k2')).toEqual({ project: 'blog', scope: 'ingest' });
  });

  it('revokes a key taken out of the list, at warn', async () => {
    const projects = new ProjectsRepo(db);
    await seedApiKeys(db, keysOf('shop=k1,blog=k2'), logger());
    const log = logger();
    expect(await seedApiKeys(db, keysOf('shop=k1'), log)).toEqual({ revoked: 1, kept: 0 });
    expect(log.lines).toEqual([{ level: 'warn', m: '1 API key no longer in NEATROOTS_API_KEYS was revoked' }]);
    expect(await projects.resolveApiKey('k2')).toBeNull();
    expect(await projects.resolveApiKey('k1')).toEqual({ project: 'shop', scope: 'api' });
  });

  it('revokes them all with NEATROOTS_API_KEYS=none, and leaves the demo\'s key', async () => {
    const projects = new ProjectsRepo(db);
    const demo = await projects.createApiKey('demo', 'demo');
    await seedApiKeys(db, keysOf('shop=k1,blog=k2'), logger());
    const log = logger();
    expect(await seedApiKeys(db, keysOf('none'), log)).toEqual({ revoked: 2, kept: 0 });
    expect(log.lines).toEqual([{ level: 'warn', m: '2 API keys no longer in NEATROOTS_API_KEYS were revoked (NEATROOTS_API_KEYS=none)' }]);
    expect([await projects.resolveApiKey('k1'), await projects.resolveApiKey('k2')]).toEqual([null, null]);
    expect((await projects.resolveApiKey(demo.key))?.project).toBe('demo');
    // Started again so, or with the setting empty: nothing left to revoke or keep, nothing said.
    const again = logger();
    await seedApiKeys(db, keysOf('none'), again);
    await seedApiKeys(db, keysOf(''), again);
    expect(again.lines).toEqual([]);
  });
});
