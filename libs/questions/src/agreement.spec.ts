import { AgreementTracker } from './agreement';

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

  it('reports agreement per question', async () => {
    const a = new AgreementTracker();
    a.record('k1', 'q1', true, true);
    a.record('k1', 'q1', false, false);
    expect(await a.stats()).toEqual([{ question_key: 'k1', check_id: 'q1', answers: 2, agreed: 1, rate: 0.5, recall: 1, classifier_first: false }]);
  });
});
