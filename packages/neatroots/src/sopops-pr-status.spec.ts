import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import type { Db } from '@neatroots/ports';
import { GitHubCodeHost } from '@neatroots/platform';
import { GitHubConnections, type Sop } from '@neatroots/review';
import { startFakeGitHub, type FakeGitHub } from '../../../libs/platform/src/github/fake-github.test';
import { fakeReasoning, FIXTURES, fixtureFolder } from '../../../services/api/src/sop-harness.test';
import { runSopops, startSopopsServer, type SopopsServer } from './sopops-server.test';

/**
 * `sopops pr-status` against a running server whose applied suggestions opened pull requests on
 * the local fake GitHub: merged ones become merged, closed ones dismissed "PR closed", and a
 * pull request that cannot be read (a refused token) is reported with exit status 1.
 */
const KEY = 'luigis-key';
const RECEIPT = '3. Email the receipt. [tool: send_receipt, required]';
const folder = fixtureFolder();

let db: Db;
let sop: Sop;
let server: SopopsServer;
let url: string;
let reasoning: Awaited<ReturnType<typeof fakeReasoning>>;
let gh: FakeGitHub;

beforeAll(async () => {
  let n = 0;
  reasoning = await fakeReasoning((call) => {
    const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
    const ids = [...user.matchAll(/^(q\d+) \(about subject/gm)].map((m) => m[1]);
    const edit = { rationale: 'r', edits: [{ find: RECEIPT, replace: `3. Email the receipt (${++n}). [tool: send_receipt, required]` }] };
    return { json: { answers: ids.map((id) => ({ id, name: 'Skipped the receipt', ...edit })) } };
  });
  gh = await startFakeGitHub();
  gh.addRepo('luigis', 'ops', 'main', { 'procedures/card-payment.md': folder.find((f) => f.path === 'procedures/card-payment.md')!.text });
  server = await startSopopsServer('luigis', KEY, {
    sop: (d) => ({
      gateway: async () => reasoning.gateway,
      github: new GitHubConnections(d, randomBytes(32), (c) => new GitHubCodeHost({ token: c.token, baseUrl: c.api_url, backoffMs: 10 })),
      prStatusCron: null,
    }),
    prepare: async (s) => {
      await s.queries.pushHead('luigis', folder);
      await s.queries.publish('luigis');
    },
    api: { logger: false, appDir: null },
  });
  ({ db, sop, url } = server);
}, 60_000);
afterAll(async () => {
  await server.close();
  await reasoning.close();
  await gh.stop();
});

const sopops = (args: string[]) => runSopops(args, { NEATROOTS_API_KEY: KEY });

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

// After the test above, which leaves open pull requests to copy.
it('follows every open pull request, past the list\'s 500 a page', async () => {
  const [one] = (await db.query<{ id: string }>("SELECT id FROM sop_suggestions WHERE status = 'pr_open' LIMIT 1")).rows;
  // 505 more open pull requests (copies of one, looked at just now, so GitHub is not asked)
  await db.query(
    `INSERT INTO sop_suggestions (id, workspace, pattern_id, procedure_id, path, rule_id, rule_text, verdict, verdict_at, status, prompt_version, base_version, old_text, new_text, pr_url, pr_number, pr_branch, pr_checked_at)
     SELECT 'sug_many' || g, s.workspace, s.pattern_id, s.procedure_id, s.path, s.rule_id, s.rule_text, s.verdict, s.verdict_at, 'pr_open', s.prompt_version, s.base_version, s.old_text, s.new_text, s.pr_url, s.pr_number, s.pr_branch, now()
       FROM generate_series(1, 505) g, sop_suggestions s WHERE s.id = $1`,
    [one.id],
  );
  await db.query("UPDATE sop_suggestions SET pr_checked_at = now() WHERE status = 'pr_open'");
  const total = Number((await db.query<{ n: unknown }>("SELECT count(*) AS n FROM sop_suggestions WHERE workspace = 'luigis' AND status = 'pr_open'")).rows[0].n);
  expect(total).toBeGreaterThan(505);
  const r = await sopops(['pr-status', '--workspace', 'luigis', '--url', url]);
  const seen = new Set([...r.out.map((l) => l.split(' ')[0]), ...r.err.map((l) => l.split(' ')[2])]);
  expect(seen.size).toBe(total);
  expect(seen.has('sug_many1')).toBe(true);
}, 300_000); // up to 84 s on a loaded 2-core machine
