import type { Evidence, RuleStatus } from './body';
import type { LockProcedure, LockRule } from './lock';
import type { Session } from './session';

/**
 * The port behind which models answer the checker's questions. Every question is a yes/no
 * decision with a probability (the seed: "Routing and each rule are decisions first"); the
 * status rules never see a model, only the observations built from these answers, so a
 * model-backed decider (the question service) plugs in here without changing them.
 *
 *   route      Does the procedure apply to the session? (only for one with Applies when:)
 *   condition  Did a step's `when:` condition arise?
 *   step       Was the step done? (evidence: the turns that show it)
 *   never      Was the never rule broken? (evidence: the agent's own words)
 *   warning    Did the warning sign's situation come up?
 *   responded  Was it handled as the sign says (the sign's -> action)?
 *   goal       Was the procedure's goal reached?
 */
export type QuestionKind = 'route' | 'condition' | 'step' | 'never' | 'warning' | 'responded' | 'goal';
export const QUESTION_KINDS: readonly QuestionKind[] = ['route', 'condition', 'step', 'never', 'warning', 'responded', 'goal'];

export interface Question {
  kind: QuestionKind;
  procedure: LockProcedure;
  /** The rule asked about; null for route and goal. */
  rule: LockRule | null;
  session: Session;
}

export interface Decision {
  decided: true;
  answer: boolean;
  /** P(yes), 0..1. */
  probability: number;
  /** false when the answer falls in the decider's review band: the reviewing model looks again. */
  sure: boolean;
  evidence: Evidence[];
  reason: string;
  /** The reasoning model judged it (SOPOPS_CHECK_MODE=review): its reason is its own, not "Decided: ...". */
  reviewed?: boolean;
}

/** Nobody could decide: the rule is not checked, and `reason` says so plainly. */
export interface Undecided {
  decided: false;
  reason: string;
  /**
   * The model failed for a passing reason (a server error, a rate limit, a timeout, a dropped
   * connection, an answer that could not be read): asking again later may decide it. Absent
   * when asking again cannot help by itself (no model configured, a request the model refused).
   */
  retryable?: true;
}

export type Answer = Decision | Undecided;

export interface Decider {
  /** What answered (null when no model did). */
  readonly model: string | null;
  readonly promptVersion: string | null;
  /** `signal` aborted: the model call is given up and the decide rejects (the check stops there). */
  decide(q: Question, opts?: AskSignal): Promise<Answer>;
}

/** What a decider or reviewer is asked under: a check that stops (its job cut short by a stop) aborts it. */
export interface AskSignal {
  signal?: AbortSignal;
}

/**
 * The reviewing (reasoning) model: it looks again at rules the decisions flag (skipped,
 * violated, unheeded) or are not sure about, and answers the same question.
 */
export interface Reviewer {
  readonly model: string;
  readonly promptVersion: string;
  review(q: Question, draft: Decision, status: RuleStatus, opts?: AskSignal): Promise<Answer>;
}

const WHAT: Record<QuestionKind, string> = {
  route: 'whether the procedure applies',
  condition: "whether the step's condition arose",
  step: 'whether the step was done (from the transcript)',
  never: 'whether the rule was broken',
  warning: 'whether the situation came up',
  responded: 'whether it was handled as the sign says',
  goal: 'whether the goal was reached',
};

/** The decider when no model is configured: decides nothing, and says so in each reason. */
export function noModelDecider(why = 'no model is configured'): Decider {
  return {
    model: null,
    promptVersion: null,
    decide: async (q) => ({ decided: false, reason: `Not checked: deciding ${WHAT[q.kind]} needs a model, and ${why}.` }),
  };
}
