import { jaccard, planRecluster, reclusterDue, type OldCluster, type ReclusterWhy, type RuleClusterFacts } from './recluster';
import { reviewState } from './review-state';
import type { VerdictEntry } from './verdicts';

/** Finding ids f<from>..f<to>. */
const ids = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `f${from + i}`);
const V = (verdict: VerdictEntry['verdict']): VerdictEntry => ({ verdict, note: null, reviewer: 'ana', created_at: '2026-11-01T00:00:00.000Z' });
const old = (id: string, findings: string[], verdict: VerdictEntry | null = null): OldCluster => ({ id, findings, verdict });

describe('when a rule is due for a split', () => {
  const T: [string, RuleClusterFacts, ReclusterWhy | null][] = [
    ['7 findings, never split', { findings: 7, clustered: false, new_since_clustering: 7, in_other: 0 }, null],
    ['8 findings, never split', { findings: 8, clustered: false, new_since_clustering: 8, in_other: 0 }, 'first_split'],
    ['split, 24 new since', { findings: 60, clustered: true, new_since_clustering: 24, in_other: 0 }, null],
    ['split, 25 new since', { findings: 60, clustered: true, new_since_clustering: 25, in_other: 0 }, 'new_findings'],
    ['other holds exactly 25%, 5 new', { findings: 100, clustered: true, new_since_clustering: 5, in_other: 25 }, null],
    ['other holds 26%, 5 new', { findings: 100, clustered: true, new_since_clustering: 5, in_other: 26 }, 'other_share'],
    ['other holds 26%, only 4 new', { findings: 100, clustered: true, new_since_clustering: 4, in_other: 26 }, null],
    ['600 findings, 60 of the newest 200 in other (30% of what a split shows), 5 new', { findings: 600, clustered: true, new_since_clustering: 5, in_other: 60 }, 'other_share'],
    ['600 findings, 50 of the newest 200 in other (25%), 5 new', { findings: 600, clustered: true, new_since_clustering: 5, in_other: 50 }, null],
  ];
  it.each(T)('%s', (_, facts, why) => expect(reclusterDue(facts)).toBe(why));
});

describe('matching new clusters to old by Jaccard over finding ids', () => {
  it('computes |a∩b| / |a∪b|', () => {
    expect(jaccard(new Set(ids(1, 10)), new Set(ids(1, 3)))).toBe(0.3);
    expect(jaccard(new Set(), new Set())).toBe(0);
  });

  // The old failure mode A holds f1..f10 and has a verdict; the one new cluster varies.
  const T: [string, string[], string | null, boolean][] = [
    ['at 0.3 (3 of 10): matched, kept less than half', ids(1, 3), 'A', true],
    ['just under 0.3 (3 of 11): a new cluster, A retired', [...ids(1, 3), 'f11'], null, false],
    ['over 0.3 (4 of 10): matched', ids(1, 4), 'A', true],
    ['exactly half kept: not material', ids(1, 5), 'A', false],
  ];
  it.each(T)('%s', (_, findings, id, material) => {
    const plan = planRecluster([old('A', ids(1, 10), V('real'))], [{ findings }]);
    expect(plan.clusters[0]).toMatchObject({ id, material });
    expect(plan.retired.map((r) => r.id)).toEqual(id ? [] : ['A']);
  });

  it('matches one to one, best first; the loser is retired', () => {
    // X is nearer A (0.9) than B (8/9): A keeps X; B's next best (Y) is under 0.3.
    const plan = planRecluster([old('B', ids(1, 8)), old('A', ids(1, 10))], [{ findings: ids(1, 9) }, { findings: ['f8', 'f20', 'f21', 'f22'] }]);
    expect(plan.clusters.map((c) => c.id)).toEqual(['A', null]);
    expect(plan.retired).toEqual([{ id: 'B', carried_to: null }]);
  });

  it('keeps two old failure modes apart when each has its own new cluster', () => {
    const plan = planRecluster([old('A', ids(1, 10)), old('B', [...ids(1, 6), ...ids(21, 24)])], [{ findings: ids(1, 10) }, { findings: ids(21, 26) }]);
    expect(plan.clusters.map((c) => c.id)).toEqual(['A', 'B']);
    expect(plan.retired).toEqual([]);
  });

  it('a first split has nothing to match: every cluster is new', () => {
    const plan = planRecluster([], [{ findings: ids(1, 5) }, { findings: ids(6, 9) }]);
    expect(plan.clusters.map((c) => c.id)).toEqual([null, null]);
  });
});

describe('verdict carry-over from a retired failure mode', () => {
  // A (f1..f10) continues as X; B (f11..f20) is retired: X takes k of B's findings, the rest go
  // to Y where they are a small part. J(B, X) = k / 20.
  const split = (k: number) => [{ findings: [...ids(1, 10), ...ids(11, 10 + k)] }, { findings: [...ids(11 + k, 20), ...ids(30, 40)] }];

  const T: [string, number, boolean][] = [
    ['at 0.3 (6 of B in X)', 6, true],
    ['just under 0.3 (5 of B in X)', 5, false],
    ['over 0.3 (7 of B in X)', 7, true],
  ];
  it.each(T)('%s', (_, k, carried) => {
    const plan = planRecluster([old('A', ids(1, 10)), old('B', ids(11, 20), V('acceptable'))], split(k));
    expect(plan.clusters[0].id).toBe('A');
    expect(plan.retired).toEqual([{ id: 'B', carried_to: carried ? 0 : null }]);
    expect(plan.clusters[0].carried).toEqual(carried ? { from: 'B', verdict: { ...V('acceptable'), carried_over: true } } : null);
    if (carried) expect(reviewState({ verdict: plan.clusters[0].carried!.verdict }).review_reason).toBe('carried_over');
  });

  it('does not replace the verdict of the cluster it lands on', () => {
    const plan = planRecluster([old('A', ids(1, 10), V('real')), old('B', ids(11, 20), V('acceptable'))], split(7));
    expect(plan.clusters[0].carried).toBeNull();
    expect(plan.retired).toEqual([{ id: 'B', carried_to: null }]);
  });

  it('a retired failure mode without a verdict carries nothing', () => {
    const plan = planRecluster([old('A', ids(1, 10)), old('B', ids(11, 20))], split(7));
    expect(plan.clusters[0].carried).toBeNull();
  });
});
