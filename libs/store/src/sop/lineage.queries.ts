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

export interface LineageWording {
  rule_id: string;
  previous_rule_id: string | null;
  /** null for a first wording that predates the stored links (rebuild writes its row). */
  how: LineageHow | null;
  similarity: number | null;
  /** The first release with this wording, and its number. */
  release_id: string | null;
  text: string | null;
  from_release: number | null;
}

export interface RuleLineageView {
  procedure_id: string;
  rule_id: string;
  lineage_id: string;
  previous_rule_id: string | null;
  how: LineageHow | null;
  /** Every wording in the rule's lineage, oldest first. */
  rules: LineageWording[];
}

export interface LineageRebuiltView {
  workspace: string;
  /** Rows written (every rule's row, the manual ones kept). */
  links: number;
  /** Procedures with rows. */
  procedures: number;
}
