import { Lineage } from '../lineage';

/**
 * The ONE place a finding's rule becomes the key of its rule pattern. A rule pattern is keyed
 * by its lineage id, the id of the rule's first wording; until publish stores the rule_lineage
 * rows, no rule has a previous one and a rule's own id is its lineage id (an empty Lineage says
 * exactly that). When the rows exist, pass them: nothing else changes.
 */
export function lineageIdOf(procedureId: string, ruleId: string, lineage: Lineage = EMPTY): string {
  return lineage.lineageId(procedureId, ruleId);
}

const EMPTY = new Lineage();
