export { nameFromRuleText, ruleLabel, NAME_MAX_CHARS } from './names';
export { lineageIdOf } from './lineage-id';
export { VERDICTS, isVerdict, suppresses, latestVerdict, effectiveVerdict, type VerdictKind, type VerdictEntry } from './verdicts';
export { isSuppressed, verdictCovers, type SuppressionFacts } from './suppression';
export {
  reviewState,
  REVIEW_STATES,
  REVIEW_REASONS,
  DEFAULT_QUEUE_STATES,
  FIX_SESSIONS_NEEDED,
  type ReviewState,
  type ReviewReason,
  type PatternFacts,
  type FixFacts,
  type ReviewStateView,
} from './review-state';
export { regressionExpect, passingStatus, type RegressionExpect } from './regression';
export { excerpt, EXCERPT_MAX_CHARS } from './excerpt';
export { rollUpCheck, rollUpSession } from './rollup';
