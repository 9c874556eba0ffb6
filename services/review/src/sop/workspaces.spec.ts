import type { Db } from '@neatroots/ports';
import { migrate, openPglite } from '@neatroots/platform';
import { SopError } from '@neatroots/store';
import { SopWorkspaces } from './workspaces';

const TAKE_ORDER = `# Take an order
Goal: The order is placed and read back to the caller.

## Steps
1. Greet the caller with the name of the restaurant.
2. Look up the account of the caller. [tool: lookup_account, required]
3. Read the order back to the caller. [required]

## Never
- Volunteer a price or a description of a dish.
`;
const AGENT = `instructions: You answer the phone for Luigi's.\nprocedures: [take-order]\n`;

let db: Db;
beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
}, 60_000);
afterAll(() => db.close());
beforeEach(() => db.exec('TRUNCATE sop_findings, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files, projects CASCADE'));

async function refusal(p: Promise<unknown>): Promise<SopError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SopError);
  return err as SopError;
}

describe('SopWorkspaces', () => {
  it('saves a file at head only when head still compiles, answering with sopc errors', async () => {
    const ws = new SopWorkspaces(db);
    expect(await ws.saveFile('w1', 'procedures/take-order.md', TAKE_ORDER)).toMatchObject({ path: 'procedures/take-order.md', version: expect.any(String) });
    const bad = await refusal(ws.saveFile('w1', 'agents/phone.yaml', 'procedures: [take-order, missing-one]\n'));
    expect(bad.status).toBe(422);
    expect(bad.code).toBe('does_not_compile');
    expect(bad.issues).toEqual([expect.objectContaining({ file: 'agents/phone.yaml', line: 1, message: expect.stringContaining('missing-one') })]);
    expect((await ws.head('w1')).files.map((f) => f.path)).toEqual(['procedures/take-order.md']);
    expect((await refusal(ws.saveFile('w1', '../etc/passwd', 'x'))).status).toBe(400);
    expect((await refusal(ws.saveFile('w1', 'procedures/Take Order.md', TAKE_ORDER))).code).toBe('invalid_path');
    // the agent that lists it keeps the procedure from being deleted
    await ws.saveFile('w1', 'agents/phone.yaml', AGENT);
    expect((await refusal(ws.deleteFile('w1', 'procedures/take-order.md'))).status).toBe(422);
    expect((await refusal(ws.deleteFile('w1', 'groups/nope.yaml'))).status).toBe(404);
  });

  it('publishes numbered releases from head, shows unpublished changes as a diff, and refuses an empty head', async () => {
    const ws = new SopWorkspaces(db);
    expect((await refusal(ws.publish('w1'))).code).toBe('nothing_to_publish');
    expect((await refusal(ws.release('w1', 'live'))).status).toBe(404);
    await ws.push('w1', [
      { path: 'procedures/take-order.md', text: TAKE_ORDER },
      { path: 'agents/phone.yaml', text: AGENT },
    ]);
    const head = await ws.head('w1');
    expect(head.live_release).toBeNull();
    expect(head.changed).toEqual([
      { path: 'agents/phone.yaml', change: 'added' },
      { path: 'procedures/take-order.md', change: 'added' },
    ]);
    const r1 = await ws.publish('w1');
    expect(r1).toMatchObject({ number: 1, live: true, agents: [{ agent: 'phone', procedures: ['take-order'] }] });
    expect(r1.procedures[0]).toMatchObject({ procedure_id: 'take-order', name: 'Take an order' });
    expect(r1.procedures[0].rules.map((r) => [r.kind, r.index])).toEqual([['step', 1], ['step', 2], ['step', 3], ['never', 1]]);
    expect((await ws.head('w1')).diff).toBe('');

    await ws.saveFile('w1', 'procedures/take-order.md', TAKE_ORDER.replace('Read the order back', 'Read the whole order back'));
    const after = await ws.head('w1');
    expect(after.live_release).toEqual({ id: r1.id, number: 1 });
    expect(after.changed).toEqual([{ path: 'procedures/take-order.md', change: 'changed' }]);
    expect(after.diff).toContain('-3. Read the order back to the caller. [required]\n+3. Read the whole order back to the caller. [required]\n');
    const r2 = await ws.publish('w1');
    expect(r2.number).toBe(2);
    // the reworded step has a new rule id; the others keep theirs
    const ids = (r: typeof r1) => r.procedures[0].rules.map((x) => x.rule_id);
    expect(ids(r2).filter((id) => ids(r1).includes(id))).toHaveLength(3);
    expect((await ws.release('w1', '1')).live).toBe(false);
    expect((await ws.release('w1', 'live')).number).toBe(2);
    expect((await ws.releases('w1')).map((r) => r.number)).toEqual([2, 1]);
  });

  it('push replaces head as a whole and is refused whole when the folder does not compile', async () => {
    const ws = new SopWorkspaces(db);
    await ws.push('w1', [{ path: 'procedures/take-order.md', text: TAKE_ORDER }]);
    const bad = await refusal(ws.push('w1', [{ path: 'procedures/x.md', text: '# X\n\n## Steps\n1. \n' }]));
    expect(bad.status).toBe(422);
    expect(bad.issues?.[0]).toMatchObject({ file: 'procedures/x.md', line: 4 });
    expect((await ws.head('w1')).files.map((f) => f.path)).toEqual(['procedures/take-order.md']);
    await ws.push('w1', [{ path: 'procedures/other.md', text: '# Other\n\n## Steps\n1. Do it.\n' }]);
    expect((await ws.head('w1')).files.map((f) => f.path)).toEqual(['procedures/other.md']);
    expect((await refusal(ws.push('w1', [{ path: 'procedures/a.md', text: '# A\n' }, { path: 'procedures/a.md', text: '# A\n' }]))).code).toBe('duplicate_path');
  });
});
