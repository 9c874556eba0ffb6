import { Lineage } from '../lineage';

/**
 * The ONE place a finding's rule becomes the key of its rule pattern. A rule pattern is keyed
 * by its lineage id, the id of the rule's first wording, from the stored rule_lineage rows
 * (pass them as a Lineage). Without rows (an empty Lineage) a rule's own id is its lineage id.
 */
export function lineageIdOf(procedureId: string, ruleId: string, lineage: Lineage = EMPTY): string {
  return lineage.lineageId(procedureId, ruleId);
}

const EMPTY = new Lineage();
