import type { QuestionCheck } from '@neatroots/checks';
import type { QuestionTaskMessage, ToolInfo } from '@neatroots/spans';

/**
 * What a question sees and what it answers. Everything here is plain JSON: evidence travels
 * from the scheduler (in the rule-engine service) to the question service on the bus, and
 * the scheduler's per-run state lives in the window store.
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

export type AnsweredBy = 'decision' | 'local' | 'classifier';

/** The answer to one question, after thresholds, the cap and the second look. */
export interface Answer {
  /** A model error or timeout is `not_checked`: it never counts as a pass. */
  status: 'answered' | 'not_checked';
  flagged: boolean;
  /** yes_no and choice: the probability of a problem (an LLM's is capped at 0.9). */
  probability?: number;
  /** score: the expected level. */
  value?: number;
  /** choice: the most likely label. */
  label?: string;
  probs?: Record<string, number>;
  quote?: string;
  answered_by?: AnsweredBy;
  /** "Very likely (LLM judgment)", or a percentage for the classifier. */
  confidence?: string;
  /** Why it was not checked, or why the second look dropped it. */
  reason?: string;
  /** The model claimed a problem it could not show in the run: not raised, but not a pass either. */
  unsupported?: boolean;
  cached?: boolean;
}

/** A question task on the bus, validated (see QuestionTaskMessage in @neatroots/spans). */
export interface QuestionTask extends QuestionTaskMessage {
  type: 'question';
  check: QuestionCheck;
  scope: QuestionCheck['scope'];
  anchor: string;
  evidence: EvidenceDoc;
  context?: ContextDoc;
}

/** What the planner reads on a workflow's first run. */
export interface PlanRequest {
  project: string;
  workflow: string;
  system_prompt?: string;
  user_message?: string;
  tools: ToolInfo[];
}

export interface PlanTask extends QuestionTaskMessage {
  type: 'plan';
  workflow: string;
  plan: PlanRequest;
}

/** A library question the planner picked for a workflow, with its parameters filled. */
export interface PlanPick {
  id: string;
  params?: Record<string, string>;
}

/** A workflow's plan: cached, and redone when new tools appear. */
export interface Plan {
  project: string;
  workflow: string;
  /** The tools the plan was made for. */
  tools: string[];
  picks: PlanPick[];
  /** Questions the planner wrote for gaps, kept as database checks until a person saves them. */
  written: { id: string; yaml: string }[];
  planned_by: AnsweredBy | 'heuristic';
  at_ms: number;
}

/** What was decided about one task: the run page's "checked", "not checked" and the quote. */
export interface QuestionResult {
  task_id: string;
  project: string;
  run_id: string;
  check_id: string;
  anchor: string;
  span_ids: string[];
  answer: Answer;
  finding_id?: string;
  at_ms: number;
}
