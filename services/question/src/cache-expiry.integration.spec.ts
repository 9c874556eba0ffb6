/**
 * An answer is used for its time to live from the moment the model gave it, whichever process
 * reads it: a replica (or the service started again) that finds it in the deployment's shared
 * cache keeps its copy only until the shared entry expires. Against the real shared caches:
 * the embedded one (the `shared_cache` table, PGlite, with a clock the test moves) and Redis,
 * and a local OpenAI-compatible server.
 */
import { parseCheck, type QuestionCheck } from '@neatroots/checks';
import { DbSharedCache, migrate, openAiChatModel, openPglite, RedisSharedCache, serviceOrSkip, uniqueName } from '@neatroots/platform';
import type { Db, SharedCache } from '@neatroots/ports';
import { QuestionAnswerer, type EvidenceDoc } from '@neatroots/questions';
import { judgeReply, startFakeOpenAI, type FakeOpenAI } from '../../../libs/platform/src/models/fake-openai.test';

let fake: FakeOpenAI;
beforeAll(async () => {
  fake = await startFakeOpenAI((call) => (call.kind === 'judge' ? judgeReply(call, () => ({ p: 0.05, quote: '' })) : { json: {} }));
});
afterAll(() => fake.close());
beforeEach(() => {
  fake.calls.length = 0;
});

const CLAIM = parseCheck({ id: 'refund-claim', kind: 'yes_no', scope: 'trace', when: 'end', ask: 'Did the agent claim a refund it did not make?' }, 'test.yaml', 'user') as QuestionCheck;
const evidence: EvidenceDoc = { spans: [], text: 'The agent wrote: your refund of $40 went through.' };
const MIN = 60_000;

/** A question service's answerer over the shared cache `shared`, on the clock `now`. */
const replica = (shared: SharedCache, now?: () => number, ttlMs?: number) =>
  new QuestionAnswerer({
    local: openAiChatModel({ role: 'local', baseURL: fake.url, model: 'llama-test', timeoutMs: 2_000 }),
    queue: { maxWaitMs: 0 },
    cache: { shared, now, ttlMs },
  });
const judged = () => fake.calls.filter((c) => c.kind === 'judge').length;

describe('the embedded shared cache (PGlite)', () => {
  let db: Db;
  beforeAll(async () => {
    db = await openPglite();
    await migrate(db);
  }, 60_000);
  afterAll(() => db.close());

  it('keeps a copy read from it only until the entry expires, 15 minutes after the model answered', async () => {
    let t = 1_700_000_000_000;
    const now = () => t;
    const cache = new DbSharedCache({ db, now });
    const [one, two] = [replica(cache.named('answers'), now), replica(cache.named('answers'), now)];
    expect(await one.ask({ q: CLAIM, evidence })).toMatchObject({ status: 'answered', flagged: false });
    expect(judged()).toBe(1);
    // Ten minutes later the other replica reads it from the shared cache and keeps a copy.
    t += 10 * MIN;
    expect(await two.ask({ q: CLAIM, evidence })).toMatchObject({ status: 'answered', cached: true });
    t += 4 * MIN;
    expect(await two.ask({ q: CLAIM, evidence })).toMatchObject({ status: 'answered', cached: true });
    expect(judged()).toBe(1);
    // Fifteen minutes and a second after the model answered: expired everywhere, the model is asked again.
    t += MIN + 1_000;
    const again = await two.ask({ q: CLAIM, evidence });
    expect(again.cached).toBeUndefined();
    expect(judged()).toBe(2);
    // The fresh answer is kept for its own 15 minutes.
    t += 14 * MIN;
    expect(await one.ask({ q: CLAIM, evidence })).toMatchObject({ cached: true });
    expect(judged()).toBe(2);
    one.close();
    two.close();
  });
});

describe('Redis', () => {
  const redis = serviceOrSkip('redis', 'the question service\'s shared answers');
  const maybe = redis ? it : it.skip;

  maybe('keeps a copy read from it only until the entry expires', async () => {
    const prefix = uniqueName('it_expiry');
    const caches = [new RedisSharedCache({ url: redis!.url, prefix }), new RedisSharedCache({ url: redis!.url, prefix })];
    try {
      for (const c of caches) await c.connect();
      const ttlMs = 2_000;
      const [one, two] = caches.map((c) => replica(c.named('answers'), undefined, ttlMs));
      const t0 = Date.now();
      await one.ask({ q: CLAIM, evidence });
      expect(judged()).toBe(1);
      await new Promise((r) => setTimeout(r, 1_200 - (Date.now() - t0)));
      expect(await two.ask({ q: CLAIM, evidence })).toMatchObject({ cached: true });
      expect(judged()).toBe(1);
      // Past the entry's expiry, though not past a time to live counted from the copy.
      await new Promise((r) => setTimeout(r, 2_300 - (Date.now() - t0)));
      const again = await two.ask({ q: CLAIM, evidence });
      expect(again.cached).toBeUndefined();
      expect(judged()).toBe(2);
      one.close();
      two.close();
    } finally {
      await Promise.all(caches.map((c) => c.close()));
    }
  });
});
