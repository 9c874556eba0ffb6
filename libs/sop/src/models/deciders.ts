import type { RuleStatus } from '../body';
import type { Answer, AskSignal, Decider, Decision, Question, QuestionKind, Reviewer, Undecided } from '../decider';
import type { DecisionEndpoint, DecisionGateway, DecisionItem } from './gateway';
import { MalformedAnswer, readModelAnswer, unusableModelAnswer, type ModelAnswer } from './parse';
import { askText, CHECK_INSTRUCTIONS, CHECK_VERSION, DECIDE_INSTRUCTIONS, DECIDE_VERSION, DEFAULT_SUBJECT_CHARS, renderSubject, reviewAskText } from './prompt';
import { NO_FITTED_BANDS, type QuestionBands } from './bands';
import { inBand, type DecisionSettings } from './settings';

/**
 * The checker's models behind its Decider and Reviewer ports, asked through the question
 * service (DecisionGateway):
 *   modelDecider       decide-1 on the decision endpoint; the bands of SOPOPS_DECISIONS (or a
 *                      question's band fitted by calibration) say whether an answer is sure
 *                      or goes to review
 *   modelReviewer      check-5 on the reasoning endpoint, shown the decision it reviews
 *   reasoningDecider   check-5 on the reasoning endpoint for every question (SOPOPS_CHECK_MODE=review)
 * A model error, a timeout or a malformed answer is Undecided with a plain reason: the rule is
 * not checked, never passed. One that asking again may cure is marked `retryable`: the review
 * service then checks the session again (retryableModelFailure).
 */
const WHAT: Record<QuestionKind, string> = {
  route: 'whether the procedure applies',
  condition: "whether the step's condition arose",
  step: 'whether the step was done',
  never: 'whether the rule was broken',
  warning: 'whether the situation came up',
  responded: 'whether it was handled as the sign says',
  goal: 'whether the goal was reached',
};

function notChecked(q: Question, who: string, why: string): Undecided {
  const reason = `Not checked: ${who} could not decide ${WHAT[q.kind]}: ${why}.`;
  return retryableModelFailure(why) ? { decided: false, reason, retryable: true } : { decided: false, reason };
}

/** How describeError's reasons that asking again may cure begin (retryableModelFailure). */
const RETRYABLE_REASONS = [
  'the model timed out',
  'the model answered HTTP ',
  'the model is rate limited',
  'the model cannot be reached',
  'the model server closed the connection',
  'the model call was aborted',
  'the model failed',
  'the model gave a malformed answer',
  'the model server:',
  'the model rate_limited:',
  'the model connection:',
  'the model aborted:',
];

/**
 * Whether the gateway's reason for giving no answer is one that asking again may cure: the
 * question service's reasons for a model error (its describeError: `the model timed out: …`,
 * `the model answered HTTP 500: …`, `the model is rate limited …`, `the model cannot be
 * reached: …`, `the model server closed the connection …`, `the model call was aborted: …`, and
 * `the model failed: …` for an error of no known kind; from a question service of an earlier
 * version `the model server: …`, `the model rate_limited: …`, `the model connection: …`, `the
 * model aborted: …`) and for an answer that could not be read (`the model gave a malformed
 * answer (…)`). Not: `the model refused the request …` (a 4xx: the request is refused again;
 * earlier `the model rejected: …`), `the model server answered with a stream …`, nor `no … is
 * configured`.
 */
export function retryableModelFailure(reason: string): boolean {
  return RETRYABLE_REASONS.some((r) => reason.startsWith(r));
}

/**
 * Asks one question and reads the answer, or says why there is none. The gateway is told what
 * a usable answer is, so a malformed one is not cached: the rule is not checked, and checking
 * the session again asks the model again.
 */
async function ask(gateway: DecisionGateway, endpoint: DecisionEndpoint, item: Omit<DecisionItem, 'usable' | 'answer_format'>, q: Question, who: string, signal?: AbortSignal): Promise<ModelAnswer | Undecided> {
  // The check itself in this process; its name for a gateway over gRPC (the question service).
  const reply = await gateway.decide(endpoint, { ...item, usable: unusableModelAnswer, answer_format: 'sop-model-answer' }, signal ? { signal } : undefined);
  if (!reply.ok) return notChecked(q, who, reply.reason.replace(/\.$/, ''));
  try {
    return readModelAnswer(reply.answer);
  } catch (e) {
    if (e instanceof MalformedAnswer) return notChecked(q, who, `the model gave a malformed answer (${e.message})`);
    throw e;
  }
}

/** The goal is not reviewed: between its bounds it is unclear (goal_reached null). */
function goalAnswer(a: ModelAnswer, [no, yes]: readonly [number, number], reviewed: boolean): Answer {
  if (a.p > no && a.p < yes) return { decided: false, reason: `Unclear whether the goal was reached (p=${a.p}): ${a.reason || 'the model was not sure.'}` };
  return { decided: true, answer: a.p >= yes, probability: a.p, sure: true, evidence: a.evidence, reason: a.reason || (a.p >= yes ? 'Reached.' : 'Not reached.'), ...(reviewed ? { reviewed } : {}) };
}

function fallbackReason(answer: boolean): string {
  return answer ? 'Yes.' : 'No.';
}

export function modelDecider(gateway: DecisionGateway, model: string, settings: DecisionSettings, bands: QuestionBands = NO_FITTED_BANDS, subjectChars = DEFAULT_SUBJECT_CHARS): Decider {
  const who = `the decision model (${model})`;
  return {
    model,
    promptVersion: DECIDE_VERSION,
    async decide(q, opts) {
      const a = await ask(gateway, 'decision', { instructions: DECIDE_INSTRUCTIONS, subject: renderSubject(q.session, subjectChars), ask: askText(q) }, q, who, opts?.signal);
      if ('decided' in a) return a;
      if (q.kind === 'goal') return goalAnswer(a, settings.goal, false);
      const { answer, sure } = inBand(a.p, bands.bandFor(q, settings));
      return { decided: true, answer, probability: a.p, sure, evidence: a.evidence, reason: a.reason || fallbackReason(answer) };
    },
  };
}

export function modelReviewer(gateway: DecisionGateway, model: string, settings: DecisionSettings, bands: QuestionBands = NO_FITTED_BANDS, subjectChars = DEFAULT_SUBJECT_CHARS): Reviewer {
  const who = `the reasoning model (${model})`;
  return {
    model,
    promptVersion: CHECK_VERSION,
    async review(q: Question, draft: Decision, status: RuleStatus, opts?: AskSignal) {
      const a = await ask(gateway, 'reasoning', { instructions: CHECK_INSTRUCTIONS, subject: renderSubject(q.session, subjectChars), ask: reviewAskText(q, draft, status) }, q, who, opts?.signal);
      if ('decided' in a) return a;
      const answer = a.p >= (q.kind === 'goal' ? 0.5 : bands.bandFor(q, settings)[2]);
      return { decided: true, answer, probability: a.p, sure: true, evidence: a.evidence, reason: a.reason || fallbackReason(answer) };
    },
  };
}

/** SOPOPS_CHECK_MODE=review: the reasoning model judges every question; its reasons are its own, not "Decided:". */
export function reasoningDecider(gateway: DecisionGateway, model: string, settings: DecisionSettings, bands: QuestionBands = NO_FITTED_BANDS, subjectChars = DEFAULT_SUBJECT_CHARS): Decider {
  const who = `the reasoning model (${model})`;
  return {
    model,
    promptVersion: CHECK_VERSION,
    async decide(q, opts) {
      const a = await ask(gateway, 'reasoning', { instructions: CHECK_INSTRUCTIONS, subject: renderSubject(q.session, subjectChars), ask: askText(q) }, q, who, opts?.signal);
      if ('decided' in a) return a;
      if (q.kind === 'goal') return goalAnswer(a, settings.goal, true);
      const answer = a.p >= bands.bandFor(q, settings)[2];
      return { decided: true, answer, probability: a.p, sure: true, evidence: a.evidence, reason: a.reason || fallbackReason(answer), reviewed: true };
    },
  };
}
