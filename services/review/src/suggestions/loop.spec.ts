import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import type { Db } from '@neatroots/ports';
import { GitHubCodeHost, InlineJobs, migrate, openAiChatModel, openPglite } from '@neatroots/platform';
import { QuestionAnswerer } from '@neatroots/questions';
import { checkSession, noModelDecider, readFolder, type DecisionGateway } from '@neatroots/sop';
import { startFakeGitHub, type FakeGitHub } from '../../../../libs/platform/src/github/fake-github.test';
import { startFakeOpenAI, type FakeOpenAI } from '../../../../libs/platform/src/models/fake-openai.test';
import { GitHubConnections } from '../github/connections';
import { startSop, type Sop } from '../sop/service';

/**
 * The whole loop, as the review service runs it (startSop: the sopops_check job, patterns,
 * lineage at publish, suggestions), with the reasoning model on the local OpenAI-compatible
 * server and the repository on the local fake GitHub: sessions in, findings, a pattern, a verdict
 * with suggest, a proposal, applied as a pull request, merged, pulled, pushed and published,
 * lineage linking the reworded rule, 10 clean sessions: fixed; then a finding after the fix:
 * regressed.
 */
const FIXTURES = path.resolve(__dirname, '../../../../libs/sop/fixtures');
const WS = 'luigis';
const folder = new Map(readFolder(path.join(FIXTURES, 'luigis')));
const session = (name: string) => JSON.parse(readFileSync(path.join(FIXTURES, 'sessions', name, 'session.json'), 'utf8'));
const STEP1 = '1. Find the order. [tool: lookup_order, required]';
const REWORDED = '1. Find the order by its number before charging anything. [tool: lookup_order, required]';

let db: Db;
let jobs: InlineJobs;
let sop: Sop;
let reasoning: FakeOpenAI;
let answerer: QuestionAnswerer;
let gh: FakeGitHub;

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  reasoning = await startFakeOpenAI((call) => {
    const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
    const ids = [...user.matchAll(/^(q\d+) \(about subject/gm)].map((m) => m[1]);
    const suggest = (call.body.messages[0]?.content ?? '').startsWith('You edit standard operating procedures');
    const answer = suggest ? { rationale: 'Look the order up by number first.', edits: [{ find: STEP1, replace: REWORDED }] } : { name: 'Skipped the order lookup' };
    return { json: { answers: ids.map((id) => ({ id, ...answer })) } };
  });
  answerer = new QuestionAnswerer({ reasoning: openAiChatModel({ role: 'reasoning', baseURL: reasoning.url, model: 'reasoner-test', timeoutMs: 2_000 }), queue: { maxWaitMs: 5, retries: 0 }, onError: () => undefined });
  const gateway: DecisionGateway = { decide: (e, i) => answerer.decide(e, i, { wait: true }), decisionModels: () => answerer.decisionModels() };
  gh = await startFakeGitHub();
  gh.addRepo('luigis', 'ops', 'main', Object.fromEntries(folder));
  jobs = new InlineJobs();
  sop = await startSop({
    db,
    jobs,
    checkSession: ({ lock, releaseId, session: s }) => checkSession(lock, s, { decider: noModelDecider('no model is configured'), releaseId }),
    gateway: async () => gateway,
    github: new GitHubConnections(db, randomBytes(32), (c) => new GitHubCodeHost({ token: c.token, baseUrl: c.api_url, backoffMs: 10 })),
    prStatusCron: null,
  });
}, 60_000);
afterAll(async () => {
  await jobs.close();
  answerer.close();
  await reasoning.close();
  await gh.stop();
  await db.close();
});

let n = 0;
/** A session sent in and checked on the live release, its findings in their patterns. */
async function sent(name: string): Promise<void> {
  const r = await sop.queries.receiveSession(WS, { ...session(name), external_id: `${name}-${++n}`, started_at: new Date().toISOString() });
  for (let i = 0; i < 500; i++) {
    const s = await sop.queries.getSession(WS, r.id);
    const findings = s.checks.flatMap((c) => c.rules).filter((x) => x.finding);
    if (s.status === 'checked' && findings.every((f) => f.pattern_id)) return;
    await new Promise((res) => setTimeout(res, 10));
  }
  throw new Error(`${name} was not checked`);
}

async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
  for (let i = 0; i < 500; i++) {
    const v = await read();
    if (ok(v)) return v;
    await new Promise((res) => setTimeout(res, 10));
  }
  throw new Error('timed out');
}

it('verdict, suggestion, pull request, merge, publish, lineage, fixed, then regressed', async () => {
  await sop.queries.pushHead(WS, [...folder].map(([p, text]) => ({ path: p, text })));
  await sop.queries.publish(WS);
  for (let i = 0; i < 3; i++) await sent('payment-skipped');

  const [item] = (await sop.review.reviewQueue(WS, {})).items;
  expect(item).toMatchObject({ procedure_id: 'card-payment', label: 'Step 1', sessions: 3, review_state: 'needs_review' });
  const given = await sop.review.giveVerdict(WS, item.pattern_id, { verdict: 'real', note: 'Charging without the order is how we double-charge.', suggest: true });
  const proposal = await until(() => sop.review.getSuggestion(WS, given.suggestion!.id), (s) => s.status !== 'generating');
  expect(proposal).toMatchObject({ status: 'proposed', plan: { agents: [{ agent: 'payments-bot', added: 1, removed: 1 }] } });

  await sop.review.putRepoConnection(WS, { repository: 'luigis/ops', path: 'procedures', api_url: gh.url, token: gh.token });
  const pr = await sop.review.applySuggestion(WS, proposal.id, { reviewer: 'ana' });
  expect(pr.status).toBe('pr_open');
  expect((await sop.review.pattern(WS, item.pattern_id, {})).review_state).toBe('fixing');

  gh.merge('luigis', 'ops', Number(pr.pr_url!.split('/').pop()));
  await db.query("UPDATE sop_suggestions SET pr_checked_at = now() - interval '2 minutes'");
  expect((await sop.review.getSuggestion(WS, proposal.id)).status).toBe('merged');

  // the pull of the merge commit, then sopops push and publish
  const pulled = [...folder.keys()].map((p) => ({ path: p, text: gh.fileAt('luigis', 'ops', 'main', p)! }));
  expect(pulled.find((f) => f.path === 'procedures/card-payment.md')!.text).toContain(REWORDED);
  await sop.queries.pushHead(WS, pulled);
  const release = await sop.queries.publish(WS);

  // lineage: the reworded step replaced the old one, linked by the suggestion
  const step1 = release.procedures.find((p) => p.procedure_id === 'card-payment')!.rules.find((r) => r.kind === 'step' && r.index === 1)!;
  const lineage = await sop.review.ruleLineage(WS, step1.rule_id, {});
  expect(lineage).toMatchObject({ how: 'suggestion', previous_rule_id: proposal.rule_id, lineage_id: proposal.rule_id });
  expect((await sop.review.listSuggestions(WS, {})).items[0]).toMatchObject({ id: proposal.id, status: 'merged', released_in: { number: 2 } });
  expect(await sop.review.pattern(WS, item.pattern_id, {})).toMatchObject({ review_state: 'fixing', fix_release: { number: 2 }, fix_sessions: 0, fix_sessions_needed: 10 });

  for (let i = 0; i < 10; i++) await sent('payment-followed');
  expect(await sop.review.pattern(WS, item.pattern_id, {})).toMatchObject({ review_state: 'fixed', fix_sessions: 10 });

  // the same mistake on the new wording: its lineage keeps it in the pattern, so it came back
  await sent('payment-skipped');
  const after = await sop.review.pattern(WS, item.pattern_id, {});
  expect(after).toMatchObject({ review_state: 'regressed', review_reason: 'came_back', review_note: 'Came back after release 2', rule: { rule_id: proposal.rule_id, current_rule_id: step1.rule_id } });
  expect((await sop.review.reviewQueue(WS, {})).items.map((i) => [i.pattern_id, i.review_state])).toEqual([[item.pattern_id, 'regressed']]);
  // Insights follows the lineage too: one row for both wordings, named by either, its trend counting all 4 findings.
  for (const rule of [proposal.rule_id, step1.rule_id]) {
    const rows = (await sop.review.insights(WS, { rule, days: 30 })).ladder;
    expect(rows.map((r) => [r.pattern_id, r.rule_id, r.text, r.findings])).toEqual([[item.pattern_id, proposal.rule_id, REWORDED.replace(/^1\. | \[.*$/g, ''), 4]]);
    expect(rows[0].trend.reduce((a, b) => a + b, 0)).toBe(4);
  }
});
