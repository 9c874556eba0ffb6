import type { Db } from '@neatroots/ports';
import { ASSIGN_INSTRUCTIONS, assignAsk, assignSubject, MalformedChoice, readModeChoice, ruleLabel } from '@neatroots/review-domain';
import { ClustersRepo, type ClusterFinding, type PatternRecord } from '@neatroots/store';
import type { GatewayOf } from './namer';
import { childPatternId, OTHER_NAME, quoteOf } from './split';
import { findingKey, type ReviewWrites } from './writes';

/** Findings decided per round (each is one decision; the question service batches them). */
const ROUND = 200;

/**
 * New findings on a rule that is split into failure modes: the assigner puts them on the rule
 * pattern, and this sends each to one of the rule's failure modes, or to `other`, by a decision
 * (assign-1 on the decision endpoint: the decision model, else the local LLM). Without a model,
 * or when it fails or answers something unusable, the finding goes to `other`: counted and
 * shown at once, and a rule whose `other` grows past 25% is reclustered. The model is asked
 * outside any transaction; a finding moved meanwhile (a recluster) is left where it went.
 */
export class FailureModeAssigner {
  constructor(
    private readonly db: Db,
    private readonly writes: ReviewWrites,
    private readonly gateway: GatewayOf,
    private readonly clusters: ClustersRepo = new ClustersRepo(),
  ) {}

  /** Returns how many findings it moved into a failure mode or `other`. */
  async assign(workspace: string): Promise<number> {
    let total = 0;
    for (let round = 0; round < 50; round++) {
      const waiting = await this.clusters.waitingForMode(this.db, workspace, ROUND);
      if (!waiting.length) break;
      const byRule = new Map<string, ClusterFinding[]>();
      for (const f of waiting) (byRule.get(f.rule_pattern_id) ?? byRule.set(f.rule_pattern_id, []).get(f.rule_pattern_id)!).push(f);
      const gateway = await this.gateway().catch(() => null);
      const models = gateway ? await gateway.decisionModels() : null;
      const decide = gateway && models?.decision ? gateway : null;
      const targets = new Map<string, string>();
      const rules = new Map((await this.writes.repo.patternsByIds(this.db, [...byRule.keys()])).map((p) => [p.id, p]));
      await Promise.all(
        [...byRule].map(async ([ruleId, findings]) => {
          const rule = rules.get(ruleId)!;
          const children = (await this.writes.repo.children(this.db, ruleId)).filter((c) => c.retired_at === null);
          const modes = children.filter((c) => c.kind === 'sub');
          const other = children.find((c) => c.kind === 'other')?.id ?? (await this.otherOf(workspace, rule));
          const subject = assignSubject({ procedure_name: rule.procedure_name, rule_label: ruleLabel(rule.rule_kind, rule.rule_index), rule_text: rule.rule_text, modes });
          await Promise.all(
            findings.map(async (f) => {
              targets.set(f.id, (decide && modes.length ? await choose(decide, subject, f, modes) : null) ?? other);
            }),
          );
        }),
      );
      const moved = await this.db.transaction(async (tx) => {
        await this.writes.repo.lockWorkspace(tx, workspace);
        const targeted = await this.writes.repo.patternsByIds(tx, [...new Set(targets.values())]);
        const ctx = await this.writes.contexts(tx, targeted);
        // A recluster may have retired a failure mode meanwhile: its findings wait for the next round.
        const retired = new Set(targeted.filter((p) => p.retired_at !== null).map((p) => p.id));
        const overrides = await this.writes.overridesOf(tx, waiting);
        const rows = waiting.filter((f) => !retired.has(targets.get(f.id)!)).map((f) => {
          const to = targets.get(f.id)!;
          return { id: f.id, from: f.rule_pattern_id, pattern_id: to, suppressed: this.writes.suppressed(f, ctx.get(to), overrides.get(findingKey(f.session_id, f.procedure_id, f.rule_id))), was: f.suppressed, session_id: f.session_id };
        });
        const n = await this.clusters.moveFindings(tx, rows);
        await this.writes.rollUp(tx, [...new Set(rows.filter((r) => r.suppressed !== r.was).map((r) => r.session_id))]);
        return n;
      });
      total += moved;
      if (waiting.length < ROUND || moved === 0) break;
    }
    return total;
  }

  /** A split rule always has an `other`; one lost (never expected) is made again. */
  private async otherOf(workspace: string, rule: PatternRecord): Promise<string> {
    const id = childPatternId();
    await this.db.transaction(async (tx) => {
      await this.writes.repo.lockWorkspace(tx, workspace);
      await this.clusters.insertChild(tx, { id, parent_id: rule.id, kind: 'other', name: OTHER_NAME, named_by: 'model', description: null });
    });
    return id;
  }
}

async function choose(gateway: NonNullable<Awaited<ReturnType<GatewayOf>>>, subject: string, f: ClusterFinding, modes: readonly PatternRecord[]): Promise<string | null> {
  const reply = await gateway.decide('decision', { instructions: ASSIGN_INSTRUCTIONS, subject, ask: assignAsk(quoteOf(f)) });
  if (!reply.ok) return null;
  try {
    const i = readModeChoice(reply.answer, modes.length);
    return i === null ? null : modes[i].id;
  } catch (err) {
    if (err instanceof MalformedChoice) return null;
    throw err;
  }
}
