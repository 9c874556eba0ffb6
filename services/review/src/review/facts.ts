import { FIX_SESSIONS_NEEDED, reviewState, ruleLabel, type ReviewStateView } from '@neatroots/review-domain';
import type { PatternRecord, RuleView, VerdictRecord, VerdictView } from '@neatroots/store';
import type { FixInfo } from '../suggestions/fix';
import type { VerdictContext } from './writes';

/** A pattern's review state from its verdict context and, once a suggestion was applied for its verdict, its fix facts (suggestions/fix.ts). */
export function stateOf(ctx: VerdictContext, findingsOnCurrentWording: number, fix: FixInfo | null = null): ReviewStateView {
  return reviewState({
    verdict: ctx.verdict,
    materially_reclustered_at: ctx.pattern.materially_reclustered_at,
    reworded_at: ctx.wording.since,
    findings_on_current_wording: findingsOnCurrentWording,
    fix,
  });
}

export function verdictView(v: (VerdictRecord & { inherited?: boolean }) | null): VerdictView | null {
  if (!v) return null;
  return { verdict: v.verdict, note: v.note, reviewer: v.reviewer, created_at: v.created_at, inherited: v.inherited ?? false, carried_over: v.carried_over };
}

export function ruleView(p: PatternRecord): RuleView {
  return { rule_id: p.lineage_id, current_rule_id: p.rule_id, kind: p.rule_kind, index: p.rule_index, text: p.rule_text, label: ruleLabel(p.rule_kind, p.rule_index) };
}

/** No suggestion applied for the verdict: no fix facts. */
export const NO_FIX = { fix_release: null, fix_sessions: null, fix_sessions_needed: null } as const;

/** fix_release, fix_sessions, fix_sessions_needed: null until the release with the edit exists. */
export function fixFields(fix: FixInfo | null | undefined): { fix_release: { id: string; number: number } | null; fix_sessions: number | null; fix_sessions_needed: number | null } {
  if (!fix?.release) return NO_FIX;
  return { fix_release: fix.release, fix_sessions: fix.sessions, fix_sessions_needed: FIX_SESSIONS_NEEDED };
}
