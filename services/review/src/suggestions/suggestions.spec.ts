import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Db } from '@neatroots/ports';
import { GitHubCodeHost, InlineJobs, migrate, openAiChatModel, openPglite, until, type GitHubOptions } from '@neatroots/platform';
import { QuestionAnswerer } from '@neatroots/questions';
import { compileFiles, readFolder } from '@neatroots/sop';
import { answererGateway as gatewayOf } from '../sop-fixtures.test';
import { SopSessionsRepo, sopFindingId, SuggestionsRepo, type ReviewSopQueries, type SuggestionView } from '@neatroots/store';
import { startFakeOpenAI, type FakeCall, type FakeOpenAI, type FakeReply } from '../../../../libs/platform/src/models/fake-openai.test';
import { startFakeGitHub, type FakeGitHub } from '../../../../libs/platform/src/github/fake-github.test';
import { GitHubConnections } from '../github/connections';
import { RuleLineage } from '../lineage/service';
import { ReviewSop } from '../review/service';
import { SopWorkspaces } from '../sop/workspaces';
import { startSop } from '../sop/service';
import { SuggestionGenerator } from './generate';
import { suggestionEditsOf } from './lineage-hooks';
import { followPullRequestsNow } from './prs';

/**
 * Suggestions end to end in the review service: SuggestEdit asked of the reasoning model through
 * the question service (its QuestionAnswerer in-process, the real `openai` client over HTTP to
 * the local scripted OpenAI-compatible server), applied as a draft or as a pull request through
 * the real GitHub adapter against the local fake GitHub, freshness against head, and the fix
 * tracking review states that follow.
 */
const WS = 'luigis';
const FIXTURE = path.resolve(__dirname, '../../../../libs/sop/fixtures/luigis');
const files = [...readFolder(FIXTURE)].map(([p, text]) => ({ path: p, text }));
const takeOrder = compileFiles(readFolder(FIXTURE)).procedures.find((p) => p.procedure_id === 'take-order')!;
const NEVER = takeOrder.rules.find((r) => r.kind === 'never')!;
const FILE = files.find((f) => f.path === 'procedures/take-order.md')!.text;

const ALLERGY = '- The caller mentions a food allergy. -> Note the allergy on the order.';
const ADD_SIGN = { rationale: 'Callers who ask for prices get them from the menu; the agent is told what to say.', edits: [{ find: ALLERGY, replace: `${ALLERGY}\n- The caller asks what a dish costs. -> Say the menu has the prices and go on with the order.` }] };
const BREAKS = { rationale: 'Renamed the section.', edits: [{ find: '## Never', replace: '## Nevers' }] };
const STEP1 = '1. Ask what the caller would like to order.';
const REWORD_STEP1 = { rationale: 'Step 1 says to wait.', edits: [{ find: STEP1, replace: '1. Ask what the caller would like to order, then wait for the answer.' }] };

let db: Db;
let reasoning: FakeOpenAI;
let answerer: QuestionAnswerer;
let jobs: InlineJobs;
let review: ReviewSop;
let q: ReviewSopQueries;
let workspaces: SopWorkspaces;
let gh: FakeGitHub;
let github: GitHubConnections;
/** More options of the GitHub adapter, for one test. */
let hostOptions: Partial<GitHubOptions>;
/** What the model answers to each SuggestEdit call, in order (then ADD_SIGN). */
let script: unknown[];
const suggestCalls: FakeCall[] = [];

function model(call: FakeCall): FakeReply {
  const system = call.body.messages.find((m) => m.role === 'system')?.content ?? '';
  const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
  const ids = [...user.matchAll(/^(q\d+) \(about subject/gm)].map((m) => m[1]);
  if (system.startsWith('You edit standard operating procedures')) {
    suggestCalls.push(call);
    const next = script.length ? script.shift() : ADD_SIGN;
    return { json: { answers: ids.map((id) => ({ id, ...(next as object) })) } };
  }
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
  await db.exec('TRUNCATE sop_suggestions, sop_repo_connections, sop_finding_days, sop_overrides, sop_verdicts, sop_findings, sop_patterns, sop_checks, sop_sessions, sop_release_files, sop_releases, sop_head_files CASCADE');
  script = [];
  suggestCalls.length = 0;
  answerer = new QuestionAnswerer({
    reasoning: openAiChatModel({ role: 'reasoning', baseURL: reasoning.url, model: 'reasoner-test', timeoutMs: 2_000 }),
    queue: { maxWaitMs: 5, retries: 0 },
    onError: () => undefined,
  });
  gh = await startFakeGitHub();
  gh.addRepo('luigis', 'ops', 'main', { 'sop/take-order.md': FILE });
  hostOptions = {};
  github = new GitHubConnections(db, randomBytes(32), (c) => new GitHubCodeHost({ token: c.token, baseUrl: c.api_url, backoffMs: 10, ...hostOptions }));
  jobs = new InlineJobs();
  workspaces = new SopWorkspaces(db);
  review = new ReviewSop({ db, jobs, gateway: async () => gatewayOf(answerer), workspaces, github, prStatusCron: null });
  await review.start();
  q = review.queries;
  await workspaces.push(WS, files);
  await workspaces.publish(WS);
});
afterEach(async () => {
  await jobs.close();
  answerer.close();
  await gh.stop();
});

const sessions = () => new SopSessionsRepo(db);
let n = 0;
/** A session checked on the live release: the never rule violated (a finding) or not. */
async function checked(violated: boolean): Promise<void> {
  const live = (await workspaces.releaseRecord(WS, 'live'))!;
  const quote = 'The margherita is 9 euros.';
  const r = await sessions().receive(WS, { external_id: `call-${++n}`, agent: 'phone-agent', release_id: null, started_at: new Date().toISOString(), transcript_ref: null, turns: [{ role: 'agent', text: violated ? quote : 'Hello' }], tool_calls: [] });
  const result = violated ? ('deviated' as const) : ('followed' as const);
  const findings = violated
    ? [{ id: sopFindingId(r.id, 'take-order', NEVER.rule_id), procedure_id: 'take-order', rule_id: NEVER.rule_id, kind: 'never' as const, index: 1, text: NEVER.text, status: 'violated' as const, evidence: [{ turn: 0, quote, source: 'transcript' }], reason: 'Quoted a price.' }]
    : [];
  await sessions().saveOutcome(r.id, r.content_hash, { release_id: live.id, result, checked_result: result, checks: [{ procedure_id: 'take-order', result, checked_result: result, body: {} }], findings });
  await review.assigner.assign(WS);
}

async function patternWithVerdict(verdict: 'real' | 'acceptable' | 'sop_wrong' | 'checker_wrong', suggest = false) {
  for (let i = 0; i < 3; i++) await checked(true);
  const pattern = (await q.patterns(WS, {})).items[0];
  const given = await q.giveVerdict(WS, pattern.id, { verdict, note: 'Prices come from the menu.', reviewer: 'ana', suggest });
  return { pattern, given };
}

async function settled(id: string): Promise<SuggestionView> {
  for (let i = 0; i < 200; i++) {
    const s = await q.getSuggestion(WS, id);
    if (s.status !== 'generating') return s;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`suggestion ${id} still generating`);
}

async function proposed(verdict: 'real' | 'sop_wrong' = 'real'): Promise<{ patternId: string; s: SuggestionView }> {
  const { pattern } = await patternWithVerdict(verdict);
  const queued = await q.suggest(WS, pattern.id, { reviewer: 'ana' });
  expect(queued.status).toBe('generating');
  return { patternId: pattern.id, s: await settled(queued.id) };
}

describe('SuggestEdit', () => {
  it('proposes an edit that compiles, from the file at head, the rule, the verdict and note, and the findings; plan.agents has each changed agent', async () => {
    const { s } = await proposed();
    expect(s).toMatchObject({ status: 'proposed', prompt_version: 'suggest-1', model: 'reasoner-test', verdict: 'real', verdict_note: 'Prices come from the menu.', rule_id: NEVER.rule_id, error: null, freshness: 'current' });
    expect(s.old_text).toBe(FILE);
    expect(s.new_text).toContain('- The caller asks what a dish costs. -> Say the menu has the prices');
    expect(s.rationale).toBe(ADD_SIGN.rationale);
    // take-order is in the ordering group of phone-agent only
    expect(s.plan!.agents).toEqual([{ agent: 'phone-agent', added: 1, removed: 0, diff: expect.stringContaining('+- The caller asks what a dish costs.') }]);
    expect(s.since_written).toMatchObject({ state: 'current', changes: '', merged_text: null, conflicts: [] });
    const user = suggestCalls[0].body.messages.find((m) => m.role === 'user')!.content;
    expect(user).toContain(STEP1);
    expect(user).toContain(`Never rule 1: "${NEVER.text}"`);
    expect(user).toContain('The verdict: real, with the reviewer\'s note: "Prices come from the menu."');
    expect(user).toContain('The margherita is 9 euros.');
    expect((await q.listSuggestions(WS, { status: ['proposed'] })).items.map((x) => x.id)).toEqual([s.id]);
  });

  it('sends a proposal that does not compile back once with sopc\'s issues; a second one that fails too is failed', async () => {
    script = [BREAKS, ADD_SIGN];
    const { s } = await proposed();
    expect(s.status).toBe('proposed');
    expect(suggestCalls).toHaveLength(2);
    const retry = suggestCalls[1].body.messages.find((m) => m.role === 'user')!.content;
    expect(retry).toMatch(/Your previous edit could not be used: sopc: procedures\/take-order\.md:\d+: unknown section "## Nevers"/);

    script = [BREAKS, BREAKS];
    const again = await settled((await q.suggest(WS, s.pattern_id, {})).id);
    expect(again.status).toBe('failed');
    expect(again.error).toMatch(/sent back once and still could not be used: sopc: .*unknown section/);
    expect(again.new_text).toBeNull();
  });

  it('an edit that adds several lines comes back whole: the answer is not cut at the default budget', async () => {
    const signs = [
      'The caller asks what a dish costs. -> Say the menu has the prices and go on with the order.',
      'The caller asks what is in a dish. -> Say the menu describes each dish and offer to read its name again.',
      'The caller asks for a recommendation. -> Say every dish is on the menu and ask what they would like.',
      'The caller asks whether a dish is spicy. -> Say the menu marks the spicy dishes and go on with the order.',
      'The caller asks about the daily special. -> Say the specials are on the menu board and ask what they would like.',
      'The caller asks how big a portion is. -> Say the menu gives the sizes and go on with the order.',
      'The caller asks for a discount. -> Say the prices are the ones on the menu and go on with the order.',
      'The caller asks whether the price includes delivery. -> Say the menu lists the delivery charge.',
      'The caller asks which dish is the most popular. -> Say every dish on the menu is a favourite and ask what they would like.',
      'The caller asks whether a dish is vegetarian. -> Say the menu marks the vegetarian dishes and go on with the order.',
      'The caller asks how a dish is cooked. -> Say the menu describes each dish and go on with the order.',
      'The caller asks whether the prices changed. -> Say the menu has the current prices and go on with the order.',
      'The caller asks what comes with a dish. -> Say the menu lists the sides and go on with the order.',
      'The caller asks for the cheapest dish. -> Say the menu has the prices and ask what they would like.',
    ].map((l) => `- ${l}`);
    script = [{ rationale: 'Callers who ask about prices or dishes are sent to the menu; each way they ask has its own warning sign.', edits: [{ find: ALLERGY, replace: [ALLERGY, ...signs].join('\n') }] }];
    const { s } = await proposed();
    expect(s).toMatchObject({ status: 'proposed', error: null });
    for (const l of signs) expect(s.new_text).toContain(l);
    expect(suggestCalls[0].body.max_tokens).toBe(2_200);
  });

  it('an edit whose lines are not in the file goes back to the model too', async () => {
    script = [{ rationale: 'x', edits: [{ find: '1. Greet the caller warmly.', replace: '1. Greet.' }] }, REWORD_STEP1];
    const { s } = await proposed();
    expect(s.status).toBe('proposed');
    expect(suggestCalls[1].body.messages.find((m) => m.role === 'user')!.content).toContain('are not in the file');
  });

  it('409 unless the verdict is real, acceptable or sop_wrong; the verdict with suggest: true queues one', async () => {
    const { pattern } = await patternWithVerdict('checker_wrong');
    await expect(q.suggest(WS, pattern.id, {})).rejects.toMatchObject({ status: 409, code: 'no_suggestion_for_verdict' });
    await expect(q.suggest(WS, 'pat_nope', {})).rejects.toMatchObject({ status: 404 });
    const given = await q.giveVerdict(WS, pattern.id, { verdict: 'acceptable', suggest: true });
    expect(given.suggestion).toMatchObject({ status: 'generating', verdict: 'acceptable', pattern_id: pattern.id });
    expect((await settled(given.suggestion!.id)).status).toBe('proposed');
  });
  it('is made for the rule as it reads at head: a rewording at head not yet published, then the published one its lineage links', async () => {
    const { pattern } = await patternWithVerdict('real');
    // The never rule reworded and moved below a new one: its kind and position now hold another rule.
    const REWORDED = '- Volunteer the price or a description of any dish on the menu.';
    const edited = FILE.replace(`- ${NEVER.text}`, `- Promise a delivery time.\n${REWORDED}`);
    await workspaces.saveFile(WS, 'procedures/take-order.md', edited);
    const atHead = compileFiles(new Map([...files.map((f): [string, string] => [f.path, f.text]), ['procedures/take-order.md', edited]])).procedures.find((p) => p.procedure_id === 'take-order')!;
    const reworded = atHead.rules.find((r) => r.text === REWORDED.slice(2))!;
    const asked = async () => {
      const made = await settled((await q.suggest(WS, pattern.id, {})).id);
      expect(made).toMatchObject({ status: 'proposed', rule_id: reworded.rule_id });
      return suggestCalls[suggestCalls.length - 1].body.messages.find((m) => m.role === 'user')!.content;
    };
    // Not published: matched as the next publish would (moved and reworded).
    expect(await asked()).toContain(`Never rule 2: "${reworded.text}"`);

    // Published, with lineage at publish: the new wording is in the pattern's lineage.
    const lineage = new RuleLineage(db);
    const publishing = new SopWorkspaces(db, undefined, (tx, ws, rel, prev) => lineage.atPublish(tx, ws, rel, prev));
    await publishing.publish(WS);
    expect(await lineage.queries.ruleLineage(WS, reworded.rule_id, {})).toMatchObject({ lineage_id: NEVER.rule_id, how: 'matched' });
    expect(await asked()).toContain(`Never rule 2: "${reworded.text}"`);
  });
  it('an edit of a wording only head has is still a suggestion link at the publish: the live wording it replaced is in the pattern\'s lineage', async () => {
    const { pattern } = await patternWithVerdict('real');
    const BY_HAND = '- Volunteer the price or a description of any dish on the menu.';
    const SUGGESTED = '- Quote what food costs unless the caller asks.';
    await workspaces.saveFile(WS, 'procedures/take-order.md', FILE.replace(`- ${NEVER.text}`, BY_HAND));
    script = [{ rationale: 'Say when prices may be given.', edits: [{ find: BY_HAND, replace: SUGGESTED }] }];
    const made = await settled((await q.suggest(WS, pattern.id, {})).id);
    await q.applySuggestion(WS, made.id, {});

    const lineage = new RuleLineage(db, undefined, { suggestionEdits: suggestionEditsOf });
    const rel = await new SopWorkspaces(db, undefined, (tx, ws, r, prev) => lineage.atPublish(tx, ws, r, prev)).publish(WS);
    const now = rel.procedures.find((p) => p.procedure_id === 'take-order')!.rules.find((r) => r.kind === 'never')!;
    expect(now.text).toBe(SUGGESTED.slice(2));
    // Shares no word with the live wording: only the suggestion links them.
    expect(await lineage.queries.ruleLineage(WS, now.rule_id, {})).toMatchObject({ how: 'suggestion', previous_rule_id: NEVER.rule_id, lineage_id: NEVER.rule_id });
  });
});

describe('the sopops_suggest job', () => {
  it('an error on the last try fails the suggestion, saying why, rather than leave it generating', async () => {
    const { pattern } = await patternWithVerdict('real');
    const repo = new SuggestionsRepo();
    const s = await repo.insert(db, { workspace: WS, pattern_id: pattern.id, procedure_id: 'take-order', path: 'procedures/take-order.md', rule_id: NEVER.rule_id, rule_text: NEVER.text, verdict: 'real', verdict_note: null, verdict_at: new Date().toISOString(), prompt_version: 'suggest-1', base_version: 'v', old_text: FILE });
    const away = new SuggestionGenerator(db, async () => {
      throw new Error('the question service is not reachable');
    });
    await expect(away.run({ workspace: WS, id: s.id }, { id: 'j', attempt: 1 })).rejects.toThrow(/not reachable/);
    expect((await repo.get(db, WS, s.id))!.status).toBe('generating');
    await expect(away.run({ workspace: WS, id: s.id }, { id: 'j', attempt: 3 })).rejects.toThrow(/not reachable/);
    expect(await repo.get(db, WS, s.id)).toMatchObject({ status: 'failed', error: 'it could not be generated: the question service is not reachable' });
  });

  it('with no reasoning model or local LLM fails the suggestion, naming the variables and a section of the docs that sets them', async () => {
    const { pattern } = await patternWithVerdict('real');
    const repo = new SuggestionsRepo();
    const s = await repo.insert(db, { workspace: WS, pattern_id: pattern.id, procedure_id: 'take-order', path: 'procedures/take-order.md', rule_id: NEVER.rule_id, rule_text: NEVER.text, verdict: 'real', verdict_note: null, verdict_at: new Date().toISOString(), prompt_version: 'suggest-1', base_version: 'v', old_text: FILE });
    await new SuggestionGenerator(db, async () => gatewayOf(new QuestionAnswerer({ onError: () => undefined }))).run({ workspace: WS, id: s.id }, { id: 'j', attempt: 1 });
    const { status, error } = (await repo.get(db, WS, s.id))!;
    expect(status).toBe('failed');
    expect(error).toMatch(/^no reasoning model is configured: .*NEATROOTS_REASONING_MODEL_URL.*NEATROOTS_LLM_URL/);
    const [, doc, anchor] = /see (docs\/[\w-]+\.md)#([\w-]+)/.exec(error!)!;
    const text = fs.readFileSync(path.join(__dirname, '../../../..', doc), 'utf8');
    const section = text.split(/^## /m).find((part) => part.split('\n')[0].trim().toLowerCase().replace(/\s+/g, '-') === anchor);
    expect(section).toBeDefined();
    expect(section).toContain('NEATROOTS_REASONING_MODEL_URL');
    expect(section).toContain('NEATROOTS_LLM_URL');
  });
});

describe('freshness and apply without a repo connection', () => {
  it('current: apply saves new_text at head as a draft (applied), shown in unpublished changes', async () => {
    const { s } = await proposed();
    const applied = await q.applySuggestion(WS, s.id, { reviewer: 'bo' });
    expect(applied).toMatchObject({ status: 'applied', reviewer: 'bo', merged_into_version: null, applied_at: expect.any(String), freshness: null, since_written: null });
    const head = await workspaces.head(WS);
    expect(head.changed).toEqual([{ path: 'procedures/take-order.md', change: 'changed' }]);
    expect(head.diff).toContain('+- The caller asks what a dish costs.');
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'not_proposed' });
    // the draft goes out with the next publish: released in it, nothing left unpublished
    const rel = await workspaces.publish(WS);
    expect((await workspaces.head(WS)).changed).toEqual([]);
    expect(rel.procedures.find((p) => p.procedure_id === 'take-order')!.rules.map((r) => r.text)).toContain('The caller asks what a dish costs.');
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ released_in: { id: rel.id, number: 2 }, released_at: expect.any(String) });
  });

  it('merges: the file changed elsewhere; apply writes the merged file and records merged_into_version', async () => {
    script = [REWORD_STEP1];
    const { patternId, s } = await proposed();
    const edited = FILE.replace('4. Read the order back to the caller. [required]', '4. Read the order back to the caller, item by item. [required]');
    const saved = await workspaces.saveFile(WS, 'procedures/take-order.md', edited);
    const got = await q.getSuggestion(WS, s.id);
    expect(got.freshness).toBe('merges');
    // computed when read wherever it is shown: the list, the review queue and the pattern page
    expect((await q.listSuggestions(WS, {})).items.map((x) => [x.id, x.freshness])).toEqual([[s.id, 'merges']]);
    expect((await q.reviewQueue(WS, { state: ['open'] })).items.map((i) => [i.pattern_id, i.suggestion?.freshness])).toEqual([[patternId, 'merges']]);
    expect((await q.pattern(WS, patternId, {})).suggestions.map((x) => x.freshness)).toEqual(['merges']);
    expect(got.since_written).toMatchObject({ state: 'merges', head_version: saved.version, conflicts: [], issues: [] });
    expect(got.since_written!.changes).toContain('+4. Read the order back to the caller, item by item. [required]');
    expect(got.since_written!.merged_text).toContain('then wait for the answer.');
    expect(got.since_written!.merged_text).toContain('item by item');
    const applied = await q.applySuggestion(WS, s.id, {});
    expect(applied).toMatchObject({ status: 'applied', merged_into_version: saved.version });
    const head = (await db.query<{ text: string }>("SELECT text FROM sop_head_files WHERE workspace = $1 AND path = 'procedures/take-order.md'", [WS])).rows[0].text;
    expect(head).toBe(got.since_written!.merged_text);
  });

  it('two suggestions on one file applied at once: both edits are at head, the later one merged into the earlier', async () => {
    script = [ADD_SIGN, REWORD_STEP1];
    const { s: a } = await proposed();
    const b = await settled((await q.suggest(WS, a.pattern_id, {})).id);
    expect([a.freshness, b.freshness]).toEqual(['current', 'current']);
    const done = await Promise.all([q.applySuggestion(WS, a.id, {}), q.applySuggestion(WS, b.id, {})]);
    expect(done.map((x) => x.status)).toEqual(['applied', 'applied']);
    const head = (await workspaces.file(WS, 'procedures/take-order.md')).text;
    expect(head).toContain('- The caller asks what a dish costs.');
    expect(head).toContain('then wait for the answer.');
    expect(done.filter((x) => x.merged_into_version !== null)).toHaveLength(1);
  });

  it('conflict: the same line changed; apply is refused saying why, and rewrite makes suggest-2 with the changes since', async () => {
    script = [REWORD_STEP1, { rationale: 'Kept the new wording.', edits: [{ find: '1. Ask what the caller wants.', replace: '1. Ask what the caller wants, and wait.' }] }];
    const { s } = await proposed();
    await workspaces.saveFile(WS, 'procedures/take-order.md', FILE.replace(STEP1, '1. Ask what the caller wants.'));
    expect((await q.pattern(WS, s.pattern_id, {})).suggestions.map((x) => x.freshness)).toEqual(['conflict']);
    const got = await q.getSuggestion(WS, s.id);
    expect(got.since_written).toMatchObject({ state: 'conflict', conflicts: [{ line: 6, base: [STEP1], current: ['1. Ask what the caller wants.'], suggested: ['1. Ask what the caller would like to order, then wait for the answer.'] }] });
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'conflict', message: expect.stringMatching(/same lines .* changed since it was written .*rewrite it/) });

    const fresh = await q.rewriteSuggestion(WS, s.id, { reviewer: 'bo' });
    expect(fresh).toMatchObject({ status: 'generating', prompt_version: 'suggest-2', rewrite_of: s.id });
    expect(fresh.changes_since).toContain('+1. Ask what the caller wants.');
    const old = await q.getSuggestion(WS, s.id);
    expect(old).toMatchObject({ status: 'dismissed', note: 'Rewritten against the current text.', rewritten_as: fresh.id });
    const done = await settled(fresh.id);
    expect(done).toMatchObject({ status: 'proposed', freshness: 'current' });
    expect(done.old_text).toContain('1. Ask what the caller wants.');
    expect(suggestCalls[1].body.messages.find((m) => m.role === 'user')!.content).toContain('keep these edits and build on them');
    await expect(q.rewriteSuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409 });
  });

  it('rewrite after a newer verdict is refused (409 verdict_changed): it would count toward that verdict while answering the old one', async () => {
    const { patternId, s } = await proposed('sop_wrong');
    await q.giveVerdict(WS, patternId, { verdict: 'real', note: 'The agent was wrong after all.' });
    await expect(q.rewriteSuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'verdict_changed', message: expect.stringContaining('has a newer verdict (real') });
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ status: 'proposed' });
  });

  it('apply after a newer verdict is refused (409 verdict_changed), the same verdict again or another one: nothing written, the suggestion stays proposed', async () => {
    const { patternId, s } = await proposed('real');
    // The reviewer gives the verdict again with more to say: fix tracking counts only suggestions made since it.
    await q.giveVerdict(WS, patternId, { verdict: 'real', note: 'Still real; menus change weekly.', reviewer: 'bo' });
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'verdict_changed', message: expect.stringContaining('has a newer verdict (real') });
    // Now the mistake is acceptable: the edit would go against the reviewer's latest judgement.
    await q.giveVerdict(WS, patternId, { verdict: 'acceptable', reviewer: 'bo' });
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'verdict_changed', message: expect.stringContaining('has a newer verdict (acceptable') });
    expect((await workspaces.head(WS)).changed).toEqual([]);
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ status: 'proposed', applied_at: null });
    // A suggestion for the latest verdict applies.
    const fresh = await settled((await q.suggest(WS, patternId, {})).id);
    expect(await q.applySuggestion(WS, fresh.id, {})).toMatchObject({ status: 'applied' });
  });

  it('conflict when the merged file would not compile', async () => {
    script = [{ rationale: 'Adds a never rule.', edits: [{ find: `- ${NEVER.text}`, replace: `- ${NEVER.text}\n- Promise a delivery time.` }] }];
    const { s } = await proposed();
    // the same rule added by hand elsewhere in the section: merged, it is a duplicate
    await workspaces.saveFile(WS, 'procedures/take-order.md', FILE.replace('## Never\n', '## Never\n- Promise a delivery time.\n'));
    const got = await q.getSuggestion(WS, s.id);
    expect(got.since_written).toMatchObject({ state: 'conflict', issues: [expect.objectContaining({ message: expect.stringContaining('duplicate') })] });
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, message: expect.stringContaining('would not compile') });
  });

  it('current but no longer compiling with head (sopc stricter since it was written): freshness conflict with sopc\'s issues, apply 409 conflict, not 422', async () => {
    const { s } = await proposed();
    // What an older sopc accepted and this one does not.
    await new SuggestionsRepo().set(db, s.id, { new_text: s.new_text!.replace('## Never', '## Nevers') });
    const got = await q.getSuggestion(WS, s.id);
    expect(got).toMatchObject({ freshness: 'conflict', since_written: { state: 'conflict', changes: '', issues: [expect.objectContaining({ message: expect.stringContaining('Nevers') })] } });
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'conflict', message: expect.stringContaining('would not compile') });
    expect((await workspaces.file(WS, 'procedures/take-order.md')).text).toBe(FILE);
  });

  it('dismiss: {note, reviewer}; only before it is applied', async () => {
    const { s } = await proposed();
    expect(await q.dismissSuggestion(WS, s.id, { note: 'Not now.', reviewer: 'ana' })).toMatchObject({ status: 'dismissed', note: 'Not now.', reviewer: 'ana', dismissed_at: expect.any(String) });
    await expect(q.dismissSuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409 });
    await expect(q.dismissSuggestion(WS, s.id, { nope: 1 })).rejects.toMatchObject({ status: 400, message: expect.stringContaining('unknown field nope') });
  });
});

describe('pull requests (the real adapter against the local GitHub)', () => {
  const connect = (token = gh.token) => github.put(WS, { repository: 'luigis/ops', branch: 'main', path: 'sop', api_url: gh.url, token });

  it('apply opens a pull request with the file; merged on GitHub makes it merged (the job, and a read once a minute)', async () => {
    await connect();
    const { s } = await proposed();
    const applied = await q.applySuggestion(WS, s.id, {});
    expect(applied).toMatchObject({ status: 'pr_open', pr_url: expect.stringMatching(/\/luigis\/ops\/pull\/1$/), pr_opened_at: expect.any(String) });
    const branch = (await review.suggestions.suggestions.repo.get(db, WS, s.id))!.pr_branch!;
    expect(gh.fileAt('luigis', 'ops', branch, 'sop/take-order.md')).toBe(s.new_text);
    // head is untouched: the edit reaches head by a pull of the merge, then a push
    expect((await workspaces.head(WS)).changed).toEqual([]);

    gh.merge('luigis', 'ops', 1);
    // read within the minute: not looked at again
    expect((await q.getSuggestion(WS, s.id)).status).toBe('pr_open');
    await db.query("UPDATE sop_suggestions SET pr_checked_at = now() - interval '2 minutes' WHERE id = $1", [s.id]);
    const merged = await q.getSuggestion(WS, s.id);
    expect(merged).toMatchObject({ status: 'merged', merged_at: expect.any(String), merge_commit_sha: expect.stringMatching(/^[0-9a-f]{40}$/) });
    expect((await q.listSuggestions(WS, {})).items[0].merge_commit_sha).toBe(merged.merge_commit_sha);
  });

  it('the pull request carries the suggestion\'s edit onto the file as GitHub has it: an edit made there since is kept, the workspace\'s own unpushed edit is not brought in', async () => {
    await connect();
    script = [REWORD_STEP1];
    const { s } = await proposed();
    const line4 = '4. Read the order back to the caller. [required]';
    expect(FILE).toContain(line4);
    // Someone edits step 4 on GitHub; the workspace edits the allergy sign and has not pushed it.
    const onGitHub = FILE.replace(line4, '4. Read the order back to the caller, item by item. [required]');
    gh.commitFile('luigis', 'ops', 'main', 'sop/take-order.md', onGitHub);
    await workspaces.saveFile(WS, 'procedures/take-order.md', FILE.replace(ALLERGY, `${ALLERGY} Ask which one.`));
    expect((await q.getSuggestion(WS, s.id)).freshness).toBe('merges');
    const applied = await q.applySuggestion(WS, s.id, {});
    // Its edit was merged into GitHub's file, not into a version of head.
    expect(applied).toMatchObject({ status: 'pr_open', merged_into_version: null });
    const rec = (await review.suggestions.suggestions.repo.get(db, WS, s.id))!;
    const inPr = gh.fileAt('luigis', 'ops', rec.pr_branch!, 'sop/take-order.md')!;
    expect(inPr).toBe(onGitHub.replace(STEP1, '1. Ask what the caller would like to order, then wait for the answer.'));
    expect(inPr).not.toContain('Ask which one.');
    expect(rec.applied_text).toBe(inPr);
  });

  it('a file the repository does not have yet: the pull request adds head\'s file with the edit, and merged_into_version is the head version it was merged into', async () => {
    gh.addRepo('luigis', 'ops', 'main', { 'sop/README.md': 'Procedures.\n' });
    await connect();
    script = [REWORD_STEP1];
    const { s } = await proposed();
    const saved = await workspaces.saveFile(WS, 'procedures/take-order.md', FILE.replace(ALLERGY, `${ALLERGY} Ask which one.`));
    const applied = await q.applySuggestion(WS, s.id, {});
    expect(applied).toMatchObject({ status: 'pr_open', merged_into_version: saved.version });
    const inPr = gh.fileAt('luigis', 'ops', (await review.suggestions.suggestions.repo.get(db, WS, s.id))!.pr_branch!, 'sop/take-order.md')!;
    expect(inPr).toContain('Ask which one.');
    expect(inPr).toContain('then wait for the answer.');
  });

  it('the same lines edited on GitHub: apply answers 409 conflict naming the file and branch, opens nothing, and the suggestion stays proposed', async () => {
    await connect();
    script = [REWORD_STEP1];
    const { s } = await proposed();
    gh.commitFile('luigis', 'ops', 'main', 'sop/take-order.md', FILE.replace(STEP1, '1. Ask what the caller wants.'));
    const pulls = gh.requests.filter((r) => r.method === 'POST').length;
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({
      status: 409, code: 'conflict', message: expect.stringContaining('conflicts with sop/take-order.md on main of luigis/ops: the same lines'),
    });
    expect(gh.requests.filter((r) => r.method === 'POST').length).toBe(pulls);
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ status: 'proposed' });
  });

  it('two applies at once (a client retrying while GitHub is slow): one pull request, the other apply answers 409 not_proposed', async () => {
    await connect();
    const { s } = await proposed();
    gh.rateLimitOnce('secondary', 5); // the first apply waits 5 s on GitHub; the retry comes meanwhile
    const asked = gh.requests.length;
    const first = q.applySuggestion(WS, s.id, {});
    first.catch(() => undefined); // settled below
    // It claimed the suggestion before calling GitHub: once GitHub is asked, the retry comes.
    await until('the first apply calling GitHub', () => gh.requests.length > asked, 30_000, 5);
    const [a, b] = await Promise.allSettled([first, q.applySuggestion(WS, s.id, {})]);
    expect(a).toMatchObject({ status: 'fulfilled', value: { status: 'pr_open', pr_url: expect.stringMatching(/\/pull\/1$/) } });
    expect(b).toMatchObject({ status: 'rejected', reason: { status: 409, code: 'not_proposed', message: expect.stringContaining('is being applied') } });
    expect(gh.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/pulls'))).toHaveLength(1);
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ status: 'pr_open', pr_url: expect.stringMatching(/\/pull\/1$/) });
  });

  it('a claim left by an apply that crashed holds for a while, then lapses', async () => {
    await connect();
    const { s } = await proposed();
    await db.query("UPDATE sop_suggestions SET apply_claim = 'crashed', apply_claimed_at = now() - interval '1 minute' WHERE id = $1", [s.id]);
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'not_proposed' });
    await expect(q.dismissSuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'not_dismissable' });
    await db.query("UPDATE sop_suggestions SET apply_claimed_at = now() - interval '16 minutes' WHERE id = $1", [s.id]);
    expect(await q.applySuggestion(WS, s.id, {})).toMatchObject({ status: 'pr_open' });
    expect((await review.suggestions.suggestions.repo.get(db, WS, s.id))!.apply_claim).toBeNull();
  });

  it('the sopops_pr_status pass: closed without merging makes it dismissed "PR closed"', async () => {
    await connect();
    const { s } = await proposed();
    await q.applySuggestion(WS, s.id, {});
    gh.close('luigis', 'ops', 1);
    const report = await followPullRequestsNow(db, review.suggestions.suggestions, (ws) => github.codeHost(ws));
    expect(report).toMatchObject({ checked: 1, settled: 1, failed: [] });
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ status: 'dismissed', note: 'PR closed' });
  });

  it('a pull request that cannot be read is looked at once a minute, not on every read', async () => {
    await connect();
    const { s } = await proposed();
    await q.applySuggestion(WS, s.id, {});
    await connect('ghp_revoked');
    await db.query("UPDATE sop_suggestions SET pr_checked_at = now() - interval '2 minutes' WHERE id = $1", [s.id]);
    const before = gh.requests.length;
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ status: 'pr_open', error: expect.stringContaining('refused the token') });
    const looked = gh.requests.length;
    expect(looked).toBeGreaterThan(before);
    await q.getSuggestion(WS, s.id);
    await q.pattern(WS, s.pattern_id, {});
    expect(gh.requests.length).toBe(looked);
  });

  it('GitHub not answering: readers of the suggestion and its pattern at one moment make one request between them and answer with the stored state, not after GitHub gives up', async () => {
    await connect();
    const { patternId, s } = await proposed();
    const applied = await q.applySuggestion(WS, s.id, {});
    await db.query("UPDATE sop_suggestions SET pr_checked_at = now() - interval '2 minutes' WHERE id = $1", [s.id]);
    hostOptions = { attempts: 1, timeoutMs: 30_000 }; // one try that GitHub holds for 30 s
    gh.hangNext(100);
    const asked = () => gh.requests.filter((r) => /\/pulls\/1$/.test(r.path)).length;
    const t0 = Date.now();
    const [a, b, c, d] = await Promise.all([q.getSuggestion(WS, s.id), q.getSuggestion(WS, s.id), q.pattern(WS, patternId, {}), q.pattern(WS, patternId, {})]);
    const took = Date.now() - t0;
    expect(asked()).toBe(1);
    for (const x of [a, b]) expect(x).toMatchObject({ status: 'pr_open', pr_url: applied.pr_url, error: null });
    for (const x of [c, d]) expect(x).toMatchObject({ review_state: 'fixing', suggestions: [expect.objectContaining({ id: s.id, status: 'pr_open' })] });
    // Well within the 30 s GitHub holds the one request (and the distributed api's 30 s deadline).
    expect(took).toBeLessThan(20_000);
    // Within the minute it is not asked again.
    await q.getSuggestion(WS, s.id);
    await q.pattern(WS, patternId, {});
    expect(asked()).toBe(1);
  }, 120_000);

  it('a stop waits for a look at a pull request that a read stopped waiting for, and what it found is stored', async () => {
    await connect();
    const { s } = await proposed();
    await q.applySuggestion(WS, s.id, {});
    await db.query("UPDATE sop_suggestions SET pr_checked_at = now() - interval '2 minutes' WHERE id = $1", [s.id]);
    hostOptions = { attempts: 1, timeoutMs: 8_000 }; // GitHub holds the one try longer than a read waits (5 s)
    gh.hangNext(1);
    const said: string[] = [];
    // The review service's SOP side, as its stop closes it (before the jobs and the database).
    const own = new InlineJobs();
    const sop = await startSop({ db, jobs: own, checkSession: () => Promise.reject(new Error('no session is checked here')), github, prStatusCron: null, log: { info: () => undefined, error: () => undefined, warn: (m) => said.push(m) }, stopWaitMs: 120_000 });
    try {
      expect(await sop.review.getSuggestion(WS, s.id)).toMatchObject({ status: 'pr_open', error: null });
      await sop.close();
      const stored = (await review.suggestions.suggestions.repo.get(db, WS, s.id))!;
      expect(stored).toMatchObject({ status: 'pr_open', error: expect.stringMatching(/the pull request could not be read: .*no answer in 8 s/) });
      expect(said).toEqual([]);
    } finally {
      await own.close();
    }
  }, 60_000);

  it('a stop that cannot wait for a look at a pull request any longer says which it cut short', async () => {
    await connect();
    const { s } = await proposed();
    await q.applySuggestion(WS, s.id, {});
    await db.query("UPDATE sop_suggestions SET pr_checked_at = now() - interval '2 minutes' WHERE id = $1", [s.id]);
    hostOptions = { attempts: 1, timeoutMs: 600_000 }; // GitHub never answers
    gh.hangNext(1);
    const said: string[] = [];
    const own = new InlineJobs();
    const sop = await startSop({ db, jobs: own, checkSession: () => Promise.reject(new Error('no session is checked here')), github, prStatusCron: null, log: { info: () => undefined, error: () => undefined, warn: (m) => said.push(m) }, stopWaitMs: 200 });
    try {
      expect(await sop.review.getSuggestion(WS, s.id)).toMatchObject({ status: 'pr_open', error: null });
      await sop.close();
      expect(said).toEqual([
        `shutdown: 1 GitHub call of suggestions still running after 0.2 s, cut short: the look at pull request #1 in luigis/ops of suggestion ${s.id} (workspace luigis) (a pull request is looked at again at the next read after a minute, or by the sopops_pr_status pass)`,
      ]);
    } finally {
      await own.close();
    }
  }, 60_000);

  /** Two suggestions with a pull request open, and a review side whose stop is watched. */
  async function twoOpen(stopWaitMs: number, timeoutMs: number) {
    await connect();
    const { s } = await proposed();
    await q.applySuggestion(WS, s.id, {});
    const other = await settled((await q.suggest(WS, s.pattern_id, {})).id);
    await q.applySuggestion(WS, other.id, {});
    hostOptions = { attempts: 1, timeoutMs }; // GitHub holds the pass's first look this long
    gh.hangNext(1);
    const said: string[] = [];
    const stopping = new ReviewSop({ db, jobs, workspaces, github, prStatusCron: null, log: { warn: (m) => said.push(m) }, stopWaitMs });
    const looks = () => gh.requests.filter((r) => r.method === 'GET' && /\/pulls\/\d+$/.test(r.path)).map((r) => Number(/(\d+)$/.exec(r.path)![1]));
    const pass = followPullRequestsNow(db, stopping.suggestions.suggestions, (ws) => github.codeHost(ws));
    await until('the pass asking GitHub about a pull request', () => looks().length > 0, 30_000, 5);
    const first = await review.suggestions.suggestions.repo.get(db, WS, looks()[0] === 1 ? s.id : other.id);
    return { said, stopping, looks, pass, first: first! };
  }

  it('a stop during a sopops_pr_status pass waits for the pull request it is at, then the pass takes no more and says how far it got', async () => {
    const { said, stopping, looks, pass } = await twoOpen(120_000, 10_000);
    await stopping.close();
    expect(said).toEqual(['shutdown: the sopops_pr_status pass stopped after 1 of 2 open pull requests; the others are looked at by the next pass (or a read)']);
    expect(await pass).toMatchObject({ checked: 1, settled: 0, failed: [expect.stringMatching(/no answer in 10 s/)] });
    expect(looks()).toHaveLength(1);
  }, 60_000);

  it('a stop that cannot wait for a sopops_pr_status pass any longer says which pull request it cut short', async () => {
    const { said, stopping, pass, first } = await twoOpen(200, 600_000); // GitHub never answers
    pass.catch(() => undefined); // ends when the fake GitHub stops
    await stopping.close();
    expect(said).toEqual([
      `shutdown: 1 GitHub call of suggestions still running after 0.2 s, cut short: the sopops_pr_status pass, at pull request #${first.pr_number} in luigis/ops of suggestion ${first.id} (1 of 2) (a pull request is looked at again at the next read after a minute, or by the sopops_pr_status pass)`,
    ]);
  }, 60_000);

  it('a pull request is followed in the repository it was opened in, though the connection names another one now', async () => {
    await connect();
    const { s } = await proposed();
    await q.applySuggestion(WS, s.id, {});
    expect(await review.suggestions.suggestions.repo.get(db, WS, s.id)).toMatchObject({ pr_repository: 'luigis/ops', pr_api_url: gh.url });
    // Another repository, whose pull request #1 is merged.
    gh.addRepo('luigis', 'other', 'main', { 'sop/take-order.md': FILE });
    const other = new GitHubCodeHost({ token: gh.token, baseUrl: gh.url });
    await other.openPullRequest({ repo: { owner: 'luigis', repo: 'other' }, base: 'main', branch: 'x', path: 'sop/take-order.md', content: 'x\n', message: 'm', title: 't', body: 'b' });
    gh.merge('luigis', 'other', 1);
    await github.put(WS, { repository: 'luigis/other', branch: 'main', path: 'sop', api_url: gh.url, token: gh.token });
    const stale = () => db.query("UPDATE sop_suggestions SET pr_checked_at = now() - interval '2 minutes' WHERE id = $1", [s.id]);
    await stale();
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ status: 'pr_open', error: null });
    expect(await followPullRequestsNow(db, review.suggestions.suggestions, (ws) => github.codeHost(ws))).toMatchObject({ checked: 1, settled: 0, failed: [] });
    expect((await q.getSuggestion(WS, s.id)).status).toBe('pr_open');
    gh.merge('luigis', 'ops', 1);
    await stale();
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ status: 'merged' });
  });

  it('the connection deleted: the pull request cannot be followed, says so, and the suggestion can be dismissed', async () => {
    await connect();
    const { patternId, s } = await proposed();
    await q.applySuggestion(WS, s.id, {});
    expect((await q.pattern(WS, patternId, {})).review_state).toBe('fixing');
    await github.delete(WS);
    await db.query("UPDATE sop_suggestions SET pr_checked_at = now() - interval '2 minutes' WHERE id = $1", [s.id]);
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ status: 'pr_open', error: expect.stringMatching(/no GitHub connection now: its pull request \(#1 in luigis\/ops\) cannot be followed; dismiss/) });
    expect(await q.dismissSuggestion(WS, s.id, { note: 'Repository moved.' })).toMatchObject({ status: 'dismissed', note: 'Repository moved.' });
    expect((await q.pattern(WS, patternId, {})).review_state).toBe('open');
  });

  it('a refused token: apply answers 409 saying so and the suggestion stays proposed', async () => {
    await connect('ghp_revoked');
    const { s } = await proposed();
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'pull_request_failed', message: expect.stringContaining('refused the token') });
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ status: 'proposed', error: expect.stringContaining('refused the token') });
  });

  it('error says why the latest apply failed: a refused token, then (the token fixed) a conflict on GitHub, then a newer verdict; cleared once applied', async () => {
    await connect('ghp_revoked');
    script = [REWORD_STEP1];
    const { patternId, s } = await proposed();
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'pull_request_failed' });
    expect((await q.getSuggestion(WS, s.id)).error).toContain('refused the token');
    await connect();
    gh.commitFile('luigis', 'ops', 'main', 'sop/take-order.md', FILE.replace(STEP1, '1. Ask what the caller wants.'));
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'conflict' });
    const conflicted = await q.getSuggestion(WS, s.id);
    expect(conflicted).toMatchObject({ status: 'proposed', error: expect.stringContaining('conflicts with sop/take-order.md on main of luigis/ops') });
    expect(conflicted.error).not.toContain('refused the token');
    gh.commitFile('luigis', 'ops', 'main', 'sop/take-order.md', FILE);
    await q.giveVerdict(WS, patternId, { verdict: 'real', note: 'Again.' });
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'verdict_changed' });
    expect((await q.getSuggestion(WS, s.id)).error).toMatch(/^suggestion \S+ answers the real verdict of .* has a newer verdict/);
    const fresh = await settled((await q.suggest(WS, patternId, {})).id);
    expect(await q.applySuggestion(WS, fresh.id, {})).toMatchObject({ status: 'pr_open', error: null });
  });

  it('a token stored under another secret key: apply answers 409 naming the workspace and NEATROOTS_SECRET_KEY, and the suggestion stays proposed with error', async () => {
    await new GitHubConnections(db, randomBytes(32), () => null as never).put(WS, { repository: 'luigis/ops', branch: 'main', path: 'sop', api_url: gh.url, token: gh.token });
    const { s } = await proposed();
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'pull_request_failed', message: expect.stringMatching(/GitHub token of workspace luigis .*NEATROOTS_SECRET_KEY/) });
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ status: 'proposed', error: expect.stringContaining('NEATROOTS_SECRET_KEY') });
    expect(gh.requests).toHaveLength(0);
  });

  it('a connection naming a repository, branch or folder that is not there: 409 naming it, no pull request adding a new file', async () => {
    const { s } = await proposed();
    for (const [conn, missing] of [
      [{ repository: 'luigis/nope', branch: 'main', path: 'sop' }, 'repository luigis/nope'],
      [{ repository: 'luigis/ops', branch: 'release', path: 'sop' }, 'branch release'],
      [{ repository: 'luigis/ops', branch: 'main', path: 'procedures' }, 'folder procedures on main'],
    ] as const) {
      await github.put(WS, { ...conn, api_url: gh.url, token: gh.token });
      await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'pull_request_failed', message: expect.stringContaining(`not found on the code host: ${missing}`) });
    }
    expect(gh.requests.filter((r) => r.method !== 'GET')).toEqual([]);
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ status: 'proposed', error: expect.stringContaining('folder procedures on main') });
  });

  const pullsOnGitHub = async () => (await (await fetch(`${gh.url}/repos/luigis/ops/pulls?state=all`, { headers: { authorization: `Bearer ${gh.token}` } })).json() as { number: number; state: string; head: { ref: string } }[]).map((p) => `#${p.number} ${p.state} ${p.head.ref}`);
  const branchOf = (id: string) => `neatroots/suggestion-${id.replace(/^sug_/, '').toLowerCase().replace(/[^a-z0-9-]/g, '-')}`;

  it('a pull request GitHub opened though every answer was lost (and the look for it too): 409, then applied again it is that pull request, recorded; never a second', async () => {
    await connect();
    const { s } = await proposed();
    gh.loseAnswers('POST', /\/pulls$/, 4);
    gh.loseAnswers('GET', /\/pulls$/, 4);
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'pull_request_failed' });
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ status: 'proposed', pr_url: null });
    expect(await pullsOnGitHub()).toEqual([`#1 open ${branchOf(s.id)}`]);
    const applied = await q.applySuggestion(WS, s.id, {});
    expect(applied).toMatchObject({ status: 'pr_open', pr_url: expect.stringMatching(/\/luigis\/ops\/pull\/1$/), error: null });
    expect((await review.suggestions.suggestions.repo.get(db, WS, s.id))!.pr_branch).toBe(branchOf(s.id));
    expect(await pullsOnGitHub()).toEqual([`#1 open ${branchOf(s.id)}`]);
  });

  it('a pull request GitHub opened though every answer was lost, closed on GitHub before the apply is tried again: a new one is opened from the same branch, pr_open, and stays open at the next look', async () => {
    await connect();
    const { s } = await proposed();
    gh.loseAnswers('POST', /\/pulls$/, 4);
    gh.loseAnswers('GET', /\/pulls$/, 4);
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'pull_request_failed' });
    gh.close('luigis', 'ops', 1);
    const applied = await q.applySuggestion(WS, s.id, {});
    expect(applied).toMatchObject({ status: 'pr_open', pr_url: expect.stringMatching(/\/luigis\/ops\/pull\/2$/), error: null });
    expect(await pullsOnGitHub()).toEqual([`#1 closed ${branchOf(s.id)}`, `#2 open ${branchOf(s.id)}`]);
    expect(await followPullRequestsNow(db, review.suggestions.suggestions, (ws) => github.codeHost(ws))).toMatchObject({ checked: 1, settled: 0, failed: [] });
    expect(await q.getSuggestion(WS, s.id)).toMatchObject({ status: 'pr_open', pr_url: applied.pr_url, note: null });
  });

  it('a pull request GitHub opened though every answer was lost, merged on GitHub before the apply is tried again: recorded merged, with its merge commit', async () => {
    await connect();
    const { s } = await proposed();
    gh.loseAnswers('POST', /\/pulls$/, 4);
    gh.loseAnswers('GET', /\/pulls$/, 4);
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'pull_request_failed' });
    gh.merge('luigis', 'ops', 1);
    const applied = await q.applySuggestion(WS, s.id, {});
    expect(applied).toMatchObject({ status: 'merged', pr_url: expect.stringMatching(/\/luigis\/ops\/pull\/1$/), merge_commit_sha: expect.stringMatching(/^[0-9a-f]{40}$/), merged_at: expect.any(String), error: null });
    expect(await pullsOnGitHub()).toEqual([`#1 closed ${branchOf(s.id)}`]);
  });

  it('a 403 on POST /pulls (a token that may not open pull requests) leaves no branch behind, however often applied', async () => {
    await connect();
    const { s } = await proposed();
    gh.answerNext('POST', /\/pulls$/, { status: 403, body: { message: 'Resource not accessible by personal access token' } }, 3);
    for (let i = 0; i < 3; i++) {
      await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'pull_request_failed', message: expect.stringContaining('Resource not accessible') });
    }
    expect(gh.branches('luigis', 'ops')).toEqual(['main']);
    expect(await q.applySuggestion(WS, s.id, {})).toMatchObject({ status: 'pr_open', pr_url: expect.stringMatching(/\/pull\/1$/) });
    expect(gh.branches('luigis', 'ops')).toEqual(['main', branchOf(s.id)]);
  });

  it('applied again after a failure that left its branch (GitHub rate limited the commit and the clean-up): the same branch name, not name-2', async () => {
    await connect();
    const { s } = await proposed();
    const limited = { status: 403, body: { message: 'API rate limit exceeded' }, headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(Math.ceil(Date.now() / 1000) + 3600) } };
    gh.answerNext('PUT', /\/contents\//, limited);
    gh.answerNext('DELETE', /\/git\/refs\//, limited);
    await expect(q.applySuggestion(WS, s.id, {})).rejects.toMatchObject({ status: 409, code: 'pull_request_failed', message: expect.stringContaining('rate limited') });
    expect(gh.branches('luigis', 'ops')).toEqual(['main', branchOf(s.id)]);
    expect(await q.applySuggestion(WS, s.id, {})).toMatchObject({ status: 'pr_open' });
    expect((await review.suggestions.suggestions.repo.get(db, WS, s.id))!.pr_branch).toBe(branchOf(s.id));
    expect(gh.branches('luigis', 'ops')).toEqual(['main', branchOf(s.id)]);
    expect(await pullsOnGitHub()).toEqual([`#1 open ${branchOf(s.id)}`]);
  });

  it('an apply asks GitHub for each thing once: four GETs (the file at the branch, then at the commit the branch is made from), not the new branch\'s file again', async () => {
    await connect();
    const { s } = await proposed();
    const before = gh.requests.length;
    expect(await q.applySuggestion(WS, s.id, {})).toMatchObject({ status: 'pr_open' });
    const asked = gh.requests.slice(before).map((r) => `${r.method} ${r.path.replace('/api/v3/repos/luigis/ops', '').replace(/\?.*/, '')}`);
    expect(asked).toEqual([
      'GET /contents/sop/take-order.md', // the file the edit is merged into (the connection's branch)
      `GET /git/matching-refs/heads/${branchOf(s.id)}`, // a pull request already opened from its branch
      'GET /git/ref/heads/main',
      'GET /contents/sop/take-order.md', // the same file at the commit the branch is made from
      'POST /git/refs',
      'PUT /contents/sop/take-order.md',
      'POST /pulls',
    ]);
  });

  it('name-N branches versions before left (one a failed apply) go once its pull request is opened, merged or closed, or it is dismissed: not those with a pull request open, its own name, nor other branches', async () => {
    await connect();
    const { s } = await proposed();
    const name = branchOf(s.id);
    const others = [`${name}0`, 'neatroots/suggestion-other', 'feature-2'];
    for (const b of [`${name}-2`, ...others]) gh.addBranch('luigis', 'ops', b, 'main');
    // Opened: the name-2 a failed try left goes.
    expect(await q.applySuggestion(WS, s.id, {})).toMatchObject({ status: 'pr_open', pr_url: expect.stringMatching(/\/pull\/1$/) });
    expect(gh.branches('luigis', 'ops')).toEqual(['main', ...others, name]);
    // Merged: those left since go (another version's apply meanwhile, one still with its pull request open).
    gh.addBranch('luigis', 'ops', `${name}-3`, 'main');
    await new GitHubCodeHost({ token: gh.token, baseUrl: gh.url }).openPullRequest({ repo: { owner: 'luigis', repo: 'ops' }, base: 'main', branch: `${name}-4`, path: 'sop/take-order.md', content: 'x\n', message: 'm', title: 't', body: 'b' });
    gh.merge('luigis', 'ops', 1);
    expect(await followPullRequestsNow(db, review.suggestions.suggestions, (ws) => github.codeHost(ws))).toMatchObject({ settled: 1 });
    expect((await q.getSuggestion(WS, s.id)).status).toBe('merged');
    await until('the name-3 branch deleted', () => !gh.branches('luigis', 'ops').includes(`${name}-3`), 30_000, 5);
    expect(gh.branches('luigis', 'ops')).toEqual(['main', ...others, name, `${name}-4`]);

    // Closed on GitHub ("PR closed"), read through GET /suggestions/{id}.
    const second = await settled((await q.suggest(WS, s.pattern_id, {})).id);
    gh.addBranch('luigis', 'ops', `${branchOf(second.id)}-2`, 'main');
    gh.addBranch('luigis', 'ops', `${branchOf(second.id)}-3`, 'main');
    gh.answerNext('GET', /\/git\/matching-refs\//, { status: 200, body: [] }); // the apply sees no leftovers, as a version before
    expect(await q.applySuggestion(WS, second.id, {})).toMatchObject({ status: 'pr_open' });
    expect(gh.branches('luigis', 'ops')).toContain(`${branchOf(second.id)}-2`);
    gh.close('luigis', 'ops', 3);
    await db.query("UPDATE sop_suggestions SET pr_checked_at = now() - interval '2 minutes' WHERE id = $1", [second.id]);
    expect(await q.getSuggestion(WS, second.id)).toMatchObject({ status: 'dismissed', note: 'PR closed' });
    await until('the closed one\'s leftovers deleted', () => !gh.branches('luigis', 'ops').some((b) => /-[23]$/.test(b) && b.startsWith(branchOf(second.id))), 30_000, 5);
    expect(gh.branches('luigis', 'ops')).toContain(branchOf(second.id)); // its pull request's own branch stays

    // Dismissed while proposed: the name-N left by failed applies go; a branch of its own name stays.
    const third = await settled((await q.suggest(WS, s.pattern_id, {})).id);
    for (const b of [branchOf(third.id), `${branchOf(third.id)}-2`, `${branchOf(third.id)}-12`]) gh.addBranch('luigis', 'ops', b, 'main');
    await q.dismissSuggestion(WS, third.id, { note: 'Not this one.' });
    await until('the dismissed one\'s leftovers deleted', () => !gh.branches('luigis', 'ops').some((b) => b.startsWith(`${branchOf(third.id)}-`)), 30_000, 5);
    expect(gh.branches('luigis', 'ops')).toContain(branchOf(third.id));
    for (const b of others) expect(gh.branches('luigis', 'ops')).toContain(b);
  });

  it('a rate limit is waited out and the pull request opened', async () => {
    await connect();
    const { s } = await proposed();
    gh.rateLimitOnce('secondary', 1);
    expect(await q.applySuggestion(WS, s.id, {})).toMatchObject({ status: 'pr_open' });
  });
});

describe('fix tracking', () => {
  it('fixing until the release with the edit is live, then fix_sessions of 10; fixed; a finding after it regressed, in the review queue', async () => {
    const { patternId, s } = await proposed();
    expect(await q.pattern(WS, patternId, {})).toMatchObject({ review_state: 'open', fix_release: null });
    await q.applySuggestion(WS, s.id, {});
    let p = await q.pattern(WS, patternId, {});
    expect(p).toMatchObject({ review_state: 'fixing', fix_release: null, fix_sessions: null, fix_sessions_needed: null, review_note: expect.stringContaining('waiting for the release') });
    expect(p.suggestions.map((x) => x.id)).toEqual([s.id]);

    const rel = await workspaces.publish(WS);
    p = await q.pattern(WS, patternId, {});
    expect(p).toMatchObject({ review_state: 'fixing', fix_release: { id: rel.id, number: 2 }, fix_sessions: 0, fix_sessions_needed: 10 });
    expect((await q.listSuggestions(WS, {})).items[0]).toMatchObject({ id: s.id, released_in: { id: rel.id, number: 2 }, released_at: expect.any(String) });

    for (let i = 0; i < 9; i++) await checked(false);
    expect(await q.pattern(WS, patternId, {})).toMatchObject({ review_state: 'fixing', fix_sessions: 9 });
    await checked(false);
    expect(await q.pattern(WS, patternId, {})).toMatchObject({ review_state: 'fixed', fix_sessions: 10, fix_sessions_needed: 10 });
    expect((await q.reviewQueue(WS, {})).items).toEqual([]);

    await checked(true);
    p = await q.pattern(WS, patternId, {});
    expect(p).toMatchObject({ review_state: 'regressed', review_reason: 'came_back', review_note: 'Came back after release 2', fix_sessions: 11 });
    const queue = await q.reviewQueue(WS, {});
    expect(queue.items).toEqual([expect.objectContaining({ pattern_id: patternId, review_state: 'regressed', fix_release: { id: rel.id, number: 2 }, suggestion: expect.objectContaining({ id: s.id, status: 'applied' }) })]);

    // a new verdict starts over
    await q.giveVerdict(WS, patternId, { verdict: 'real' });
    expect(await q.pattern(WS, patternId, {})).toMatchObject({ review_state: 'open', fix_release: null });
  });
});
