import { FIX_SESSIONS_NEEDED, reviewState, ruleLabel, type ReviewStateView } from '@neatroots/review-domain';
import type { PatternRecord, RuleView, VerdictRecord, VerdictView, WordingCount } from '@neatroots/store';
import type { FixInfo } from '../suggestions/fix';
import { covers, type VerdictContext } from './writes';

/**
 * A pattern's review state from its verdict context, its rule pattern's findings per wording of
 * the rule, and, once a suggestion was applied for its verdict, its fix facts (suggestions/fix.ts).
 */
export function stateOf(ctx: VerdictContext, wordings: readonly WordingCount[], fix: FixInfo | null = null): ReviewStateView {
  return reviewState({
    verdict: ctx.verdict,
    materially_reclustered_at: ctx.pattern.materially_reclustered_at,
    reworded_at: ctx.wording.since,
    findings_on_newer_wordings: onNewerWordings(ctx, wordings),
    fix,
  });
}

/**
 * Findings on a wording of the rule newer than the pattern's verdict, which the verdict does not
 * cover: the current wording's, and those of a wording between the verdict's and the current
 * (A -> B -> C with the verdict given on A: B's and C's).
 */
export function onNewerWordings(ctx: VerdictContext, wordings: readonly WordingCount[]): number {
  if (!ctx.verdict) return 0;
  return wordings.reduce((n, w) => (covers(ctx, w) ? n : n + w.n), 0);
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
