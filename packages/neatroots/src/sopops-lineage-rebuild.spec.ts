import type { INestApplication } from '@nestjs/common';
import { apiUrl, createApi } from '@neatroots/api';
import type { Db } from '@neatroots/ports';
import { InlineJobs, migrate, openPglite } from '@neatroots/platform';
import { createReviewQueries, startSop } from '@neatroots/review';
import { checkSession, noModelDecider } from '@neatroots/sop';
import { LineageRepo, ProjectsRepo } from '@neatroots/store';
import { refundFolder } from '../../../services/review/src/lineage/refunds.test';
import { main } from './sopops';

/** `sopops lineage rebuild` against a running server (the api on the review service, PGlite). */
const KEY = 'shop-key';
let db: Db;
let jobs: InlineJobs;
let app: INestApplication;
let url: string;

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  await new ProjectsRepo(db).addApiKey('shop', KEY);
  jobs = new InlineJobs();
  const sop = await startSop({ db, jobs, checkSession: ({ lock, releaseId, session }) => checkSession(lock, session, { decider: noModelDecider(), releaseId }) });
  for (const n of [1, 2]) {
    await sop.queries.pushHead('shop', refundFolder(n));
    await sop.queries.publish('shop');
  }
  app = await createApi({ queries: createReviewQueries(db), resolveKey: (k) => new ProjectsRepo(db).resolveApiKey(k), sop: sop.queries, review: sop.review, port: 0, host: '127.0.0.1' });
  url = apiUrl(app);
}, 60_000);
afterAll(async () => {
  await app.close();
  await jobs.close();
  await db.close();
});

async function sopops(args: string[], key = KEY) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { out: (l) => out.push(l), err: (l) => err.push(l), env: { NEATROOTS_API_KEY: key }, cwd: process.cwd() });
  return { code, out, err };
}

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
