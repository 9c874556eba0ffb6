export { merge, type MergeConflict, type MergeResult } from './merge';
