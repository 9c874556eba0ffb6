import type { Evidence, ProcedureCheck, RuleResult, RuleStatus, SessionBody } from './body';
import type { Answer, Decider, Decision, Question, QuestionKind, Reviewer } from './decider';
import type { LockAgent, LockProcedure, LockRule } from './lock';
import { counts, excludedReason, isFinding, procedureResult, resultWithSuppressed, sessionResult, type RolledRule } from './result';
import { agentSpoke, type Session, type ToolCall } from './session';
import { neverStatus } from './status/never';
import type { NeverObservation, Observation, StepObservation, WarningObservation } from './status/observation';
import { join, stepStatuses, type Derived } from './status/steps';
import { warningStatus } from './status/warning';
import { fromToolCalls, stepCalls } from './tool-calls';

/**
 * The procedure checker: routes a session to its agent's procedures, observes each rule (tool
 * calls first, then the Decider's yes/no answers, then the Reviewer for what is flagged or
 * unsure), derives statuses and results with the pure rules of status/ and result.ts, and
 * returns the body of GET /v1/workspaces/{ws}/sessions/{id}. The same function runs offline
 * (`sopops check`, no model: noModelDecider) and, later, in the service with real models.
 */
export interface CheckFolder {
  procedures: readonly LockProcedure[];
  agents: readonly Pick<LockAgent, 'agent' | 'procedures'>[];
}

export interface CheckOptions {
  decider: Decider;
  reviewer?: Reviewer;
  /** Overrides the session's agent (sopops check --agent). */
  agent?: string;
  /** The release checked against; null offline. */
  releaseId?: string | null;
  /** Decided statuses the reviewer looks at even when the decision was sure (default: every finding). */
  reviewStatuses?: readonly RuleStatus[];
  /** Told of each rule question's decision (what calibration later fits thresholds to). */
  onDecision?: (d: DecisionRecord) => void;
  /**
   * Told of each question the decider left undecided because the model failed for a passing
   * reason (Undecided.retryable): its rule is not_checked, and checking again may decide it. A
   * review that fails is not told: the decision stands.
   */
  onModelFailure?: (f: ModelFailure) => void;
  /**
   * Aborted when the check is to stop (its job cut short by a stop of the process): no further
   * question is asked, the one in flight is given up, and the check rejects with the reason,
   * returning nothing to save.
   */
  signal?: AbortSignal;
}

/** A question the model failed to answer for a passing reason (a server error, a timeout, an unreadable answer...). */
export interface ModelFailure {
  procedure_id: string;
  /** null for the route and goal questions. */
  rule_id: string | null;
  kind: QuestionKind;
  /** The rule's reason: `Not checked: the decision model (…) could not decide …: the model answered HTTP 500: …`. */
  reason: string;
}

/**
 * One rule question's decision as it was answered, before any review: kept with the check so
 * calibration can fit the question's band to reviewers' labels later, from the database alone.
 */
export interface DecisionRecord {
  procedure_id: string;
  rule_id: string;
  field: Exclude<QuestionKind, 'route' | 'goal'>;
  /** P(yes). */
  p: number;
  sure: boolean;
}

export class UnknownAgentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnknownAgentError';
  }
}

export async function checkSession(folder: CheckFolder, session: Session, opts: CheckOptions): Promise<SessionBody> {
  const name = opts.agent ?? session.agent;
  if (!name) throw new UnknownAgentError('the session names no agent');
  const agent = folder.agents.find((a) => a.agent === name);
  if (!agent) {
    const known = folder.agents.map((a) => a.agent).join(', ') || 'none';
    throw new UnknownAgentError(`agent "${name}" is not in the procedures folder (agents: ${known})`);
  }
  const byId = new Map(folder.procedures.map((p) => [p.procedure_id, p]));
  // Procedures are checked together (in the agent's order), so their questions share model requests.
  const listed = agent.procedures.map((id) => byId.get(id)).filter((p): p is LockProcedure => !!p);
  const checks: ProcedureCheck[] = await Promise.all(listed.map((p) => checkProcedure(p, session, opts)));
  return {
    id: null,
    external_id: session.external_id,
    agent: name,
    release_id: opts.releaseId ?? null,
    status: 'checked',
    result: sessionResult(checks.map((c) => c.result)),
    checks,
  };
}

/** One rule's observation and, when a model decided it, the question to review. */
interface Entry {
  rule: LockRule;
  obs: Observation;
  review: { question: Question; decision: Decision; field: 'done' | 'violated' | 'heeded' } | null;
}

export async function checkProcedure(p: LockProcedure, session: Session, opts: CheckOptions): Promise<ProcedureCheck> {
  let decided = 0;
  let reviewed = 0;
  const ask = async (kind: QuestionKind, rule: LockRule | null): Promise<{ q: Question; a: Answer }> => {
    const q: Question = { kind, procedure: p, rule, session };
    opts.signal?.throwIfAborted();
    const a = await opts.decider.decide(q, { signal: opts.signal });
    if (a.decided) decided++;
    else if (a.retryable) opts.onModelFailure?.({ procedure_id: p.procedure_id, rule_id: rule?.rule_id ?? null, kind, reason: a.reason });
    if (a.decided && rule && kind !== 'route' && kind !== 'goal') opts.onDecision?.({ procedure_id: p.procedure_id, rule_id: rule.rule_id, field: kind, p: a.probability, sure: a.sure });
    return { q, a: a.decided ? { ...a, evidence: kind === 'never' ? a.evidence : inRange(a.evidence, session) } : a };
  };
  const modelFields = () => ({
    model: !decided ? null : reviewed && opts.reviewer ? `${opts.decider.model}+${opts.reviewer.model}` : opts.decider.model,
    prompt_version: !decided ? null : reviewed && opts.reviewer ? `${opts.decider.promptVersion}+${opts.reviewer.promptVersion}` : opts.decider.promptVersion,
  });
  const head = {
    procedure_id: p.procedure_id,
    procedure_name: p.name,
    procedure_version: p.version,
    release_id: opts.releaseId ?? null,
  };

  let applicable: boolean | null = true;
  let route_reason = 'It has no Applies when:, so it applies to every session of this agent.';
  if (p.applies_when) {
    const { a } = await ask('route', null);
    applicable = a.decided ? a.answer : null;
    route_reason = a.reason;
  }
  if (applicable !== true) {
    return {
      ...head, applicable, excluded_reason: null, route_reason, result: null, checked_result: null, goal_reached: null, goal_reason: null,
      steps_applicable: 0, steps_done: 0, nevers_violated: 0, ...modelFields(), rules: [],
    };
  }

  const calls = stepCalls(p.rules, session);
  // Every rule's questions are independent: asked together, so a model-backed decider can batch them.
  const [entries, goal] = await Promise.all([
    Promise.all(p.rules.map((rule) => observe(rule, session, ask, calls))),
    p.goal ? ask('goal', null).then(({ a }) => a) : null,
  ]);
  const goal_reached = goal?.decided ? goal.answer : null;
  const goal_reason = !goal ? 'The procedure has no Goal:.' : goal.decided ? decidedReason(goal) : goal.reason;

  let derived = derive(entries, session);
  if (opts.reviewer) {
    const reviewer = opts.reviewer;
    const flags = (s: RuleStatus) => (opts.reviewStatuses ? opts.reviewStatuses.includes(s) : isFinding(s));
    const flagged = entries.filter((e, i) => e.review && (flags(derived[i].status) || !e.review.decision.sure));
    opts.signal?.throwIfAborted();
    const answers = await Promise.all(flagged.map((e) => reviewer.review(e.review!.question, e.review!.decision, derived[entries.indexOf(e)].status, { signal: opts.signal })));
    flagged.forEach((e, i) => {
      const a = answers[i];
      if (!a.decided) return; // the decision stands
      reviewed++;
      (e.obs as unknown as Record<string, unknown>)[e.review!.field] = a.answer;
      if (e.review!.field === 'done') e.obs.evidence = inRange(a.evidence, session);
      else if (e.review!.field === 'violated') e.obs.evidence = a.evidence; // neverStatus keeps only the agent's words, at the turn that has them
      e.obs.reason = a.reason;
    });
    if (reviewed) derived = derive(entries, session);
  }

  const rules: RuleResult[] = entries.map((e, i) => ({
    rule_id: e.rule.rule_id,
    kind: e.rule.kind,
    index: e.rule.index,
    text: e.rule.text,
    status: derived[i].status,
    evidence: derived[i].evidence,
    reason: derived[i].reason,
    finding: isFinding(derived[i].status),
    finding_id: null,
    pattern_id: null,
    suppressed: false,
    override: null,
  }));
  const rolled = rules.map((r, i): RolledRule => {
    const obs = entries[i].obs;
    const seenNotDone = r.kind === 'step' && r.status === 'not_checked' && (obs as StepObservation).done === false;
    return { kind: r.kind, status: r.status, required: entries[i].rule.required, suppressed: r.suppressed, ...(seenNotDone ? { seenNotDone } : {}) };
  });
  const spoke = agentSpoke(session);
  const excluded_reason = excludedReason(rolled, spoke);
  return {
    ...head,
    applicable: true,
    excluded_reason,
    route_reason,
    result: excluded_reason ? null : resultWithSuppressed(rolled, goal_reached, spoke),
    checked_result: excluded_reason ? null : procedureResult(rolled, goal_reached, spoke),
    goal_reached,
    goal_reason: spoke ? goal_reason : join(goal_reason ?? '', 'The agent never spoke, so there is nothing to judge.'),
    ...counts(rolled),
    ...modelFields(),
    rules,
  };
}

type Ask = (kind: QuestionKind, rule: LockRule | null) => Promise<{ q: Question; a: Answer }>;

async function observe(rule: LockRule, session: Session, ask: Ask, calls: ReadonlyMap<string, ToolCall | null>): Promise<Entry> {
  if (rule.kind === 'never') {
    const { q, a } = await ask('never', rule);
    const obs: NeverObservation = { rule, violated: a.decided ? a.answer : null, evidence: a.decided ? a.evidence : [], reason: reasonOf(a) };
    return { rule, obs, review: a.decided ? { question: q, decision: a, field: 'violated' } : null };
  }
  if (rule.kind === 'warning') {
    const { a } = await ask('warning', rule);
    const obs: WarningObservation = { rule, present: a.decided ? a.answer : null, heeded: null, evidence: a.decided ? a.evidence : [], reason: reasonOf(a) };
    if (!(a.decided && a.answer && rule.action)) return { rule, obs, review: null };
    const r = await ask('responded', rule);
    obs.heeded = r.a.decided ? r.a.answer : null;
    // one "Decided:" for the two decisions; undecided whether it was handled, not_checked says so first
    obs.reason = r.a.decided ? join(obs.reason, r.a.reason) : join(r.a.reason, obs.reason);
    if (r.a.decided) obs.evidence = [...obs.evidence, ...r.a.evidence];
    return { rule, obs, review: r.a.decided ? { question: r.q, decision: r.a, field: 'heeded' } : null };
  }

  const tools = fromToolCalls(rule, session, calls);
  if (tools?.done) return { rule, obs: { rule, applies: true, done: true, evidence: tools.evidence, reason: tools.reason }, review: null };
  let applies: boolean | null = true;
  let conditionReason = '';
  if (rule.when) {
    const { a } = await ask('condition', rule);
    applies = a.decided ? a.answer : null;
    conditionReason = reasonOf(a);
    if (applies === false) return { rule, obs: { rule, applies, done: null, evidence: [], reason: conditionReason }, review: null };
  }
  if (tools) {
    // not_checked when its condition is undecided: the reason says so first ("Not checked: ...")
    const obs: StepObservation = { rule, applies, done: false, evidence: [], reason: applies === null ? join(conditionReason, tools.reason) : tools.reason };
    return { rule, obs, review: null };
  }
  const { q, a } = await ask('step', rule);
  const done = a.decided ? a.answer : null;
  const reason = applies === null && done !== true ? join(conditionReason, reasonOf(a)) : reasonOf(a);
  const obs: StepObservation = { rule, applies, done, evidence: a.decided ? a.evidence : [], reason };
  return { rule, obs, review: a.decided ? { question: q, decision: a, field: 'done' } : null };
}

function derive(entries: readonly Entry[], session: Session): Derived[] {
  const steps = entries.filter((e) => e.rule.kind === 'step');
  const stepDerived = stepStatuses(steps.map((e) => e.obs as StepObservation));
  return entries.map((e) => {
    if (e.rule.kind === 'step') return stepDerived[steps.indexOf(e)];
    if (e.rule.kind === 'never') return neverStatus(e.obs as NeverObservation, session);
    return warningStatus(e.obs as WarningObservation);
  });
}

/** A decision's reason says it was a decision ("Decided: ..."); a review's (or the reasoning model's own judgement) does not. */
function decidedReason(a: Decision): string {
  return a.reviewed ? a.reason : `Decided: ${a.reason}`;
}

function reasonOf(a: Answer): string {
  return a.decided ? decidedReason(a) : a.reason;
}

/**
 * Evidence must point at a turn of the session; anything else is dropped, not trusted. A never
 * rule's evidence is not filtered here: its quotes are looked up in the agent's turns
 * (status/quotes.ts), which moves a quote cited at the wrong turn, out of range included, to
 * the turn that has it.
 */
function inRange(evidence: readonly Evidence[], session: Session): Evidence[] {
  return evidence.filter((e) => Number.isInteger(e.turn) && e.turn >= 0 && e.turn < session.turns.length);
}
