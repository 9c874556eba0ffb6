import { Lineage, linksFromChanges, type LineageLink } from './links';
import { compareReleases, type LineageProcedure, type SuggestionEdit } from './match';

/** One release as a rebuild sees it: its procedures and the suggestions applied in it. */
export interface ReleaseRules {
  procedures: readonly LineageProcedure[];
  /** Applied suggestions whose edit is in this release's files (the rule of the release before that each edited). */
  suggestions?: readonly SuggestionEdit[];
}

/**
 * The rebuild (POST .../rules/lineage/rebuild, `sopops lineage rebuild`): the matched and
 * suggestion links of every release against the one before it by number, recomputed from the
 * releases alone, with the manual rows kept as they are. Releases come oldest first; the first
 * is compared with nothing, so its rules are new. The same releases and manual rows always give
 * the same rows, so running it twice changes nothing.
 */
export function rebuildLineage(releases: readonly ReleaseRules[], manual: readonly LineageLink[] = []): LineageLink[] {
  // Manual rows go in first: a publish never overwrites a row, so they stay.
  let lineage = new Lineage(manual.filter((l) => l.how === 'manual'));
  let previous: readonly LineageProcedure[] = [];
  for (const release of releases) {
    lineage = lineage.withPublished(linksFromChanges(compareReleases(previous, release.procedures, release.suggestions ?? []))).lineage;
    previous = release.procedures;
  }
  return lineage.links();
}
