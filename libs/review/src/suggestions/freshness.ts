import type { Issue } from '@neatroots/sop';
import { merge, type MergeConflict } from './merge';
import { unifiedDiff } from './unified-diff';

export type FreshnessState = 'current' | 'merges' | 'conflict';

export interface Freshness {
  state: FreshnessState;
  /** A unified diff of the file since the suggestion was written ('' when it has not changed). */
  changes: string;
  merged_text: string | null;
  conflicts: MergeConflict[];
  issues: Issue[];
  /** Why it is a conflict, in one sentence (the 409 of apply); null otherwise. */
  reason: string | null;
}

/**
 * A proposed suggestion's freshness, computed when it is read: `current` when the file is the
 * one it was written against and the suggested file compiles with the rest of head; `merges` when the edit merges into the file as it is now (the
 * three-way line merge, its base file as the base) and the merged file compiles with the rest
 * of head and still defines the procedure; `conflict` otherwise. `compile` compiles head with
 * the file replaced and says sopc's issues (the procedure missing is one of them).
 */
export function freshness(
  s: { path: string; old_text: string; new_text: string },
  now: string | null,
  compile: (merged: string) => Issue[],
): Freshness {
  if (now === null) {
    return { state: 'conflict', changes: unifiedDiff(s.old_text, '', { from: `a/${s.path}`, to: '/dev/null' }), merged_text: null, conflicts: [], issues: [], reason: `${s.path} is no longer at head` };
  }
  if (now === s.old_text) {
    // Compiled again with head as it is now: what apply saves must compile (sopc may have become
    // stricter since it was written); otherwise a conflict saying why, never a 422 at apply.
    const issues = s.new_text === s.old_text ? [] : compile(s.new_text);
    if (issues.length) return { state: 'conflict', changes: '', merged_text: null, conflicts: [], issues, reason: `with head as it is now, the suggested ${s.path} would not compile (${firstIssues(issues)}): rewrite it` };
    return { state: 'current', changes: '', merged_text: null, conflicts: [], issues: [], reason: null };
  }
  const changes = unifiedDiff(s.old_text, now, { from: `a/${s.path}`, to: `b/${s.path}` });
  const m = merge(s.old_text, now, s.new_text);
  if (!m.ok) {
    const lines = m.conflicts.map((c) => c.line).join(', ');
    return { state: 'conflict', changes, merged_text: null, conflicts: m.conflicts, issues: [], reason: `the same lines of ${s.path} were changed since it was written (line ${lines} now): rewrite it` };
  }
  const issues = compile(m.text);
  if (issues.length) {
    return { state: 'conflict', changes, merged_text: null, conflicts: [], issues, reason: `merged with the changes made since, ${s.path} would not compile (${firstIssues(issues)}): rewrite it` };
  }
  return { state: 'merges', changes, merged_text: m.text, conflicts: [], issues: [], reason: null };
}

function firstIssues(issues: Issue[]): string {
  return issues.slice(0, 3).map((i) => `${i.file}:${i.line}: ${i.message}`).join('; ');
}

/**
 * Whether `file` has the suggestion's edit, alone or merged with other edits: merging the
 * edit into it changes nothing. How the first release with the edit is found.
 */
export function hasEdit(base: string, suggested: string, file: string): boolean {
  if (base === suggested) return false;
  const m = merge(base, file, suggested);
  return m.ok && m.text === file;
}
