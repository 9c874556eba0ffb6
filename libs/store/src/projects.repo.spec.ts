import type { Db } from '@neatroots/ports';
import { ChecksRepo } from './checks.repo';
import { hashApiKey, ProjectsRepo } from './projects.repo';
import { openTestDb, resetDb } from './test-db.test';

let db: Db;

beforeAll(async () => {
  db = await openTestDb();
}, 60_000);
afterAll(() => db.close());
beforeEach(() => resetDb(db));

describe('ProjectsRepo', () => {
  it('ensures projects and switches steering', async () => {
    const projects = new ProjectsRepo(db);
    expect(await projects.ensure('p1')).toMatchObject({ name: 'p1', steering: false });
    expect(await projects.ensure('p1')).toMatchObject({ name: 'p1' });
    await projects.setSteering('p1', true);
    expect(await projects.steering('p1')).toBe(true);
    await projects.setSteering('p2', true);
    await projects.setSteering('p1', false);
    expect((await projects.list()).map((p) => [p.name, p.steering])).toEqual([['p1', false], ['p2', true]]);
    expect(await projects.steering('nope')).toBe(false);
  });

  it('creates API keys, stores only their hash, resolves and revokes them', async () => {
    const projects = new ProjectsRepo(db);
    const created = await projects.createApiKey('p1', 'ci');
    expect(created.key).toMatch(/^nr_/);
    expect(created.key_hash).toBe(hashApiKey(created.key));
    const stored = await db.query<{ key_hash: string }>('SELECT key_hash FROM api_keys');
    expect(stored.rows).toEqual([{ key_hash: created.key_hash }]);
    expect((await projects.resolveApiKey(created.key))?.project).toBe('p1');
    expect(await projects.resolveApiKey('nr_wrong')).toBeNull();
    await projects.addApiKey('p2', 'fixed-key');
    await projects.addApiKey('p2', 'fixed-key');
    expect((await projects.resolveApiKey('fixed-key'))?.project).toBe('p2');
    expect(await projects.revokeApiKey(created.key)).toBe(true);
    expect(await projects.revokeApiKey(created.key)).toBe(false);
    expect(await projects.resolveApiKey(created.key)).toBeNull();
  });
});

describe('ProjectsRepo: the projects a setting turns steering on in', () => {
  const S = 'NEATROOTS_STEERING';
  const steering = async (projects: ProjectsRepo) => (await projects.list()).map((p) => [p.name, p.steering]);

  it('switches off a project taken out of the list, and every one at an empty list', async () => {
    const projects = new ProjectsRepo(db);
    expect(await projects.syncSettingSteering(S, ['shop', 'blog'])).toEqual({ on: ['blog', 'shop'], claimed: [], off: [] });
    expect(await steering(projects)).toEqual([['blog', true], ['shop', true]]);
    // The same list again: nothing changes.
    expect(await projects.syncSettingSteering(S, ['blog', 'shop'])).toEqual({ on: [], claimed: [], off: [] });
    expect(await projects.syncSettingSteering(S, ['blog'])).toEqual({ on: [], claimed: [], off: ['shop'] });
    expect(await steering(projects)).toEqual([['blog', true], ['shop', false]]);
    expect(await projects.syncSettingSteering(S, [])).toEqual({ on: [], claimed: [], off: ['blog'] });
    expect(await steering(projects)).toEqual([['blog', false], ['shop', false]]);
    // Listed again: on again.
    expect(await projects.syncSettingSteering(S, ['shop'])).toEqual({ on: ['shop'], claimed: [], off: [] });
    expect(await projects.steering('shop')).toBe(true);
  });

  it('leaves a project switched on another way (the demo) on, listed or not', async () => {
    const projects = new ProjectsRepo(db);
    await projects.setSteering('demo', true);
    expect(await projects.syncSettingSteering(S, ['demo', 'shop'])).toEqual({ on: ['shop'], claimed: [], off: [] });
    expect(await projects.syncSettingSteering(S, [])).toEqual({ on: [], claimed: [], off: ['shop'] });
    expect(await steering(projects)).toEqual([['demo', true], ['shop', false]]);
    // Switched on the other way after the setting did: the other way's from then on.
    await projects.syncSettingSteering(S, ['shop']);
    await projects.setSteering('shop', true);
    expect(await projects.syncSettingSteering(S, [])).toEqual({ on: [], claimed: [], off: [] });
    expect(await projects.steering('shop')).toBe(true);
    // And switched off that way, it is off until the setting lists it again.
    await projects.setSteering('shop', false);
    expect(await projects.syncSettingSteering(S, ['shop'])).toEqual({ on: ['shop'], claimed: [], off: [] });
  });

  it('takes over a listed project an earlier version switched on (no source), so it is switched off once no longer listed', async () => {
    const projects = new ProjectsRepo(db);
    // As a review before steering_source writes it (after a rollback too): on, the source left NULL.
    await db.query("INSERT INTO projects (name, steering) VALUES ('shop', true), ('blog', true)");
    expect(await projects.unsourcedSteering()).toEqual(['blog', 'shop']);
    expect(await projects.syncSettingSteering(S, ['shop'])).toEqual({ on: [], claimed: ['shop'], off: [] });
    expect(await projects.settingSteering(S)).toEqual(['shop']);
    // Not listed: left on, and still without a source.
    expect(await projects.unsourcedSteering()).toEqual(['blog']);
    expect(await projects.syncSettingSteering(S, [])).toEqual({ on: [], claimed: [], off: ['shop'] });
    expect(await steering(projects)).toEqual([['blog', true], ['shop', false]]);
  });
});

describe('ProjectsRepo: the keys a configuration lists', () => {
  it('revokes a key taken out of the list, moves one listed for another project, opens one listed again; leaves keys made otherwise', async () => {
    const projects = new ProjectsRepo(db);
    const demo = await projects.createApiKey('demo', 'demo');
    const L = 'NEATROOTS_API_KEYS';
    expect(await projects.syncLabelledKeys(L, [{ project: 'alpha', key: 'leaked-key' }])).toEqual({ revoked: 0, kept: 0 });
    expect((await projects.resolveApiKey('leaked-key'))?.project).toBe('alpha');

    // Rotated: the old key no longer opens anything.
    expect(await projects.syncLabelledKeys(L, [{ project: 'alpha', key: 'fresh-key' }])).toEqual({ revoked: 1, kept: 0 });
    expect(await projects.resolveApiKey('leaked-key')).toBeNull();
    expect((await projects.resolveApiKey('fresh-key'))?.project).toBe('alpha');
    // Moved to another project: it opens that one only.
    expect(await projects.syncLabelledKeys(L, [{ project: 'alpha', key: 'fresh-key' }, { project: 'beta', key: 'leaked-key' }])).toEqual({ revoked: 0, kept: 0 });
    expect((await projects.resolveApiKey('leaked-key'))?.project).toBe('beta');
    expect(await projects.syncLabelledKeys(L, [{ project: 'beta', key: 'fresh-key' }])).toEqual({ revoked: 1, kept: 0 });
    expect((await projects.resolveApiKey('fresh-key'))?.project).toBe('beta');
    expect(await projects.resolveApiKey('leaked-key')).toBeNull();
    // Twice the same: nothing changes. An empty list revokes nothing (the setting missing from a
    // process's environment); one meant to be empty (none) revokes them all; the demo's key stays.
    expect(await projects.syncLabelledKeys(L, [{ project: 'beta', key: 'fresh-key' }])).toEqual({ revoked: 0, kept: 0 });
    expect(await projects.syncLabelledKeys(L, [])).toEqual({ revoked: 0, kept: 1 });
    expect((await projects.resolveApiKey('fresh-key'))?.project).toBe('beta');
    expect(await projects.syncLabelledKeys(L, [], { none: true })).toEqual({ revoked: 1, kept: 0 });
    expect(await projects.resolveApiKey('fresh-key')).toBeNull();
    expect((await projects.resolveApiKey(demo.key))?.project).toBe('demo');
    // Nothing left to keep: an empty list says so.
    expect(await projects.syncLabelledKeys(L, [])).toEqual({ revoked: 0, kept: 0 });
  });
});

describe('ChecksRepo', () => {
  it('creates, lists, saves, replaces and deletes database checks', async () => {
    const checks = new ChecksRepo(db);
    const yaml = 'id: refund-without-ownership\nkind: yes_no\nask: Did the agent refund without checking?\n';
    const c = await checks.put({ id: 'refund-without-ownership', yaml, origin: 'planner', project: 'p1', workflow: 'refund-agent' });
    expect(c).toMatchObject({ id: 'refund-without-ownership', source: 'database', origin: 'planner', saved: false, project: 'p1' });
    await checks.put({ id: 'global', yaml: 'id: global\n', origin: 'agent' });
    expect((await checks.list({ project: 'p1' })).map((x) => x.id)).toEqual(['refund-without-ownership', 'global']);
    expect((await checks.list({ project: 'p2' })).map((x) => x.id)).toEqual(['global']);
    expect((await checks.list({ origin: 'agent' })).map((x) => x.id)).toEqual(['global']);
    expect(await checks.markSaved(null, 'global')).toBe(true);
    expect(await checks.markSaved(null, 'nope')).toBe(false);
    expect((await checks.list({ saved: true })).map((x) => x.id)).toEqual(['global']);
    const replaced = await checks.put({ id: 'global', yaml: 'id: global\ntitle: new\n', origin: 'app' });
    expect(replaced).toMatchObject({ yaml: 'id: global\ntitle: new\n', origin: 'app', saved: false, created_at: (await checks.get(null, 'global'))!.created_at });
    expect(await checks.delete(null, 'global')).toBe(true);
    expect(await checks.get(null, 'global')).toBeNull();
  });

  it("keeps each project's checks apart: the same id in two projects, neither replaced nor deleted by the other", async () => {
    const checks = new ChecksRepo(db);
    await checks.put({ id: 'same', yaml: 'id: same\ntitle: a\n', origin: 'app', project: 'pa' });
    await checks.put({ id: 'same', yaml: 'id: same\ntitle: b\n', origin: 'agent', project: 'pb' });
    expect((await checks.get('pa', 'same'))?.yaml).toBe('id: same\ntitle: a\n');
    expect((await checks.get('pb', 'same'))?.origin).toBe('agent');
    expect(await checks.delete('pb', 'same')).toBe(true);
    expect(await checks.get('pb', 'same')).toBeNull();
    expect((await checks.get('pa', 'same'))?.yaml).toBe('id: same\ntitle: a\n');
    expect(await checks.get(null, 'same')).toBeNull();
  });
});
