import { jaccard, MATCH_MIN_JACCARD } from './recluster';

/**
 * Which existing theme each regrouped theme continues ("existing theme names and ids are kept
 * whenever they still fit"): first by name (the model was shown the existing names and kept
 * those that fit), then, one to one and best first, by the rule patterns they share (Jaccard at
 * least 0.3, as failure modes are matched), which keeps the id under the model's new name. An
 * existing theme that continues none is retired.
 */
export interface OldTheme {
  id: string;
  name: string;
  patterns: readonly string[];
}

export interface ThemePlan {
  /** Per new theme, in order: the id it keeps, or null (a new theme). */
  ids: (string | null)[];
  retired: string[];
}

export function planThemes(old: readonly OldTheme[], next: readonly { name: string; patterns: readonly string[] }[]): ThemePlan {
  const ids: (string | null)[] = next.map(() => null);
  const used = new Set<string>();
  next.forEach((t, i) => {
    const same = old.find((o) => !used.has(o.id) && o.name.toLowerCase() === t.name.toLowerCase());
    if (same) {
      ids[i] = same.id;
      used.add(same.id);
    }
  });
  const pairs: { o: number; n: number; j: number }[] = [];
  old.forEach((o, oi) => {
    if (used.has(o.id)) return;
    next.forEach((t, n) => {
      if (ids[n] !== null) return;
      const j = jaccard(new Set(o.patterns), new Set(t.patterns));
      if (j >= MATCH_MIN_JACCARD) pairs.push({ o: oi, n, j });
    });
  });
  pairs.sort((a, b) => b.j - a.j || a.o - b.o || a.n - b.n);
  for (const p of pairs) {
    if (used.has(old[p.o].id) || ids[p.n] !== null) continue;
    ids[p.n] = old[p.o].id;
    used.add(old[p.o].id);
  }
  return { ids, retired: old.filter((o) => !used.has(o.id)).map((o) => o.id) };
}
