import type { Queryable } from '@neatroots/ports';
import { nameFromRuleText, planRealign, type Lineage } from '@neatroots/review-domain';
import { wordingSince, type LineageRepo, type LineageRow, type PatternRecord } from '@neatroots/store';
import { insertRulePattern } from '../review/assign';
import type { ReviewWrites } from '../review/writes';

/**
 * Called when rule pattern `from` is merged into `into`, before it is deleted, in the same
 * transaction: what else belongs to a rule pattern moves over (the suggestions service moves
 * its suggestions here).
 */
export type OnPatternsMerged = (q: Queryable, from: string, into: string) => Promise<void>;

const key = (procedureId: string, lineageId: string) => `${procedureId}\0${lineageId}`;

export interface RealignDeps {
  writes: ReviewWrites;
  lineageRepo: LineageRepo;
  onMerged?: OnPatternsMerged;
}

export interface Realigned {
  /** Rule patterns that took another key, merged, or gained or lost findings. */
  touched: string[];
  /** Rule patterns made for findings whose lineage had none. */
  created: string[];
}

/**
 * Moves every finding to the rule pattern of its rule's lineage id (planRealign says which),
 * then gives the patterns involved their current wording, suppresses their findings again and
 * rolls their sessions up. Runs in the caller's transaction, under the workspace's row lock.
 */
export async function realign(q: Queryable, workspace: string, lineage: Lineage, rows: readonly LineageRow[], opts: { wholeMoves: boolean }, deps: RealignDeps): Promise<Realigned> {
  const repo = deps.writes.repo;
  const patterns = (await repo.patternsOf(q, workspace)).filter((p) => p.kind === 'rule');
  const groups = await deps.lineageRepo.ruleGroups(q, workspace);
  const plan = planRealign(groups, patterns, lineage, opts);
  if (!plan.whole.length && !plan.rules.length) return { touched: [], created: [] };

  const byId = new Map(patterns.map((p) => [p.id, p]));
  const holder = new Map(patterns.map((p) => [key(p.procedure_id, p.lineage_id), p.id]));
  const touched = new Set<string>();
  const created: string[] = [];

  // Patterns that move whole leave their keys first, so a chain or a swap never meets itself.
  for (const w of plan.whole) {
    const p = byId.get(w.pattern_id)!;
    holder.delete(key(p.procedure_id, p.lineage_id));
    await deps.lineageRepo.setKey(q, p.id, `~moving~${p.id}`);
  }
  for (const w of plan.whole) {
    const k = key(w.procedure_id, w.lineage_id);
    const p = byId.get(w.pattern_id)!;
    const heldBy = holder.get(k);
    if (!heldBy) {
      await deps.lineageRepo.setKey(q, p.id, w.lineage_id);
      byId.set(p.id, { ...p, lineage_id: w.lineage_id });
      holder.set(k, p.id);
      touched.add(p.id);
      continue;
    }
    // Both have a pattern: they merge into the older one, which shows the later wording.
    const other = byId.get(heldBy)!;
    const [into, from] = p.created_at < other.created_at || (p.created_at === other.created_at && p.id < other.id) ? [p, other] : [other, p];
    await deps.onMerged?.(q, from.id, into.id);
    await deps.lineageRepo.merge(q, from.id, into.id);
    await deps.lineageRepo.setKey(q, into.id, w.lineage_id);
    const wording = from.rule_ran_at > into.rule_ran_at ? from : into;
    const merged: PatternRecord = { ...into, lineage_id: w.lineage_id, procedure_name: wording.procedure_name, rule_id: wording.rule_id, rule_kind: wording.rule_kind, rule_index: wording.rule_index, rule_text: wording.rule_text, rule_ran_at: wording.rule_ran_at, reworded_at: wording.reworded_at };
    byId.set(into.id, merged);
    byId.delete(from.id);
    touched.delete(from.id);
    holder.set(k, into.id);
    touched.add(into.id);
  }

  // Findings that move by their rule: into the pattern keyed by its lineage id, made when there is none.
  const sources = new Map(groups.map((g) => [key(g.procedure_id, g.rule_id), g.rule_pattern_id]));
  for (const r of plan.rules) {
    const k = key(r.procedure_id, r.lineage_id);
    let into = holder.get(k);
    if (!into) {
      const rules = plan.rules.filter((x) => x.procedure_id === r.procedure_id && x.lineage_id === r.lineage_id).map((x) => x.rule_id);
      const newest = await deps.lineageRepo.latestFinding(q, workspace, r.procedure_id, rules);
      const source = byId.get(sources.get(key(r.procedure_id, r.rule_id)) ?? '');
      const text = newest?.text ?? r.rule_id;
      const made = await insertRulePattern(q, repo, {
        workspace,
        procedure_id: r.procedure_id,
        procedure_name: source?.procedure_name ?? r.procedure_id,
        lineage_id: r.lineage_id,
        name: nameFromRuleText(text),
        rule_id: newest?.rule_id ?? r.rule_id,
        rule_kind: newest?.kind ?? source?.rule_kind ?? 'step',
        rule_index: newest?.index ?? source?.rule_index ?? 1,
        rule_text: text,
        rule_ran_at: newest?.at ?? new Date().toISOString(),
      });
      into = made.id;
      if (made.created) created.push(made.id);
      const [p] = await repo.patternsByIds(q, [made.id]);
      if (p) byId.set(p.id, p);
      holder.set(k, into);
    }
    const leaf = (await deps.lineageRepo.otherOf(q, into)) ?? into;
    await deps.lineageRepo.moveRule(q, workspace, r.procedure_id, r.rule_id, into, leaf);
    touched.add(into);
    const from = sources.get(key(r.procedure_id, r.rule_id));
    if (from && byId.has(from)) touched.add(from);
  }

  // Each pattern shows its lineage's wording: a pattern left showing a wording that moved out
  // shows its newest finding's, and reworded_at is when the shown wording came to be.
  const since = wordingSince(rows, await deps.lineageRepo.returns(q, workspace));
  for (const id of touched) {
    const p = byId.get(id);
    if (!p) continue;
    let w = { procedure_name: p.procedure_name, rule_id: p.rule_id, rule_kind: p.rule_kind, rule_index: p.rule_index, rule_text: p.rule_text, rule_ran_at: p.rule_ran_at, reworded_at: p.reworded_at };
    if (lineage.lineageId(p.procedure_id, p.rule_id) !== p.lineage_id) {
      const members = groups.filter((g) => g.procedure_id === p.procedure_id && lineage.lineageId(g.procedure_id, g.rule_id) === p.lineage_id).map((g) => g.rule_id);
      const newest = members.length ? await deps.lineageRepo.latestFinding(q, workspace, p.procedure_id, members) : null;
      if (newest) w = { ...w, rule_id: newest.rule_id, rule_kind: newest.kind, rule_index: newest.index, rule_text: newest.text, rule_ran_at: newest.at };
    }
    // The lineage's first wording has no date unless it came back (A, B, then A again): then its return's.
    w.reworded_at = w.rule_id === p.lineage_id ? since(p.procedure_id, w.rule_id) : (since(p.procedure_id, w.rule_id) ?? (w.rule_id === p.rule_id ? p.reworded_at : null) ?? w.rule_ran_at);
    await repo.updateWording(q, p.id, w);
  }

  const findings = await repo.findingsOfPatterns(q, [...touched]);
  const changed = await deps.writes.resuppress(q, findings);
  await deps.writes.rollUp(q, changed);
  return { touched: [...touched], created };
}
