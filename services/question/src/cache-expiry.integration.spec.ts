/**
 * An answer is used for its time to live from the moment the model gave it, whichever process
 * reads it: a replica (or the service started again) that finds it in the deployment's shared
 * cache keeps its copy only until the shared entry expires. Against the real shared caches:
 * the embedded one (the `shared_cache` table, PGlite, with a clock the test moves) and Redis,
 * and a local OpenAI-compatible server.
 */
import { parseCheck, type QuestionCheck } from '@neatroots/checks';
import { DbSharedCache, migrate, openAiChatModel, openPglite, RedisSharedCache, serviceOrSkip, uniqueName, until } from '@neatroots/platform';
import type { Db, SharedCache } from '@neatroots/ports';
import { QuestionAnswerer, type CacheResult, type EvidenceDoc } from '@neatroots/questions';
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
const replica = (shared: SharedCache, now?: () => number, ttlMs?: number, onCacheLookup?: (result: CacheResult) => void) =>
  new QuestionAnswerer({
    local: openAiChatModel({ role: 'local', baseURL: fake.url, model: 'llama-test', timeoutMs: 2_000 }),
    queue: { maxWaitMs: 0 },
    cache: { shared, now, ttlMs },
    onCacheLookup: onCacheLookup && ((kind, result) => kind === 'question' && onCacheLookup(result)),
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
      const ttlMs = 5_000;
      // When two's lookups found the answer (in its memory, in the shared cache) or missed it.
      const lookups: { result: CacheResult; at: number }[] = [];
      const one = replica(caches[0].named('answers'), undefined, ttlMs);
      const two = replica(caches[1].named('answers'), undefined, ttlMs, (result) => void lookups.push({ result, at: Date.now() }));
      const t0 = Date.now();
      await one.ask({ q: CLAIM, evidence });
      // The model answered between t0 and t1: the shared entry expires a ttl after that.
      const t1 = Date.now();
      expect(judged()).toBe(1);
      await new Promise((r) => setTimeout(r, t1 + 1_000 - Date.now()));
      // A second later the other replica reads it from the shared cache and keeps a copy.
      const readAt = Date.now();
      expect(await two.ask({ q: CLAIM, evidence })).toMatchObject({ cached: true });
      expect(lookups.map((l) => l.result)).toEqual(['shared']);
      expect(judged()).toBe(1);
      // Its copy serves it until the entry expires, then it misses and the model is asked again.
      const again = await until('the copy to expire', async () => {
        const a = await two.ask({ q: CLAIM, evidence });
        return a.cached ? undefined : a;
      }, 30_000, 50);
      expect(again.cached).toBeUndefined();
      expect(judged()).toBe(2);
      const miss = lookups.find((l) => l.result === 'miss')!;
      expect(lookups.filter((l) => l.result === 'miss')).toHaveLength(1);
      expect(lookups.slice(1, -1).every((l) => l.result === 'memory')).toBe(true);
      // Not before a ttl from the model's answer, and before a ttl counted from the copy
      // (readAt or later) was up: the copy expired with the shared entry, a second earlier.
      expect(miss.at).toBeGreaterThan(t0 + ttlMs);
      expect(miss.at).toBeLessThan(readAt + ttlMs);
      one.close();
      two.close();
    } finally {
      await Promise.all(caches.map((c) => c.close()));
    }
  });
});
