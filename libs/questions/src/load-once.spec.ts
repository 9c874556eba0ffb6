import { AgreementTracker, type AgreementRecord } from './agreement';
import { FastClassifier, type ClassifierStore } from './classifier/classifier';
import type { SavedModel } from './classifier/model';
import { question } from './fixtures.test';
import { questionKey } from './judge';
import { LoadOnce } from './load-once';

/** A store whose loads wait until released, as the database does while a span write holds it. */
function slowStore<V>(values: Map<string, V>) {
  const loads: string[][] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  return {
    loads,
    release: () => release(),
    load: async (keys: readonly string[]) => {
      loads.push([...keys]);
      await gate;
      return new Map(keys.filter((k) => values.has(k)).map((k) => [k, values.get(k)!]));
    },
  };
}

it('loads each key once when many ask while the first load still waits', async () => {
  const once = new LoadOnce();
  const store = slowStore(new Map([['a', 1], ['b', 2]]));
  const asked = [once.ready(['a'], (k) => store.load(k).then(() => undefined)), once.ready(['a', 'b'], (k) => store.load(k).then(() => undefined)),
    once.ready(['b', 'a'], (k) => store.load(k).then(() => undefined))];
  store.release();
  await Promise.all(asked);
  expect(store.loads).toEqual([['a'], ['b']]);
  await once.ready(['a', 'b'], (k) => store.load(k).then(() => undefined));
  expect(store.loads).toHaveLength(2);
});

it('tries a failed load again on the next call, and tells every caller that waited on it', async () => {
  const once = new LoadOnce();
  let calls = 0;
  const failing = async () => {
    calls++;
    throw new Error('database down');
  };
  await expect(Promise.all([once.ready(['a'], failing), once.ready(['a'], failing)])).rejects.toThrow('database down');
  expect(calls).toBe(1);
  await once.ready(['a'], async () => void calls++);
  expect(calls).toBe(2);
});

it('remembers at most its bound of keys as loaded, the least recently asked going first, and loads a key let go again', async () => {
  const once = new LoadOnce(3);
  const loads: string[] = [];
  const load = async (keys: string[]) => void loads.push(...keys);
  for (const k of ['a', 'b', 'c']) await once.ready([k], load);
  await once.ready(['a'], load); // asked again: now the most recent
  await once.ready(['d'], load);
  expect(once.size).toBe(3);
  expect(['a', 'b', 'c', 'd'].map((k) => once.has(k))).toEqual([true, false, true, true]);
  await once.ready(['a', 'b'], load);
  expect(loads).toEqual(['a', 'b', 'c', 'd', 'b']);
  once.forget('a');
  await once.ready(['a'], load);
  expect(loads.slice(5)).toEqual(['a']);
});

it('gives the classifier and the agreement tracker one load per question, however many batches ask at once', async () => {
  const tone = question({ id: 'tone', ask: 'Was the agent rude?' });
  const other = question({ id: 'other', ask: 'Did the agent push an upgrade?' });
  let model: SavedModel | undefined;
  const learnt = new FastClassifier({ store: { load: async () => new Map(), save: async (ms) => void (model = ms[0]!.model) }, minTrained: 1 });
  await learnt.ready([tone]);
  learnt.learn(tone, { spans: [], final_output: 'you again?' }, { p: 1 });
  await learnt.flush();
  const models = slowStore(new Map([[questionKey(tone), model!]]));
  const classifier = new FastClassifier({ store: { load: models.load, save: async () => undefined } satisfies ClassifierStore, minTrained: 1 });
  const record: AgreementRecord = { key: questionKey(tone), check_id: 'tone', answers: 40, agreed: 39, recent: 'a'.repeat(40) };
  const agreement = slowStore(new Map([[record.key, record]]));
  const tracker = new AgreementTracker({ store: { load: agreement.load, save: async () => undefined } });
  const batches = Array.from({ length: 20 }, () => Promise.all([classifier.ready([tone, other]), tracker.ready([record.key])]));
  models.release();
  agreement.release();
  await Promise.all(batches);
  expect(models.loads).toEqual([[questionKey(tone), questionKey(other)]]);
  expect(agreement.loads).toEqual([[record.key]]);
  expect(classifier.trained(tone)).toBe(1);
});

it('makes a question ready at once (no promise, no load) only once it is loaded, and with it the least recently used as ready does', async () => {
  const [a, b, c] = ['a', 'b', 'c'].map((id) => question({ id, ask: `Did the agent do ${id} wrong?` }));
  const loads: string[][] = [];
  const store = { load: async (keys: readonly string[]) => (loads.push([...keys]), new Map()), save: async () => undefined };
  const classifier = new FastClassifier({ store, maxLoadedKeys: 2 });
  const tracker = new AgreementTracker({ store, maxLoadedKeys: 2 });
  // Not loaded: ready's promise, which loads it once.
  const first = [classifier.readyNow(a), tracker.readyNow(questionKey(a))];
  expect(first.every((p) => p instanceof Promise)).toBe(true);
  await Promise.all(first);
  expect(loads).toEqual([[questionKey(a)], [questionKey(a)]]);
  // Loaded: at once, nothing read.
  expect([classifier.readyNow(a), tracker.readyNow(questionKey(a))]).toEqual([undefined, undefined]);
  expect(loads).toHaveLength(2);
  // a made ready at once is the most recently used: b then c loaded, b is let go, not a.
  await Promise.all([classifier.ready([b]), tracker.ready([questionKey(b)])]);
  expect([classifier.readyNow(a), tracker.readyNow(questionKey(a))]).toEqual([undefined, undefined]);
  await Promise.all([classifier.ready([c]), tracker.ready([questionKey(c)])]);
  expect(classifier.readyNow(a)).toBeUndefined();
  expect(tracker.readyNow(questionKey(a))).toBeUndefined();
  const again = [classifier.readyNow(b), tracker.readyNow(questionKey(b))];
  expect(again.every((p) => p instanceof Promise)).toBe(true);
  await Promise.all(again);
  expect(loads.slice(2)).toEqual([[questionKey(b)], [questionKey(b)], [questionKey(c)], [questionKey(c)], [questionKey(b)], [questionKey(b)]]);
  // Without a store there is never anything to wait for.
  expect(new FastClassifier().readyNow(a)).toBeUndefined();
  expect(new AgreementTracker().readyNow(questionKey(a))).toBeUndefined();
});
