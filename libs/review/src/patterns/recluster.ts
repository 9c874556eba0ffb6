import type { VerdictEntry } from './verdicts';

/**
 * The reclustering rules for a rule pattern's failure modes (the seed's "Failure modes"), as
 * pure functions: when a rule is due for a split, and how a new split is matched to the old one.
 * The split itself (the reasoning model naming at most 5 ways the agent failed the rule) and the
 * writes are elsewhere; this only decides.
 */

/** Findings a rule needs before its first split. */
export const SPLIT_AT_FINDINGS = 8;
/** Findings since the last clustering that make a split rule due again. */
export const RECLUSTER_AFTER_NEW = 25;
/** The share of a rule's findings in `other` above which it is due again... */
export const OTHER_SHARE_MAX = 0.25;
/** ...provided at least this many arrived since the last clustering (else it would loop). */
export const OTHER_MIN_NEW = 5;
/** The least member overlap (Jaccard over finding ids) for a new cluster to be an old one. */
export const MATCH_MIN_JACCARD = 0.3;
/** Named failure modes a split may have, besides `other`. */
export const MAX_FAILURE_MODES = 5;
/**
 * Findings the model reads for one split: a rule's newest, so a prompt stays a prompt. A split
 * judges only these (matching, material, carry-over); the older ones stay where they are, and the
 * share in `other` is measured on them too (older findings in `other` were never shown again, so
 * counting them would make the rule due for ever).
 */
export const SPLIT_MAX_FINDINGS = 200;

export interface RuleClusterFacts {
  /** The rule pattern's findings (all of them, across its failure modes and other). */
  findings: number;
  /** Whether it was ever split (clustered_at not null). */
  clustered: boolean;
  /** Findings that arrived since its last clustering. */
  new_since_clustering: number;
  /** Of its newest SPLIT_MAX_FINDINGS findings (what a split shows the model), those in its `other` sub-pattern. */
  in_other: number;
}

export type ReclusterWhy = 'first_split' | 'new_findings' | 'other_share';

/** Why the rule is due for a (re)split now, or null. The daily cron reclusters regardless. */
export function reclusterDue(f: RuleClusterFacts): ReclusterWhy | null {
  if (!f.clustered) return f.findings >= SPLIT_AT_FINDINGS ? 'first_split' : null;
  if (f.new_since_clustering >= RECLUSTER_AFTER_NEW) return 'new_findings';
  // The share in other of what a split would show the model (the newest SPLIT_MAX_FINDINGS).
  const shown = Math.min(f.findings, SPLIT_MAX_FINDINGS);
  if (shown > 0 && f.in_other / shown > OTHER_SHARE_MAX && f.new_since_clustering >= OTHER_MIN_NEW) return 'other_share';
  return null;
}

/** |a ∩ b| / |a ∪ b| over finding ids; two empty sets share nothing. */
export function jaccard(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  const inter = intersection(a, b);
  const union = a.size + b.size - inter;
  return union === 0 ? 0 : inter / union;
}

function intersection(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  let n = 0;
  for (const id of small) if (large.has(id)) n++;
  return n;
}

export interface OldCluster<V extends VerdictEntry = VerdictEntry> {
  id: string;
  /** Its findings the model was shown (a split judges only those; the others are not compared). */
  findings: readonly string[];
  /** Its own latest verdict (not inherited), or null. */
  verdict: V | null;
}

export interface NewCluster {
  findings: readonly string[];
}

export interface ClusterOutcome<V extends VerdictEntry = VerdictEntry> {
  /** Index into the new clusters. */
  index: number;
  /** The old failure mode it continues (keeping its id, name and verdicts), or null: a new one. */
  id: string | null;
  /** Its overlap with that old one (0 for a new cluster). */
  jaccard: number;
  /** It kept less than half of the old one's findings: an older verdict needs review (`reclustered`). */
  material: boolean;
  /** A verdict carried over from a retired failure mode (marked carried_over), or null. */
  carried: { from: string; verdict: V & { carried_over: true } } | null;
}

export interface RetiredOutcome {
  id: string;
  /** The new cluster its verdict went to, or null (no verdict, nowhere at 0.3, or it had its own). */
  carried_to: number | null;
}

export interface ReclusterPlan<V extends VerdictEntry = VerdictEntry> {
  clusters: ClusterOutcome<V>[];
  retired: RetiredOutcome[];
}

/**
 * Matches a new split to the old failure modes. Pairs at Jaccard ≥ 0.3 are taken one to one,
 * best first (ties: the earlier old, then the earlier new, so the plan is the same every run);
 * a matched cluster keeps the old id, name and verdicts. An old one left unmatched is retired,
 * and its verdict carries over to the new cluster that took most of its findings, when their
 * Jaccard is ≥ 0.3 and that cluster has no verdict of its own; should two retired ones reach the
 * same cluster, the one it took more findings from wins.
 */
export function planRecluster<V extends VerdictEntry>(old: readonly OldCluster<V>[], next: readonly NewCluster[]): ReclusterPlan<V> {
  const oldSets = old.map((o) => new Set(o.findings));
  const newSets = next.map((n) => new Set(n.findings));

  const pairs: { o: number; n: number; j: number }[] = [];
  oldSets.forEach((a, o) =>
    newSets.forEach((b, n) => {
      const j = jaccard(a, b);
      if (j >= MATCH_MIN_JACCARD) pairs.push({ o, n, j });
    }),
  );
  pairs.sort((x, y) => y.j - x.j || x.o - y.o || x.n - y.n);

  const oldTaken = new Map<number, { n: number; j: number }>();
  const newTaken = new Map<number, { o: number; j: number }>();
  for (const p of pairs) {
    if (oldTaken.has(p.o) || newTaken.has(p.n)) continue;
    oldTaken.set(p.o, p);
    newTaken.set(p.n, p);
  }

  const clusters: ClusterOutcome<V>[] = next.map((_, index) => {
    const m = newTaken.get(index);
    if (!m) return { index, id: null, jaccard: 0, material: false, carried: null };
    const kept = intersection(oldSets[m.o], newSets[index]);
    return { index, id: old[m.o].id, jaccard: m.j, material: kept * 2 < oldSets[m.o].size, carried: null };
  });

  // Carry-over candidates: each retired verdict to the cluster that took most of its findings.
  const offers: { o: number; n: number; shared: number }[] = [];
  const retired: RetiredOutcome[] = [];
  old.forEach((o, i) => {
    if (oldTaken.has(i)) return;
    retired.push({ id: o.id, carried_to: null });
    if (!o.verdict) return;
    let best = -1;
    let bestShared = 0;
    newSets.forEach((b, n) => {
      const shared = intersection(oldSets[i], b);
      if (shared > bestShared) [best, bestShared] = [n, shared];
    });
    if (best >= 0 && jaccard(oldSets[i], newSets[best]) >= MATCH_MIN_JACCARD) offers.push({ o: i, n: best, shared: bestShared });
  });
  offers.sort((x, y) => y.shared - x.shared || x.o - y.o);
  for (const { o, n } of offers) {
    const target = clusters[n];
    const own = target.id !== null && old.find((x) => x.id === target.id)?.verdict;
    if (own || target.carried) continue;
    const from = old[o];
    target.carried = { from: from.id, verdict: { ...(from.verdict as V), carried_over: true } };
    retired.find((r) => r.id === from.id)!.carried_to = n;
  }
  return { clusters, retired };
}
