import * as path from 'node:path';
import type { Db } from '@neatroots/ports';
import { InlineJobs, migrate, openAiChatModel, openPglite } from '@neatroots/platform';
import { QuestionAnswerer } from '@neatroots/questions';
import { compileFiles, readFolder, type Rule } from '@neatroots/sop';
import { answererGateway as gatewayOf } from '../sop-fixtures.test';
import { SopSessionsRepo, sopFindingId, type ReviewSopQueries, type SuggestionView } from '@neatroots/store';
import { startFakeOpenAI, type FakeCall, type FakeOpenAI, type FakeReply } from '../../../../libs/platform/src/models/fake-openai.test';
import { RuleLineage } from '../lineage/service';
import { ReviewSop } from '../review/service';
import { SopWorkspaces } from '../sop/workspaces';
import { suggestionEditsOf } from './lineage-hooks';

/**
 * A suggestion's `suggestion` link at the publish that releases its edit, end to end: SuggestEdit
 * asked of the reasoning model (the local scripted OpenAI-compatible server), applied as a draft,
 * published with rule lineage at publish fed by suggestionEditsOf, then the findings of the new
 * release assigned to rule patterns.
 */
const WS = 'luigis';
const FIXTURE = path.resolve(__dirname, '../../../../libs/sop/fixtures/luigis');
const files = [...readFolder(FIXTURE)].map(([p, text]) => ({ path: p, text }));
const takeOrder = compileFiles(readFolder(FIXTURE)).procedures.find((p) => p.procedure_id === 'take-order')!;
const NEVER = takeOrder.rules.find((r) => r.kind === 'never')!;

let db: Db;
let reasoning: FakeOpenAI;
let answerer: QuestionAnswerer;
let jobs: InlineJobs;
let review: ReviewSop;
let q: ReviewSopQueries;
let workspaces: SopWorkspaces;
let lineage: RuleLineage;
/** What the model answers to the SuggestEdit call. */
let edit: unknown;

function model(call: FakeCall): FakeReply {
  const system = call.body.messages.find((m) => m.role === 'system')?.content ?? '';
  const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
  const ids = [...user.matchAll(/^(q\d+) \(about subject/gm)].map((m) => m[1]);
  if (system.startsWith('You edit standard operating procedures')) return { json: { answers: ids.map((id) => ({ id, ...(edit as object) })) } };
  return { json: { answers: ids.map((id) => ({ id, name: 'Quoted prices' })) } };
}

beforeAll(async () => {
  db = await openPglite();
  await migrate(db);
  reasoning = await startFakeOpenAI(model);
}, 60_000);
afterAll(async () => {
  await reasoning.close();
  await db.close();
});
beforeEach(async () => {
  answerer = new QuestionAnswerer({
    reasoning: openAiChatModel({ role: 'reasoning', baseURL: reasoning.url, model: 'reasoner-test', timeoutMs: 2_000 }),
    queue: { maxWaitMs: 5, retries: 0 },
    onError: () => undefined,
  });
  jobs = new InlineJobs();
  lineage = new RuleLineage(db, undefined, { suggestionEdits: suggestionEditsOf });
  workspaces = new SopWorkspaces(db, undefined, (tx, ws, r, prev) => lineage.atPublish(tx, ws, r, prev));
  review = new ReviewSop({ db, jobs, gateway: async () => gatewayOf(answerer), workspaces, lineage: lineage.queries });
  await review.start();
  q = review.queries;
  await workspaces.push(WS, files);
  await workspaces.publish(WS);
});
afterEach(async () => {
  await jobs.close();
  answerer.close();
});

let n = 0;
/** A session checked on the live release with `rule` violated. */
async function violated(rule: Pick<Rule, 'rule_id' | 'kind' | 'index' | 'text'>): Promise<void> {
  const sessions = new SopSessionsRepo(db);
  const live = (await workspaces.releaseRecord(WS, 'live'))!;
  const quote = 'The margherita is 9 euros.';
  const r = await sessions.receive(WS, { external_id: `call-${++n}`, agent: 'phone-agent', release_id: null, started_at: new Date().toISOString(), transcript_ref: null, turns: [{ role: 'agent', text: quote }], tool_calls: [] });
  const finding = { id: sopFindingId(r.id, 'take-order', rule.rule_id), procedure_id: 'take-order', rule_id: rule.rule_id, kind: rule.kind, index: rule.index, text: rule.text, status: 'violated' as const, evidence: [{ turn: 0, quote, source: 'transcript' }], reason: 'Broke the rule.' };
  await sessions.saveOutcome(r.id, r.content_hash, { release_id: live.id, result: 'deviated', checked_result: 'deviated', checks: [{ procedure_id: 'take-order', result: 'deviated', checked_result: 'deviated', body: {} }], findings: [finding] });
  await review.assigner.assign(WS);
}

async function settled(id: string): Promise<SuggestionView> {
  for (let i = 0; i < 400; i++) {
    const s = await q.getSuggestion(WS, id);
    if (s.status !== 'generating') return s;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`suggestion ${id} still generating`);
}

describe("a suggestion's link at the publish", () => {
  it('follows the rewording when the edit also inserts a rule of the same kind before it: the pattern and its verdict go with the rewording', async () => {
    for (let i = 0; i < 3; i++) await violated(NEVER);
    const pattern = (await q.patterns(WS, {})).items[0];
    await q.giveVerdict(WS, pattern.id, { verdict: 'real', note: 'Prices only when asked.', reviewer: 'ana' });
    // The edit puts a new never rule where the old one was and rewords the old one below it.
    const INSERTED = 'Promise a delivery time.';
    const REWORDED = 'Volunteer a price or a description of a dish unless the caller asks.';
    edit = { rationale: 'Prices only when asked; no delivery promises.', edits: [{ find: `- ${NEVER.text}`, replace: `- ${INSERTED}\n- ${REWORDED}` }] };
    const made = await settled((await q.suggest(WS, pattern.id, { reviewer: 'ana' })).id);
    expect(made.status).toBe('proposed');
    await q.applySuggestion(WS, made.id, {});

    const rel = await workspaces.publish(WS);
    const nevers = rel.procedures.find((p) => p.procedure_id === 'take-order')!.rules.filter((r) => r.kind === 'never');
    expect(nevers.map((r) => [r.index, r.text])).toEqual([
      [1, INSERTED],
      [2, REWORDED],
    ]);
    const [inserted, reworded] = nevers;
    expect(await q.ruleLineage(WS, reworded.rule_id, { procedure: 'take-order' })).toMatchObject({ how: 'suggestion', previous_rule_id: NEVER.rule_id, lineage_id: NEVER.rule_id });
    expect(await q.ruleLineage(WS, inserted.rule_id, { procedure: 'take-order' })).toMatchObject({ how: 'new', previous_rule_id: null, lineage_id: inserted.rule_id });

    // On the new release, the rewording's findings join the pattern with the verdict; the inserted rule's get one of their own.
    await violated(reworded);
    await violated(inserted);
    const after = (await q.patterns(WS, {})).items;
    expect(after.map((p) => [p.rule.text, p.id === pattern.id])).toEqual(
      expect.arrayContaining([
        [REWORDED, true],
        [INSERTED, false],
      ]),
    );
    expect((await q.pattern(WS, pattern.id, {})).wordings.map((w) => w.text)).toEqual([REWORDED, NEVER.text]);
  });
});
