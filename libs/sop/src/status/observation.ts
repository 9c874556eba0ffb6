import type { Evidence } from '../body';
import type { LockRule } from '../lock';

/**
 * What was observed about one rule, before its status is derived: from the tool calls, from a
 * Decider's yes/no answers, or from a review. `null` means nobody could tell (no model, or a
 * model that could not decide): the status is then not_checked with `reason` saying why.
 * The status rules (steps.ts, never.ts, warning.ts) are pure functions of these.
 */
export interface StepObservation {
  rule: LockRule;
  /** Did its `when:` condition arise (true for a step without one)? */
  applies: boolean | null;
  done: boolean | null;
  evidence: Evidence[];
  reason: string;
}

export interface NeverObservation {
  rule: LockRule;
  violated: boolean | null;
  evidence: Evidence[];
  reason: string;
}

export interface WarningObservation {
  rule: LockRule;
  /** Did the situation come up? */
  present: boolean | null;
  /** Was it handled as the sign's `-> ...` says (null when not asked or not known)? */
  heeded: boolean | null;
  evidence: Evidence[];
  reason: string;
}

export type Observation = StepObservation | NeverObservation | WarningObservation;
