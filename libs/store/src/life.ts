import type { CheckStat, FindingRecord, FindingState, Problem } from './records';

/**
 * The findings' life, from the neatroots seed (Findings): "A check you dismiss 3 times in a
 * project goes quiet there: its findings are still recorded on the run page, but no longer
 * count, send notes or appear on Home. Reopen one to count it again." and "Dismissals feed
 * each check's precision; noisy checks are flagged for retirement."
 */
export const QUIET_AFTER_DISMISSALS = 3;
/** A check is judged for retirement only once it has this many findings... */
export const RETIRE_MIN_FINDINGS = 5;
/** ...and suggested for retirement when its precision is below this. */
export const RETIRE_BELOW_PRECISION = 0.5;

export function findingState(f: { status: string; active_at: string | null; dismissed_at: string | null }): FindingState {
  if (f.dismissed_at) return 'dismissed';
  if (f.status === 'resolved') return 'resolved';
  return f.active_at ? 'active' : 'open';
}

export function checkStat(check_id: string, findings: number, dismissals: number): CheckStat {
  // A quiet finding dismissed and then reopened can leave more dismissals than counted
  // findings for a moment; precision stays within [0, 1].
  const precision = findings > 0 ? Math.max(0, 1 - dismissals / findings) : null;
  return {
    check_id,
    findings,
    dismissals,
    precision,
    quiet: dismissals >= QUIET_AFTER_DISMISSALS,
    retire_suggested: findings >= RETIRE_MIN_FINDINGS && precision !== null && precision < RETIRE_BELOW_PRECISION,
  };
}

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
