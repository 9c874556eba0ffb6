import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { apiUrl, createApi } from '@neatroots/api';
import type { Db } from '@neatroots/ports';
import { GitHubCodeHost, InlineJobs, migrate, openAiChatModel, openPglite } from '@neatroots/platform';
import { QuestionAnswerer } from '@neatroots/questions';
import { createReviewQueries, GitHubConnections, startSop, type Sop } from '@neatroots/review';
import { checkSession, noModelDecider, readFolder, type DecisionGateway } from '@neatroots/sop';
import { ProjectsRepo } from '@neatroots/store';
import { startFakeGitHub, type FakeGitHub } from '../../../libs/platform/src/github/fake-github.test';
import { startFakeOpenAI, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { main } from './sopops';

/**
 * `sopops pr-status` against a running server whose applied suggestions opened pull requests on
 * the local fake GitHub: merged ones become merged, closed ones dismissed "PR closed", and a
 * pull request that cannot be read (a refused token) is reported with exit status 1.
 */
const FIXTURES = path.resolve(__dirname, '../../../libs/sop/fixtures');
const KEY = 'luigis-key';
const RECEIPT = '3. Email the receipt. [tool: send_receipt, required]';
const folder = [...readFolder(path.join(FIXTURES, 'luigis')).entries()].map(([p, text]) => ({ path: p, text }));

let db: Db;
let jobs: InlineJobs;
let sop: Sop;
let app: INestApplication;
let url: string;
let reasoning: FakeOpenAI;
let answerer: QuestionAnswerer;
let gh: FakeGitHub;

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  await new ProjectsRepo(db).addApiKey('luigis', KEY);
  jobs = new InlineJobs();
  let n = 0;
  reasoning = await startFakeOpenAI((call) => {
    const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
    const ids = [...user.matchAll(/^(q\d+) \(about subject/gm)].map((m) => m[1]);
    const edit = { rationale: 'r', edits: [{ find: RECEIPT, replace: `3. Email the receipt (${++n}). [tool: send_receipt, required]` }] };
    return { json: { answers: ids.map((id) => ({ id, name: 'Skipped the receipt', ...edit })) } };
  });
  answerer = new QuestionAnswerer({ reasoning: openAiChatModel({ role: 'reasoning', baseURL: reasoning.url, model: 'reasoner-test', timeoutMs: 2_000 }), queue: { maxWaitMs: 5, retries: 0 }, onError: () => undefined });
  const gateway: DecisionGateway = { decide: (e, i) => answerer.decide(e, i, { wait: true }), decisionModels: () => answerer.decisionModels() };
  gh = await startFakeGitHub();
  gh.addRepo('luigis', 'ops', 'main', { 'procedures/card-payment.md': folder.find((f) => f.path === 'procedures/card-payment.md')!.text });
  sop = await startSop({
    db,
    jobs,
    checkSession: ({ lock, releaseId, session }) => checkSession(lock, session, { decider: noModelDecider(), releaseId }),
    gateway: async () => gateway,
    github: new GitHubConnections(db, randomBytes(32), (c) => new GitHubCodeHost({ token: c.token, baseUrl: c.api_url, backoffMs: 10 })),
    prStatusCron: null,
  });
  await sop.queries.pushHead('luigis', folder);
  await sop.queries.publish('luigis');
  app = await createApi({ queries: createReviewQueries(db), resolveKey: (k) => new ProjectsRepo(db).resolveApiKey(k), sop: sop.queries, review: sop.review, port: 0, host: '127.0.0.1', logger: false, appDir: null });
  url = apiUrl(app);
}, 60_000);
afterAll(async () => {
  await app.close();
  answerer.close();
  await reasoning.close();
  await gh.stop();
  await jobs.close();
  await db.close();
});

async function sopops(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { out: (l) => out.push(l), err: (l) => err.push(l), env: { NEATROOTS_API_KEY: KEY }, cwd: process.cwd() });
  return { code, out, err };
}

/** A proposed suggestion applied as a pull request; its id and number. */
async function openPullRequest(patternId: string): Promise<{ id: string; number: number }> {
  let s = await sop.review.suggest('luigis', patternId, {});
  for (let i = 0; i < 400 && s.status === 'generating'; i++) {
    await new Promise((r) => setTimeout(r, 10));
    s = await sop.review.getSuggestion('luigis', s.id);
  }
  const applied = await sop.review.applySuggestion('luigis', s.id, {});
  return { id: s.id, number: Number(applied.pr_url!.split('/').pop()) };
}

it('settles merged and closed pull requests, leaves open ones, and says which could not be read', async () => {
  const sent = await sop.queries.receiveSession('luigis', { ...JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', 'payment-skipped', 'session.json'), 'utf8')), external_id: 'pay-1' });
  let patternId: string | undefined;
  for (let i = 0; i < 400 && !patternId; i++) {
    const s = await sop.queries.getSession('luigis', sent.id);
    patternId = s.checks.flatMap((c) => c.rules).find((r) => r.finding)?.pattern_id ?? undefined;
    if (!patternId) await new Promise((r) => setTimeout(r, 10));
  }
  await sop.review.giveVerdict('luigis', patternId!, { verdict: 'real' });
  await sop.review.putRepoConnection('luigis', { repository: 'luigis/ops', path: 'procedures', api_url: gh.url, token: gh.token });
  const merged = await openPullRequest(patternId!);
  const closed = await openPullRequest(patternId!);
  const open = await openPullRequest(patternId!);
  gh.merge('luigis', 'ops', merged.number);
  gh.close('luigis', 'ops', closed.number);
  // looked at more than a minute ago, as a pass from cron every 15 minutes finds them
  await db.query("UPDATE sop_suggestions SET pr_checked_at = now() - interval '15 minutes'");

  const first = await sopops(['pr-status', '--workspace', 'luigis', '--url', url]);
  expect(first).toMatchObject({ code: 0, err: [] });
  expect(first.out).toHaveLength(3);
  expect(first.out).toEqual(expect.arrayContaining([`${merged.id} merged`, `${closed.id} dismissed (PR closed)`, `${open.id} pr_open`].map((l) => expect.stringContaining(l))));
  expect((await sop.review.getSuggestion('luigis', merged.id)).status).toBe('merged');
  expect(await sop.review.getSuggestion('luigis', closed.id)).toMatchObject({ status: 'dismissed', note: 'PR closed' });

  // the token is revoked: the open one cannot be read, and the command says so
  await sop.review.putRepoConnection('luigis', { repository: 'luigis/ops', path: 'procedures', api_url: gh.url, token: 'ghp_revoked' });
  await db.query("UPDATE sop_suggestions SET pr_checked_at = now() - interval '15 minutes'");
  const second = await sopops(['pr-status', '--workspace', 'luigis', '--url', url]);
  expect(second.code).toBe(1);
  expect(second.err).toEqual([expect.stringMatching(new RegExp(`^sopops pr-status: ${open.id} .*refused the token`))]);
});
