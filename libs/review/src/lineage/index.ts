export { FUNCTION_WORDS, similarity, words } from './similarity';
export {
  ANYWHERE_THRESHOLD,
  SAME_POSITION_THRESHOLD,
  compareProcedure,
  compareReleases,
  type ChangeHow,
  type EditedRule,
  type LineageProcedure,
  type LineageRule,
  type RuleChange,
  type SuggestionEdit,
} from './match';
export { Lineage, LineageCycleError, linksFromChanges, type LineageLink, type LinkHow } from './links';
export { rebuildLineage, rebuildLineageSteps, type LineageReturn, type ReleaseRules } from './rebuild';
export { planRealign, type FindingGroup, type RealignPlan, type RulePatternKey } from './realign';
