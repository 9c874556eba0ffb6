export { merge, type MergeConflict, type MergeResult } from './merge';
export { unifiedDiff, unifiedDiffFiles } from './unified-diff';
