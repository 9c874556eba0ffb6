import type { AddJobOptions, Db, JobHandler, WorkOptions } from '@neatroots/ports';
import { InlineJobs, openAiChatModel } from '@neatroots/platform';
import { QuestionAnswerer } from '@neatroots/questions';
import type { DecisionGateway } from '@neatroots/sop';
import { PatternsRepo, SopSessionsRepo, sopFindingId, type PatternsListView } from '@neatroots/store';
import { startFakeOpenAI, type FakeCall, type FakeOpenAI, type FakeReply } from '../../../../libs/platform/src/models/fake-openai.test';
import { RECLUSTER_QUEUE } from './recluster';
import { useMigratedDb } from '../sop-fixtures.test';
import { ReviewSop } from './service';

/**
 * Failure modes and themes through the question service (its QuestionAnswerer in-process, the
 * real `openai` client over HTTP to a local OpenAI-compatible server answering from a script):
 * the first split at 8 findings (queued by the sopops_patterns job as sopops_recluster), new
 * findings sent to a failure mode by a decision, a forced recluster that keeps a matched mode's
 * id and name, retires the other and carries its verdict over, themes whose ids are kept, and
 * the same without a model.
 */
const WS = 'luigis';
const PROC = 'take-order';
let db: Db;
let model: FakeOpenAI;
let answerer: QuestionAnswerer;
let jobs: SettlingJobs;
let review: ReviewSop;
const repo = new PatternsRepo();

const PRICE = { id: 'never-price', kind: 'never' as const, index: 1, text: 'Volunteer a price or a description of a dish: the menu does that.' };
const READ_BACK = { id: 'step-read-back', kind: 'step' as const, index: 3, text: 'Read the order back to the caller before saying goodbye, item by item.' };

/** How the scripted model splits: each finding by the first word of its quote. */
let splitBy: Record<string, string> = { price: 'Quoted a price', dish: 'Described a dish' };
let themeNames: { step: string; never: string } = { step: 'Closing the order', never: 'Taking the order' };

type Q = { id: string; subject: string; ask: string };
function questions(call: FakeCall): Q[] {
  const user = call.body.messages.find((m) => m.role === 'user')?.content ?? '';
  const [head, qs] = user.split('\n\n### Questions\n');
  const subjects = new Map([...`\n\n${head}`.split(/\n\n### Subject /).slice(1)].map((b) => [b.slice(0, b.indexOf('\n')), b.slice(b.indexOf('\n') + 1)]));
  return [...qs.matchAll(/^(q\d+) \(about subject (S\d+)\) (.*)$/gm)].map((m) => ({ id: m[1], subject: subjects.get(m[2]) ?? '', ask: m[3] }));
}

function script(call: FakeCall): FakeReply {
  const sys = call.body.messages[0].content;
  const answers = questions(call).map((q) => {
    if (sys.startsWith('You name patterns')) return { id: q.id, name: q.subject.includes('price') ? 'Talked about prices' : 'Skipped the read-back' };
    if (sys.startsWith('You group the findings of one rule')) {
      const modes = new Map<string, string[]>();
      for (const m of q.subject.matchAll(/^- (\S+): (\w+)/gm)) {
        const name = splitBy[m[2]];
        if (name) modes.set(name, [...(modes.get(name) ?? []), m[1]]);
      }
      return { id: q.id, failure_modes: [...modes].map(([name, findings]) => ({ name, findings })) };
    }
    if (sys.startsWith('You sort findings')) {
      const word = /Finding: (\w+)/.exec(q.ask)?.[1] ?? '';
      const n = [...q.subject.matchAll(/^(\d+)\. (.*)$/gm)].find((m) => m[2] === splitBy[word])?.[1];
      return { id: q.id, mode: n ? Number(n) : 0 };
    }
    if (sys.startsWith('You group the mistakes')) {
      const pats = [...q.subject.matchAll(/^- (\S+): (Step|Never)/gm)];
      const of = (k: string) => pats.filter((p) => p[2] === k).map((p) => p[1]);
      return { id: q.id, themes: [{ name: themeNames.never, patterns: of('Never') }, { name: themeNames.step, patterns: of('Step') }] };
    }
    return { id: q.id };
  });
  return { json: { answers } };
}
const asked = (prefix: string) => model.calls.filter((c) => c.body.messages[0].content.startsWith(prefix)).length;

/** Every decision the model did not answer usably (timed out, unreachable, malformed), with its reason. */
let notAnswered: string[] = [];
const gatewayOf = (a: QuestionAnswerer): DecisionGateway => ({
  decide: async (e, i) => {
    const reply = await a.decide(e, i, { wait: true });
    if (!reply.ok) notAnswered.push(`${e}: ${reply.reason}`);
    return reply;
  },
  decisionModels: () => a.decisionModels(),
});

let n = 0;
/** A checked session with a finding on each rule, quoting `words` as the agent's. */
async function checked(words: string, rules: { id: string; kind: 'step' | 'never'; index: number; text: string }[] = [PRICE], notify = true): Promise<void> {
  const sessions = new SopSessionsRepo(db);
  const r = await sessions.receive(WS, { external_id: `call-${++n}`, agent: 'a', release_id: null, started_at: new Date().toISOString(), transcript_ref: null, turns: [{ role: 'agent', text: words }], tool_calls: [] });
  const findings = rules.map((rule) => ({
    id: sopFindingId(r.id, PROC, rule.id),
    procedure_id: PROC,
    rule_id: rule.id,
    kind: rule.kind,
    index: rule.index,
    text: rule.text,
    status: rule.kind === 'never' ? ('violated' as const) : ('skipped' as const),
    evidence: [{ turn: 0, quote: words, source: 'transcript' }],
    reason: null,
  }));
  await sessions.saveOutcome(r.id, r.content_hash, { release_id: null, result: 'deviated', checked_result: 'deviated', checks: [{ procedure_id: PROC, result: 'deviated', checked_result: 'deviated', body: {} }], findings });
  if (notify) await review.onChecked(WS);
}

/**
 * The jobs in this process, knowing whether any is queued or running: a due recluster (queued by
 * the sopops_patterns job) still asking the model when settle() returned would write its split
 * over the findings stored next, sending those not yet assigned to other without a decision.
 */
class SettlingJobs extends InlineJobs {
  private readonly open: { n: number };
  private readonly ids = new Set<string>();
  constructor() {
    const open = { n: 0 };
    super({ onFailed: () => void open.n-- }); // its tries used up
    this.open = open;
  }
  get idle(): boolean {
    return this.open.n === 0;
  }
  override async add<T>(queue: string, data: T, opts: AddJobOptions = {}): Promise<string> {
    this.open.n++; // counted before it can run
    const id = await super.add(queue, data, opts);
    const key = `${queue}\0${id}`;
    // A known id adds nothing: a job id kept, or a waiting job shared (coalesce: sopops_patterns).
    if (this.ids.has(key)) this.open.n--;
    else this.ids.add(key);
    return id;
  }
  override async work<T, R>(queue: string, handler: JobHandler<T, R>, opts?: WorkOptions<T>): Promise<void> {
    return super.work<T, R>(
      queue,
      async (data, job) => {
        const r = await handler(data, job);
        this.open.n--;
        return r;
      },
      opts,
    );
  }
}

/** Waits for the workspace's jobs to settle: no job queued or running, no finding waiting and `until` true. */
async function settle(until: () => Promise<boolean> = async () => true): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const waiting = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM sop_findings f WHERE f.pattern_id IS NULL OR (f.pattern_id = f.rule_pattern_id AND EXISTS (SELECT 1 FROM sop_patterns c WHERE c.parent_id = f.rule_pattern_id AND c.retired_at IS NULL))`);
    if (jobs.idle && Number(waiting.rows[0].n) === 0 && (await until()) && jobs.idle) return;
    if (Date.now() > deadline) throw new Error('the jobs did not settle');
    await new Promise((r) => setTimeout(r, 25));
  }
}

const priceRule = async () => (await repo.patternsOf(db, WS)).find((p) => p.kind === 'rule' && p.rule_id === PRICE.id)!;
const list = () => review.queries.patterns(WS, {}) as Promise<PatternsListView>;
const modesOf = async () => {
  const item = (await list()).items.find((i) => i.rule.rule_id === PRICE.id)!;
  return Object.fromEntries(item.sub_patterns.map((s) => [s.name, s]));
};
async function members(): Promise<Record<string, string[]>> {
  const res = await db.query<{ name: string; quote: string }>(
    `SELECT p.name, f.evidence->0->>'quote' AS quote FROM sop_findings f JOIN sop_patterns p ON p.id = f.pattern_id WHERE f.rule_id = $1 ORDER BY quote`,
    [PRICE.id],
  );
  const out: Record<string, string[]> = {};
  for (const r of res.rows) (out[r.name] ??= []).push(r.quote);
  return out;
}

useMigratedDb((d) => (db = d), 'sop_finding_days, sop_overrides, sop_verdicts, sop_findings, sop_patterns, sop_themes, sop_checks, sop_sessions');
beforeEach(async () => {
  splitBy = { price: 'Quoted a price', dish: 'Described a dish' };
  themeNames = { step: 'Closing the order', never: 'Taking the order' };
  notAnswered = [];
  model = await startFakeOpenAI(script);
  // The scripted model answers at once: a generous timeout and retries so that a loaded machine
  // does not turn a slow answer into a decision not made (which sends the finding to other).
  const m = (role: string) => openAiChatModel({ role, baseURL: model.url, model: `${role}-test`, timeoutMs: 60_000 });
  answerer = new QuestionAnswerer({ decision: m('decision'), reasoning: m('reasoning'), queue: { maxWaitMs: 10, retries: 2 }, cache: false, onError: () => undefined });
  jobs = new SettlingJobs();
});
afterEach(async () => {
  await jobs.close();
  answerer.close();
  await model.close();
});

describe('failure modes and themes with a model', () => {
  it('splits at 8 findings, assigns new ones by a decision, and a recluster keeps, retires and carries over', async () => {
    review = new ReviewSop({ db, jobs, gateway: async () => gatewayOf(answerer) });
    await review.start();

    for (const w of ['price 1', 'price 2', 'price 3', 'price 4', 'dish 1', 'dish 2']) await checked(w);
    await checked('dish 3', [PRICE, READ_BACK]);
    await settle(async () => (await repo.patternsOf(db, WS)).every((p) => p.theme_id !== null));
    // 7 findings: not split yet (themes are grouped for the new rule patterns).
    expect(asked('You group the findings of one rule')).toBe(0);
    expect((await priceRule()).clustered_at).toBeNull();

    await checked('kitchen closed');
    await settle(async () => (await priceRule()).clustered_at !== null);
    expect(asked('You group the findings of one rule')).toBe(1);
    expect(await members()).toEqual({ 'Quoted a price': ['price 1', 'price 2', 'price 3', 'price 4'], 'Described a dish': ['dish 1', 'dish 2', 'dish 3'], Other: ['kitchen closed'] });
    const first = await modesOf();
    expect(Object.values(first).map((m) => [m.kind, m.findings])).toEqual(
      expect.arrayContaining([
        ['sub', 4],
        ['sub', 3],
        ['other', 1],
      ]),
    );
    // The queue's leaves are the failure modes now, each with its rule's theme.
    const queue = await review.queries.reviewQueue(WS, {});
    expect(queue.items.map((i) => i.name).sort()).toEqual(['Described a dish', 'Other', 'Quoted a price', 'Skipped the read-back']);
    expect(queue.items.find((i) => i.name === 'Quoted a price')!.theme).toMatchObject({ name: 'Taking the order' });
    expect(queue.clustered_at).not.toBeNull();
    const themesBefore = (await list()).items.map((i) => [i.name, i.theme]);

    await review.queries.giveVerdict(WS, first['Described a dish'].id, { verdict: 'acceptable', reviewer: 'ana' });

    // New findings on a split rule: one decision each, to its failure mode or to other.
    await checked('price 5');
    await checked('kitchen again');
    await settle();
    expect(asked('You sort findings')).toBeGreaterThan(0);
    expect(await members()).toMatchObject({ 'Quoted a price': ['price 1', 'price 2', 'price 3', 'price 4', 'price 5'], Other: ['kitchen again', 'kitchen closed'] });
    // 2 new since the split, other at 20%: not due, nothing split again.
    expect(asked('You group the findings of one rule')).toBe(1);

    // Forced: the model now puts prices and dishes together and the kitchen apart.
    splitBy = { price: 'Talked about the food', dish: 'Talked about the food', kitchen: 'Said the kitchen was closed' };
    themeNames = { step: 'Closing the order', never: 'Taking the order' };
    const r = await review.queries.recluster(WS, { force: true });
    expect(r).toEqual({ assigned: 0, reclustered: 1, themed: 1, reason: null });

    const after = await modesOf();
    // 5 of the 8 were "Quoted a price" (Jaccard 5/8): it keeps its id and name, and takes the dishes.
    expect(after['Quoted a price'].id).toBe(first['Quoted a price'].id);
    expect(after['Quoted a price'].findings + after['Quoted a price'].suppressed).toBe(8);
    // "Described a dish" matched nothing: retired, not deleted; its acceptable verdict went to
    // the cluster that took its findings (3/8), marked carried over until confirmed.
    const dish = await review.queries.pattern(WS, first['Described a dish'].id, {});
    expect(dish.retired_at).not.toBeNull();
    expect(dish.verdict).toMatchObject({ verdict: 'acceptable', carried_over: false });
    expect(after['Quoted a price']).toMatchObject({ verdict: { verdict: 'acceptable', carried_over: true }, review_state: 'needs_review', review_reason: 'carried_over' });
    expect(after['Quoted a price'].suppressed).toBe(8);
    // Carried with the date it was given: it covers the wordings the original covered, no newer one.
    expect(after['Quoted a price'].verdict!.created_at).toBe(dish.verdict!.created_at);
    expect(after['Said the kitchen was closed']).toMatchObject({ kind: 'sub', findings: 2 });
    // Other is kept (empty, so not listed), and the retired one has no finding left to list.
    expect(after.Other).toBeUndefined();
    expect((await repo.pattern(db, WS, first.Other.id))!.retired_at).toBeNull();
    expect(after['Described a dish']).toBeUndefined();
    expect((await review.queries.reviewQueue(WS, {})).items.map((i) => i.name)).not.toContain('Described a dish');
    // Themes regrouped with the same names: the same ids.
    expect((await list()).items.map((i) => [i.name, i.theme])).toEqual(themesBefore);
    // A recluster through the job queue, as the endpoint asks for it.
    expect(await jobs.run(RECLUSTER_QUEUE, { workspace: WS, by: 'request' })).toMatchObject({ reclustered: 0, reason: null });
  }, 30_000);

  it('reclusters when other holds over 25% with 5 new findings, once', async () => {
    review = new ReviewSop({ db, jobs, gateway: async () => gatewayOf(answerer) });
    await review.start();
    for (const w of ['price 1', 'price 2', 'price 3', 'price 4', 'dish 1', 'dish 2', 'dish 3', 'dish 4']) await checked(w);
    await settle(async () => (await priceRule()).clustered_at !== null);
    const firstAt = (await priceRule()).clustered_at!;
    // 4 of 12 in other (33%) but only 4 new: not due.
    for (let i = 1; i <= 4; i++) await checked(`kitchen ${i}`);
    await settle();
    expect(asked('You group the findings of one rule')).toBe(1);
    // The 5th new one: due again (other_share), split once more.
    await checked('kitchen 5');
    await settle(async () => (await priceRule()).clustered_at !== firstAt);
    expect(asked('You group the findings of one rule')).toBe(2);
    expect((await members()).Other).toHaveLength(5);
    // Clustered just now: the next finding makes nothing due.
    await checked('kitchen 6');
    await settle();
    await new Promise((r) => setTimeout(r, 100));
    expect(asked('You group the findings of one rule')).toBe(2);
  }, 30_000);

  it('a recluster judges a failure mode bigger than the model is shown by the findings it was shown', async () => {
    review = new ReviewSop({ db, jobs, gateway: async () => gatewayOf(answerer) });
    await review.start();
    for (const w of ['price 1', 'price 2', 'price 3', 'price 4', 'dish 1', 'dish 2', 'dish 3', 'dish 4']) await checked(w);
    await settle(async () => (await priceRule()).clustered_at !== null);
    const first = await modesOf();
    await review.queries.giveVerdict(WS, first['Quoted a price'].id, { verdict: 'acceptable', reviewer: 'ana' });
    // 404 more prices, each sent to "Quoted a price" by a decision (reclustered every 25 new ones
    // on the way): 408 there, all suppressed. More than twice the 200 the model is shown: judged
    // by all its findings, the 200 it keeps would be less than half of them (a material change).
    const PRICES = 408;
    for (let i = 5; i <= PRICES; i++) {
      await checked(`price ${i}`, [PRICE], false);
      if (i % 8 === 0 || i === PRICES) {
        await review.onChecked(WS);
        await settle();
      }
    }
    expect(notAnswered).toEqual([]);
    expect((await modesOf())['Quoted a price']).toMatchObject({ findings: 0, suppressed: PRICES, review_state: 'closed' });

    // The model is shown the newest 200 (all prices) and keeps them together: the same mode, unchanged.
    expect(await review.queries.recluster(WS, { force: true })).toMatchObject({ reclustered: 1 });
    const after = await modesOf();
    expect(after['Quoted a price']).toMatchObject({ id: first['Quoted a price'].id, findings: 0, suppressed: PRICES, review_state: 'closed', verdict: { verdict: 'acceptable', carried_over: false } });
    // The dishes were not shown: their failure mode stays as it is, not retired to other.
    expect(after['Described a dish']).toMatchObject({ id: first['Described a dish'].id, findings: 4 });
    expect(after.Other).toBeUndefined();
    const insights = await review.queries.insights(WS, {});
    expect(insights.tiles).toMatchObject({ findings: 4, suppressed: PRICES });
    expect(notAnswered).toEqual([]);
  }, 240_000);

  it('a rule split with more findings than the model is shown settles: 5 new findings at a time do not split it again', async () => {
    review = new ReviewSop({ db, jobs, gateway: async () => gatewayOf(answerer) });
    await review.start();
    // 300 findings before any split: the model is shown the newest 200, the 100 older go to other.
    for (let i = 1; i <= 300; i++) await checked(`price ${i}`, [PRICE], false);
    await review.onChecked(WS);
    await settle(async () => (await priceRule()).clustered_at !== null);
    expect(asked('You group the findings of one rule')).toBe(1);
    expect((await modesOf())['Quoted a price']).toMatchObject({ findings: 200 });
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 5; i++) await checked(`price extra ${round}-${i}`);
      await settle();
      await new Promise((r) => setTimeout(r, 100));
      await settle();
    }
    expect((await modesOf())['Quoted a price']).toMatchObject({ findings: 215 });
    expect(asked('You group the findings of one rule')).toBe(1);
  }, 120_000);

  it('a failure mode that keeps less than half of its findings needs its verdict confirmed (reclustered)', async () => {
    splitBy = { early: 'Quoted a price', price: 'Quoted a price', dish: 'Described a dish' };
    review = new ReviewSop({ db, jobs, gateway: async () => gatewayOf(answerer) });
    await review.start();
    for (const w of ['early 1', 'early 2', 'price 1', 'price 2', 'price 3', 'dish 1', 'dish 2', 'dish 3']) await checked(w);
    await settle(async () => (await priceRule()).clustered_at !== null);
    const before = await modesOf();
    await review.queries.giveVerdict(WS, before['Quoted a price'].id, { verdict: 'real' });
    expect((await modesOf())['Quoted a price']).toMatchObject({ review_state: 'open' });

    // Now only the early ones are a failure mode: 2 of its 5 (Jaccard 0.4) keep its id and name.
    splitBy = { early: 'Quoted early', dish: 'Described a dish' };
    expect(await review.queries.recluster(WS, { force: true })).toMatchObject({ reclustered: 1, reason: null });
    const after = await modesOf();
    expect(after['Quoted a price']).toMatchObject({ id: before['Quoted a price'].id, findings: 2, verdict: { verdict: 'real', carried_over: false }, review_state: 'needs_review', review_reason: 'reclustered' });
    expect(after['Described a dish']).toMatchObject({ id: before['Described a dish'].id, findings: 3, review_reason: 'no_verdict' });
    expect(after.Other).toMatchObject({ findings: 3 });
    // A new verdict confirms it.
    await review.queries.giveVerdict(WS, before['Quoted a price'].id, { verdict: 'real' });
    expect((await modesOf())['Quoted a price']).toMatchObject({ review_state: 'open', review_reason: null });
  }, 30_000);

  it('a verdict given while the model splits is older than the split it changes materially (reclustered)', async () => {
    splitBy = { early: 'Quoted a price', price: 'Quoted a price', dish: 'Described a dish' };
    review = new ReviewSop({ db, jobs, gateway: async () => gatewayOf(answerer) });
    await review.start();
    for (const w of ['early 1', 'early 2', 'price 1', 'price 2', 'price 3', 'dish 1', 'dish 2', 'dish 3']) await checked(w);
    await settle(async () => (await priceRule()).clustered_at !== null);
    const id = (await modesOf())['Quoted a price'].id;

    // The reviewer gives a verdict while the model is splitting again (keeping 2 of its 5).
    splitBy = { early: 'Quoted early', dish: 'Described a dish' };
    model.script = async (call) => {
      if (call.body.messages[0].content.startsWith('You group the findings of one rule')) await review.queries.giveVerdict(WS, id, { verdict: 'real' });
      return script(call);
    };
    expect(await review.queries.recluster(WS, { force: true })).toMatchObject({ reclustered: 1, reason: null });
    expect((await modesOf())['Quoted a price']).toMatchObject({ id, findings: 2, verdict: { verdict: 'real' }, review_state: 'needs_review', review_reason: 'reclustered' });
  }, 30_000);

  it("a reworded rule's failure mode counts only its own findings on the newer wording, not its siblings'", async () => {
    review = new ReviewSop({ db, jobs, gateway: async () => gatewayOf(answerer) });
    await review.start();
    for (const w of ['price 1', 'price 2', 'price 3', 'price 4', 'dish 1', 'dish 2', 'dish 3', 'dish 4']) await checked(w);
    await settle(async () => (await priceRule()).clustered_at !== null);
    // The prices ran an earlier wording of the rule; the dishes the current one (the rule was
    // reworded after the verdict below, as a publish linking the two wordings records it).
    await db.query(`UPDATE sop_findings SET rule_id = 'never-price-v1' WHERE evidence->0->>'quote' LIKE 'price%'`);
    const price = (await modesOf())['Quoted a price'].id;
    await review.queries.giveVerdict(WS, price, { verdict: 'acceptable' });
    await new Promise((r) => setTimeout(r, 20));
    await db.query(`UPDATE sop_patterns SET reworded_at = clock_timestamp() WHERE workspace = $1`, [WS]);
    // Its own findings are all on the wording it judged: closed. The dishes are its sibling's.
    const queue = await review.queries.reviewQueue(WS, { state: ['needs_review', 'closed'] });
    expect(queue.items.find((i) => i.pattern_id === price)).toMatchObject({ review_state: 'closed', review_reason: null });
    expect((await modesOf())['Quoted a price']).toMatchObject({ review_state: 'closed' });
    expect((await review.queries.pattern(WS, (await priceRule()).id, {})).failure_modes.find((m) => m.id === price)).toMatchObject({ review_state: 'closed' });
  }, 30_000);

  it("a failure mode without a verdict of its own has its rule pattern's (inherited), suppressing like its own", async () => {
    review = new ReviewSop({ db, jobs, gateway: async () => gatewayOf(answerer) });
    await review.start();
    for (const w of ['price 1', 'price 2', 'price 3', 'price 4', 'dish 1', 'dish 2', 'dish 3', 'dish 4']) await checked(w);
    await settle(async () => (await priceRule()).clustered_at !== null);
    await review.queries.giveVerdict(WS, (await priceRule()).id, { verdict: 'acceptable', reviewer: 'ana' });
    const inherited = await modesOf();
    for (const name of ['Quoted a price', 'Described a dish']) {
      expect(inherited[name]).toMatchObject({ verdict: { verdict: 'acceptable', reviewer: 'ana', inherited: true }, review_state: 'closed', findings: 0, suppressed: 4 });
    }
    // Its own verdict wins over the rule pattern's: counted again, open.
    await review.queries.giveVerdict(WS, inherited['Quoted a price'].id, { verdict: 'real' });
    const own = await modesOf();
    expect(own['Quoted a price']).toMatchObject({ verdict: { verdict: 'real', inherited: false }, review_state: 'open', findings: 4, suppressed: 0 });
    expect(own['Described a dish']).toMatchObject({ verdict: { verdict: 'acceptable', inherited: true }, suppressed: 4 });
    const closed = await review.queries.reviewQueue(WS, { state: ['closed'] });
    expect(closed.items.map((i) => [i.name, i.verdict?.inherited])).toEqual([['Described a dish', true]]);
  }, 30_000);

  it("the queue's new_findings of a failure mode without a verdict of its own count from its rule pattern's latest verdict", async () => {
    review = new ReviewSop({ db, jobs, gateway: async () => gatewayOf(answerer) });
    await review.start();
    for (const w of ['price 1', 'price 2', 'price 3', 'price 4', 'dish 1', 'dish 2', 'dish 3', 'dish 4']) await checked(w);
    await settle(async () => (await priceRule()).clustered_at !== null);
    const queued = async () =>
      Object.fromEntries((await review.queries.reviewQueue(WS, { state: ['needs_review', 'open'] })).items.map((i) => [i.name, { verdict: i.verdict?.verdict ?? null, inherited: i.verdict?.inherited ?? null, new_findings: i.new_findings }]));
    // No verdict anywhere: every finding is new.
    expect(await queued()).toEqual({ 'Quoted a price': { verdict: null, inherited: null, new_findings: 4 }, 'Described a dish': { verdict: null, inherited: null, new_findings: 4 } });

    // A real verdict on the rule pattern: its failure modes go by it, and nothing came since.
    await review.queries.giveVerdict(WS, (await priceRule()).id, { verdict: 'real' });
    expect(await queued()).toEqual({ 'Quoted a price': { verdict: 'real', inherited: true, new_findings: 0 }, 'Described a dish': { verdict: 'real', inherited: true, new_findings: 0 } });
    await checked('price 5');
    await settle();
    expect(await queued()).toMatchObject({ 'Quoted a price': { inherited: true, new_findings: 1 }, 'Described a dish': { inherited: true, new_findings: 0 } });

    // A verdict of its own counts from it.
    const modes = await modesOf();
    await review.queries.giveVerdict(WS, modes['Quoted a price'].id, { verdict: 'sop_wrong' });
    await checked('dish 5');
    await settle();
    expect(await queued()).toEqual({ 'Quoted a price': { verdict: 'sop_wrong', inherited: false, new_findings: 0 }, 'Described a dish': { verdict: 'real', inherited: true, new_findings: 1 } });
  }, 30_000);

  it('a renamed theme that still holds the same rule patterns keeps its id', async () => {
    review = new ReviewSop({ db, jobs, gateway: async () => gatewayOf(answerer) });
    await review.start();
    await checked('price 1', [PRICE, READ_BACK]);
    await settle(async () => (await repo.patternsOf(db, WS)).every((p) => p.theme_id !== null));
    const before = Object.fromEntries((await list()).items.map((i) => [i.rule.rule_id, i.theme!]));
    themeNames = { step: 'Saying goodbye', never: 'Taking the order' };
    expect(await review.queries.recluster(WS, {})).toMatchObject({ themed: 1, reason: null });
    const after = Object.fromEntries((await list()).items.map((i) => [i.rule.rule_id, i.theme!]));
    expect(after[READ_BACK.id]).toEqual({ id: before[READ_BACK.id].id, name: 'Saying goodbye' });
    expect(after[PRICE.id]).toEqual(before[PRICE.id]);
  }, 30_000);

  it('a failing model splits nothing and says why; the rule pattern stays whole', async () => {
    model.script = () => ({ status: 500 });
    review = new ReviewSop({ db, jobs, gateway: async () => gatewayOf(answerer) });
    await review.start();
    for (let i = 1; i <= 8; i++) await checked(`price ${i}`);
    await settle();
    const r = await review.queries.recluster(WS, { procedure: PROC });
    expect(r.reclustered).toBe(0);
    expect(r.reason).toMatch(/take-order never-price was not split: the model failed/);
    expect(Object.keys(await modesOf())).toEqual([]);
  }, 30_000);
});

describe('failure modes without a model', () => {
  it('no split at 8 findings: the rule pattern stays whole, and recluster says what it could not do', async () => {
    review = new ReviewSop({ db, jobs, gateway: async () => null });
    await review.start();
    for (let i = 1; i <= 9; i++) await checked(`price ${i}`);
    await settle();
    expect(await members()).toEqual({ 'Volunteer a price or a description of a dish': [1, 2, 3, 4, 5, 6, 7, 8, 9].map((i) => `price ${i}`) });
    expect(await review.queries.recluster(WS, {})).toEqual({
      assigned: 0,
      reclustered: 0,
      themed: 0,
      reason: 'no reasoning model is configured: 1 rule due for a split stays whole, and themes were not grouped',
    });
    expect((await priceRule()).clustered_at).toBeNull();
    expect(model.calls).toHaveLength(0);
  });

  it('a recluster that outlives its wait answers 504 still_running, and the run goes on', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    review = new ReviewSop({ db, jobs, gateway: async () => (await gate, null), reclusterWaitMs: 200 });
    await review.start();
    const err = await review.queries.recluster(WS, {}).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 504, code: 'still_running', message: expect.stringContaining('the recluster of luigis is still running after 200 ms') });
    release();
    // One run at a time per workspace: the next one waits for it, so it answers once that one is done.
    expect(await review.queries.recluster(WS, {})).toMatchObject({ assigned: 0, reclustered: 0 });
  });

  it('refuses a bad body by name', async () => {
    review = new ReviewSop({ db, jobs, gateway: async () => null });
    await review.start();
    await expect(review.queries.recluster(WS, { everything: true } as never)).rejects.toThrow(/unknown field "everything"/);
    await expect(review.queries.recluster(WS, { force: 'yes' } as never)).rejects.toThrow(/"force" must be true or false/);
    await expect(review.queries.recluster(WS, { rule: '' } as never)).rejects.toThrow(/"rule" must be a non-empty string/);
  });

  it('refuses a procedure or rule the workspace does not know, naming it (404 not_in_release), before running anything', async () => {
    review = new ReviewSop({ db, jobs, gateway: async () => null });
    await review.start();
    await checked('price 1', [PRICE], false);
    const none = 'in none of its releases, findings or patterns: nothing to recluster';
    await expect(review.queries.recluster(WS, { procedure: 'nope' })).rejects.toMatchObject({ status: 404, code: 'not_in_release', message: `no procedure nope in workspace ${WS}: it is ${none}` });
    await expect(review.queries.recluster(WS, { rule: 'nope' })).rejects.toMatchObject({ status: 404, code: 'not_in_release', message: `no rule nope in workspace ${WS}: it is ${none}` });
    await expect(review.queries.recluster(WS, { procedure: PROC, rule: 'nope' })).rejects.toMatchObject({
      status: 404,
      code: 'not_in_release',
      message: `no rule nope in procedure ${PROC} of workspace ${WS}: it is ${none}`,
    });
    // Refused before the job: the finding waits unassigned.
    expect(await db.query('SELECT 1 FROM sop_findings WHERE pattern_id IS NOT NULL')).toMatchObject({ rows: [] });
    // Known from a finding (before any pattern), and a procedure and rule known from a release only.
    expect(await review.queries.recluster(WS, { procedure: PROC, rule: PRICE.id })).toMatchObject({ assigned: 1 });
    const lock = { procedures: [{ procedure_id: 'pay-bill', rules: [{ rule_id: 'step-card', kind: 'step', index: 1, text: 'Take the card.' }] }] };
    await db.query(`INSERT INTO sop_releases (id, workspace, number, lock) VALUES ('rel-recluster-known', $1, 900, $2::jsonb)`, [WS, JSON.stringify(lock)]);
    try {
      expect(await review.queries.recluster(WS, { procedure: 'pay-bill', rule: 'step-card' })).toMatchObject({ assigned: 0, reclustered: 0 });
      await expect(review.queries.recluster(WS, { procedure: 'pay-bill', rule: PRICE.id })).rejects.toMatchObject({ status: 404, message: expect.stringMatching(/^no rule never-price in procedure pay-bill of workspace luigis/) });
    } finally {
      await db.query(`DELETE FROM sop_releases WHERE id = 'rel-recluster-known'`);
    }
  });
});
