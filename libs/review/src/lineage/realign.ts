import type { Lineage } from './links';

/**
 * Which findings move when the lineage changes (a publish's links, a manual link or unlink, a
 * rebuild). Every finding on one rule belongs to the rule pattern keyed by (procedure, lineage
 * id of its rule); a finding in any other pattern moves.
 *
 * A pattern whose every finding now belongs to one other key moves whole (`whole`): it takes
 * that key, or, when a pattern holds the key already, the two merge into the older one with
 * their failure modes, verdicts and suggestions (a manual link, a rebuild). An unlink moves no
 * pattern whole: the unlinked rule's findings, and its later wordings', go to a pattern of their
 * own with no verdict, so `wholeMoves` is false then. Every other misplaced finding moves by its
 * rule (`rules`): into the pattern keyed by its lineage id, made when there is none.
 */
export interface FindingGroup {
  procedure_id: string;
  rule_id: string;
  /** The rule pattern its findings are in. */
  rule_pattern_id: string;
}

export interface RulePatternKey {
  id: string;
  procedure_id: string;
  lineage_id: string;
}

export interface RealignPlan {
  whole: { pattern_id: string; procedure_id: string; lineage_id: string }[];
  rules: { procedure_id: string; rule_id: string; lineage_id: string }[];
}

export function planRealign(groups: readonly FindingGroup[], patterns: readonly RulePatternKey[], lineage: Lineage, opts: { wholeMoves: boolean }): RealignPlan {
  const byId = new Map(patterns.map((p) => [p.id, p]));
  const targets = new Map<string, { procedure_id: string; rule_id: string; lineage_id: string }[]>();
  for (const g of groups) {
    const p = byId.get(g.rule_pattern_id);
    if (!p) continue;
    const lineageId = lineage.lineageId(g.procedure_id, g.rule_id);
    (targets.get(p.id) ?? targets.set(p.id, []).get(p.id)!).push({ procedure_id: g.procedure_id, rule_id: g.rule_id, lineage_id: lineageId });
  }
  const plan: RealignPlan = { whole: [], rules: [] };
  for (const [id, rules] of targets) {
    const p = byId.get(id)!;
    const misplaced = rules.filter((r) => r.lineage_id !== p.lineage_id || r.procedure_id !== p.procedure_id);
    if (!misplaced.length) continue;
    const keys = new Set(rules.map((r) => `${r.procedure_id}\0${r.lineage_id}`));
    if (opts.wholeMoves && keys.size === 1 && misplaced.length === rules.length) {
      plan.whole.push({ pattern_id: id, procedure_id: rules[0].procedure_id, lineage_id: rules[0].lineage_id });
    } else {
      plan.rules.push(...misplaced);
    }
  }
  const order = (a: { procedure_id: string; lineage_id: string }, b: { procedure_id: string; lineage_id: string }) =>
    a.procedure_id < b.procedure_id ? -1 : a.procedure_id > b.procedure_id ? 1 : a.lineage_id < b.lineage_id ? -1 : a.lineage_id > b.lineage_id ? 1 : 0;
  plan.whole.sort((a, b) => order(a, b) || (a.pattern_id < b.pattern_id ? -1 : 1));
  plan.rules.sort((a, b) => order(a, b) || (a.rule_id < b.rule_id ? -1 : 1));
  return plan;
}
