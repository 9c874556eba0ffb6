import type { INestApplication } from '@nestjs/common';
import { apiUrl, createApi } from '@neatroots/api';
import type { Db } from '@neatroots/ports';
import { InlineJobs, migrate, openAiChatModel, openPglite } from '@neatroots/platform';
import { QuestionAnswerer } from '@neatroots/questions';
import { createReviewQueries, startSop } from '@neatroots/review';
import { checkSession, noModelDecider, type DecisionGateway } from '@neatroots/sop';
import { PatternsRepo, ProjectsRepo } from '@neatroots/store';
import { startFakeOpenAI, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';
import { main } from './sopops';

/**
 * `sopops patterns rename` against a running server whose question service asks a local
 * OpenAI-compatible server (or, switched off, no model at all).
 */
const KEY = 'luigis-key';
let db: Db;
let jobs: InlineJobs;
let app: INestApplication;
let url: string;
let reasoning: FakeOpenAI;
let answerer: QuestionAnswerer;
let modelOn = true;
const repo = new PatternsRepo();

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  await new ProjectsRepo(db).addApiKey('luigis', KEY);
  jobs = new InlineJobs();
  // Every name question answered "Quoted prices unprompted".
  reasoning = await startFakeOpenAI((call) => {
    const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
    return { json: { answers: [...user.matchAll(/^(q\d+) /gm)].map((m) => ({ id: m[1], name: 'Quoted prices unprompted' })) } };
  });
  answerer = new QuestionAnswerer({ reasoning: openAiChatModel({ role: 'reasoning', baseURL: reasoning.url, model: 'reasoner-test', timeoutMs: 1_000 }), queue: { maxWaitMs: 20, retries: 0 }, onError: () => undefined });
  const gateway: DecisionGateway = { decide: (e, i) => answerer.decide(e, i, { wait: true }), decisionModels: () => answerer.decisionModels() };
  const sop = await startSop({
    db,
    jobs,
    checkSession: ({ lock, releaseId, session }) => checkSession(lock, session, { decider: noModelDecider(), releaseId }),
    gateway: async () => (modelOn ? gateway : null),
  });
  app = await createApi({ queries: createReviewQueries(db), resolveKey: (k) => new ProjectsRepo(db).resolveApiKey(k), sop: sop.queries, review: sop.review, port: 0, host: '127.0.0.1' });
  url = apiUrl(app);
}, 60_000);
afterAll(async () => {
  await app.close();
  answerer.close();
  await reasoning.close();
  await jobs.close();
  await db.close();
});

async function sopops(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { out: (l) => out.push(l), err: (l) => err.push(l), env: { NEATROOTS_API_KEY: KEY }, cwd: process.cwd() });
  return { code, out, err };
}

const rulePattern = (id: string, rule: string) =>
  repo.insertRulePattern(db, { id, workspace: 'luigis', procedure_id: 'take-order', procedure_name: 'Take an order', lineage_id: rule, name: 'Volunteer a price', rule_id: rule, rule_kind: 'never', rule_index: 1, rule_text: `Volunteer a price (${rule}).`, rule_ran_at: '2026-11-01T00:00:00.000Z' });
const named = async (id: string) => (await repo.pattern(db, 'luigis', id))?.named_by;

describe('sopops patterns rename', () => {
  it('without a model says the patterns keep their names, and exits 1', async () => {
    modelOn = false;
    await rulePattern('pat_1', 'r1');
    const r = await sopops(['patterns', 'rename', '--workspace', 'luigis', '--url', url]);
    expect(r).toMatchObject({ code: 1, out: ['renamed 0 patterns in luigis'] });
    expect(r.err).toEqual(['sopops patterns rename: 1 pattern kept its name: no reasoning model is configured: the patterns keep the names taken from their rules']);
    expect(await named('pat_1')).toBe('rule_text');
  });

  it('with the reasoning model names what is still named from its rule, then nothing is left; --all asks again', async () => {
    modelOn = true;
    await rulePattern('pat_2', 'r2');
    expect(await sopops(['patterns', 'rename', '--workspace', 'luigis', '--url', url])).toEqual({ code: 0, out: ['renamed 2 patterns in luigis'], err: [] });
    expect((await repo.pattern(db, 'luigis', 'pat_2'))?.name).toBe('Quoted prices unprompted');
    expect(await named('pat_1')).toBe('model');
    expect((await sopops(['patterns', 'rename', '--workspace', 'luigis', '--url', url])).out[0]).toMatch(/^nothing to rename in luigis/);
    expect(await sopops(['patterns', 'rename', '--all', '--workspace', 'luigis', '--url', url])).toMatchObject({ code: 0, out: ['renamed 2 patterns in luigis'] });
  });

  it('refuses a missing or unknown patterns command', async () => {
    expect((await sopops(['patterns', '--workspace', 'luigis', '--url', url])).code).toBe(2);
    const r = await sopops(['patterns', 'frob', '--workspace', 'luigis', '--url', url]);
    expect(r.code).toBe(2);
    expect(r.err.join('\n')).toContain('unknown patterns command: frob');
  });
});
