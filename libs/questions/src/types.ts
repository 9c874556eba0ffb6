// The tasks and what they carry are the bus contract's (@neatroots/messages); named here too,
// where questions have always been read from.
export type { ContextDoc, EvidenceDoc, PlanRequest, PlanTask, QuestionTask, RunSummary, SpanSummary } from '@neatroots/messages';

/**
 * What a question sees and what it answers. Everything here is plain JSON: evidence travels
 * from the scheduler (in the rule-engine service) to the question service on the bus, and
 * the scheduler's per-run state lives in the window store.
 */

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
  /**
   * Questions the planner wrote for gaps, kept as database checks until a person saves them.
   * One whose database check is deleted leaves this list (ChecksRepo.delete) for `deleted`.
   */
  written: { id: string; yaml: string }[];
  /** Ids of written questions whose database check was deleted: not asked, and never written again. */
  deleted?: string[];
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
