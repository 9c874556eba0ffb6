/**
 * The question scheduler's windows in Redis, as the distributed rule engine keeps them: a long
 * run's span ids in the hash beside its window (QUESTION_WINDOW_MEMBER_FIELDS) and its ring in a
 * list (QUESTION_WINDOW_LIST_FIELDS), each batch loading only its own spans' ids and saving only the
 * summaries it added, over replicas that each start with nothing in memory.
 */
import { Redis } from 'ioredis';
import { openRedisWindowStore, serviceOrSkip, uniqueName, type RedisWindowStore } from '@neatroots/platform';
import { span, question, T0 } from './fixtures.test';
import { questionSet } from './library';
import { QUESTION_WINDOW_LIST_FIELDS, QUESTION_WINDOW_MEMBER_FIELDS, QuestionScheduler, questionWindowKey, type QuestionWindow, type SchedulerWindow } from './scheduler';
import type { QuestionTask } from './types';

const redis = serviceOrSkip('redis', 'the question scheduler on Redis');

(redis ? describe : describe.skip)('QuestionScheduler on Redis, member fields', () => {
  const perCall = question({ id: 'negative-amount', scope: 'span', ask: 'Did this call pass a negative amount?' });
  const set = questionSet([perCall]);
  const p = uniqueName('it_qs');
  let raw: Redis;

  beforeAll(() => {
    raw = new Redis(redis!.url);
  });
  afterAll(async () => {
    const keys = await raw.keys(`${p}:*`);
    if (keys.length) await raw.del(...keys);
    raw.disconnect();
  });

  it('asks nothing new of a long run\'s span exported again, and keeps its ring, over replicas that load only each batch\'s ids', async () => {
    const stores: RedisWindowStore<SchedulerWindow>[] = [];
    let s: QuestionScheduler | undefined;
    const asked: string[] = [];
    try {
      const batches: ReturnType<typeof span>[][] = Array.from({ length: 4 }, (_, b) => Array.from({ length: 100 }, (_, i) => span('r1', `s${b * 100 + i}`, {}, T0 + b * 100 + i)));
      // then an early span exported again (its output changed), beside a new one; then two batches of one new span each
      batches.push([span('r1', 's399', { output: 'the second copy' }, T0 + 500), span('r1', 's5', {}, T0 + 500), span('r1', 's400', {}, T0 + 501)]);
      batches.push([span('r1', 's401', {}, T0 + 502)], [span('r1', 's402', {}, T0 + 503)]);
      const askedBy: string[][] = [];
      for (let b = 0; b < batches.length; b++) {
        if (b % 2 === 0) {
          const store = await openRedisWindowStore<SchedulerWindow>({ url: redis!.url, prefix: p, memberFields: QUESTION_WINDOW_MEMBER_FIELDS, listFields: QUESTION_WINDOW_LIST_FIELDS });
          stores.push(store);
          s = new QuestionScheduler({ windows: store, questions: () => set, ringSize: 8 });
        }
        const out = await s!.process(batches[b]);
        await out.commit();
        const these = out.tasks.filter((t): t is QuestionTask => t.type === 'question').map((t) => t.anchor);
        askedBy.push(these);
        asked.push(...these);
      }
      const key = questionWindowKey('p', 'r1');
      // the span ids moved to the hash beside the window, the ring to a list; each span asked about once
      expect(JSON.parse((await raw.get(`${p}:w:${key}`))!)).toMatchObject({ seen: '#hash', ring: '#list' });
      expect(await raw.hlen(`${p}:w:${key}:m`)).toBe(403);
      // the batch with the copy asks about its new span only; no span is asked about twice
      expect(askedBy.slice(4)).toEqual([['s400'], ['s401'], ['s402']]);
      expect(new Set(asked).size).toBe(asked.length);
      const w = (await stores[0].load([key])).get(key) as QuestionWindow;
      // the copy exported again replaced its summary in the ring; s5, long out of the ring, added nothing
      expect(w.ring.map((x) => x.id)).toEqual(['s395', 's396', 's397', 's398', 's399', 's400', 's401', 's402']);
      expect(w.ring.find((x) => x.id === 's399')!.output).toBe('the second copy');
      expect(w.dropped).toBe(395);
      // the ring's list in Redis is the ring, in order
      expect((await raw.lrange(`${p}:w:${key}:l:ring`, 0, -1)).map((x) => (JSON.parse(x) as { id: string }).id)).toEqual(w.ring.map((x) => x.id));
    } finally {
      await Promise.all(stores.map((x) => x.close()));
    }
  });
});
