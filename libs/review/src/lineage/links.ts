import type { RuleChange } from './match';

/**
 * The rule_lineage rows: which rule each rule replaced. One row per procedure and rule id, the
 * first one written (links are never overwritten by later publishes), so a wording that comes
 * back (a revert) keeps the row it got when it first appeared and stays in its own lineage;
 * its return is a step of that lineage of its own (`withPublished`'s `returned`, stored in
 * rule_lineage_returns at the release that brought it back), which changes no lineage id.
 * Only a manual link (POST/DELETE .../lineage) replaces a row.
 *
 * A rule's lineage id is its first wording's id: follow previous_rule_id until a rule with no
 * previous one (or no row: a rule that predates the rows starts its own lineage).
 */
export type LinkHow = 'suggestion' | 'matched' | 'new' | 'manual';

export interface LineageLink {
  procedure_id: string;
  rule_id: string;
  /** The rule this one replaced; null for a new rule (or one made new by hand). */
  previous_rule_id: string | null;
  how: LinkHow;
  similarity: number | null;
}

export class LineageCycleError extends Error {
  constructor(
    readonly procedureId: string,
    readonly ruleIds: string[],
  ) {
    super(`a cycle in the rule lineage of procedure ${procedureId}: ${ruleIds.join(' -> ')}`);
    this.name = 'LineageCycleError';
  }
}

/** The links a publish writes: a row for every rule that is new to the procedure (not `same`, not `removed`). */
export function linksFromChanges(changes: readonly RuleChange[]): LineageLink[] {
  return changes.flatMap((c): LineageLink[] =>
    c.new_rule_id === null || c.how === 'same' || c.how === 'removed'
      ? []
      : [{ procedure_id: c.procedure_id, rule_id: c.new_rule_id, previous_rule_id: c.old_rule_id, how: c.how, similarity: c.similarity }],
  );
}

const key = (procedureId: string, ruleId: string) => `${procedureId}\u0000${ruleId}`;

/** The rows of a workspace (or of one procedure), read-only, with the walks over them. */
export class Lineage {
  private readonly rows = new Map<string, LineageLink>();

  constructor(links: Iterable<LineageLink> = []) {
    for (const l of links) this.rows.set(key(l.procedure_id, l.rule_id), l);
  }

  links(): LineageLink[] {
    return [...this.rows.values()];
  }

  link(procedureId: string, ruleId: string): LineageLink | undefined {
    return this.rows.get(key(procedureId, ruleId));
  }

  /** The links from the first wording to this rule, oldest first (empty for a rule with no row). */
  chain(procedureId: string, ruleId: string): LineageLink[] {
    const chain: LineageLink[] = [];
    const seen = new Set<string>();
    for (let id: string | null = ruleId; id !== null; ) {
      if (seen.has(id)) throw new LineageCycleError(procedureId, [...chain.map((l) => l.rule_id), id].reverse());
      seen.add(id);
      const l = this.link(procedureId, id);
      if (!l) break;
      chain.push(l);
      id = l.previous_rule_id;
    }
    return chain.reverse();
  }

  /** The id of the rule's first wording: the key of its rule pattern. */
  lineageId(procedureId: string, ruleId: string): string {
    const chain = this.chain(procedureId, ruleId);
    return chain.length === 0 ? ruleId : (chain[0].previous_rule_id ?? chain[0].rule_id);
  }

  /** Whether linking ruleId to previousRuleId would close a cycle (409 for a manual link). */
  wouldCycle(procedureId: string, ruleId: string, previousRuleId: string): boolean {
    for (let id: string | null = previousRuleId; id !== null; id = this.link(procedureId, id)?.previous_rule_id ?? null) {
      if (id === ruleId) return true;
    }
    return false;
  }

  /**
   * A publish's links added to these: a rule that already has a row keeps it (never overwritten,
   * so a revert stays in its own lineage), and a link that would close a cycle is left out.
   * Returns the rows to write, the lineage with them, and the wordings that came back: the
   * publish's links of rules that have a row and were in an earlier release (`earlier`; by
   * default every rule with a row was, as at a publish), each a step of its lineage at this
   * release that changes no row.
   */
  withPublished(
    proposed: readonly LineageLink[],
    earlier: (procedureId: string, ruleId: string) => boolean = () => true,
  ): { lineage: Lineage; added: LineageLink[]; returned: LineageLink[] } {
    const next = new Lineage(this.links());
    const added: LineageLink[] = [];
    const returned: LineageLink[] = [];
    for (const l of proposed) {
      if (next.link(l.procedure_id, l.rule_id)) {
        if (earlier(l.procedure_id, l.rule_id)) returned.push(l);
        continue;
      }
      if (l.previous_rule_id !== null && next.wouldCycle(l.procedure_id, l.rule_id, l.previous_rule_id)) continue;
      next.rows.set(key(l.procedure_id, l.rule_id), l);
      added.push(l);
    }
    return { lineage: next, added, returned };
  }

  /**
   * A manual link (previousRuleId) or unlink (null): it replaces the rule's row.
   * Throws LineageCycleError when the link would close a cycle.
   */
  withManual(procedureId: string, ruleId: string, previousRuleId: string | null): { lineage: Lineage; link: LineageLink } {
    if (previousRuleId !== null && this.wouldCycle(procedureId, ruleId, previousRuleId)) {
      // The path the link would close: ruleId -> previousRuleId -> ... -> ruleId.
      const path = [ruleId];
      for (let id: string | null = previousRuleId; id !== null && id !== ruleId; id = this.link(procedureId, id)?.previous_rule_id ?? null) path.push(id);
      throw new LineageCycleError(procedureId, [...path, ruleId]);
    }
    const link: LineageLink = { procedure_id: procedureId, rule_id: ruleId, previous_rule_id: previousRuleId, how: 'manual', similarity: null };
    const next = new Lineage(this.links());
    next.rows.set(key(procedureId, ruleId), link);
    return { lineage: next, link };
  }
}
