/**
 * The API's JSON (docs/api.md) as the app reads it: the store's own record types (type-only
 * imports, erased from the bundle), so the pages and the API cannot drift apart.
 */
import type { FindingRecord } from '@neatroots/store';
import type { Span } from '@neatroots/spans';

export type { CheckStat, FindingState, Problem, RunDetail, RunRecord as Run } from '@neatroots/store';
export type { Span } from '@neatroots/spans';

/**
 * A span as the run page lists it (`bodies=preview`): its input and output cut to a preview,
 * `truncated` naming each one cut with its full length (GET .../spans/{span_id} gives it whole).
 */
export type ListedSpan = Span & { truncated?: { input?: number; output?: number } };

export interface Page {
  next_cursor: string | null;
}

/** A finding as the API answers it (its project is the signed-in one). */
export type Finding = FindingRecord;

/** GET checks/disabled: a check the rule engine turned off for a slow pattern. */
export interface DisabledCheck {
  check_id: string;
  pattern: string;
  source?: string;
  reason: string;
  ms: number;
  limit_ms: number;
  since: string;
}

/** GET models/agreement: one question's agreement between the fast classifier and the LLM. */
export interface AgreementRow {
  question_key: string;
  check_id: string;
  answers: number;
  agreed: number;
  rate: number;
  /** Of the problems the LLM found recently, the share the classifier caught (absent: none found). */
  recall?: number;
  classifier_first: boolean;
  trained: number;
  /** The question's text; empty for an earlier wording of the check's question. */
  ask: string;
}
