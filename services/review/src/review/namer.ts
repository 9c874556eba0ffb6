import type { Db } from '@neatroots/ports';
import { MalformedName, NAME_INSTRUCTIONS, nameAsk, nameSubject, readPatternName, ruleLabel } from '@neatroots/review-domain';
import type { DecisionGateway } from '@neatroots/sop';
import { PatternsRepo } from '@neatroots/store';

/** The question service's decisions, found when first needed (null: this deployment has none). */
export type GatewayOf = () => Promise<DecisionGateway | null>;

export interface RenameResult {
  /** Patterns the reasoning model named now. */
  renamed: number;
  /** Patterns it was asked about and could not name (they keep their rule-text name). */
  failed: number;
  /** Why nothing was or some were not named: no model, or the first failure's reason. */
  reason: string | null;
}

/**
 * NameRulePattern: asks the reasoning model (through the question service's gateway) what the
 * agent did wrong in each rule pattern, in a few plain words. A pattern is named once, when it
 * is created; one the model could not name keeps its rule-text name and `named_by: rule_text`,
 * so `sopops patterns rename` (or the next recluster) finds it again. Model calls happen outside
 * any transaction: a slow model never holds the workspace's assignment lock.
 */
export class PatternNamer {
  constructor(
    private readonly db: Db,
    private readonly gateway: GatewayOf,
    private readonly repo: PatternsRepo = new PatternsRepo(),
  ) {}

  /** Names the workspace's rule patterns still named from their text (every one with `all`, only `ids` when given). */
  async rename(workspace: string, opts: { all?: boolean; ids?: readonly string[] } = {}): Promise<RenameResult> {
    const patterns = await this.repo.toName(this.db, workspace, opts);
    if (!patterns.length) return { renamed: 0, failed: 0, reason: null };
    const gateway = await this.gateway();
    const models = gateway ? await gateway.decisionModels() : null;
    if (!gateway || !models?.reasoning) {
      return { renamed: 0, failed: patterns.length, reason: 'no reasoning model is configured: the patterns keep the names taken from their rules' };
    }
    let renamed = 0;
    let reason: string | null = null;
    const results = await Promise.all(
      patterns.map(async (p) => {
        const s = { procedure_name: p.procedure_name, rule_label: ruleLabel(p.rule_kind, p.rule_index), rule_text: p.rule_text };
        const reply = await gateway.decide('reasoning', { instructions: NAME_INSTRUCTIONS, subject: nameSubject(s), ask: nameAsk(s) });
        if (!reply.ok) return { id: p.id, error: `the model failed: ${reply.reason}` };
        try {
          return { id: p.id, name: readPatternName(reply.answer) };
        } catch (err) {
          if (err instanceof MalformedName) return { id: p.id, error: `the model's answer was unusable: ${err.message}` };
          throw err;
        }
      }),
    );
    for (const r of results) {
      if ('name' in r && r.name) {
        await this.repo.setModelName(this.db, r.id, r.name);
        renamed++;
      } else reason ??= r.error ?? null;
    }
    return { renamed, failed: patterns.length - renamed, reason };
  }
}
