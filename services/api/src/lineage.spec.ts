import type { INestApplication } from '@nestjs/common';
import type { Db } from '@neatroots/ports';
import { refundFolder, refundSession } from '../../review/src/lineage/refunds.test';
import { deployments, send, startApiOn, startSopHarness, type SopHarness } from './sop-harness.test';

/**
 * The rule lineage endpoints over real HTTP, in both deployments: the api on the review
 * service's queries in-process, and on its gRPC client (neatroots.v1.Sop) distributed.
 */
const KEY = 'key-for-shop';
/** A workspace of its own per deployment for the reverts (the shop's tests truncate theirs). */
const PAY: Record<string, { ws: string; key: string }> = { 'in-process': { ws: 'pay-in-process', key: 'key-for-pay-1' }, 'over gRPC': { ws: 'pay-over-grpc', key: 'key-for-pay-2' } };

let h: SopHarness;
let db: Db;

beforeAll(async () => {
  h = await startSopHarness({ shop: KEY, ...Object.fromEntries(Object.values(PAY).map((p) => [p.ws, p.key])) });
  db = h.db;
}, 60_000);
afterAll(() => h.close());

describe.each(deployments(() => h))('the rule lineage endpoints (%s)', (_name, sopOf, reviewOf) => {
  let app: INestApplication;
  let base: string;
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    await db.exec('TRUNCATE rule_lineage, sop_overrides, sop_verdicts, sop_patterns, sop_findings, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files CASCADE');
    ({ app, base } = await startApiOn(db, 'shop', sopOf(), reviewOf()));
  });
  afterAll(() => app.close());

  const call = async (method: string, p: string, body?: unknown) => {
    const { status, body: answer } = await send(`${base}${p}`, method, KEY, body);
    return { status, body: answer };
  };
  const publish = async (n: number) => {
    expect((await call('PUT', '/head', { files: refundFolder(n) })).status).toBe(200);
    const r = await call('POST', '/releases');
    expect(r.body.number).toBe(n);
    return (text: string) => r.body.procedures[0].rules.find((x: { text: string }) => x.text === text).rule_id as string;
  };
  const checked = async (externalId: string, skip: string, minute: number) => {
    const sent = await call('POST', '/sessions', refundSession(externalId, skip, new Date(Date.UTC(2026, 10, 20, 9, minute)).toISOString()));
    for (let i = 0; i < 500; i++) {
      const s = await call('GET', `/sessions/${sent.body.id}`);
      if (s.body.checks?.[0]?.rules.some((r: { pattern_id?: string | null }) => r.pattern_id)) return sent.body.id as string;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`${externalId} never got a pattern`);
  };

  it('links a reworded rule at publish; its findings stay in one pattern, and the sessions filter takes any wording', async () => {
    const r1 = await publish(1);
    ids.look1 = r1('Look up the order of the caller.');
    const a = await checked('api-a', 'lookup_order', 1);
    const r2 = await publish(2);
    ids.look2 = r2("Look up the caller's order by order number.");
    ids.check2 = r2('Check that the payment is less than 30 days old.');
    const b = await checked('api-b', 'lookup_order', 2);

    const got = await call('GET', `/rules/${ids.look2}/lineage`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ procedure_id: 'refund', rule_id: ids.look2, lineage_id: ids.look1, previous_rule_id: ids.look1, how: 'matched' });
    expect(got.body.rules.map((r: { rule_id: string; from_release: number; similarity: number | null }) => [r.rule_id, r.from_release, r.similarity])).toEqual([[ids.look1, 1, null], [ids.look2, 2, 0.8]]);
    expect((await call('GET', `/rules/${ids.look1}/lineage?procedure=refund`)).body.rules).toHaveLength(2);

    const patterns = await call('GET', '/patterns?days=3650');
    expect(patterns.body.items.map((p: { rule: { rule_id: string; current_rule_id: string } }) => p.rule)).toEqual([expect.objectContaining({ rule_id: ids.look1, current_rule_id: ids.look2 })]);
    for (const id of [ids.look1, ids.look2]) {
      expect((await call('GET', `/sessions?rule=${id}`)).body.items.map((s: { id: string }) => s.id).sort()).toEqual([a, b].sort());
    }
  });

  it('links by hand (409 for a cycle), unlinks, and rebuilds idempotently', async () => {
    const r3 = await publish(3);
    ids.sure = r3('Make sure the charge happened this month.');
    const linked = await call('POST', `/rules/${ids.sure}/lineage`, { previous_rule_id: ids.check2 });
    expect(linked.status).toBe(200);
    expect(linked.body).toMatchObject({ rule_id: ids.sure, previous_rule_id: ids.check2, how: 'manual', rules: [{}, { rule_id: ids.check2 }, { rule_id: ids.sure, how: 'manual', from_release: 3 }] });

    const cycle = await call('POST', `/rules/${ids.check2}/lineage`, { previous_rule_id: ids.sure });
    expect(cycle.status).toBe(409);
    expect(cycle.body.error).toMatchObject({ code: 'lineage_cycle', message: expect.stringContaining('cycle') });

    const unlinked = await call('DELETE', `/rules/${ids.sure}/lineage`);
    expect(unlinked.status).toBe(200);
    expect(unlinked.body).toMatchObject({ rule_id: ids.sure, lineage_id: ids.sure, previous_rule_id: null, how: 'manual' });

    const first = await call('POST', '/rules/lineage/rebuild');
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ workspace: 'shop', procedures: 1, links: expect.any(Number) });
    const rows = await db.query('SELECT procedure_id, rule_id, previous_rule_id, how, similarity, release_id FROM rule_lineage ORDER BY rule_id');
    expect((await call('POST', '/rules/lineage/rebuild')).body).toEqual(first.body);
    expect((await db.query('SELECT procedure_id, rule_id, previous_rule_id, how, similarity, release_id FROM rule_lineage ORDER BY rule_id')).rows).toEqual(rows.rows);
    // The manual row survives the rebuild.
    expect((await call('GET', `/rules/${ids.sure}/lineage`)).body).toMatchObject({ how: 'manual', previous_rule_id: null });
  });

  it('refuses what it does not take, naming it', async () => {
    expect((await call('GET', '/rules/nope/lineage')).status).toBe(404);
    expect((await call('GET', `/rules/${ids.look2}/lineage?procedure=other`)).status).toBe(404);
    expect((await call('GET', `/rules/${ids.look2}/lineage?proc=refund`)).body.error.code).toBe('unknown_parameter');
    const noPrevious = await call('POST', `/rules/${ids.look2}/lineage`, { previous: ids.look1 });
    expect(noPrevious.status).toBe(400);
    expect(noPrevious.body.error.message).toContain('previous');
    expect((await call('POST', `/rules/${ids.look2}/lineage`, { previous_rule_id: 'nope' })).status).toBe(404);
  });

  it('asks which procedure when a rule id is in two (the same kind and wording)', async () => {
    const exchange = '# Exchange an item\n\n## Steps\n1. Refund the payment to the card. [tool: refund_payment, required]\n2. Send the new item.\n';
    expect((await call('PUT', '/head', { files: [...refundFolder(3), { path: 'procedures/exchange.md', text: exchange }] })).status).toBe(200);
    const r = await call('POST', '/releases');
    const refundId = r.body.procedures.find((p: { procedure_id: string }) => p.procedure_id === 'refund').rules.find((x: { text: string }) => x.text === 'Refund the payment to the card.').rule_id;
    const ambiguous = await call('GET', `/rules/${refundId}/lineage`);
    expect(ambiguous.status).toBe(400);
    expect(ambiguous.body.error).toMatchObject({ code: 'ambiguous_rule', message: expect.stringContaining('exchange, refund') });
    expect((await call('GET', `/rules/${refundId}/lineage?procedure=exchange`)).body).toMatchObject({ procedure_id: 'exchange', lineage_id: refundId, rules: [{ rule_id: refundId, how: 'new', from_release: 4 }] });
    expect((await call('GET', `/rules/${refundId}/lineage?procedure=refund`)).body.rules).toEqual([expect.objectContaining({ rule_id: refundId, from_release: 1 })]);
  });
});

describe.each(deployments(() => h))('a wording that comes back (%s)', (name, sopOf, reviewOf) => {
  const { ws, key } = PAY[name];
  let app: INestApplication;
  let base: string;
  beforeAll(async () => {
    ({ app, base } = await startApiOn(db, ws, sopOf(), reviewOf()));
  });
  afterAll(() => app.close());

  const A = '# Pay\nGoal: Paid.\n\n## Steps\n1. Look up the order. [tool: lookup_order, required]\n2. Charge it. [tool: charge, required]\n';
  const B = A.replace('Look up the order.', 'Look up the order and confirm the owner.');
  type Step = { rule_id: string; previous_rule_id: string | null; how: string; text: string; from_release: number };
  const call = async (method: string, p: string, body?: unknown, type?: string) => (await send(`${base}${p}`, method, key, body, type)).body;
  /** Saves the file and publishes it, as the editor does; the release's first rule. */
  async function publish(text: string, n: number): Promise<{ rule_id: string; text: string }> {
    expect((await send(`${base}/head/procedures/pay.md`, 'PUT', key, text, 'text/markdown')).status).toBe(200);
    const r = await call('POST', '/releases');
    expect(r.number).toBe(n);
    return r.procedures[0].rules[0];
  }
  const steps = async (ruleId: string) => ((await call('GET', `/rules/${ruleId}/lineage?procedure=pay`)).rules as Step[]).map((r) => [r.from_release, r.text, r.how, r.rule_id, r.previous_rule_id]);

  it('A -> B -> A: the return is a step at the release that brought it back, the lineage ending on the live wording; the rebuild gives the same', async () => {
    const a = await publish(A, 1);
    const b = await publish(B, 2);
    const back = await publish(A, 3);
    expect(back.rule_id).toBe(a.rule_id);
    const expected = [
      [1, 'Look up the order.', 'new', a.rule_id, null],
      [2, 'Look up the order and confirm the owner.', 'matched', b.rule_id, a.rule_id],
      [3, 'Look up the order.', 'matched', a.rule_id, b.rule_id],
    ];
    expect(await steps(a.rule_id)).toEqual(expected);
    // Any wording names the same lineage; the rule keeps its lineage id (its pattern's key).
    expect(await steps(b.rule_id)).toEqual(expected);
    expect(await call('GET', `/rules/${a.rule_id}/lineage`)).toMatchObject({ lineage_id: a.rule_id, previous_rule_id: null, how: 'new' });

    expect(await call('POST', '/rules/lineage/rebuild')).toEqual({ workspace: ws, links: 4, procedures: 1 });
    expect(await steps(a.rule_id)).toEqual(expected);
  });

  it('A -> B -> A -> B: each return is a step of its own', async () => {
    const b = await publish(B, 4);
    const all = await steps(b.rule_id);
    expect(all.map(([n, , how]) => [n, how])).toEqual([[1, 'new'], [2, 'matched'], [3, 'matched'], [4, 'matched']]);
    expect(all[3]).toEqual([4, 'Look up the order and confirm the owner.', 'matched', b.rule_id, all[0][3]]);
    expect(await call('POST', '/rules/lineage/rebuild')).toEqual({ workspace: ws, links: 5, procedures: 1 });
    expect(await steps(b.rule_id)).toEqual(all);
  });
});
