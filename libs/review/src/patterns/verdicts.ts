/**
 * A reviewer's verdict on a pattern (the seed's "Review and suggestions"):
 *
 *   real           a real agent mistake             its findings keep counting
 *   acceptable     fine in this situation           suppressed, now and later
 *   sop_wrong      the instruction is wrong         keep counting
 *   checker_wrong  sopops misjudged                 suppressed (and negative calibration labels)
 *
 * Verdicts are appended, never edited: the latest is the pattern's verdict, the rest its
 * verdict_history. A failure mode without one has its rule pattern's (inherited: true).
 */
export const VERDICTS = ['real', 'acceptable', 'sop_wrong', 'checker_wrong'] as const;
export type VerdictKind = (typeof VERDICTS)[number];

export function isVerdict(v: unknown): v is VerdictKind {
  return typeof v === 'string' && (VERDICTS as readonly string[]).includes(v);
}

/** Verdicts that take the pattern's findings out of every count. */
export function suppresses(v: VerdictKind): boolean {
  return v === 'acceptable' || v === 'checker_wrong';
}

export interface VerdictEntry {
  verdict: VerdictKind;
  note: string | null;
  reviewer: string | null;
  /** ISO time it was given. */
  created_at: string;
  /** Carried over by a recluster from a retired failure mode, not confirmed since. */
  carried_over?: boolean;
}

/** The pattern's verdict and history from its appended entries (any order): newest wins. */
export function latestVerdict<V extends VerdictEntry>(entries: readonly V[]): { verdict: V | null; history: V[] } {
  const sorted = [...entries].sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0));
  return { verdict: sorted[0] ?? null, history: sorted.slice(1) };
}

/** The verdict a pattern goes by: its own, else (a failure mode) its rule pattern's, marked inherited. */
export function effectiveVerdict<V extends VerdictEntry>(own: V | null, parent: V | null): (V & { inherited: boolean }) | null {
  if (own) return { ...own, inherited: false };
  if (parent) return { ...parent, inherited: true };
  return null;
}
