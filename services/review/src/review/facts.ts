import { reviewState, ruleLabel, type ReviewStateView } from '@neatroots/review-domain';
import type { PatternRecord, RuleView, VerdictRecord, VerdictView } from '@neatroots/store';
import type { VerdictContext } from './writes';

/** A pattern's review state from its verdict context (fix facts come with suggestions: none yet). */
export function stateOf(ctx: VerdictContext, findingsOnCurrentWording: number): ReviewStateView {
  return reviewState({
    verdict: ctx.verdict,
    materially_reclustered_at: ctx.pattern.materially_reclustered_at,
    reworded_at: ctx.wording.since,
    findings_on_current_wording: findingsOnCurrentWording,
    fix: null,
  });
}

export function verdictView(v: (VerdictRecord & { inherited?: boolean }) | null): VerdictView | null {
  if (!v) return null;
  return { verdict: v.verdict, note: v.note, reviewer: v.reviewer, created_at: v.created_at, inherited: v.inherited ?? false, carried_over: v.carried_over };
}

export function ruleView(p: PatternRecord): RuleView {
  return { rule_id: p.lineage_id, current_rule_id: p.rule_id, kind: p.rule_kind, index: p.rule_index, text: p.rule_text, label: ruleLabel(p.rule_kind, p.rule_index) };
}

/** Suggestions are not built: no fix is applied, so these are null (the seed fills them once a fix release is live). */
export const NO_FIX = { fix_release: null, fix_sessions: null, fix_sessions_needed: null } as const;
