import { suppresses, type VerdictKind } from './verdicts';

/**
 * A pattern's review_state, with review_reason and review_note, as a pure function of its
 * facts (the seed's "Review state"):
 *
 *   needs_review  no verdict (no_verdict); a verdict carried over by a recluster and not
 *                 confirmed (carried_over); a verdict older than a recluster that changed the
 *                 pattern's findings materially, keeping less than half (reclustered); an
 *                 acceptable or checker_wrong verdict older than the rule's current wording,
 *                 with findings on a wording newer than the verdict, the current one or one in
 *                 between (reworded)
 *   open          real or sop_wrong, no suggestion applied for this verdict
 *   fixing        a suggestion for it applied (draft or pull request)
 *   fixed         10 sessions on the fix's release or later, none with a finding in the pattern
 *   regressed     a finding in the pattern on a session that ran the fix's release or later
 *                 (came_back, "Came back after release N")
 *   closed        acceptable or checker_wrong
 *
 * A new verdict starts over: every fact below is about the latest verdict. The fix facts come
 * from the suggestion applied for that verdict (services/review suggestions/fix.ts); without
 * one, real and sop_wrong stay open.
 */
export const REVIEW_STATES = ['needs_review', 'open', 'fixing', 'fixed', 'regressed', 'closed'] as const;
export type ReviewState = (typeof REVIEW_STATES)[number];
export const REVIEW_REASONS = ['no_verdict', 'carried_over', 'reclustered', 'reworded', 'came_back'] as const;
export type ReviewReason = (typeof REVIEW_REASONS)[number];

/** The sessions a fix needs before it counts as fixed. */
export const FIX_SESSIONS_NEEDED = 10;

export interface PatternFacts {
  /** The verdict the pattern goes by (its own, or inherited for a failure mode), or null. */
  verdict: { verdict: VerdictKind; created_at: string; carried_over?: boolean; inherited?: boolean } | null;
  /** The last recluster that kept less than half of the pattern's findings (ISO), or null. */
  materially_reclustered_at?: string | null;
  /** When the rule's current wording replaced an earlier one (ISO), null for its first wording. */
  reworded_at?: string | null;
  /**
   * Findings on a wording of the rule newer than the verdict (suppressed or not): the current
   * wording, or one between the verdict's and the current (A -> B -> C with the verdict given on
   * A: B's and C's findings). The verdict does not cover them (verdictCovers).
   */
  findings_on_newer_wordings?: number;
  /** The suggestion applied for this verdict, if any. */
  fix?: FixFacts | null;
}

export interface FixFacts {
  /** The release with the edit, once it is live; null while the fix waits for it. */
  release: { number: number } | null;
  /** Sessions checked on the procedure on that release or later. */
  sessions: number;
  /** Of those, the ones with a finding in the pattern. */
  sessions_with_finding: number;
}

export interface ReviewStateView {
  review_state: ReviewState;
  review_reason: ReviewReason | null;
  review_note: string;
}

export function reviewState(p: PatternFacts): ReviewStateView {
  const v = p.verdict;
  if (!v) return needs('no_verdict', 'No verdict yet.');
  if (v.carried_over) return needs('carried_over', `The ${v.verdict} verdict was carried over by a recluster; confirm it with a new verdict.`);
  if (p.materially_reclustered_at && v.created_at < p.materially_reclustered_at) {
    return needs('reclustered', `A recluster changed this pattern's findings since the ${v.verdict} verdict (it kept less than half of them).`);
  }
  if (suppresses(v.verdict) && p.reworded_at && v.created_at < p.reworded_at && (p.findings_on_newer_wordings ?? 0) > 0) {
    const n = p.findings_on_newer_wordings ?? 0;
    return needs(
      'reworded',
      `The ${v.verdict} verdict judged an earlier wording of the rule; ${n} finding${n === 1 ? '' : 's'} on a newer wording ${n === 1 ? 'is' : 'are'} not suppressed until a verdict confirms it.`,
    );
  }
  if (suppresses(v.verdict)) {
    return { review_state: 'closed', review_reason: null, review_note: `${v.verdict === 'acceptable' ? 'Acceptable' : 'The checker was wrong'}: its findings are suppressed.` };
  }
  const fix = p.fix;
  if (!fix) return { review_state: 'open', review_reason: null, review_note: `${v.verdict === 'real' ? 'A real mistake' : 'The instruction is wrong'}: waiting for a fix.` };
  if (!fix.release) return { review_state: 'fixing', review_reason: null, review_note: 'A fix was applied; waiting for the release with it.' };
  if (fix.sessions_with_finding > 0) return { review_state: 'regressed', review_reason: 'came_back', review_note: `Came back after release ${fix.release.number}` };
  if (fix.sessions >= FIX_SESSIONS_NEEDED) return { review_state: 'fixed', review_reason: null, review_note: `No finding in ${fix.sessions} sessions since release ${fix.release.number}.` };
  return { review_state: 'fixing', review_reason: null, review_note: `${fix.sessions} of ${FIX_SESSIONS_NEEDED} sessions on release ${fix.release.number} or later, none with this finding.` };
}

function needs(reason: ReviewReason, note: string): ReviewStateView {
  return { review_state: 'needs_review', review_reason: reason, review_note: note };
}

/** The review queue's default: what needs a reviewer. */
export const DEFAULT_QUEUE_STATES: readonly ReviewState[] = ['needs_review', 'regressed'];
