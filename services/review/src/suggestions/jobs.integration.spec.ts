import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Db } from '@neatroots/ports';
import { GitHubCodeHost, migrate, openAiChatModel, openPglite, serviceOrSkip } from '@neatroots/platform';
import { QuestionAnswerer } from '@neatroots/questions';
import { compileFiles, readFolder, type DecisionGateway } from '@neatroots/sop';
import { SopSessionsRepo, sopFindingId } from '@neatroots/store';
import { Queue } from 'bullmq';
import { startFakeOpenAI, type FakeOpenAI } from '../../../../libs/platform/src/models/fake-openai.test';
import { bullReplicas } from '../bull-replicas.test';
import { GitHubConnections } from '../github/connections';
import { PR_STATUS_QUEUE } from '../github/pr-status';
import { ReviewSop } from '../review/service';
import { SopWorkspaces } from '../sop/workspaces';

/**
 * The suggestion jobs on BullMQ, on the real Redis (the distributed deployment): sopops_suggest
 * generates a suggestion queued by one replica, and sopops_pr_status is one repeatable job on
 * SOPOPS_PR_STATUS_CRON however many replicas start.
 */
const redis = serviceOrSkip('redis', 'sopops suggestion jobs on BullMQ');
const prefix = `sug-test-${process.pid}-${Date.now()}`;
const FIXTURE = path.resolve(__dirname, '../../../../libs/sop/fixtures/luigis');
const ALLERGY = '- The caller mentions a food allergy. -> Note the allergy on the order.';

(redis ? describe : describe.skip)('suggestion jobs on BullMQ', () => {
  let db: Db;
  let llm: FakeOpenAI;
  let answerer: QuestionAnswerer;
  const { replica, close: closeReplicas } = bullReplicas(redis?.url ?? '', prefix);

  beforeAll(async () => {
    db = await openPglite();
    await migrate(db);
    llm = await startFakeOpenAI((call) => {
      const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
      const ids = [...user.matchAll(/^(q\d+) \(about subject/gm)].map((m) => m[1]);
      const edit = { rationale: 'r', edits: [{ find: ALLERGY, replace: `${ALLERGY}\n- The caller asks for a price. -> Point to the menu.` }] };
      return { json: { answers: ids.map((id) => ({ id, name: 'Quoted prices', ...edit })) } };
    });
    answerer = new QuestionAnswerer({ reasoning: openAiChatModel({ role: 'reasoning', baseURL: llm.url, model: 'reasoner-test', timeoutMs: 2_000 }), queue: { maxWaitMs: 5, retries: 0 }, onError: () => undefined });
  }, 60_000);
  afterAll(async () => {
    await closeReplicas();
    answerer.close();
    await llm.close();
    await db.close();
  });

  it('sopops_pr_status is registered once on SOPOPS_PR_STATUS_CRON; sopops_suggest generates what another replica queued', async () => {
    const gateway: DecisionGateway = { decide: (e, i) => answerer.decide(e, i, { wait: true }), decisionModels: () => answerer.decisionModels() };
    const github = new GitHubConnections(db, randomBytes(32), (c) => new GitHubCodeHost({ token: c.token, baseUrl: c.api_url }));
    const reviews: ReviewSop[] = [];
    for (let i = 0; i < 3; i++) {
      const r = new ReviewSop({ db, jobs: replica(), gateway: async () => gateway, github, prStatusCron: '*/15 * * * *' });
      await r.start();
      reviews.push(r);
    }
    const q = new Queue(PR_STATUS_QUEUE, { connection: { url: redis!.url }, prefix });
    try {
      expect((await q.getJobSchedulers()).map((s) => ({ key: s.key, pattern: s.pattern }))).toEqual([{ key: 'sopops_pr_status', pattern: '*/15 * * * *' }]);
    } finally {
      await q.close();
    }

    const workspaces = new SopWorkspaces(db);
    await workspaces.push('luigis', [...readFolder(FIXTURE)].map(([p, text]) => ({ path: p, text })));
    await workspaces.publish('luigis');
    const never = compileFiles(readFolder(FIXTURE)).procedures.find((p) => p.procedure_id === 'take-order')!.rules.find((r) => r.kind === 'never')!;
    const sessions = new SopSessionsRepo(db);
    const s = await sessions.receive('luigis', { external_id: 'call-1', agent: 'phone-agent', release_id: null, started_at: null, transcript_ref: null, turns: [{ role: 'agent', text: 'It is 9 euros.' }], tool_calls: [] });
    const finding = { id: sopFindingId(s.id, 'take-order', never.rule_id), procedure_id: 'take-order', rule_id: never.rule_id, kind: 'never' as const, index: 1, text: never.text, status: 'violated' as const, evidence: [], reason: null };
    await sessions.saveOutcome(s.id, s.content_hash, { release_id: null, result: 'deviated', checked_result: 'deviated', checks: [{ procedure_id: 'take-order', result: 'deviated', checked_result: 'deviated', body: {} }], findings: [finding] });
    await reviews[0].assigner.assign('luigis');
    const pattern = (await reviews[0].queries.patterns('luigis', {})).items[0];
    const given = await reviews[0].queries.giveVerdict('luigis', pattern.id, { verdict: 'real', suggest: true });
    let got = given.suggestion!;
    for (let i = 0; i < 500 && got.status === 'generating'; i++) {
      await new Promise((r) => setTimeout(r, 20));
      got = await reviews[1].queries.getSuggestion('luigis', got.id);
    }
    expect(got).toMatchObject({ status: 'proposed', model: 'reasoner-test' });
    expect(got.new_text).toContain('- The caller asks for a price. -> Point to the menu.');
  }, 60_000);
});
