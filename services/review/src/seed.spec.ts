import { migrate, openPglite } from '@neatroots/platform';
import type { Db } from '@neatroots/ports';
import { ProjectsRepo } from '@neatroots/store';
import { seedSteering } from './module';

/**
 * What the review service makes of NEATROOTS_STEERING at its start: the projects where halts
 * act, in the database every service reads steering from. A project taken out of the setting
 * stops halting; it used to stay on for good.
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
  it('switches steering off in a project no longer listed, saying so at warn', async () => {
    const projects = new ProjectsRepo(db);
    const first = logger();
    await seedSteering(db, ['p'], first);
    expect(await projects.steering('p')).toBe(true);
    expect(first.lines).toEqual([{ level: 'info', m: 'steering switched on by NEATROOTS_STEERING: p' }]);

    // Restarted with the project taken out (here: an empty setting).
    const second = logger();
    await seedSteering(db, [], second);
    expect(await projects.steering('p')).toBe(false);
    expect(second.lines).toEqual([{ level: 'warn', m: 'steering switched off (halt rules only flag there now): p, no longer in NEATROOTS_STEERING' }]);

    // Started again the same way: nothing to say.
    const third = logger();
    await seedSteering(db, [], third);
    expect(third.lines).toEqual([]);
  });

  it('keeps steering on in a project switched on another way (the demo)', async () => {
    const projects = new ProjectsRepo(db);
    await projects.setSteering('demo', true);
    await seedSteering(db, ['demo', 'p'], logger());
    await seedSteering(db, [], logger());
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
});
