import { QUESTION_KINDS, type QuestionCheck } from '@neatroots/checks';
import type { v1 } from '@neatroots/proto';
import type { ToolInfo } from '@neatroots/spans';

/**
 * The question tasks: a question check that is due, or a workflow to plan, on its way from
 * the rule engine's scheduler to the question service (neatroots.v1.QuestionTask). The JSON
 * parts travel as JSON text (check_json, evidence_json, context_json, plan_json); the decoder
 * checks their shape once, so the question service takes a task as it comes.
 */

/** One span as questions see it: its fields as text, each cut to a bounded length. */
export interface SpanSummary {
  id: string;
  type: string;
  name: string;
  tool?: string;
  status: 'ok' | 'error';
  input?: string;
  output?: string;
  error?: string;
  start?: number;
}

/** An earlier run of the same session (session scope). */
export interface RunSummary {
  run_id: string;
  status?: string;
  user_message?: string;
  final_output?: string;
  spans: SpanSummary[];
}

/** The evidence of one question: what the model (or the classifier) is shown. */
export interface EvidenceDoc {
  /** Span scope: the id of the span being judged (the last of `spans`). */
  focus?: string;
  /** In run order. For span scope: the earlier tool calls, then the span judged. */
  spans: SpanSummary[];
  /** Matching spans left out by `last` or by the window's bound. */
  omitted?: number;
  final_output?: string;
  run_status?: string;
  user_message?: string;
  system_prompt?: string;
  tools?: ToolInfo[];
  /** Session scope: the session's earlier runs, oldest first. */
  runs?: RunSummary[];
  /** Evidence given as plain text (the gRPC Ask API). */
  text?: string;
}

/** What the run did before the evidence: the second look judges the problem against it. */
export interface ContextDoc {
  spans: SpanSummary[];
  omitted?: number;
  user_message?: string;
  /** Context given as plain text (the gRPC Ask API). */
  text?: string;
}

/** What the planner reads on a workflow's first run. */
export interface PlanRequest {
  project: string;
  workflow: string;
  system_prompt?: string;
  user_message?: string;
  tools: ToolInfo[];
}

/** The fields every task has. */
interface TaskBase {
  id: string;
  project: string;
  run_id: string;
  workflow?: string;
  session_id?: string;
  span_ids: string[];
  final: boolean;
  at_ms: number;
  received_ms?: number;
}

/** A question check that is due, with what it is asked about. */
export interface QuestionTask extends TaskBase {
  type: 'question';
  check: QuestionCheck;
  scope: QuestionCheck['scope'];
  anchor: string;
  evidence: EvidenceDoc;
  context?: ContextDoc;
}

/** A workflow's first run: pick the library questions that fit it. */
export interface PlanTask extends TaskBase {
  type: 'plan';
  workflow: string;
  plan: PlanRequest;
}

export type QuestionTaskMessage = QuestionTask | PlanTask;

function jsonText(v: unknown): string {
  return v === undefined ? '' : JSON.stringify(v);
}

export function questionTaskToProto(t: QuestionTaskMessage): v1.QuestionTask {
  const q = t.type === 'question' ? t : undefined;
  return {
    id: t.id,
    type: t.type,
    project: t.project,
    run_id: t.run_id,
    workflow: t.workflow ?? '',
    session_id: t.session_id ?? '',
    check_json: jsonText(q?.check),
    scope: q?.scope ?? '',
    anchor: q?.anchor ?? '',
    evidence_json: jsonText(q?.evidence),
    context_json: jsonText(q?.context),
    span_ids: [...t.span_ids],
    final: t.final,
    at_ms: t.at_ms,
    received_ms: t.received_ms ?? 0,
    plan_json: jsonText(t.type === 'plan' ? t.plan : undefined),
  };
}

const SCOPES = new Set<string>(['span', 'trace', 'session']);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Reads a task, checking the shape of its JSON parts; throws naming the task and the field. */
export function questionTaskFromProto(msg: v1.QuestionTask): QuestionTaskMessage {
  const bad = (field: string, reason: string): Error => new Error(`question task ${msg.id}: ${field} ${reason}`);
  const json = (text: string, field: string): unknown => {
    if (!text) return undefined;
    try {
      return JSON.parse(text);
    } catch (e) {
      throw bad(field, `is not valid JSON (${(e as Error).message})`);
    }
  };
  const base: TaskBase = {
    id: msg.id,
    project: msg.project,
    run_id: msg.run_id,
    span_ids: msg.span_ids,
    final: msg.final,
    at_ms: msg.at_ms,
  };
  if (msg.workflow) base.workflow = msg.workflow;
  if (msg.session_id) base.session_id = msg.session_id;
  if (msg.received_ms) base.received_ms = msg.received_ms;

  if (msg.type === 'plan') {
    const plan = json(msg.plan_json, 'plan_json');
    if (!isObject(plan) || typeof plan.workflow !== 'string' || !Array.isArray(plan.tools)) {
      throw bad('plan_json', 'must be a plan request with a workflow and its tools');
    }
    return { ...base, type: 'plan', workflow: plan.workflow, plan: plan as unknown as PlanRequest };
  }
  if (msg.type !== 'question') throw bad('type', `must be question or plan, got ${JSON.stringify(msg.type)}`);
  const check = json(msg.check_json, 'check_json');
  if (!isObject(check) || typeof check.id !== 'string' || typeof check.ask !== 'string' || !(QUESTION_KINDS as readonly unknown[]).includes(check.kind)) {
    throw bad('check_json', `must be a question check (an id, a kind of ${QUESTION_KINDS.join(', ')}, and what it asks)`);
  }
  const evidence = json(msg.evidence_json, 'evidence_json');
  if (!isObject(evidence) || !Array.isArray(evidence.spans)) throw bad('evidence_json', 'must be evidence with its spans');
  const context = json(msg.context_json, 'context_json');
  if (context !== undefined && (!isObject(context) || !Array.isArray(context.spans))) throw bad('context_json', 'must be a context with its spans');
  const c = check as unknown as QuestionCheck;
  const scope = msg.scope || c.scope;
  if (!SCOPES.has(scope)) throw bad('scope', `must be span, trace or session, got ${JSON.stringify(scope)}`);
  const t: QuestionTask = {
    ...base,
    type: 'question',
    check: c,
    scope: scope as QuestionTask['scope'],
    anchor: msg.anchor || 'run',
    evidence: evidence as unknown as EvidenceDoc,
  };
  if (context !== undefined) t.context = context as unknown as ContextDoc;
  return t;
}
