import { similarity } from './similarity';

/**
 * Rule lineage at a publish: which rule of the new release each rule of the release that was
 * live became. sopc derives a rule's id from its kind and wording, so an id in both releases is
 * the same rule; a reworded rule has a new id and is matched to the one it replaced, within one
 * procedure and one kind, one to one, in the seed's order:
 *
 *   1. suggestion: an applied suggestion knows the rule it edited; its new wording is one of
 *      the rules its own edit put in, the most similar to the old wording (the nearer its
 *      position on a tie). When those are not known (or not in the release: edited again by
 *      hand), it is the new rule at that position, unless another new one is more similar and
 *      at least ANYWHERE_THRESHOLD (the edit moved the rule and put another in its place), else
 *      the most similar new one;
 *   2. matched: the new rule at the same position, if similarity >= 0.35;
 *   3. matched: the most similar remaining pair anywhere in the procedure, best first, if
 *      similarity >= 0.5 (moved and reworded).
 *
 * The bar is lower at the same position because a rule that stayed in place and kept a third of
 * its words is far more likely a rewording than a coincidence; anywhere else it must keep half.
 */
export const SAME_POSITION_THRESHOLD = 0.35;
export const ANYWHERE_THRESHOLD = 0.5;

/** A rule as sopc compiles it (only what matching needs). */
export interface LineageRule {
  rule_id: string;
  kind: string;
  /** From 1 within its kind, in file order. */
  index: number;
  text: string;
}

export interface LineageProcedure {
  procedure_id: string;
  rules: readonly LineageRule[];
}

/** An applied suggestion whose edit is in the file published: the rule (of the old release) it edited. */
export interface SuggestionEdit extends EditedRule {
  procedure_id: string;
}

/** The rule (of the old release) a suggestion edited, and the rules its own edit put in, when known. */
export interface EditedRule {
  rule_id: string;
  /**
   * The rules of the suggestion's edited file that the file it edited did not have (a rewording,
   * and any rule the edit inserted): the rule's new wording is one of them. Absent: not known.
   */
  new_rule_ids?: readonly string[];
}

export type ChangeHow = 'same' | 'suggestion' | 'matched' | 'new' | 'removed';

/** One rule across the two releases (`sopops lineage diff` prints these, one a line). */
export interface RuleChange {
  procedure_id: string;
  kind: string;
  old_rule_id: string | null;
  new_rule_id: string | null;
  old_text: string | null;
  new_text: string | null;
  how: ChangeHow;
  /** 1 for same, the two wordings' similarity (3 decimals) for suggestion and matched, null otherwise. */
  similarity: number | null;
}

/**
 * Compares two releases' procedures: every rule of either, once. Procedures are in id order;
 * within one, kinds in order (steps, nevers, warning signs), the new release's rules by
 * position, then the removed ones by their old position.
 */
export function compareReleases(
  oldProcedures: readonly LineageProcedure[],
  newProcedures: readonly LineageProcedure[],
  suggestions: readonly SuggestionEdit[] = [],
): RuleChange[] {
  const olds = new Map(oldProcedures.map((p) => [p.procedure_id, p.rules]));
  const news = new Map(newProcedures.map((p) => [p.procedure_id, p.rules]));
  const ids = [...new Set([...olds.keys(), ...news.keys()])].sort();
  return ids.flatMap((id) =>
    compareProcedure(
      id,
      olds.get(id) ?? [],
      news.get(id) ?? [],
      suggestions.filter((s) => s.procedure_id === id).map(({ rule_id, new_rule_ids }) => ({ rule_id, new_rule_ids })),
    ),
  );
}

/**
 * One procedure's rules in two releases; `edited` are the old rules applied suggestions edited
 * (an id alone when the rules the edit put in are not known).
 */
export function compareProcedure(
  procedureId: string,
  oldRules: readonly LineageRule[],
  newRules: readonly LineageRule[],
  edited: readonly (string | EditedRule)[] = [],
): RuleChange[] {
  const newIds = new Set(newRules.map((r) => r.rule_id));
  const oldIds = new Set(oldRules.map((r) => r.rule_id));
  const oldLeft = oldRules.filter((r) => !newIds.has(r.rule_id));
  const newLeft = new Set(newRules.filter((r) => !oldIds.has(r.rule_id)));
  const pairs = new Map<LineageRule, { to: LineageRule; how: 'suggestion' | 'matched'; similarity: number }>();
  const take = (from: LineageRule, to: LineageRule, how: 'suggestion' | 'matched', sim: number) => {
    pairs.set(from, { to, how, similarity: sim });
    newLeft.delete(to);
  };
  const candidates = (from: LineageRule) => [...newLeft].filter((r) => r.kind === from.kind);

  // 1. suggestions, in the order given; a rule edited twice is matched once.
  for (const e of edited) {
    const { rule_id: id, new_rule_ids: own } = typeof e === 'string' ? { rule_id: e, new_rule_ids: undefined } : e;
    const from = oldLeft.find((r) => r.rule_id === id);
    if (!from || pairs.has(from)) continue;
    const to = editedInto(from, candidates(from), own);
    if (to) take(from, to, 'suggestion', similarity(from.text, to.text));
  }
  // 2. the same position.
  for (const from of oldLeft) {
    if (pairs.has(from)) continue;
    const to = candidates(from).find((r) => r.index === from.index);
    if (!to) continue;
    const sim = similarity(from.text, to.text);
    if (sim >= SAME_POSITION_THRESHOLD) take(from, to, 'matched', sim);
  }
  // 3. the best remaining pairs anywhere in the procedure; ties go to the earlier rules.
  const remaining = oldLeft
    .filter((from) => !pairs.has(from))
    .flatMap((from) => candidates(from).map((to) => ({ from, to, sim: similarity(from.text, to.text) })))
    .filter((p) => p.sim >= ANYWHERE_THRESHOLD)
    .sort((a, b) => b.sim - a.sim || a.from.index - b.from.index || a.to.index - b.to.index);
  for (const p of remaining) {
    if (!pairs.has(p.from) && newLeft.has(p.to)) take(p.from, p.to, 'matched', p.sim);
  }

  const replaced = new Map([...pairs].map(([from, p]) => [p.to, { from, ...p }]));
  const oldById = new Map(oldRules.map((r) => [r.rule_id, r]));
  const rows: RuleChange[] = [];
  for (const to of newRules) {
    const same = oldById.get(to.rule_id);
    const match = replaced.get(to);
    const from = same ?? match?.from;
    rows.push({
      procedure_id: procedureId,
      kind: to.kind,
      old_rule_id: from?.rule_id ?? null,
      new_rule_id: to.rule_id,
      old_text: from?.text ?? null,
      new_text: to.text,
      how: same ? 'same' : match ? match.how : 'new',
      similarity: same ? 1 : match ? round(match.similarity) : null,
    });
  }
  for (const from of oldLeft) {
    if (pairs.has(from)) continue;
    rows.push({ procedure_id: procedureId, kind: from.kind, old_rule_id: from.rule_id, new_rule_id: null, old_text: from.text, new_text: null, how: 'removed', similarity: null });
  }
  return sortRows(rows, oldRules, newRules);
}

/**
 * The new rule a suggestion's edit made of `from`: among the rules its own edit put in (when
 * the release has any of them), the most similar; else the rule at its position, unless
 * another is more similar and a rewording by the bar for anywhere, since an edit that inserts
 * a rule before the one it rewords leaves the inserted rule at the old position.
 */
function editedInto(from: LineageRule, options: LineageRule[], own: readonly string[] | undefined): LineageRule | undefined {
  const mine = own ? options.filter((r) => own.includes(r.rule_id)) : [];
  if (mine.length) return mostSimilar(from, mine);
  const best = mostSimilar(from, options);
  const atPosition = options.find((r) => r.index === from.index);
  if (!atPosition || !best || best === atPosition) return best;
  const bestSim = similarity(from.text, best.text);
  return bestSim >= ANYWHERE_THRESHOLD && bestSim > similarity(from.text, atPosition.text) ? best : atPosition;
}

function mostSimilar(from: LineageRule, options: LineageRule[]): LineageRule | undefined {
  let best: { rule: LineageRule; sim: number } | undefined;
  for (const rule of options) {
    const sim = similarity(from.text, rule.text);
    const nearer = best && sim === best.sim && Math.abs(rule.index - from.index) < Math.abs(best.rule.index - from.index);
    if (!best || sim > best.sim || nearer) best = { rule, sim };
  }
  return best?.rule;
}

const KIND_ORDER = ['step', 'never', 'warning'];

function sortRows(rows: RuleChange[], oldRules: readonly LineageRule[], newRules: readonly LineageRule[]): RuleChange[] {
  const kindRank = (k: string) => (KIND_ORDER.includes(k) ? KIND_ORDER.indexOf(k) : KIND_ORDER.length);
  const newIndex = new Map(newRules.map((r) => [r.rule_id, r.index]));
  const oldIndex = new Map(oldRules.map((r) => [r.rule_id, r.index]));
  // New rules by their position, then removed ones (no new position) by their old one.
  const position = (r: RuleChange) => (r.new_rule_id !== null ? [0, newIndex.get(r.new_rule_id) ?? 0] : [1, oldIndex.get(r.old_rule_id ?? '') ?? 0]);
  return rows.sort((a, b) => {
    const [ag, ai] = position(a);
    const [bg, bi] = position(b);
    return kindRank(a.kind) - kindRank(b.kind) || (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0) || ag - bg || ai - bi;
  });
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
