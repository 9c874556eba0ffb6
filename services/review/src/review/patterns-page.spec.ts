import type { Db } from '@neatroots/ports';
import { migrate, openPglite } from '@neatroots/platform';
import { SopError, SopSessionsRepo, sopFindingId, type PatternsListView } from '@neatroots/store';
import { ReviewSop } from './service';

/**
 * GET /patterns a page at a time: 30 rule patterns (findings from 12 down to 1, so ties are
 * broken by id), one of them split into two failure modes. `limit` pages it (default 100, at
 * most 500), `next_cursor` goes on, and following the cursors gives every rule pattern once,
 * in the order of one big page, each with its own failure modes.
 */
const WS = 'paged';
const RULES = 30;
const SESSIONS = 12;
const ruleId = (r: number) => `rule-${String(r).padStart(2, '0')}`;

let db: Db;
let review: ReviewSop;
let split: { rule: string; children: string[] };

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  const jobs = { work: async () => undefined, add: async () => 'x', run: async () => undefined as never, schedule: async () => undefined, close: async () => undefined };
  review = new ReviewSop({ db, jobs });
  const sessions = new SopSessionsRepo(db);
  for (let s = 0; s < SESSIONS; s++) {
    const r = await sessions.receive(WS, { external_id: `call-${s}`, agent: 'a', release_id: null, started_at: null, transcript_ref: null, turns: [{ role: 'agent', text: 'hi' }], tool_calls: [] });
    // rule r has a finding in the sessions s >= r % 12: 12 - r % 12 findings
    const findings = Array.from({ length: RULES }, (_, i) => i)
      .filter((i) => i % SESSIONS <= s)
      .map((i) => ({ id: sopFindingId(r.id, 'take-order', ruleId(i)), procedure_id: 'take-order', rule_id: ruleId(i), kind: 'never' as const, index: i + 1, text: `Never do thing ${i}.`, status: 'violated' as const, evidence: [], reason: null }));
    await sessions.saveOutcome(r.id, r.content_hash, { release_id: null, result: 'deviated', checked_result: 'deviated', checks: [{ procedure_id: 'take-order', result: 'deviated', checked_result: 'deviated', body: {} }], findings });
  }
  await review.assigner.assign(WS);
  // Split the rule pattern of rule-05 into a failure mode and other, its findings spread over both.
  const rule = (await db.query<{ id: string }>(`SELECT id FROM sop_patterns WHERE workspace = $1 AND rule_id = $2`, [WS, ruleId(5)])).rows[0].id;
  await db.query(
    `INSERT INTO sop_patterns (id, workspace, procedure_id, procedure_name, lineage_id, kind, parent_id, name, named_by, description, rule_id, rule_kind, rule_index, rule_text, rule_ran_at, clustered_at)
     SELECT p.id || '_' || k, p.workspace, p.procedure_id, p.procedure_name, p.lineage_id, CASE WHEN k = 1 THEN 'other' ELSE 'sub' END, p.id, 'Mode ' || k, 'model', null, p.rule_id, p.rule_kind, p.rule_index, p.rule_text, p.rule_ran_at, now()
       FROM sop_patterns p, generate_series(0, 1) k WHERE p.id = $1`,
    [rule],
  );
  await db.query(
    `UPDATE sop_findings f SET pattern_id = f.rule_pattern_id || '_' || (n.rn % 2)
       FROM (SELECT id, row_number() OVER (ORDER BY id) AS rn FROM sop_findings WHERE rule_pattern_id = $1) n WHERE f.id = n.id`,
    [rule],
  );
  split = { rule, children: [`${rule}_0`, `${rule}_1`] };
}, 60_000);
afterAll(async () => {
  await db?.close();
});

const ids = (v: PatternsListView) => v.items.map((p) => p.id);
const refused = (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e as SopError);

describe('GET /patterns, a page at a time', () => {
  it('pages with limit and next_cursor: following the cursors gives every rule pattern once, in the order of one page', async () => {
    const whole = await review.queries.patterns(WS, { limit: 500 });
    expect(whole.items).toHaveLength(RULES);
    expect(whole.next_cursor).toBeNull();
    // most findings first, ties by id
    const keys = whole.items.map((p) => [p.findings, p.id] as const);
    expect([...keys].sort((a, b) => b[0] - a[0] || (a[1] < b[1] ? -1 : 1))).toEqual(keys);
    expect(whole.items[0].findings).toBe(SESSIONS);

    const first = await review.queries.patterns(WS, { limit: 10 });
    expect(first.items).toHaveLength(10);
    expect(first.next_cursor).toEqual(expect.any(String));
    const seen = [...ids(first)];
    let cursor = first.next_cursor;
    let pages = 1;
    while (cursor) {
      const page = await review.queries.patterns(WS, { limit: 10, cursor });
      seen.push(...ids(page));
      cursor = page.next_cursor;
      pages++;
    }
    expect(pages).toBe(3);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(ids(whole));

    // the default is 100 a page: all 30 here, and no next page
    const dflt = await review.queries.patterns(WS, {});
    expect(ids(dflt)).toEqual(ids(whole));
    expect(dflt.next_cursor).toBeNull();
    // a page that ends on the last pattern has no next page
    const exact = await review.queries.patterns(WS, { limit: RULES });
    expect(exact.next_cursor).toBeNull();
  });

  it('gives each rule pattern its own failure modes, on whatever page it falls', async () => {
    const whole = await review.queries.patterns(WS, { limit: 500 });
    const at = ids(whole).indexOf(split.rule);
    const item = whole.items[at];
    expect(item.sub_patterns.map((s) => s.id).sort()).toEqual(split.children);
    expect(item.sub_patterns.map((s) => s.parent_id)).toEqual([split.rule, split.rule]);
    expect(item.sub_patterns.reduce((n, s) => n + s.findings, 0)).toBe(item.findings);
    expect(whole.items.filter((p) => p.id !== split.rule).every((p) => p.sub_patterns.length === 0)).toBe(true);
    // alone on a page of one
    let cursor: string | null | undefined;
    for (let i = 0; i < at; i++) cursor = (await review.queries.patterns(WS, { limit: 1, ...(cursor ? { cursor } : {}) })).next_cursor;
    const one = await review.queries.patterns(WS, { limit: 1, ...(cursor ? { cursor } : {}) });
    expect(one.items).toEqual([item]);
  });

  it('refuses a limit out of 1 to 500 and a cursor it did not hand out', async () => {
    for (const limit of [0, 501, 1.5]) expect(await refused(review.queries.patterns(WS, { limit }))).toMatchObject({ status: 400, code: 'invalid_query' });
    const other = Buffer.from(JSON.stringify(['releases', 3]), 'utf8').toString('base64url');
    for (const cursor of ['nope', other, Buffer.from('["patterns",-1,0,"x"]').toString('base64url')]) {
      expect(await refused(review.queries.patterns(WS, { cursor }))).toMatchObject({ status: 400, code: 'invalid_cursor' });
    }
  });
});
