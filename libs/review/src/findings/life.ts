/**
 * The findings' life (the neatroots seed, Findings): "A check you dismiss 3 times in a project
 * goes quiet there: its findings are still recorded on the run page, but no longer count, send
 * notes or appear on Home. Reopen one to count it again." and "Dismissals feed each check's
 * precision; noisy checks are flagged for retirement." Pure rules: the repositories only read
 * and write the counts they apply to.
 */
export const QUIET_AFTER_DISMISSALS = 3;
/** A check is judged for retirement only once it has this many findings... */
export const RETIRE_MIN_FINDINGS = 5;
/** ...and suggested for retirement when its precision is below this. */
export const RETIRE_BELOW_PRECISION = 0.5;

export type FindingState = 'open' | 'active' | 'resolved' | 'dismissed';

/** Dismissed, resolved, active once a note about it reached the agent, else open. */
export function findingState(f: { status: string; active_at: string | null; dismissed_at: string | null }): FindingState {
  if (f.dismissed_at) return 'dismissed';
  if (f.status === 'resolved') return 'resolved';
  return f.active_at ? 'active' : 'open';
}

/** Whether a check dismissed this many times in a project is quiet there. */
export function isQuiet(dismissals: number): boolean {
  return dismissals >= QUIET_AFTER_DISMISSALS;
}

export interface CheckStat {
  check_id: string;
  /** Findings that count: raised while the check was not quiet (and quiet ones a person dismissed). */
  findings: number;
  /** Findings dismissed now (reopening one takes it back). */
  dismissals: number;
  /** 1 − dismissals / findings; null before the first finding. */
  precision: number | null;
  /** Dismissed 3 times or more in the project. */
  quiet: boolean;
  /** At least 5 findings and precision under 0.5. */
  retire_suggested: boolean;
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
    quiet: isQuiet(dismissals),
    retire_suggested: findings >= RETIRE_MIN_FINDINGS && precision !== null && precision < RETIRE_BELOW_PRECISION,
  };
}
