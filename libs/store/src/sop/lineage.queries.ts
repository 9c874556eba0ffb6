/**
 * Rule lineage as the api calls it (GET/POST/DELETE /v1/workspaces/{ws}/rules/{rule_id}/lineage,
 * POST /v1/workspaces/{ws}/rules/lineage/rebuild): in-process in the embedded default, over gRPC
 * distributed. Refusals are SopError (400, 404, 409 for a cycle).
 */
export interface RuleLineageQueries {
  ruleLineage(workspace: string, ruleId: string, q: RuleLineageQuery): Promise<RuleLineageView>;
  linkRule(workspace: string, ruleId: string, input: LinkRuleInput): Promise<RuleLineageView>;
  unlinkRule(workspace: string, ruleId: string, q: RuleLineageQuery): Promise<RuleLineageView>;
  rebuildLineage(workspace: string): Promise<LineageRebuiltView>;
}

export type LineageHow = 'suggestion' | 'matched' | 'new' | 'manual';

export interface RuleLineageQuery {
  /** Needed only when the rule id is in more than one procedure. */
  procedure?: string;
}

export interface LinkRuleInput {
  previous_rule_id: string;
  procedure_id?: string;
}

/** A step of a rule's lineage: a wording at the first release with it, or at a release that brought it back. */
export interface LineageWording {
  rule_id: string;
  /** The wording it replaced at that release. */
  previous_rule_id: string | null;
  /** null for a first wording that predates the stored links (rebuild writes its row). */
  how: LineageHow | null;
  similarity: number | null;
  /** The step's release, and its number: the first release with this wording, or one that brought it back. */
  release_id: string | null;
  text: string | null;
  from_release: number | null;
}

export interface RuleLineageView {
  procedure_id: string;
  rule_id: string;
  lineage_id: string;
  /** The rule's own link (its row: its first appearance, or a manual link). */
  previous_rule_id: string | null;
  how: LineageHow | null;
  /**
   * Every step of the rule's lineage, by release: each wording at the first release with it,
   * and again at each release that brought it back; the last is the newest release's wording.
   */
  rules: LineageWording[];
}

export interface LineageRebuiltView {
  workspace: string;
  /** Rows written (every rule's row, the manual ones kept, and every wording's return). */
  links: number;
  /** Procedures with rows. */
  procedures: number;
}
