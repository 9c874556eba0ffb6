import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { requireService } from '@neatroots/platform';
import { refundFolder } from '../../services/review/src/lineage/refunds.test';
import { Cluster } from './cluster';

/**
 * Rule lineage in the distributed deployment: the api process answers the lineage endpoints by
 * calling the review process over neatroots.v1.Sop (GetRuleLineage, LinkRuleLineage,
 * UnlinkRuleLineage, RebuildLineage), on the real Postgres; the links are written by the
 * review process at publish; `sopops lineage rebuild` is the real CLI against the api process.
 */
const SUITE = 'rule lineage, distributed';
const kafka = requireService('kafka', SUITE);
const redisUrl = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redisUrl && pg ? describe : describe.skip;

const WS = `lineage-${Date.now().toString(36)}`;
const KEY = `key-${WS}`;
const SOPOPS = path.resolve(__dirname, '../../packages/neatroots/bin/sopops.js');

maybe(SUITE, () => {
  let cluster: Cluster;
  let base: string;
  const api = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${base}${p}`, { method, headers: { 'x-api-key': KEY, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: JSON.parse(await res.text()) };
  };

  beforeAll(async () => {
    cluster = new Cluster({ kafka: kafka!, redis: redisUrl!, pg: pg! }, { NEATROOTS_API_KEYS: `${WS}=${KEY}` });
    await cluster.init();
    await cluster.start('review');
    await cluster.start('api');
    base = `http://127.0.0.1:${cluster.ports.http}/v1/workspaces/${WS}`;
  }, 180_000);
  afterAll(async () => {
    await cluster?.close();
  }, 60_000);

  it('links a reworded rule at publish, refuses a cycle, and rebuilds with sopops lineage rebuild', async () => {
    const rules: Record<string, string> = {};
    for (const n of [1, 2]) {
      expect((await api('PUT', '/head', { files: refundFolder(n) })).status).toBe(200);
      const r = await api('POST', '/releases');
      expect(r.status).toBe(201);
      for (const rule of r.body.procedures[0].rules as { rule_id: string; text: string }[]) rules[`${n}:${rule.text}`] = rule.rule_id;
    }
    const look1 = rules['1:Look up the order of the caller.'];
    const look2 = rules["2:Look up the caller's order by order number."];
    const got = await api('GET', `/rules/${look2}/lineage`);
    expect(got).toMatchObject({ status: 200, body: { lineage_id: look1, previous_rule_id: look1, how: 'matched', rules: [{ rule_id: look1, from_release: 1 }, { rule_id: look2, similarity: 0.8, from_release: 2 }] } });

    const cycle = await api('POST', `/rules/${look1}/lineage`, { previous_rule_id: look2 });
    expect(cycle.status).toBe(409);
    expect(cycle.body.error.code).toBe('lineage_cycle');

    const run = await promisify(execFile)(process.execPath, [SOPOPS, 'lineage', 'rebuild', '--workspace', WS, '--url', `http://127.0.0.1:${cluster.ports.http}`], { env: { PATH: process.env.PATH, NEATROOTS_API_KEY: KEY } });
    expect(run.stdout.trim()).toMatch(new RegExp(`^rebuilt the rule lineage of ${WS}: \\d+ links in 1 procedure$`));
    expect((await api('GET', `/rules/${look2}/lineage`)).body).toEqual(got.body);

    const unlinked = await api('DELETE', `/rules/${look2}/lineage`);
    expect(unlinked.body).toMatchObject({ lineage_id: look2, previous_rule_id: null, how: 'manual' });
  });
});
