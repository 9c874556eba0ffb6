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
export {
  reclusterDue,
  planRecluster,
  jaccard,
  SPLIT_AT_FINDINGS,
  SPLIT_MAX_FINDINGS,
  RECLUSTER_AFTER_NEW,
  OTHER_SHARE_MAX,
  OTHER_MIN_NEW,
  MATCH_MIN_JACCARD,
  MAX_FAILURE_MODES,
  type RuleClusterFacts,
  type ReclusterWhy,
  type OldCluster,
  type NewCluster,
  type ClusterOutcome,
  type RetiredOutcome,
  type ReclusterPlan,
} from './recluster';
export { NAME_VERSION, NAME_MAX_WORDS, NAME_INSTRUCTIONS, nameSubject, nameAsk, readPatternName, MalformedName, type NameSubject } from './name-prompt';
export { SPLIT_VERSION, SPLIT_INSTRUCTIONS, SPLIT_ASK, splitSubject, splitAnswerTokens, findingRef, readSplit, MalformedSplit, type SplitFinding, type SplitResult } from './split-prompt';
export { ASSIGN_VERSION, ASSIGN_INSTRUCTIONS, assignSubject, assignAsk, readModeChoice, MalformedChoice, type AssignRule } from './assign-prompt';
export { THEME_VERSION, THEME_INSTRUCTIONS, THEME_ASK, themeSubject, themeAnswerTokens, patternRef, readThemes, MalformedThemes, type ThemePattern, type ThemeGroup } from './theme-prompt';
export { planThemes, type OldTheme, type ThemePlan } from './themes';
