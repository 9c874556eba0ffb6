import type { INestApplication } from '@nestjs/common';
import { deployments, fixtureFolder, send, startApiOn, startSopHarness, type SopHarness } from './sop-harness.test';

const KEY = 'key-for-luigis';
const folder = fixtureFolder();

let h: SopHarness;

beforeAll(async () => {
  h = await startSopHarness({ luigis: KEY });
}, 60_000);
afterAll(() => h.close());

/**
 * GET .../releases as the web app's Procedures and Insights read it: a summary without the
 * procedures' rules and the agents (a workspace's releases whole were 28.7 MB with 100 releases
 * of 20 procedures), paged with limit and cursor.
 */
describe.each(deployments(() => h))('the releases list (%s)', (_name, sopOf, reviewOf) => {
  let app: INestApplication;
  let base: string;
  const RELEASES = 7;
  beforeAll(async () => {
    await h.db.exec('TRUNCATE sop_overrides, sop_verdicts, sop_patterns, sop_findings, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files CASCADE');
    ({ app, base } = await startApiOn(h.db, 'luigis', sopOf(), reviewOf()));
    expect((await send(`${base}/head`, 'PUT', KEY, { files: folder })).status).toBe(200);
    for (let i = 0; i < RELEASES; i++) expect((await send(`${base}/releases`, 'POST', KEY)).status).toBe(201);
  });
  afterAll(() => app.close());

  const get = async (p: string) => send(`${base}${p}`, 'GET', KEY);

  it('gives each release summed up, without the rules and agents, with the same procedures, newest first', async () => {
    const whole = await get('/releases');
    expect(whole.status).toBe(200);
    expect(whole.body.next_cursor).toBeNull();
    expect(whole.body.items.map((r: { number: number }) => r.number)).toEqual([7, 6, 5, 4, 3, 2, 1]);
    const summary = await get('/releases?fields=summary');
    expect(summary.status).toBe(200);
    expect(summary.body.next_cursor).toBeNull();
    type Whole = { id: string; number: number; live: boolean; created_at: string; procedures: { procedure_id: string; name: string; version: string; rules: unknown[] }[]; agents: unknown[] };
    const expected = (whole.body.items as Whole[]).map((r) => ({
      id: r.id,
      number: r.number,
      live: r.live,
      created_at: r.created_at,
      procedures: r.procedures.map((p) => ({ procedure_id: p.procedure_id, name: p.name, version: p.version, rule_count: p.rules.length })),
      agent_count: r.agents.length,
    }));
    expect(summary.body.items).toEqual(expected);
    expect(expected[0].procedures.length).toBe(3);
    expect(expected[0].procedures.every((p) => p.rule_count > 0)).toBe(true);
    // No rule text, no agent, no goal: only what the pages list.
    const text = JSON.stringify(summary.body);
    for (const r of whole.body.items[0].procedures[0].rules as { text: string }[]) expect(text).not.toContain(r.text);
    expect(text).not.toMatch(/"rules"|"agents"|"goal"|"instructions"/);
    expect(text.length).toBeLessThan(JSON.stringify(whole.body).length / 3);
  });

  it('pages with limit and cursor to the end, each release once, in both forms', async () => {
    for (const form of ['fields=summary&', '']) {
      const seen: number[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await get(`/releases?${form}limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expect(page.status).toBe(200);
        expect(page.body.items.length).toBeLessThanOrEqual(3);
        seen.push(...page.body.items.map((r: { number: number }) => r.number));
        cursor = page.body.next_cursor;
        pages++;
      } while (cursor && pages < 10);
      expect([form, seen, pages]).toEqual([form, [7, 6, 5, 4, 3, 2, 1], 3]);
    }
    const exact = await get('/releases?fields=summary&limit=7');
    expect([exact.body.items.length, exact.body.next_cursor]).toEqual([7, null]);
  });

  it('refuses an unknown form, a bad limit and a cursor it did not give', async () => {
    expect((await get('/releases?fields=all')).body.error.code).toBe('invalid_query');
    expect((await get('/releases?limit=0')).body.error.code).toBe('invalid_query');
    const bad = await get(`/releases?cursor=${Buffer.from(JSON.stringify(['sessions', 3])).toString('base64url')}`);
    expect([bad.status, bad.body.error.code]).toEqual([400, 'invalid_cursor']);
    expect((await get('/releases?cursor=nope')).status).toBe(400);
    expect((await get('/releases?sort=number')).body.error.code).toBe('unknown_parameter');
  });
});
