import type { Question, QuestionKind } from '../decider';
import type { LockRule } from '../lock';
import type { Band, BandKind, DecisionSettings } from './settings';

/**
 * A question's own band, fitted by calibration to a workspace's labels and stored per
 * workspace. It is used only while the question reads the same: `wording` is what the
 * question asks about the rule (questionWording), so a reworded rule (a new rule id) or a
 * warning sign with another "-> ..." action goes back to SOPOPS_DECISIONS' band.
 */
export interface QuestionBand {
  procedure_id: string;
  rule_id: string;
  field: BandKind;
  wording: string;
  band: Band;
}

/** What a rule's question of this kind asks about, in the rule's words: the key a fitted band is kept under. */
export function questionWording(field: BandKind, rule: Pick<LockRule, 'text' | 'when' | 'action'>): string {
  if (field === 'condition') return `${rule.text} [when: ${rule.when ?? ''}]`;
  if (field === 'responded') return `${rule.text} -> ${rule.action ?? ''}`;
  return rule.text;
}

const key = (procedureId: string, ruleId: string, field: string) => `${procedureId}\0${ruleId}\0${field}`;

/** A workspace's fitted bands, looked up per question; the rest use the settings' band of their kind. */
export class QuestionBands {
  private readonly rows = new Map<string, QuestionBand>();

  constructor(rows: Iterable<QuestionBand> = []) {
    for (const r of rows) this.rows.set(key(r.procedure_id, r.rule_id, r.field), r);
  }

  get size(): number {
    return this.rows.size;
  }

  /**
   * The band `q` is read with: while its wording is unchanged, its fitted band joined with the
   * settings' (the wider of the two at each end, the settings' decide), so a fit never
   * narrows a band, even after SOPOPS_DECISIONS is widened; else the settings' band.
   */
  bandFor(q: Pick<Question, 'kind' | 'procedure' | 'rule'>, settings: DecisionSettings): Band {
    const field = q.kind as Exclude<QuestionKind, 'goal'>;
    const s = settings.bands[field];
    if (!q.rule) return s;
    const fitted = this.rows.get(key(q.procedure.procedure_id, q.rule.rule_id, field));
    if (!fitted || fitted.wording !== questionWording(field, q.rule)) return s;
    return [Math.min(fitted.band[0], s[0]), Math.max(fitted.band[1], s[1]), s[2]];
  }
}

export const NO_FITTED_BANDS = new QuestionBands();
