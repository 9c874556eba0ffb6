import type { Db } from '@neatroots/ports';
import { ClustersRepo, type PatternRecord } from '@neatroots/store';

export type ThemeOf = (p: Pick<PatternRecord, 'theme_id'>) => { id: string; name: string } | null;

/**
 * What the patterns list, a pattern and the review queue show of clustering: each pattern's
 * theme (a failure mode has its rule's) and the workspace's last clustering.
 */
export async function clusteringView(db: Db, workspace: string, clusters: ClustersRepo = new ClustersRepo()): Promise<{ themeOf: ThemeOf; clustered_at: string | null }> {
  const [themes, clustered_at] = await Promise.all([clusters.themesOf(db, workspace), clusters.lastClustering(db, workspace)]);
  const themeOf: ThemeOf = (p) => {
    const t = p.theme_id ? themes.get(p.theme_id) : undefined;
    return t ? { id: t.id, name: t.name } : null;
  };
  return { themeOf, clustered_at };
}
