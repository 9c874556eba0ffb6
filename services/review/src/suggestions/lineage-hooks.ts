import type { Queryable } from '@neatroots/ports';
import { Lineage, LineageCycleError, type SuggestionEdit } from '@neatroots/review-domain';
import { parseProcedure } from '@neatroots/sop';
import { LineageRepo, PatternsRepo, SuggestionsRepo, type LineageRow, type SuggestionRecord } from '@neatroots/store';
import { releasedIn } from './fix';

const repo = new SuggestionsRepo();
const patterns = new PatternsRepo();
const lineageRepo = new LineageRepo();

/**
 * Rule lineage's `suggestion` links: the applied suggestions (a draft, or a pull request open
 * or merged) whose edit is in the release's copy of their file, alone or merged with other
 * edits, for the first time (the release with the edit), each with the rule it edited. Read through `q`: it runs in the publish's transaction.
 *
 * A suggestion is made for the rule as it reads at head, which may be a wording no release has
 * yet (head reworded it by hand before the suggestion was asked for). The matching only knows
 * the rules of the release before, so the other wordings of the pattern's lineage follow the
 * suggestion's own rule: whichever of them that release has is the rule the edit replaced.
 *
 * Each comes with the rules the suggestion's own edit put in (its edited file's rules that the
 * file it edited did not have): the rule's new wording is one of them, not whatever rule the
 * edit left at the rule's old position (a rule it inserted before the one it reworded).
 */
export async function suggestionEditsOf(q: Queryable, workspace: string, release: { id: string; number: number }): Promise<SuggestionEdit[]> {
  const out: SuggestionEdit[] = [];
  let rows: LineageRow[] | null = null;
  for (const s of await repo.applied(q, workspace)) {
    // Only the first release with the edit: a later one still has it, but what it rewords is someone else's edit.
    if ((await releasedIn(q, s))?.id !== release.id) continue;
    const own = rulesPutIn(s);
    out.push({ procedure_id: s.procedure_id, rule_id: s.rule_id, new_rule_ids: own });
    const pattern = await patterns.pattern(q, workspace, s.pattern_id);
    if (!pattern) continue;
    rows ??= await lineageRepo.rows(q, workspace);
    for (const id of wordingsOf(rows, s.procedure_id, pattern.lineage_id)) if (id !== s.rule_id) out.push({ procedure_id: s.procedure_id, rule_id: id, new_rule_ids: own });
  }
  return out;
}

/** The rules of the suggestion's edited file that the file it edited did not have; undefined when either does not read as a procedure. */
function rulesPutIn(s: SuggestionRecord): string[] | undefined {
  if (s.new_text === null) return undefined;
  const before = parseProcedure(s.path, s.procedure_id, s.old_text);
  const after = parseProcedure(s.path, s.procedure_id, s.new_text);
  if (before.issues.length || after.issues.length) return undefined;
  const had = new Set(before.procedure.rules.map((r) => r.rule_id));
  return after.procedure.rules.filter((r) => !had.has(r.rule_id)).map((r) => r.rule_id);
}

/** Every wording of a lineage the rows know, newest row first, its first wording last. */
function wordingsOf(rows: readonly LineageRow[], procedureId: string, lineageId: string): string[] {
  const own = rows.filter((r) => r.procedure_id === procedureId);
  const lineage = new Lineage(own.map((r) => ({ procedure_id: r.procedure_id, rule_id: r.rule_id, previous_rule_id: r.previous_rule_id, how: r.how, similarity: r.similarity })));
  const ofLineage = (id: string) => {
    try {
      return lineage.lineageId(procedureId, id) === lineageId;
    } catch (err) {
      if (err instanceof LineageCycleError) return false;
      throw err;
    }
  };
  const ids = own
    .filter((r) => r.rule_id !== lineageId && ofLineage(r.rule_id))
    .sort((a, b) => (b.release_number ?? 0) - (a.release_number ?? 0))
    .map((r) => r.rule_id);
  return [...ids, lineageId];
}

/** When rule lineage merges two rule patterns, the suggestions go with their findings. */
export function moveSuggestions(q: Queryable, from: string, into: string): Promise<void> {
  return repo.movePattern(q, from, into);
}
