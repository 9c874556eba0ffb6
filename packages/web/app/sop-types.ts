/**
 * The sopops API's answers as the pages read them (docs/api.md#workspaces-sopops): the
 * checker's and the store's own types (type-only imports, erased from the bundle).
 */
import type { SessionsListView } from '@neatroots/store';
import type { RuleKind } from '@neatroots/sop';

export type { Evidence, Issue as SopIssue, LockRule, ProcedureCheck, RuleKind, RuleResult } from '@neatroots/sop';
export type { HeadView as Head, ReleaseView as Release, ReleaseSummaryView as ReleaseSummary, SessionTranscriptView as SopTranscript, SessionView as SopSession, SopResult } from '@neatroots/store';

/** A session as the sessions list shows it (no checks). */
export type SopSessionRow = SessionsListView['items'][number];

/** Rules in the order a procedure reads: steps, then never rules, then warning signs. */
const KIND_ORDER: Record<RuleKind, number> = { step: 0, never: 1, warning: 2 };
export function inReadingOrder<T extends { kind: RuleKind; index: number }>(rules: T[]): T[] {
  return [...rules].sort((a, b) => KIND_ORDER[a.kind] - KIND_ORDER[b.kind] || a.index - b.index);
}
