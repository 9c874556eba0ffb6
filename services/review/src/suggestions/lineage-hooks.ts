import type { Queryable } from '@neatroots/ports';
import { hasEdit, type SuggestionEdit } from '@neatroots/review-domain';
import { SuggestionsRepo } from '@neatroots/store';

const repo = new SuggestionsRepo();

/**
 * Rule lineage's `suggestion` links: the applied suggestions (a draft, or a pull request open
 * or merged) whose edit is in the release's copy of their file, alone or merged with other
 * edits, each with the rule it edited. Read through `q`: it runs in the publish's transaction.
 */
export async function suggestionEditsOf(q: Queryable, workspace: string, release: { id: string; number: number }): Promise<SuggestionEdit[]> {
  const out: SuggestionEdit[] = [];
  for (const s of await repo.applied(q, workspace)) {
    if (!s.new_text) continue;
    const file = await repo.releaseFile(q, release.id, s.path);
    if (file !== null && hasEdit(s.old_text, s.new_text, file)) out.push({ procedure_id: s.procedure_id, rule_id: s.rule_id });
  }
  return out;
}

/** When rule lineage merges two rule patterns, the suggestions go with their findings. */
export function moveSuggestions(q: Queryable, from: string, into: string): Promise<void> {
  return repo.movePattern(q, from, into);
}
