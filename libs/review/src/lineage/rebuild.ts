import { Lineage, linksFromChanges, type LineageLink } from './links';
import { compareReleases, type LineageProcedure, type SuggestionEdit } from './match';

/** One release as a rebuild sees it: its procedures and the suggestions applied in it. */
export interface ReleaseRules {
  procedures: readonly LineageProcedure[];
  /** Applied suggestions whose edit is in this release's files (the rule of the release before that each edited). */
  suggestions?: readonly SuggestionEdit[];
}

/** A wording that came back in a release: the index of that release in the rebuild's list, and the link its publish made. */
export interface LineageReturn {
  release: number;
  link: LineageLink;
}

/**
 * The rebuild (POST .../rules/lineage/rebuild, `sopops lineage rebuild`): the matched and
 * suggestion links of every release against the one before it by number, recomputed from the
 * releases alone, with the manual rows kept as they are. Releases come oldest first; the first
 * is compared with nothing, so its rules are new. The same releases and manual rows always give
 * the same rows, so running it twice changes nothing.
 */
export function rebuildLineage(releases: readonly ReleaseRules[], manual: readonly LineageLink[] = []): LineageLink[] {
  return rebuildLineageSteps(releases, manual).links;
}

/**
 * rebuildLineage's rows, and the wordings that came back (each a step of its lineage at the
 * release that brought it back) as the publishes of these releases recorded them: a rule whose
 * link the release proposes, with a row already, and in an earlier release of its procedure.
 */
export function rebuildLineageSteps(releases: readonly ReleaseRules[], manual: readonly LineageLink[] = []): { links: LineageLink[]; returns: LineageReturn[] } {
  // Manual rows go in first: a publish never overwrites a row, so they stay.
  let lineage = new Lineage(manual.filter((l) => l.how === 'manual'));
  const returns: LineageReturn[] = [];
  const seen = new Set<string>();
  const key = (procedureId: string, ruleId: string) => `${procedureId}\u0000${ruleId}`;
  let previous: readonly LineageProcedure[] = [];
  releases.forEach((release, i) => {
    const published = lineage.withPublished(linksFromChanges(compareReleases(previous, release.procedures, release.suggestions ?? [])), (p, r) => seen.has(key(p, r)));
    lineage = published.lineage;
    for (const link of published.returned) returns.push({ release: i, link });
    for (const p of release.procedures) for (const r of p.rules) seen.add(key(p.procedure_id, r.rule_id));
    previous = release.procedures;
  });
  return { links: lineage.links(), returns };
}
