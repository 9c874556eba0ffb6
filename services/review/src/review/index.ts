export { ReviewSop, type ReviewSopOptions } from './service';
export { PATTERNS_QUEUE, PatternAssigner, rulePatternId, type PatternsJob } from './assign';
