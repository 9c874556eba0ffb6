import type { FindingRecord, Problem } from './records';

/**
 * The findings' life is domain code (@neatroots/review-domain): when a check goes quiet, a
 * finding's state, precision and retirement. Re-exported here for the repositories and their
 * callers; what follows is how the store folds findings into problems.
 */
export {
  QUIET_AFTER_DISMISSALS,
  RETIRE_MIN_FINDINGS,
  RETIRE_BELOW_PRECISION,
  findingState,
  isQuiet,
  checkStat,
} from '@neatroots/review-domain';

/** Findings of one group in one run are one problem; a finding with no group is its own. */
export function problemKey(f: Pick<FindingRecord, 'id' | 'run_id' | 'group'>): string {
  return f.group ? `g\u001f${f.run_id}\u001f${f.group}` : `f\u001f${f.id}`;
}

/** Heads a group: the most specific (highest priority), then the earliest, then by id. */
export function headsBefore(a: FindingRecord, b: FindingRecord): boolean {
  if (a.priority !== b.priority) return a.priority > b.priority;
  if (a.raised_at !== b.raised_at) return a.raised_at < b.raised_at;
  return a.id < b.id;
}

/**
 * Folds findings into problems. Problems come in the order their heads have in `findings`;
 * each head carries the other members of its group, in input order, under `related`.
 */
export function groupProblems(findings: readonly FindingRecord[]): Problem[] {
  const groups = new Map<string, FindingRecord[]>();
  for (const f of findings) {
    const k = problemKey(f);
    const g = groups.get(k);
    if (g) g.push(f);
    else groups.set(k, [f]);
  }
  const headOf = new Map<string, FindingRecord>();
  for (const [k, members] of groups) {
    let head = members[0];
    for (const m of members) if (headsBefore(m, head)) head = m;
    headOf.set(k, head);
  }
  const out: Problem[] = [];
  for (const f of findings) {
    const k = problemKey(f);
    if (headOf.get(k) !== f) continue;
    out.push({ ...f, related: (groups.get(k) ?? []).filter((m) => m !== f) });
  }
  return out;
}
