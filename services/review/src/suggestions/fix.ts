import type { Queryable } from '@neatroots/ports';
import { hasEdit, type FixFacts } from '@neatroots/review-domain';
import { APPLIED_STATUSES, SuggestionsRepo, type SuggestionRecord } from '@neatroots/store';
import type { VerdictContext } from '../review/writes';

export interface FixInfo extends FixFacts {
  release: { id: string; number: number } | null;
}

const repo = new SuggestionsRepo();

/**
 * The first release whose copy of the file has the suggestion's edit (the suggested text, or
 * that merged with other edits), published after the suggestion was written; null before.
 */
export async function releasedIn(q: Queryable, s: SuggestionRecord): Promise<{ id: string; number: number; created_at: string } | null> {
  if (!s.new_text || !APPLIED_STATUSES.includes(s.status)) return null;
  for (const r of await repo.releasesWithFile(q, s.workspace, s.path, s.created_at)) {
    if (r.text !== null && hasEdit(s.old_text, s.new_text, r.text)) return { id: r.release_id, number: r.number, created_at: r.created_at };
  }
  return null;
}

/**
 * The fix facts of these patterns (review states fixing, fixed, regressed): the suggestions
 * applied for the verdict each goes by (its own, or its rule pattern's when inherited), made
 * since that verdict, so a new verdict starts over. Once a release with the edit exists, the
 * sessions checked on the procedure on that release or later, and those with a finding in the
 * pattern. Patterns with nothing applied are left out.
 */
export async function fixFactsOf(q: Queryable, contexts: Iterable<VerdictContext>): Promise<Map<string, FixInfo>> {
  const wanted = [...contexts].filter((c) => c.verdict && (c.verdict.verdict === 'real' || c.verdict.verdict === 'sop_wrong'));
  const out = new Map<string, FixInfo>();
  if (!wanted.length) return out;
  const ids = new Set<string>();
  for (const c of wanted) {
    ids.add(c.pattern.id);
    if (c.verdict!.inherited && c.pattern.parent_id) ids.add(c.pattern.parent_id);
  }
  // The applied suggestions grouped once by pattern (not scanned again for each pattern).
  const byPattern = new Map<string, SuggestionRecord[]>();
  for (const s of await repo.ofPatterns(q, [...ids])) {
    if (APPLIED_STATUSES.includes(s.status)) (byPattern.get(s.pattern_id) ?? byPattern.set(s.pattern_id, []).get(s.pattern_id)!).push(s);
  }
  for (const c of wanted) {
    const owners = new Set([c.pattern.id, ...(c.verdict!.inherited && c.pattern.parent_id ? [c.pattern.parent_id] : [])]);
    const applied = [...owners].flatMap((id) => byPattern.get(id) ?? []).filter((s) => s.created_at >= c.verdict!.created_at);
    if (!applied.length) continue;
    let release: FixInfo['release'] = null;
    for (const s of applied) {
      const r = await releasedIn(q, s);
      if (r && (!release || r.number < release.number)) release = { id: r.id, number: r.number };
    }
    if (!release) {
      out.set(c.pattern.id, { release: null, sessions: 0, sessions_with_finding: 0 });
      continue;
    }
    const n = await repo.fixSessions(q, c.pattern.workspace, c.pattern.procedure_id, release.number, { id: c.pattern.id, kind: c.pattern.kind });
    out.set(c.pattern.id, { release, sessions: n.sessions, sessions_with_finding: n.with_finding });
  }
  return out;
}
