import type { Db } from '@neatroots/ports';
import { LineageRepo } from '@neatroots/store';
import { refundFolder } from '../../../services/review/src/lineage/refunds.test';
import { runSopops, startSopopsServer, type SopopsServer } from './sopops-server.test';

/** `sopops lineage rebuild` against a running server (the api on the review service, PGlite). */
const KEY = 'shop-key';
let db: Db;
let server: SopopsServer;
let url: string;

beforeAll(async () => {
  server = await startSopopsServer('shop', KEY, {
    prepare: async (sop) => {
      for (const n of [1, 2]) {
        await sop.queries.pushHead('shop', refundFolder(n));
        await sop.queries.publish('shop');
      }
    },
  });
  ({ db, url } = server);
}, 60_000);
afterAll(() => server.close());

const sopops = (args: string[], key = KEY) => runSopops(args, { NEATROOTS_API_KEY: key });

const links = async () => (await new LineageRepo().rows(db, 'shop')).map((r) => [r.rule_id, r.previous_rule_id, r.how]);

describe('sopops lineage rebuild', () => {
  it('has the server write the links again from the releases, the same every time', async () => {
    const published = await links();
    expect(published.filter((l) => l[2] === 'matched')).toHaveLength(2);
    await db.query(`DELETE FROM rule_lineage WHERE workspace = 'shop'`);
    const r = await sopops(['lineage', 'rebuild', '--workspace', 'shop', '--url', url]);
    expect(r).toEqual({ code: 0, out: [`rebuilt the rule lineage of shop: ${published.length} links in 1 procedure`], err: [] });
    expect(await links()).toEqual(published);
    expect((await sopops(['lineage', 'rebuild', '--workspace', 'shop', '--url', url])).out).toEqual(r.out);
    expect(await links()).toEqual(published);
  });

  it('says why when the server refuses, and refuses server options for diff', async () => {
    const refused = await sopops(['lineage', 'rebuild', '--workspace', 'shop', '--url', url], 'wrong-key');
    expect(refused.code).toBe(1);
    expect(refused.err.join('\n')).toContain('sopops lineage rebuild');
    const diff = await sopops(['lineage', 'diff', 'a', 'b', '--url', url]);
    expect(diff.code).toBe(2);
    expect(diff.err.join('\n')).toContain('--url is for rebuild');
  });
});
