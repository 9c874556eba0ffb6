import { randomBytes } from 'node:crypto';
import type { Db } from '@neatroots/ports';
import { MalformedThemes, planThemes, readThemes, ruleLabel, THEME_ASK, THEME_INSTRUCTIONS, themeAnswerTokens, themeSubject } from '@neatroots/review-domain';
import type { DecisionGateway } from '@neatroots/sop';
import { ClustersRepo, type PatternRecord } from '@neatroots/store';
import type { ReviewWrites } from './writes';

const themeId = (): string => `thm_${randomBytes(16).toString('base64url').slice(0, 22)}`;
const KIND_ORDER = { step: 0, never: 1, warning: 2 } as const;

export type ThemesOutcome = { ok: true; themes: number } | { ok: false; reason: string };

/**
 * Themes: the reasoning model groups one procedure's active rule patterns by the phase of the
 * session where they happen, in session order (theme-2), shown the procedure's themes now so it
 * keeps the names that still fit. Each new theme continues an old one by name or by the rule
 * patterns they share (planThemes), keeping its id; an old theme continued by none is retired.
 * A rule pattern the model put in no theme has none; its failure modes have their rule's theme.
 */
export class ThemeGrouper {
  constructor(
    private readonly db: Db,
    private readonly writes: ReviewWrites,
    private readonly clusters: ClustersRepo = new ClustersRepo(),
  ) {}

  async group(workspace: string, procedureId: string, gateway: DecisionGateway): Promise<ThemesOutcome> {
    const rules = (await this.writes.repo.patternsOf(this.db, workspace))
      .filter((p) => p.kind === 'rule' && p.retired_at === null && p.procedure_id === procedureId)
      .sort(sessionOrder);
    if (!rules.length) return { ok: true, themes: 0 };
    const existing = await this.clusters.themes(this.db, workspace, procedureId);
    const subject = themeSubject(
      rules[rules.length - 1].procedure_name,
      rules.map((p) => ({ id: p.id, rule_label: ruleLabel(p.rule_kind, p.rule_index), name: p.name, rule_text: p.rule_text })),
      existing,
    );
    // The answer lists every rule pattern: its budget grows with them.
    const reply = await gateway.decide('reasoning', { instructions: THEME_INSTRUCTIONS, subject, ask: THEME_ASK, max_tokens: themeAnswerTokens(rules.length) });
    if (!reply.ok) return { ok: false, reason: `the model failed: ${reply.reason}` };
    let themes;
    try {
      themes = readThemes(reply.answer, rules.map((p) => p.id)).themes;
    } catch (err) {
      if (err instanceof MalformedThemes) return { ok: false, reason: `the model's answer was unusable: ${err.message}` };
      throw err;
    }
    await this.db.transaction(async (tx) => {
      await this.writes.repo.lockWorkspace(tx, workspace);
      // Read again under the lock: another regrouping may have finished meanwhile.
      const now = await this.clusters.themes(tx, workspace, procedureId);
      const plan = planThemes(now, themes);
      const ids = plan.ids.map((id) => id ?? themeId());
      for (const [i, t] of themes.entries()) await this.clusters.saveTheme(tx, workspace, { id: ids[i], procedure_id: procedureId, name: t.name, position: i + 1 });
      await this.clusters.retireThemes(tx, plan.retired);
      const of = new Map<string, string>();
      themes.forEach((t, i) => t.patterns.forEach((p) => of.set(p, ids[i])));
      await this.clusters.setThemes(tx, rules.map((p) => ({ pattern_id: p.id, theme_id: of.get(p.id) ?? null })));
    });
    return { ok: true, themes: themes.length };
  }
}

/** Steps in their order, then never rules, then warning signs: how the model is shown them. */
function sessionOrder(a: PatternRecord, b: PatternRecord): number {
  return KIND_ORDER[a.rule_kind] - KIND_ORDER[b.rule_kind] || a.rule_index - b.rule_index || (a.id < b.id ? -1 : 1);
}
