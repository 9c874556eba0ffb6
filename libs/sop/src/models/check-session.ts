import type { SessionBody } from '../body';
import { checkSession, type DecisionRecord, type ModelFailure } from '../checker';
import { noModelDecider, type Decider, type Reviewer } from '../decider';
import type { Lock } from '../lock';
import type { Session } from '../session';
import { NO_FITTED_BANDS, type QuestionBands } from './bands';
import { modelDecider, modelReviewer, reasoningDecider } from './deciders';
import type { DecisionGateway } from './gateway';
import { DEFAULT_SOP_SETTINGS, type SopModelSettings } from './settings';

/**
 * The one function the review service calls to check a session: the checker of this
 * package with its models, asked through the question service. Which models run:
 *
 *   SOPOPS_CHECK_MODE=decide (default)   decide-1 on the decision endpoint (the decision model
 *                                        when it is on, else the local LLM), then check-5 on the
 *                                        reasoning endpoint for what the decisions flag or are
 *                                        unsure of (not with SOPOPS_CHECK_REVIEW=off)
 *   SOPOPS_CHECK_MODE=review             check-5 on the reasoning endpoint for every question
 *
 * With no model for the mode, noModelDecider: steps the tool calls decide are decided, the
 * rest are "not checked", and each reason says so.
 */
export type CheckSessionFn = (args: CheckSessionArgs) => Promise<SessionBody>;

export interface CheckSessionArgs {
  lock: Lock;
  releaseId: string;
  session: Session;
  /** The workspace's bands fitted by calibration (sopops calibrate); the rest use SOPOPS_DECISIONS. */
  bands?: QuestionBands;
  /** Told of each rule question's decision, to be stored with the check (calibration's labels need it). */
  onDecision?: (d: DecisionRecord) => void;
  /** Told of each question a model failed to answer for a passing reason (CheckOptions.onModelFailure). */
  onModelFailure?: (f: ModelFailure) => void;
  /** Aborted when the check is to stop (CheckOptions.signal): its model calls are given up. */
  signal?: AbortSignal;
}

export interface CheckSessionOptions {
  /**
   * The question service (in-process or over gRPC); absent: no model is configured. A function
   * is called at the first check: the review service can start before the question service
   * (which needs the review service's stores) and find it when a session is checked.
   */
  gateway?: DecisionGateway | null | (() => DecisionGateway | null | Promise<DecisionGateway | null>);
  settings?: SopModelSettings;
}

export function createCheckSession(opts: CheckSessionOptions = {}): CheckSessionFn {
  const settings = opts.settings ?? DEFAULT_SOP_SETTINGS;
  type Resolved = { gateway: DecisionGateway | null; models: { decision: string | null; reasoning: string | null } };
  let resolved: Promise<Resolved> | undefined;
  const resolveOnce = () => {
    // The gateway and its models do not change while the process runs; a failed lookup is tried again.
    resolved ??= (async () => {
      const gateway = typeof opts.gateway === 'function' ? await opts.gateway() : (opts.gateway ?? null);
      return { gateway, models: gateway ? await gateway.decisionModels() : { decision: null, reasoning: null } };
    })().catch((err) => {
      resolved = undefined;
      throw err;
    });
    return resolved;
  };
  return async ({ lock, releaseId, session, bands, onDecision, onModelFailure, signal }) => {
    const { gateway, models: m } = await resolveOnce();
    const { decider, reviewer } = modelsFor(gateway, m, settings, bands ?? NO_FITTED_BANDS);
    return checkSession(lock, session, { decider, reviewer, releaseId, reviewStatuses: settings.decisions.review_statuses, onDecision, onModelFailure, signal });
  };
}

function modelsFor(
  gateway: DecisionGateway | null,
  m: { decision: string | null; reasoning: string | null },
  s: SopModelSettings,
  bands: QuestionBands,
): { decider: Decider; reviewer?: Reviewer } {
  if (!gateway) return { decider: noModelDecider() };
  if (s.mode === 'review') {
    if (!m.reasoning) return { decider: noModelDecider('SOPOPS_CHECK_MODE=review needs a reasoning model (NEATROOTS_REASONING_MODEL_URL) or a local LLM (NEATROOTS_LLM_URL)') };
    return { decider: reasoningDecider(gateway, m.reasoning, s.decisions, bands, s.subjectChars) };
  }
  if (!m.decision) return { decider: noModelDecider('no decision model (NEATROOTS_DECISION_MODEL_URL) or local LLM (NEATROOTS_LLM_URL) is configured') };
  const decider = modelDecider(gateway, m.decision, s.decisions, bands, s.subjectChars);
  return s.review && m.reasoning ? { decider, reviewer: modelReviewer(gateway, m.reasoning, s.decisions, bands, s.subjectChars) } : { decider };
}
