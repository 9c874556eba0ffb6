import { AgreementTracker, ClassifierFirstView } from './agreement';

describe('agreement and the routing switch', () => {
  it('switches a question to the classifier once it agrees on 90% of at least 30 answers', () => {
    const a = new AgreementTracker();
    for (let i = 0; i < 29; i++) a.record('k', 'q', true);
    expect(a.classifierFirst('k')).toBe(false);
    a.record('k', 'q', true);
    expect(a.classifierFirst('k')).toBe(true);
  });

  it('goes back to the LLM when recent agreement drops below 90%', () => {
    const a = new AgreementTracker({ window: 30 });
    for (let i = 0; i < 30; i++) a.record('k', 'q', true);
    for (let i = 0; i < 3; i++) a.record('k', 'q', false);
    expect(a.classifierFirst('k')).toBe(true);
    a.record('k', 'q', false);
    expect(a.classifierFirst('k')).toBe(false);
  });

  it('does not switch a classifier that misses the problems the LLM finds, however often it agrees', () => {
    const a = new AgreementTracker();
    // 27 passes both agree on, 3 problems it missed: 90% agreement, no problem caught.
    for (let i = 0; i < 27; i++) a.record('k', 'q', true, false);
    for (let i = 0; i < 3; i++) a.record('k', 'q', false, true);
    expect(a.classifierFirst('k')).toBe(false);
    const b = new AgreementTracker();
    for (let i = 0; i < 27; i++) b.record('k', 'q', true, false);
    for (let i = 0; i < 3; i++) b.record('k', 'q', true, true);
    expect(b.classifierFirst('k')).toBe(true);
  });

  it('without a store, keeps at most maxRecords records, the least recently used going first', () => {
    const a = new AgreementTracker({ maxRecords: 2 });
    a.record('k1', 'q1', true);
    a.record('k2', 'q2', true);
    a.record('k1', 'q1', true);
    a.record('k3', 'q3', true);
    expect(a.held().records).toBe(2);
    expect(['k1', 'k2', 'k3'].map((k) => a.get(k)?.answers)).toEqual([2, undefined, 1]);
  });

  it('reports agreement per question', async () => {
    const a = new AgreementTracker();
    a.record('k1', 'q1', true, true);
    a.record('k1', 'q1', false, false);
    expect(await a.stats()).toEqual([{ question_key: 'k1', check_id: 'q1', answers: 2, agreed: 1, rate: 0.5, recall: 1, classifier_first: false }]);
  });
});

describe('ClassifierFirstView: the switch as another process reads it', () => {
  const rec = (key: string, recent: string) => ({ key, check_id: key, answers: recent.length, agreed: [...recent].filter((c) => c === 'a' || c === 'A').length, recent });

  it('says which questions go to the classifier first, from the store, refreshed in the background', async () => {
    let now = 0;
    let records = [rec('first', 'a'.repeat(30)), rec('too-few', 'a'.repeat(29)), rec('misses', 'a'.repeat(27) + 'DDD')];
    let reads = 0;
    const view = new ClassifierFirstView(async () => (reads++, records), { refreshMs: 1000, now: () => now });
    expect(view.has('first')).toBe(false); // nothing read yet: the cap applies
    await view.refresh();
    expect([view.has('first'), view.has('too-few'), view.has('misses')]).toEqual([true, false, false]);
    records = [rec('too-few', 'a'.repeat(30))];
    now = 500;
    view.has('first');
    await Promise.resolve();
    expect(reads).toBe(1); // the first has() and refresh() shared one read; none again within refreshMs
    now = 2000;
    view.has('first'); // starts a read
    await new Promise((r) => setImmediate(r));
    expect([view.has('first'), view.has('too-few')]).toEqual([false, true]);
  });

  it('keeps what it read last when a read fails, and says why', async () => {
    const errors: string[] = [];
    let fail = false;
    const view = new ClassifierFirstView(async () => {
      if (fail) throw new Error('review unavailable');
      return [rec('first', 'a'.repeat(30))];
    }, { onError: (e) => errors.push((e as Error).message) });
    await view.refresh();
    fail = true;
    await view.refresh();
    expect(view.has('first')).toBe(true);
    expect(errors).toEqual(['review unavailable']);
  });
});
