import * as fs from 'node:fs';
import * as path from 'node:path';
import { recordedDecider, type Recorded, type SessionBody } from '@neatroots/sop';
import type { Io } from './cli';
import { main } from './sopops';

/**
 * Procedure checks tested as data (like the check library's examples): libs/sop/fixtures/luigis
 * is a restaurant's procedures folder, and each folder in libs/sop/fixtures/sessions/ is one
 * session with the output `sopops check` must print for it (expected.json). A case without
 * decisions.json runs exactly as the command does with no model; one with it answers the
 * checker's questions from the recorded answers (recordedDecider), so that the statuses only a
 * model can decide are covered by the same status rules.
 *
 * SOP_FIXTURES_UPDATE=1 rewrites expected.json from the current output (review the diff).
 */
const root = path.resolve(__dirname, '../../../libs/sop/fixtures');
const folder = path.join(root, 'luigis');
const sessionsDir = path.join(root, 'sessions');
const cases = fs.readdirSync(sessionsDir).filter((d) => fs.statSync(path.join(sessionsDir, d)).isDirectory()).sort();
const update = process.env.SOP_FIXTURES_UPDATE === '1';

async function check(dir: string): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: Io = { out: (l) => out.push(l), err: (l) => err.push(l), env: {}, cwd: dir };
  const decisions = path.join(dir, 'decisions.json');
  const deps = fs.existsSync(decisions) ? { decider: recordedDecider(JSON.parse(fs.readFileSync(decisions, 'utf8')) as Recorded) } : {};
  const code = await main(['check', '--procedures', folder, 'session.json'], io, deps);
  return { code, out, err };
}

const expectedOf = (c: string) => JSON.parse(fs.readFileSync(path.join(sessionsDir, c, 'expected.json'), 'utf8')) as SessionBody;

describe('procedure fixtures through sopops check', () => {
  it.each(cases)('%s', async (c) => {
    const dir = path.join(sessionsDir, c);
    const r = await check(dir);
    expect(r.err).toEqual([]);
    expect(r.code).toBe(0);
    expect(r.out).toHaveLength(1);
    const got = JSON.parse(r.out[0]) as SessionBody;
    if (update) fs.writeFileSync(path.join(dir, 'expected.json'), `${JSON.stringify(got, null, 2)}\n`);
    expect(got).toEqual(expectedOf(c));
  });

  it('the cases show every rule status and every result', () => {
    const bodies = cases.map(expectedOf);
    const statuses = new Set(bodies.flatMap((b) => b.checks.flatMap((k) => k.rules.map((r) => `${r.kind}:${r.status}`))));
    expect([...statuses].sort()).toEqual(
      [
        'step:done', 'step:out_of_order', 'step:skipped', 'step:not_reached', 'step:not_applicable', 'step:not_checked',
        'never:violated', 'never:ok', 'never:not_checked',
        'warning:present', 'warning:unheeded', 'warning:absent', 'warning:not_checked',
      ].sort(),
    );
    const results = new Set(bodies.flatMap((b) => [b.result, ...b.checks.map((k) => k.result)]));
    expect([...results].sort()).toEqual(['deviated', 'followed', 'not_measurable', 'partial', null].sort());
  });

  it('cases without recorded answers are the offline checker exactly (no model named anywhere)', () => {
    const offline = cases.filter((c) => !fs.existsSync(path.join(sessionsDir, c, 'decisions.json')));
    expect(offline.length).toBeGreaterThan(4);
    for (const c of offline) for (const k of expectedOf(c).checks) expect(k.model).toBeNull();
  });
});
